"""The real Cassandra node writes CDC segments into cdc_raw the way the publisher expects."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest

from devstack import cassandra
from publisher.agent.cdc_index import index_path, read_cdc_index

from support.reference import cdc_offsets, completed_segments
from support.services import wait_until

pytestmark = pytest.mark.integration


def test_cdc_writes_hard_link_segment_and_grow_index(stack, cql, cdc_table):
    table = cdc_table("events", "(k int PRIMARY KEY, v text)")
    before = cdc_offsets(stack.cdc_raw_dir)
    insert = cql.prepare(f"INSERT INTO {table} (k, v) VALUES (?, ?)")
    for k in range(200):
        cql.execute(insert, (k, f"value-{k}"))

    def grown() -> dict[str, int]:
        now = cdc_offsets(stack.cdc_raw_dir)
        return {s: o for s, o in now.items() if o > before.get(s, 0)}

    first = wait_until(grown, 15, "a _cdc.idx offset to cover the new CDC writes")
    name, offset1 = max(first.items())
    seg = stack.cdc_raw_dir / name
    # 5.0 in its default CASSANDRA_4 mode writes descriptor version 7 (name and header).
    assert seg.name.startswith("CommitLog-7-")
    with open(seg, "rb") as fh:
        assert struct.unpack(">i", fh.read(4))[0] == 7
    # cdc_raw holds a hard link of the live segment, not a copy.
    live = stack.commitlog_dir / seg.name
    if live.exists():  # the segment may already have been recycled after a flush
        assert os.stat(live).st_ino == os.stat(seg).st_ino
        assert os.stat(seg).st_nlink >= 2
    assert index_path(seg).exists()
    assert offset1 <= seg.stat().st_size

    for k in range(200, 400):
        cql.execute(insert, (k, "x" * 500))

    def synced_past_first() -> bool:
        idx = read_cdc_index(seg)
        return idx is not None and idx.offset > offset1

    wait_until(synced_past_first, 15, f"the synced offset of {seg.name} to grow past {offset1}")


def test_flush_and_enough_writes_complete_a_segment(stack, cql, cdc_table):
    table = cdc_table("blobs", "(k int PRIMARY KEY, b blob)")
    already = set(completed_segments(stack.cdc_raw_dir))
    insert = cql.prepare(f"INSERT INTO {table} (k, b) VALUES (?, ?)")
    blob = os.urandom(100_000)
    # ~6 MB of CDC writes overflow one 4 MiB segment, so Cassandra must switch segments and
    # close the full one out, writing COMPLETED into its idx.
    for k in range(60):
        cql.execute(insert, (k, blob))
    ks, name = table.split(".")
    cassandra.nodetool(stack, "flush", ks, name)

    def newly_completed() -> list[Path]:
        return [s for s in completed_segments(stack.cdc_raw_dir) if s not in already]

    done = wait_until(newly_completed, 30, "a new _cdc.idx to say COMPLETED")
    for seg in done:
        idx = read_cdc_index(seg)
        assert idx is not None and 0 < idx.offset <= seg.stat().st_size
