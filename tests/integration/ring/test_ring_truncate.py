"""A TRUNCATE on the ring (RF=3) while the job runs and one node's publisher is behind: the
rows written before it, whose third copies and truncation record reach Kafka only after
the rows written after it, end as in `SELECT` at ALL, with the three checks of every ring
scenario (tests/support/ring_harness.py `check_events`, which applies each partition's
truncate event as a consumer would)."""

from __future__ import annotations

import re

import pytest
from cassandra import ConsistencyLevel
from cassandra.query import SimpleStatement

from shared.topic_names import raw_topic

from support.materializer_harness import (
    kill_group,
    materializer_command,
    read_events,
    start_materializer,
)
from support.ring_harness import (
    check_events,
    job_caught_up,
    keyspace_tables,
    raw_records,
    rf3_keyspace,
)
from support.services import free_port, http_get, wait_until

pytestmark = pytest.mark.integration
ROWS = 60


def test_a_truncate_with_a_publisher_behind_ends_at_select_all(env) -> None:
    ring, publishers, work, truth = env["ring"], env["publishers"], env["work"], env["truth"]
    ks = rf3_keyspace(truth, tables="none")
    truth.execute(f"CREATE TABLE {ks}.t (id int PRIMARY KEY, a text, b text) WITH cdc = true")
    port = free_port()
    cmd = materializer_command(ring, env["prefix"], work / "ckpt-truncate",
                               f"http.port={port}", "kafka.starting_offsets=latest",
                               # partitions of its own: a truncate event goes to each
                               f"events.table_partitions.{ks}.t=3", available_now=False)
    job = start_materializer(cmd, work / "truncate.log")
    behind = publishers.agents[3]
    try:
        wait_until(lambda: '"batchId"' in http_get(port, "/status")[1], 240,
                   "the job's first progress report")
        assert behind.stop() == 0  # node 3's copies, and its truncation, come late
        at_all = ConsistencyLevel.ALL
        for i in range(ROWS):
            truth.execute(SimpleStatement(
                f"INSERT INTO {ks}.t (id, a, b) VALUES ({i}, 'a{i}', 'b{i}')",
                consistency_level=at_all))
        # the rows' events first (so the truncation has rows to remove: `d` events and a
        # truncate event), as a table written long before its TRUNCATE would have
        topic = f"{env['prefix']}.{ks}.t"
        wait_until(lambda: _events(ring, topic) >= ROWS or job.poll() is not None, 180,
                   "the rows' events before the TRUNCATE")
        truth.execute(f"TRUNCATE {ks}.t")
        for i in range(0, ROWS, 3):  # rows written again: only what comes after counts
            truth.execute(SimpleStatement(f"UPDATE {ks}.t SET a = 'new{i}' WHERE id = {i}",
                                          consistency_level=at_all))
        for i in range(ROWS, ROWS + 10):
            truth.execute(SimpleStatement(
                f"INSERT INTO {ks}.t (id, a, b) VALUES ({i}, 'a{i}', 'b{i}')",
                consistency_level=at_all))
        # the other two publishers' copies first: the job meets the writes after the
        # TRUNCATE before node 3's copies of those before it
        publishers.wait_caught_up(nodes=(1, 2))
        publishers.start(3)
        publishers.wait_caught_up()
        # one truncate event per partition, written once every raw partition applied the
        # truncation (node 3's later record of it is within the same TRUNCATE: none more)
        truncates = f'casscade_materializer_truncate_events_total{{table="{ks}.t"}}'

        def written_once() -> bool:
            body = http_get(port, "/metrics")[1]
            return re.search(rf"^{re.escape(truncates)} 1$", body, re.M) is not None

        wait_until(lambda: written_once() or job.poll() is not None, 300,
                   "the truncate events")
        # then the job past the barriers it wrote to the raw topic (the rows again)
        wait_until(lambda: job_caught_up(work / "ckpt-truncate", ring.bootstrap_servers,
                                         raw_topic(env["prefix"])) or job.poll() is not None,
                   300, "the job at the end of the raw topic", interval_s=2)
        assert written_once()
        assert job.poll() is None, (work / "truncate.log").read_text()[-3000:]
    finally:
        kill_group(job)
        if behind.proc is None or behind.proc.poll() is not None:
            publishers.start(3)  # the ring's other tests need it
    late = [r for r in raw_records(env, ks, "t") if r["source"]["host"] == "node-3"]
    assert len(late) >= ROWS + ROWS // 3 + 10  # node 3's copies of every write did come
    counts = check_events(ring.bootstrap_servers, env["prefix"], truth,
                          keyspace_tables(truth, ks), min_rows=ROWS // 3 + 10)
    assert counts["t"] >= 2 * ROWS, counts  # a create and a delete of each row before
    events = read_events(ring.bootstrap_servers, f"{env['prefix']}.{ks}.t")
    partitions = {p for p, *_ in events}
    assert partitions == {0, 1, 2}, partitions
    truncates = sorted(p for p, _o, key, value in events if key is None and value)
    assert truncates == sorted(partitions), truncates  # one truncate event per partition


def _events(ring, topic: str) -> int:
    """How many events the topic holds (0 before the job made it)."""
    try:
        return sum(1 for *_, v in read_events(ring.bootstrap_servers, topic, 5) if v)
    except AssertionError:
        return 0
