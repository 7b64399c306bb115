"""Column ADD, DROP and re-ADD on the real stack: publisher → Kafka → Spark → events equal
Cassandra's `SELECT *` after each step (the agent and the job run between the steps, as they
would in production, so each step's records carry that step's schema version)."""

from __future__ import annotations

import json
import uuid

import pytest

from shared.kafka_topics import read_to_end
from shared.schema import TableSchema, catalog_from_json
from shared.system_schema import read_system_schema

from support.materializer_harness import (
    canonical,
    final_rows,
    materializer_command,
    oracle_rows,
    publish_new_cdc,
    read_events,
    run_materializer,
)
from support.reference import cdc_offsets

pytestmark = pytest.mark.integration


def _table(cql, ks: str) -> TableSchema:
    return next(t for t in catalog_from_json(read_system_schema(cql)).values()
                if t.keyspace == ks and t.table == "t")


def test_add_drop_and_readd_column_events_follow_select(stack, cql, tmp_path) -> None:
    ks, prefix = f"sc_{uuid.uuid4().hex[:8]}", f"sc{uuid.uuid4().hex[:8]}"
    cql.execute(f"CREATE KEYSPACE {ks} WITH replication = "
                "{'class': 'SimpleStrategy', 'replication_factor': 1}")
    ckpt = tmp_path / "ckpt"
    steps = [
        [f"CREATE TABLE {ks}.t (k int, c int, a text, b int, PRIMARY KEY (k, c)) "
         "WITH cdc = true",
         *[f"INSERT INTO {ks}.t (k, c, a, b) VALUES ({k}, {c}, 'a{k}{c}', {k * 10 + c})"
           for k in (1, 2, 3) for c in (1, 2)],
         f"UPDATE {ks}.t SET b = 99 WHERE k = 9 AND c = 9"],  # alive only through b
        [f"ALTER TABLE {ks}.t ADD d text",
         f"UPDATE {ks}.t SET d = 'new' WHERE k = 1 AND c = 1",
         f"INSERT INTO {ks}.t (k, c, a, d) VALUES (4, 1, 'a41', 'd41')",
         f"ALTER TABLE {ks}.t DROP b",
         f"INSERT INTO {ks}.t (k, c, a) VALUES (9, 1, 'touch')",  # k=9 processed again
         f"UPDATE {ks}.t SET a = 'after-drop' WHERE k = 2 AND c = 1"],
        [f"ALTER TABLE {ks}.t ADD b int",  # the old b values must not come back
         f"UPDATE {ks}.t SET b = 77 WHERE k = 1 AND c = 1",
         # a schema change emits no events itself: only rows written after it show it,
         # so every other row is written once more here
         *[f"UPDATE {ks}.t SET a = 'touch' WHERE k = {k} AND c = {c}"
           for k, c in ((1, 2), (2, 1), (2, 2), (3, 1), (3, 2), (4, 1), (9, 1))]],
    ]
    try:
        before = cdc_offsets(stack.cdc_raw_dir)
        for i, statements in enumerate(steps):
            for st in statements:
                cql.execute(st)
            publish_new_cdc(stack, cql, before, prefix, tmp_path / f"step{i}",
                            host=f"node-{i}", from_before=True)
            before = cdc_offsets(stack.cdc_raw_dir)
            run_materializer(materializer_command(stack, prefix, ckpt), tmp_path / "job.log")
            table = _table(cql, ks)
            events = read_events(stack.bootstrap_servers, f"{prefix}.{ks}.t")
            names = [c.name for c in table.columns]
            # a schema change emits nothing itself: compare on today's columns
            got = {k: {n: v.get(n) for n in names} for k, v in final_rows(events).items()}
            want = oracle_rows(cql, table)
            differ = sorted(k for k in got.keys() | want.keys() if got.get(k) != want.get(k))
            assert not differ, f"step {i}: {differ[0]}: events {canonical(got.get(differ[0]))}" \
                               f" != select {canonical(want.get(differ[0]))}"
        ops = [(key["k"], key["c"], v["op"]) for *_, key, v in events if v]
        assert (9, 9, "d") in ops  # the row only the dropped column kept alive is gone
        assert want[canonical({"k": 2, "c": 1})]["b"] is None  # not resurrected
        assert want[canonical({"k": 1, "c": 1})]["b"] == 77
        # every version the agents published carries its ALTER time, so versions are ordered
        versions = [json.loads(m.value()) for m in read_to_end(stack.bootstrap_servers,
                                                               f"{prefix}.schemas")]
        altered = sorted(v["altered_at"] for v in versions if v["table"] == "t"
                         and v["keyspace"] == ks)
        assert len(altered) >= 3 and altered[0] > 0 and len(set(altered)) == len(altered)
    finally:
        cql.execute(f"DROP KEYSPACE {ks}")
