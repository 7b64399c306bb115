#!/usr/bin/env python3
"""`make demo`: start the local stack, write to a CDC table, show what lands in cdc_raw.

It then decodes the new CDC data with casscade's commit log reader. The publisher agent and
the materializer are not built yet (issues 4 and 5): the demo says so.
"""

from __future__ import annotations

import time

from publisher.cdc_index import read_cdc_index
from publisher.commitlog.reader import CommitLogReader
from publisher.schema_source import CassandraSchemaSource
from shared import codec
from shared.devstack import cassandra, stack
from shared.devstack.settings import StackSettings

WORKLOAD = [
    "CREATE KEYSPACE IF NOT EXISTS demo WITH replication = "
    "{'class': 'SimpleStrategy', 'replication_factor': 1}",
    "CREATE TABLE IF NOT EXISTS demo.customers (id int PRIMARY KEY, name text, email text, "
    "tier text, tags set<text>) WITH cdc = true",
    "INSERT INTO demo.customers (id, name, email, tier, tags) "
    "VALUES (1, 'Ada', 'ada@example.com', 'gold', {'early'})",
    "INSERT INTO demo.customers (id, name, email, tier) "
    "VALUES (2, 'Grace', 'grace@example.com', 'silver')",
    "INSERT INTO demo.customers (id, name, email, tier) VALUES (3, 'Linus', 'l@example.com', "
    "'bronze')",
    "UPDATE demo.customers SET tier = 'platinum', tags = tags + {'vip'} WHERE id = 1",
    "UPDATE demo.customers SET email = 'grace@navy.mil' WHERE id = 2",
    "DELETE FROM demo.customers WHERE id = 3",
]


def main() -> None:
    """Run the demo end to end and print what happened."""
    s = StackSettings.from_env()
    print("== 1. local stack (Kafka + Cassandra with CDC), started from Maven Central jars")
    stack.up(s)
    before = _indexed(s)

    print("\n== 2. a CDC table and a few writes")
    cluster = cassandra.cql_cluster(s)
    session = cluster.connect()
    try:
        for cql in WORKLOAD:
            print(f"   cql> {cql}")
            session.execute(cql, timeout=60)
        rows = list(session.execute("SELECT id, name, email, tier, tags FROM demo.customers"))
    finally:
        cluster.shutdown()
    print("   table now:")
    for r in sorted(rows):
        print(f"     {r.id} | {r.name:6} | {r.email:18} | {r.tier:8} | "
              f"{sorted(r.tags or [])}")

    print("\n== 3. what Cassandra handed to CDC consumers in cdc_raw")
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and _indexed(s) == before:
        time.sleep(0.25)  # the idx is rewritten at the next commit log sync (1 s period)
    for seg, idx in sorted(_indexed(s).items()):
        state = "COMPLETED" if idx.completed else "live"
        grew = "  <- new CDC data" if before.get(seg) != idx else ""
        print(f"   {seg:34} synced offset {idx.offset:>9,} B  {state}{grew}")
    print(f"   ({s.cdc_raw_dir})")

    print("\n== 4. the same writes, decoded from those segments by casscade's reader")
    _show_decoded(s, before)

    print("\n== 5. not built yet")
    print("   publisher    (issue 4): follow cdc_raw and publish these row updates to the "
          "Kafka topic casscade.raw.demo.customers")
    print("   materializer (issue 5): merge them into c/u/d events with complete before/after "
          "rows on casscade.demo.customers")
    print("\nThe stack keeps running: `deploy/local/stack status`, `make down` to stop it.")


def _show_decoded(s: StackSettings, before: dict) -> None:
    """Print every demo.customers change found in the CDC data written since `before`."""
    cluster = cassandra.cql_cluster(s)
    try:
        reader = CommitLogReader(CassandraSchemaSource(cluster.connect()), skip_unknown=True)
        for name, idx in sorted(_indexed(s).items()):
            start = before[name].offset if name in before else 0
            if idx.offset <= start:
                continue
            until = None if idx.completed else idx.offset
            for mutation in reader.read(s.cdc_raw_dir / name, until=until, resume_from=start):
                for update in mutation.updates:
                    if update.table.name == "demo.customers":
                        _show_update(name, mutation.position, update)
    finally:
        cluster.shutdown()


def _show_update(segment: str, position: int, update) -> None:
    key = codec.decode_partition_key(update.table, update.partition_key)
    where = f"   {segment}@{position:<8} id={key['id']}"
    if update.partition_deletion is not None:
        print(f"{where}  partition deleted at {update.partition_deletion.marked_for_delete_at}")
    for row in update.rows:
        what = "row marker (INSERT) + " if row.liveness else ""
        if row.deletion is not None:
            what += f"row deleted at {row.deletion.marked_for_delete_at} "
        cells = []
        for cell in row.cells:
            name = cell.column.name
            if cell.path is not None and cell.column.type.name == "set":
                element = codec.decode_cell_path(cell.column, cell.path)
                cells.append(f"{name} {'-' if cell.tombstone else '+'} {{{element!r}}}")
                continue
            if cell.path is not None:
                name += f"[{codec.decode_cell_path(cell.column, cell.path)!r}]"
            value = "tombstone" if cell.tombstone else repr(
                codec.decode_cell_value(cell.column, cell.path, cell.value))
            cells.append(f"{name}={value}")
        if row.complex_deletions:
            cells += [f"{n} cleared" for n in row.complex_deletions]
        print(f"{where}  {what}{', '.join(cells)}")


def _indexed(s: StackSettings) -> dict:
    out = {}
    for seg in s.cdc_raw_dir.glob("CommitLog-*.log"):
        idx = read_cdc_index(seg)
        if idx is not None:
            out[seg.name] = idx
    return out


if __name__ == "__main__":
    main()
