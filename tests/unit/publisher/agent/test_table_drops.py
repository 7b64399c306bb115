"""Dropped tables: found by a schema refresh (publisher.commitlog.schema_source) and announced
once to every raw partition, only while the agent is caught up (publisher.agent.table_drops),
with a sink and a session that record what they are handed (the real ones: integration)."""

from __future__ import annotations

import json
from typing import Any

from publisher.agent.table_drops import TableDrops
from publisher.commitlog import schema_source
from publisher.commitlog.schema_source import CassandraSchemaSource
from shared.metrics import Registry
from shared.schema import FORMAT
from shared.table_drop import decode_table_drop

from support.announcer_fakes import ORDERS, PLAIN, RETURNS, Sink, Source


def test_a_dropped_cdc_table_is_announced_once_to_every_partition_when_idle() -> None:
    now = [0.0]
    source, sink = Source(ORDERS, RETURNS, PLAIN), Sink()
    drops = TableDrops(sink, source, "node-1", 30, Registry(),  # type: ignore[arg-type]
                       clock=lambda: now[0])
    source.gone = {ORDERS.id: ORDERS, PLAIN.id: PLAIN}  # PLAIN was never captured
    assert drops.maybe_announce(idle=False) == 0  # records to read first: they come before
    sink.backlog = 1
    assert drops.maybe_announce(idle=True) == 0  # records not acknowledged yet
    sink.backlog = 0
    assert drops.maybe_announce(idle=True) == 3
    assert [(t, p, k) for t, p, k, _v in sink.sent] == [("p.raw", p, ORDERS.id.bytes)
                                                       for p in range(3)]
    drop = decode_table_drop(sink.sent[0][3])
    assert (drop.table_id, drop.name, drop.host) == (ORDERS.id, "shop.orders", "node-1")
    assert drops.maybe_announce(idle=True) == 0  # once
    assert source.refreshes == 0  # not due yet
    now[0] += 30
    source.gone[RETURNS.id] = RETURNS
    assert drops.maybe_announce(idle=True) == 3 and source.refreshes == 1
    assert drops.sent.get() == 6


def test_a_refresh_finds_the_tables_gone_since_an_earlier_one(monkeypatch) -> None:
    """Tables dropped before the source first read the schema are not reported (nothing
    says they were ever captured here); one gone since is, and stays decodable."""
    docs = [[ORDERS, RETURNS], [RETURNS]]

    def read(_session: Any) -> dict[str, Any]:
        return {"format": FORMAT, "tables": [t.to_json() for t in docs.pop(0)], "types": {}}

    monkeypatch.setattr(schema_source, "read_system_schema", read)
    source = CassandraSchemaSource(session=None)
    assert source.dropped() == {}
    assert source.refresh()
    assert {i: t.name for i, t in source.dropped().items()} == {ORDERS.id: "shop.orders"}
    assert source.table(ORDERS.id) is not None  # its older mutations still decode


def test_a_schema_file_reports_no_drops(tmp_path) -> None:
    path = tmp_path / "schema.json"
    path.write_text(json.dumps({"format": FORMAT, "tables": [ORDERS.to_json()]}))
    assert schema_source.FileSchemaSource(path).dropped() == {}


def test_no_timed_refresh_when_its_interval_is_zero() -> None:
    now = [0.0]
    source = Source(ORDERS)
    drops = TableDrops(Sink(), source, "n", 0, Registry(),  # type: ignore[arg-type]
                       clock=lambda: now[0])
    now[0] += 1000
    assert drops.maybe_announce(idle=True) == 0 and source.refreshes == 0
