"""The RF=3 pipeline on a ring of Cassandra 4.1 nodes (the ring tests' other line; the
session's ring runs 5.0): three 4.1 nodes on Java 11 beside it, a publisher per node, the
random ring workload at ONE, QUORUM and ALL, a TRUNCATE with rows written again, then the
job; the three checks of every ring scenario (tests/support/ring_harness.py
`check_events`) and the copies of every write from every node."""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
from cassandra import ConsistencyLevel
from cassandra.query import SimpleStatement

from devstack import stack as devstack
from devstack.settings import StackSettings
from shared.kafka_topics import read_to_end
from shared.table_truncate import decode_table_truncate, is_table_truncate
from shared.topic_names import raw_topic

from support.materializer_harness import materializer_command, run_materializer
from support.ring_harness import (
    RingPublishers,
    check_events,
    keyspace_tables,
    pinned_sessions,
    raw_records,
    rf3_keyspace,
    run_ring_workload,
    session_at_all,
)
from support.services import wait_until

pytestmark = pytest.mark.integration

LINE = "4.1"
# ports of its own: the session's 5.0 ring (9142, 7100, 7300) and the one-node lines'
# (9242, 7200, 7400) may be up beside it
PORTS = {"cql_port": 9342, "storage_port": 7500, "jmx_port": 7600}
AGENT_PORTS = {1: 18211, 2: 18212, 3: 18213}
STATEMENTS = 1_500
COVER = ("INSERT", "DELETE FROM", "USING TTL", "m[", ".ctr", "BATCH", "IF NOT EXISTS")
ROWS = 30


@pytest.fixture(scope="module")
def ring41(broker: StackSettings, tmp_path_factory) -> Iterator[dict[str, Any]]:
    """Three 4.1 nodes and their publishers under one prefix, for this module; stopped
    after it unless they were running."""
    s = replace(broker, state_dir=broker.state_dir / f"ring-{LINE}",
                cluster_name="casscade-ring41", nodes=3, cassandra_version=LINE, **PORTS)
    report = devstack.up(s, log=lambda msg: print(f"[ring {LINE}] {msg}"), with_kafka=False)
    work = tmp_path_factory.mktemp("ring41")
    prefix = f"r41{uuid.uuid4().hex[:6]}"
    publishers = RingPublishers(s, work, prefix, http_ports=AGENT_PORTS)
    sessions, truth = {}, None
    try:
        publishers.start()
        sessions = pinned_sessions(s)
        truth = session_at_all(s)
        yield {"ring": s, "work": work, "prefix": prefix, "publishers": publishers,
               "sessions": sessions, "truth": truth}
    finally:
        publishers.stop()
        for session in (*sessions.values(), *([truth] if truth else [])):
            session.cluster.shutdown()
        from devstack import cassandra

        for node in s.all_nodes():
            if node.node_index in report.nodes_started:
                cassandra.shutdown(node, drain=False)


def _truncations(env: dict[str, Any], ks: str) -> set[str]:
    """The hosts whose table-truncated record of {ks}.t is in the raw topic."""
    return {t.host for t in (decode_table_truncate(m.value()) for m in read_to_end(
                env["ring"].bootstrap_servers, raw_topic(env["prefix"]))
                if is_table_truncate(m.value())) if t.name == f"{ks}.t"}


def test_a_41_ring_ends_at_select_all_with_a_truncate(ring41) -> None:
    env = ring41
    ring, truth = env["ring"], env["truth"]
    release = truth.execute("SELECT release_version FROM system.local").one().release_version
    assert release.startswith(f"{LINE}."), release
    ks = rf3_keyspace(truth)
    done = run_ring_workload(env["sessions"], ks, STATEMENTS, seed=41, cover=COVER, workers=4)
    assert len(done.executed) >= 0.95 * STATEMENTS and done.unavailable < 20, done.unavailable
    truth.execute(f"CREATE TABLE {ks}.t (id int PRIMARY KEY, a text) WITH cdc = true")
    at_all = ConsistencyLevel.ALL
    for i in range(ROWS):
        truth.execute(SimpleStatement(f"INSERT INTO {ks}.t (id, a) VALUES ({i}, 'a{i}')",
                                      consistency_level=at_all))
    truth.execute(f"TRUNCATE {ks}.t")
    for i in range(0, ROWS, 3):
        truth.execute(SimpleStatement(f"UPDATE {ks}.t SET a = 'new{i}' WHERE id = {i}",
                                      consistency_level=at_all))
    env["publishers"].wait_caught_up()
    # each node's truncation announced by its publisher (within cdc.truncation_check_s)
    wait_until(lambda: _truncations(env, ks) == {"node-1", "node-2", "node-3"}, 60,
               "every node's truncation in the raw topic")
    # every node's copies came (its publisher read the 4.1 commit log)
    hosts = Counter(r["source"]["host"] for r in raw_records(env, ks, "r"))
    assert set(hosts) == {"node-1", "node-2", "node-3"}, hosts
    run_materializer(materializer_command(ring, env["prefix"], env["work"] / "ckpt"),
                     env["work"] / "job.log")
    counts = check_events(ring.bootstrap_servers, env["prefix"], truth,
                          keyspace_tables(truth, ks), min_rows=3)
    # (ctr has 6 keys, each written by a few of the statements, and a write that times
    # out or finds a replica unavailable is not retried: a key may have no row, and one
    # fresh clone's run had 4)
    assert counts["r"] < sum(hosts.values()) / 2, (counts, hosts)
