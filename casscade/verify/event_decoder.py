"""An event topic's records → (key, envelope) in the Kafka Connect JSON form.

JSON events are read as they are (the `payload` when `events.schemas` wraps them). Avro
events name their writer schema in a header: the Confluent wire format (byte 0, the
registry's 4-byte id) or Avro's single-object encoding (C3 01, the 8-byte fingerprint of a
schema on the schema topic); either is looked up once and decoded with fastavro, then put
in the JSON form (`avro_json`), so both formats are judged alike.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from fastavro import parse_schema

from casscade.verify.avro_json import avro_as_json
from materializer.kafka.avro_registry import ConfluentRegistry
from materializer.output.avro_envelope import decode, schemas_from_topic
from materializer.output.avro_wire import CONFLUENT_MAGIC, SINGLE_OBJECT_MAGIC
from materializer.output.envelope import EnvelopeWriter
from materializer.output.event_settings import EventSettings
from shared.kafka_topics import read_to_end
from shared.schema import TableSchema


class EventDecodeError(ValueError):
    """A record that is not an event of the configured format."""


class EventDecoder:
    """Decodes one table's events (`table`: the schema as published)."""

    def __init__(self, settings: EventSettings, table: TableSchema,
                 schemas: WriterSchemas | None = None) -> None:
        self.settings = settings
        # the Connect schemas say how Avro values map back to the JSON form
        self.writer = EnvelopeWriter(table, settings.cluster, False, settings.modes)
        self.schemas = schemas  # Avro only

    def key(self, raw: bytes) -> dict[str, Any]:
        """The key's primary key columns."""
        if self.settings.format == "avro":
            return avro_as_json(self._avro(raw), self.writer.key_schema)
        doc = json.loads(raw)
        return doc["payload"] if self.settings.schemas else doc

    def value(self, raw: bytes | None) -> dict[str, Any] | None:
        """The envelope {op, before, after, source, ts_ms}; None for a tombstone."""
        if raw is None:
            return None
        if self.settings.format == "avro":
            return avro_as_json(self._avro(raw), self.writer.value_schema)
        doc = json.loads(raw)
        return doc["payload"] if self.settings.schemas else doc

    def _avro(self, raw: bytes) -> Any:
        assert self.schemas is not None
        try:
            return decode(raw, self.schemas.known)
        except KeyError:  # a writer schema not seen yet: fetched once
            self.schemas.learn(raw)
            return decode(raw, self.schemas.known)


class WriterSchemas:
    """Avro writer schemas by message header, each fetched once: from the registry (the
    Confluent wire format) or the schema topic (single-object encoding)."""

    def __init__(self, settings: EventSettings, kafka: Mapping[str, str], prefix: str) -> None:
        self.registry = (ConfluentRegistry(settings.schema_registry_url,
                                           settings.schema_registry.access())
                         if settings.schema_registry_url else None)
        self.kafka = kafka
        self.topic = settings.avro_schemas(prefix)
        self.known: dict[bytes, Any] = {}

    def learn(self, message: bytes) -> None:
        """Fetch the writer schema `message` names (EventDecodeError if there is none)."""
        if message[:1] == CONFLUENT_MAGIC:
            if self.registry is None:
                raise EventDecodeError("a Confluent wire format event, but "
                                       "events.schema_registry_url is not set")
            self.known[message[:5]] = parse_schema(
                self.registry.schema(int.from_bytes(message[1:5], "big")))
        elif message[:2] == SINGLE_OBJECT_MAGIC:
            # the writer publishes a schema before its first message: one reread finds it
            # parsed once here: `decode` then finds them parsed on every message
            self.known.update({h: parse_schema(v) for h, v in schemas_from_topic([
                (m.key(), m.value()) for m in read_to_end(self.kafka, self.topic)
                if m.value() is not None]).items()})
            if message[:10] not in self.known:
                raise EventDecodeError(f"Avro schema {message[2:10].hex()} is not on "
                                       f"{self.topic}")
        else:
            raise EventDecodeError(f"no Avro header (first bytes {message[:4].hex()})")
