"""Commit log decoding speed on real segments: rows decoded per second on one core, peak RSS.

Cassandra writes the segments: (a) 100,000 one-row INSERTs into a 5-column int/text table,
(b) 1,000 UNLOGGED BATCHes of 100 rows of one partition. The decode then runs in a fresh
subprocess (one core, nothing else loaded) over those segments with a schema file, and
prints rows/s and its own peak RSS. Target (issue 3): >= 100,000 rows/s on (a).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from cassandra.concurrent import execute_concurrent_with_args

from publisher.cdc_index import read_cdc_index
from publisher.schema_source import read_system_schema

ROWS = int(os.environ.get("BENCH_ROWS", "100000"))

DECODE = r"""
import resource, sys, time
from publisher.commitlog.reader import CommitLogReader
from publisher.schema_source import FileSchemaSource
schema, table, files = sys.argv[1], sys.argv[2], sys.argv[3:]
reader = CommitLogReader(FileSchemaSource(schema), skip_unknown=True)
rows = 0
start = time.process_time()
for f in files:
    for m in reader.read(f):
        for u in m.updates:
            if u.table.table == table:
                rows += len(u.rows)
cpu = time.process_time() - start
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(f"{rows} {cpu:.3f} {rss:.1f}")
"""


def _offsets(stack) -> dict[str, int]:
    return {s.name: idx.offset for s in stack.cdc_raw_dir.glob("CommitLog-*.log")
            if (idx := read_cdc_index(s)) is not None}


def _segments_with(stack, before: dict[str, int]) -> list[Path]:
    """Segments whose synced offset grew since `before`, once the offsets settle."""
    deadline = time.monotonic() + 30
    previous: dict[str, int] = {}
    while time.monotonic() < deadline:
        time.sleep(2.5)  # > 2 commit log sync periods
        now = _offsets(stack)
        if now == previous:
            break
        previous = now
    return sorted((stack.cdc_raw_dir / n for n, off in previous.items()
                   if off > before.get(n, 0)), key=lambda p: int(p.stem.split("-")[2]))


def _decode(schema: Path, table: str, files: list[Path]) -> tuple[int, float, float]:
    out = subprocess.run([sys.executable, "-c", DECODE, str(schema), table,
                          *map(str, files)], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[2])
    rows, cpu, rss = out.stdout.split()
    return int(rows), float(cpu), float(rss)


def test_bench_decode(stack, cql, keyspace, tmp_path) -> None:
    cql.execute(f"CREATE TABLE {keyspace}.single (k int PRIMARY KEY, c1 int, c2 text, "
                "c3 int, c4 text) WITH cdc = true")
    cql.execute(f"CREATE TABLE {keyspace}.batched (k int, ck int, c1 int, c2 text, c3 int, "
                "c4 text, PRIMARY KEY (k, ck)) WITH cdc = true")
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps(read_system_schema(cql)))

    before = _offsets(stack)
    insert = cql.prepare(f"INSERT INTO {keyspace}.single (k, c1, c2, c3, c4) "
                         "VALUES (?, ?, ?, ?, ?)")
    execute_concurrent_with_args(cql, insert, [(i, i, f"text-{i}", -i, "x" * 20)
                                               for i in range(ROWS)], concurrency=128)
    single = _segments_with(stack, before)

    before = _offsets(stack)
    values = ", ".join("(?, ?, ?, ?, ?, ?)" for _ in range(1))
    batch = cql.prepare(
        "BEGIN UNLOGGED BATCH "
        + " ".join(f"INSERT INTO {keyspace}.batched (k, ck, c1, c2, c3, c4) VALUES {values};"
                   for _ in range(100)) + " APPLY BATCH")
    args = [tuple(v for ck in range(100) for v in (k, ck, ck, f"t{ck}", k, "y" * 20))
            for k in range(ROWS // 100)]
    execute_concurrent_with_args(cql, batch, args, concurrency=32)
    batched = _segments_with(stack, before)

    # Copy: the live cdc_raw files are not ours to keep.
    for group in (single, batched):
        for seg in group:
            shutil.copyfile(seg, tmp_path / seg.name)
    results = {
        "one-row mutations": _decode(schema, "single", [tmp_path / s.name for s in single]),
        "100-row batches": _decode(schema, "batched", [tmp_path / s.name for s in batched]),
    }
    for what, (rows, cpu, rss) in results.items():
        assert rows >= ROWS * 0.99, (what, rows)
        print(f"\ncommit log decode, {what}: {rows:,} rows in {cpu:.2f}s CPU = "
              f"{rows / cpu:,.0f} rows/s; peak RSS {rss:.0f} MB")
