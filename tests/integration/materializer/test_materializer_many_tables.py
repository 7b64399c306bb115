"""A job that starts with a backlog over many new tables, with the job's default settings.

Twenty CDC tables written and published before the job first runs, so the job makes twenty
event topics at its start and writes to all of them in its first micro-batch. Kafka's
idempotent producer met such topics before their broker served them, and retried a batch
with OUT_OF_ORDER_SEQUENCE_NUMBER until its delivery timeout failed the micro-batch, which
then ran again and wrote its events twice (KAFKA-15591). The job must write every change
exactly once, in one query start, with no setting changed.
"""

from __future__ import annotations

import uuid
from collections import Counter

import pytest
from cassandra.concurrent import execute_concurrent_with_args

from shared.schema import catalog_from_json
from shared.system_schema import read_system_schema

from support.materializer_harness import (
    final_rows,
    materializer_command,
    oracle_rows,
    publish_new_cdc,
    read_events,
    run_materializer,
)
from support.raw_copies import copy_raw
from support.reference import cdc_offsets

pytestmark = pytest.mark.integration

TABLES = 20
# per table: an INSERT each, then an UPDATE of every third key, a DELETE of every fifth.
# Enough that the first micro-batch has several produce requests in flight to each new
# event topic partition, which the fault needs (a backlog of 30 keys a table passed without
# the fix; 1,500 failed it)
KEYS = 1_500


@pytest.fixture(scope="module")
def backlog(stack, cql, tmp_path_factory) -> dict:
    """TABLES new tables' changes published under a new prefix; nothing read them yet."""
    ks = f"many_{uuid.uuid4().hex[:8]}"
    cql.execute(f"CREATE KEYSPACE {ks} WITH replication = "
                "{'class': 'SimpleStrategy', 'replication_factor': 1}")
    names = [f"t{i:02d}" for i in range(TABLES)]
    for name in names:
        cql.execute(f"CREATE TABLE {ks}.{name} (k int PRIMARY KEY, v text, n int) "
                    "WITH cdc = true")
    before = cdc_offsets(stack.cdc_raw_dir)
    changes: Counter[str] = Counter()
    for name in names:
        rounds = [(f"INSERT INTO {ks}.{name} (k, v, n) VALUES (?, ?, ?)",
                   [(k, f"v{k}", k) for k in range(KEYS)]),
                  (f"UPDATE {ks}.{name} SET v = ? WHERE k = ?",
                   [(f"u{k}", k) for k in range(0, KEYS, 3)]),
                  (f"DELETE FROM {ks}.{name} WHERE k = ?", [(k,) for k in range(0, KEYS, 5)])]
        for statement, args in rounds:  # one round after the other: each key's order holds
            for ok, result in execute_concurrent_with_args(cql, cql.prepare(statement), args,
                                                           concurrency=64):
                assert ok, result
            changes[name] += len(args)
    work = tmp_path_factory.mktemp("many-tables")
    prefix = f"n{uuid.uuid4().hex[:8]}"
    assert publish_new_cdc(stack, cql, before, prefix, work) >= sum(changes.values())
    tables = {t.table: t for t in catalog_from_json(read_system_schema(cql)).values()
              if t.keyspace == ks}
    yield {"ks": ks, "prefix": prefix, "work": work, "changes": changes, "tables": tables}
    cql.execute(f"DROP KEYSPACE {ks}", timeout=60)


def test_a_backlog_over_twenty_new_tables_is_written_once(stack, cql, backlog) -> None:
    """Default settings: one query start, no failed micro-batch, one event per change in
    each of the twenty new event topics, and the last image of every key is what Cassandra
    returns."""
    work = backlog["work"]
    prefix = f"{backlog['prefix']}c"
    # every record three times, as three replicas' publishers send it, into fresh topics
    copy_raw(stack, backlog["prefix"], prefix, 3, seed=1, replicas=True)
    log = work / "job.log"
    run_materializer(materializer_command(stack, prefix, work / "ckpt"), log)
    text = log.read_text()
    assert "starting it again from its checkpoint" not in text, text[-3000:]
    assert "OUT_OF_ORDER_SEQUENCE" not in text and "Expiring" not in text, text[-3000:]
    problems = _problems(stack, cql, backlog, prefix)
    assert not problems, "\n".join(problems)


def test_at_least_once_a_backlog_over_twenty_new_tables_is_written_whole(stack, cql, backlog
                                                                         ) -> None:
    """`events.delivery: at-least-once`, its defaults otherwise (Spark's Kafka sink): one
    query start, one event per change in each of the twenty new event topics (nothing
    failed, so nothing ran twice), and the last image of every key is what Cassandra
    returns."""
    work = backlog["work"]
    prefix = f"{backlog['prefix']}a"
    copy_raw(stack, backlog["prefix"], prefix, 3, seed=2, replicas=True)
    log = work / "job-alo.log"
    run_materializer(materializer_command(stack, prefix, work / "ckpt-alo",
                                          "events.delivery=at-least-once"), log)
    text = log.read_text()
    assert "starting it again from its checkpoint" not in text, text[-3000:]
    problems = _problems(stack, cql, backlog, prefix)
    assert not problems, "\n".join(problems)


def _problems(stack, cql, backlog: dict, prefix: str) -> list[str]:
    """Each table whose event topic under `prefix` has not one event per change, or whose
    last images differ from SELECT."""
    ks, problems = backlog["ks"], []
    for name, table in backlog["tables"].items():
        events = read_events(stack.bootstrap_servers, f"{prefix}.{ks}.{name}")
        written = [value for *_, value in events if value is not None]
        if len(written) != backlog["changes"][name]:
            problems.append(f"{name}: {len(written)} events for {backlog['changes'][name]} "
                            "changes")
        if final_rows(events) != oracle_rows(cql, table):
            problems.append(f"{name}: the last images differ from SELECT")
    return problems
