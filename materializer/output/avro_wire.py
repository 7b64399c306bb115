"""The header each Avro event starts with, and what a schema publisher is (pure: no I/O).

- Confluent wire format (a schema registry): byte 0, then the registry's 4-byte big-endian
  schema id.
- Avro's single-object encoding (no registry): bytes C3 01, then the schema's 8-byte
  little-endian CRC-64-AVRO fingerprint.

The clients that publish schemas (a registry over HTTP, a schema topic on Kafka) are in
`materializer.kafka.avro_registry`: this package stays free of network clients.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from fastavro.schema import fingerprint, parse_schema, to_parsing_canonical_form

SINGLE_OBJECT_MAGIC = b"\xc3\x01"
CONFLUENT_MAGIC = b"\x00"


class SchemaPublisher(Protocol):
    """Publishes an Avro schema for a subject and returns the header of its messages."""

    def header(self, subject: str, schema: Any) -> bytes: ...


@dataclass(frozen=True)
class RegistryAccess:
    """How to reach a registry: the CA of its https certificate (None: the system's CAs)
    and HTTP Basic credentials (None: none sent); the password already read."""

    ca_file: str | None = None
    username: str | None = None
    password: str | None = None

    def __repr__(self) -> str:  # never print the password
        return f"RegistryAccess(ca_file={self.ca_file!r}, username={self.username!r})"


OPEN = RegistryAccess()  # a registry without TLS trust of its own or credentials


def schema_fingerprint(schema: Any) -> bytes:
    """CRC-64-AVRO of the schema's Parsing Canonical Form, 8 bytes little-endian."""
    canonical = to_parsing_canonical_form(parse_schema(schema))
    # fastavro gives the fingerprint's bytes in little-endian order, as hex
    return bytes.fromhex(fingerprint(canonical, "CRC-64-AVRO"))
