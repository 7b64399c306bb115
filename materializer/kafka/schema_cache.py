"""Table schemas by hash, read from the compacted `<prefix>.schemas` topic (no Cassandra).

The publisher writes a table's schema there, acknowledged, before the first record that names
its hash, so a miss is resolved by reading the topic again up to its current end.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping

from shared.kafka_topics import read_to_end
from shared.schema import TableSchema, table_from_json

log = logging.getLogger(__name__)


class UnknownSchemaError(LookupError):
    """A schema hash the schema topic does not hold."""


class SchemaCache:
    """hash → TableSchema; re-reads the schema topic on a miss (for one missing hash at
    most every `retry_s`, so a stream of records with a bad hash costs no reload each)."""

    def __init__(self, bootstrap: str | Mapping[str, str], topic: str, timeout_s: float = 30.0,
                 retry_s: float = 10.0) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.timeout_s = timeout_s
        self.retry_s = retry_s
        self.tables: dict[str, TableSchema] = {}
        self._missed: dict[str, float] = {}

    def get(self, schema_hash: str) -> TableSchema:
        """The table schema a record's `schema_hash` names."""
        table = self.tables.get(schema_hash)
        if table is None:
            if time.monotonic() - self._missed.get(schema_hash, -1e9) < self.retry_s:
                raise UnknownSchemaError(f"schema hash {schema_hash} is not in topic "
                                         f"{self.topic}")
            self._missed[schema_hash] = time.monotonic()
            self.reload()
            table = self.tables.get(schema_hash)
            if table is None:
                raise UnknownSchemaError(f"schema hash {schema_hash} is not in topic "
                                         f"{self.topic}")
        return table

    def reload(self) -> None:
        """Read the whole schema topic (it is compacted: one record per hash)."""
        for msg in read_to_end(self.bootstrap, self.topic, self.timeout_s):
            if msg.value() is not None:
                self._add(msg.value(), msg.partition(), msg.offset())

    def _add(self, value: bytes, partition: int, offset: int) -> None:
        try:
            doc = json.loads(value)
            table = table_from_json(doc, {doc["keyspace"]: doc.get("types", {})})
            self.tables[doc["schema_hash"]] = table
        except (ValueError, KeyError, TypeError) as exc:
            log.error("unreadable schema record skipped",
                      extra={"topic": self.topic, "partition": partition, "offset": offset,
                             "error": str(exc)})
