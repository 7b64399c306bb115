"""Truncated tables: found in the node's truncation records and announced once per
truncation to every raw partition (publisher.agent.truncations), with a sink and records
that the test controls (the real ones: tests/integration/materializer/
test_tables_come_and_go.py)."""

from __future__ import annotations

import struct
import uuid

from publisher.agent.truncations import Truncations
from shared.metrics import Registry
from shared.table_truncate import decode_table_truncate

from support.announcer_fakes import ORDERS, PLAIN, RETURNS, Sink, Source


class Records:
    """A node's truncation records, as the test sets them (None: the node is away)."""

    def __init__(self) -> None:
        self.found: dict[uuid.UUID, bytes] | None = {}
        self.reads = 0

    def read(self) -> dict[uuid.UUID, bytes] | None:
        self.reads += 1
        return self.found


def _record(at_ms: int, segment_id: int = 17, position: int = 400) -> bytes:
    return struct.pack(">qiq", segment_id, position, at_ms)


def _truncations(records: Records, now: list[float], check_s: float = 5,
                 sink: Sink | None = None) -> Truncations:
    return Truncations(sink or Sink(), Source(ORDERS, RETURNS, PLAIN),  # type: ignore[arg-type]
                       records, "node-1", "dc1", check_s, Registry(), clock=lambda: now[0])


def test_each_truncation_of_a_cdc_table_is_announced_once_to_every_partition() -> None:
    now, records, sink = [0.0], Records(), Sink()
    truncations = _truncations(records, now, sink=sink)
    # at start: every record found (the materializer ignores one it applied); a table
    # without CDC is not announced, nor a record that cannot be read
    records.found = {ORDERS.id: _record(1000), PLAIN.id: _record(1000),
                     RETURNS.id: b"\x00" * 12}
    assert truncations.maybe_announce() == 3
    assert [(t, p, k) for t, p, k, _v in sink.sent] == [("p.raw", p, ORDERS.id.bytes)
                                                       for p in range(3)]
    got = decode_table_truncate(sink.sent[0][3])
    assert (got.table_id, got.name, got.host, got.datacenter) == (
        ORDERS.id, "shop.orders", "node-1", "dc1")
    assert (got.truncated_at_ms, got.segment_id, got.position) == (1000, 17, 400)
    now[0] += 1
    records.found[ORDERS.id] = _record(2000)
    assert truncations.maybe_announce() == 0 and records.reads == 1  # not due yet
    now[0] += 5
    assert truncations.maybe_announce() == 3  # a new truncation of the same table
    assert decode_table_truncate(sink.sent[-1][3]).truncated_at_ms == 2000
    now[0] += 5
    assert truncations.maybe_announce() == 0  # nothing new
    assert truncations.sent.get() == 6


def test_nothing_is_lost_while_the_node_or_the_raw_topic_is_away() -> None:
    now, records, sink = [0.0], Records(), Sink(partitions=0)
    truncations = _truncations(records, now, sink=sink)
    records.found = None  # the node did not answer
    assert truncations.maybe_announce() == 0
    records.found = {ORDERS.id: _record(1000)}
    now[0] += 5
    assert truncations.maybe_announce() == 0  # no raw topic yet: tried again later
    sink.partitions = 2
    now[0] += 5
    assert truncations.maybe_announce() == 2


def test_no_reads_when_the_check_is_off() -> None:
    now, records = [0.0], Records()
    truncations = _truncations(records, now, check_s=0)
    now[0] += 1000
    assert truncations.maybe_announce() == 0 and records.reads == 0
