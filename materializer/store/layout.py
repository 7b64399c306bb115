"""Where the partition stores live, and how a store lays out its keys and entries.

A store serves one raw partition, which holds the keys of every captured table: each key is
a raw record's Kafka key, the table id (16 bytes) then the partition key
(`shared.topic_names.raw_key`), so two tables' partitions never share an entry, and one
table's entries sit together under its id (what `DROP TABLE` frees in one range).

Store keys (inside `PartitionStore`'s own prefixes):

- `s` + raw key: a partition's entry: next expiry (ms, -1: none), the schema hash it was
  written with, then the state blob (`materializer.rules.model.PartitionState`).
- `p` + table id + page id (8 bytes, big-endian) + partition key: one page of a wide
  partition's rows (`materializer.rules.pages`).
- `w` + sweep kind + table id: a sweep of the table's keys under way (a TRUNCATE's, a
  reset's, a truncate barrier's), with its cursor (`materializer.store.table_sweeps`).
- `v` + sweep kind + raw key: a key that sweep has done ahead of its cursor.
"""

from __future__ import annotations

import struct
from pathlib import Path

from shared.topic_names import TABLE_ID_SIZE

STATE_DIR = "partition-state"  # under the checkpoint: its records (and local stores)
EXECUTOR_DIR = "casscade-partition-state"  # on a cluster: in each executor's work directory
_ENTRY = struct.Struct(">qH")  # next expiry (ms, -1: none), length of the schema hash
_PAGE_ID = struct.Struct(">q")
ENTRY, PAGE = b"s", b"p"
SWEEP, SWEPT = b"w", b"v"


def state_root(checkpoint: Path) -> Path:
    """Where a checkpoint's partition-store records live (its stores too, on a local
    master)."""
    return Path(checkpoint) / STATE_DIR


def store_path(root: Path, topic: str, partition: int) -> Path:
    """The directory of one raw topic partition's store under `root`."""
    return root / topic / str(partition)


def entry_key(raw_key: bytes) -> bytes:
    """The store key of a partition's entry."""
    return ENTRY + raw_key


def page_key(page: int, raw_key: bytes) -> bytes:
    """The store key of page `page` of a wide partition."""
    return PAGE + raw_key[:TABLE_ID_SIZE] + _PAGE_ID.pack(page) + raw_key[TABLE_ID_SIZE:]


def table_prefixes(table_id: bytes) -> tuple[bytes, bytes]:
    """The store key prefixes of one table's entries and pages (what its drop frees)."""
    return ENTRY + table_id, PAGE + table_id


def raw_key_of(store_key: bytes) -> bytes:
    """The raw record key (table id + partition key) a store key belongs to: an entry's or a
    page's."""
    if store_key[:1] == ENTRY:
        return store_key[1:]
    head = 1 + TABLE_ID_SIZE
    return store_key[1:head] + store_key[head + _PAGE_ID.size:]


def unpack_entry(raw: bytes | None) -> tuple[bytes | None, str | None, int | None]:
    """(state blob, schema hash, next expiry ms) of a stored entry (all None: no entry)."""
    if raw is None:
        return None, None, None
    timer, n = _ENTRY.unpack_from(raw)
    at = _ENTRY.size
    return raw[at + n:], raw[at:at + n].decode(), (None if timer < 0 else timer)


def pack_entry(blob: bytes, schema_hash: str, timer_ms: int | None) -> bytes:
    """A partition's entry: its state blob, the schema hash it was written with, and when
    it next expires (None: never)."""
    h = schema_hash.encode()
    return _ENTRY.pack(-1 if timer_ms is None else timer_ms, len(h)) + h + blob
