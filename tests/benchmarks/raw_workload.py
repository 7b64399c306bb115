"""The benchmarks' synthetic raw input: one table, its one-row changes as a publisher writes
them to the raw topic, and what a KeyMaterializer needs to take them without a registry;
the floors' output topics (jvm_floors).
BENCH_COLUMNS (the table's width) and BENCH_FORMAT (the events' encoding) apply to every
benchmark that takes its table or its format from here.
"""

from __future__ import annotations

import os

from confluent_kafka import Producer

from materializer.output.avro_wire import SINGLE_OBJECT_MAGIC, schema_fingerprint
from shared import rowupdate, topic_names
from shared.kafka_topics import TopicCreator
from shared.schema import TableSchema, table_from_json

# the table's columns, its key included: k, then c1..c(N-1), int and text in turn; every
# change writes them all (5: the figures in the README; 10: issue 14's wider rows)
COLUMNS = int(os.environ.get("BENCH_COLUMNS", "5"))
TABLE = table_from_json({
    "keyspace": "bench", "table": "t", "id": "7b0f2a52-6c9e-4d1e-9b61-3c1d2f8e0a01",
    "columns": [{"name": "k", "kind": "partition_key", "position": 0, "type": "int"},
                *({"name": f"c{i}", "kind": "regular", "position": -1,
                   "type": "int" if i % 2 else "text"} for i in range(1, COLUMNS))]}, {})

FORMAT = os.environ.get("BENCH_FORMAT", "json")  # event encoding: json or avro


def change_values(key: int, update: int) -> list[tuple[str, bytes]]:
    """The regular columns' values of one change (c1..c4 as before BENCH_COLUMNS)."""
    first = [("c1", (key + update).to_bytes(4, "big", signed=True)),
             ("c2", f"text-{key}-{update}".encode()),
             ("c3", update.to_bytes(4, "big", signed=True)), ("c4", b"x" * 20)]
    more = [(f"c{i}", ((key * i + update) % 2**31).to_bytes(4, "big", signed=True) if i % 2
             else f"value-{i}-{update}".encode()) for i in range(5, COLUMNS)]
    return (first + more)[:COLUMNS - 1]


def raw_change(table: TableSchema, key: int, update: int) -> tuple[bytes, bytes]:
    """(Kafka key, RowUpdate value) of version `update` of row `key` of `table`, one node's;
    the key is a raw key (`topic_names.raw_key`: table id, then partition key)."""
    ts = 1_700_000_000_000_000 + update * 1000 + key
    pk = key.to_bytes(4, "big", signed=True)
    cells = [{"column": c, "path": None, "value": v, "timestamp": ts, "ttl": 0,
              "local_deletion_time": None, "tombstone": False}
             for c, v in change_values(key, update)]
    rec = {"table_id": table.id.bytes, "keyspace": table.keyspace, "table": table.table,
           "schema_hash": table.schema_hash, "partition_key": pk, "clustering": [],
           "kind": "ROW", "deletion": None, "shadowable": False, "range": None,
           "liveness": {"timestamp": ts, "ttl": 0, "local_expiration_time": None},
           "cells": cells, "complex_deletions": [],
           "source": {"host": "h", "datacenter": "dc", "file": "CommitLog-7-1.log",
                      "segment_id": 1, "position": 100 + key * 10 + update, "index": 0,
                      "commitlog_version": 7, "messaging_version": 12}}
    return topic_names.raw_key(table.id, pk), rowupdate.encode(rec)


def raw_producer(bootstrap: str, prefix: str) -> Producer:
    """A producer for `prefix`'s raw topic (`topic_names.raw_topic`), made here with 2
    partitions, and the schema topic, with TABLE's schema record in it."""
    from publisher.kafka_sink import schema_record

    creator = TopicCreator(bootstrap, 2, 1)
    creator.ensure(topic_names.raw_topic(prefix))
    creator.ensure(topic_names.schema_topic(prefix))
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50,
                         "queue.buffering.max.messages": 1_000_000})
    producer.produce(topic_names.schema_topic(prefix), key=TABLE.schema_hash.encode(),
                     value=schema_record(TABLE))
    return producer


def floor_topic(prefix: str, table_id: bytes) -> str:
    """The output topic of a floor (jvm_floors) for the records of one table:
    `<prefix>.floor.<the table id's bytes in lowercase hex>`. The floors take the table id
    from a raw key's first 16 bytes (the one raw topic names no table); a heartbeat's key,
    its host, gives a topic of its own."""
    return f"{prefix}.floor.{table_id.hex()}"


class SchemaHeaders:
    """Single-object headers without the schema topic write (that happens once per schema)."""

    def header(self, subject: str, schema: object) -> bytes:
        """The single-object header of `schema`."""
        return SINGLE_OBJECT_MAGIC + schema_fingerprint(schema)


class TableSchemas:
    """The schema registry of a KeyMaterializer that knows TABLE alone."""

    def get(self, schema_hash: str) -> TableSchema:
        """TABLE (the only schema asked for)."""
        assert schema_hash == TABLE.schema_hash
        return TABLE
