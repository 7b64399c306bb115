"""The publisher agent as operators run it: a real process on a real node's cdc_raw,
publishing to the real broker; killed, restarted, cut off from Kafka, meeting new tables."""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
import threading
import time
from collections import defaultdict

import pytest
from cassandra.concurrent import execute_concurrent_with_args

from devstack import cassandra, kafka
from devstack.cassandra import cql_cluster
from devstack.settings import repo_root
from publisher.agent.record_writer import SourceInfo
from publisher.commitlog.reader import CommitLogReader
from publisher.commitlog.schema_source import CassandraSchemaSource
from shared.topic_names import raw_key, raw_topic

from support.publisher_harness import (
    AgentProcess,
    read_topic,
    wait_for,
)
from support.reference import completed_segments
from support.services import http_get
from support.splitter_reference import split

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def node(agent_node):
    """The publisher tests' node (agent_node): this module's writes go to a keyspace of its
    own."""
    return agent_node


@pytest.fixture(scope="module")
def session(node):
    cluster = cql_cluster(node)
    sess = cluster.connect()
    sess.execute("CREATE KEYSPACE IF NOT EXISTS ag WITH replication = "
                 "{'class': 'SimpleStrategy', 'replication_factor': 1}")
    yield sess
    cluster.shutdown()


def _roll_segments(session, table: str = "ag.filler") -> None:
    """Write > one 4 MiB segment so the current one closes (COMPLETED)."""
    session.execute(f"CREATE TABLE IF NOT EXISTS {table} (k int PRIMARY KEY, b blob) "
                    "WITH cdc = true")
    insert = session.prepare(f"INSERT INTO {table} (k, b) VALUES (?, ?)")
    blob = random.randbytes(200_000)
    # a few at a time: 25 x 200 kB at once can overload the driver's connection
    # (ConnectionBusy seen once in a fresh-clone run on the 2-core machine)
    execute_concurrent_with_args(session, insert, [(i, blob) for i in range(25)],
                                 concurrency=4)


def test_mixed_workload_reaches_kafka_exactly_as_decoded(stack, node, session, tmp_path):
    session.execute("CREATE TABLE ag.mixed (k int, c int, v text, s text static, "
                    "tags set<text>, PRIMARY KEY (k, c)) WITH cdc = true")
    agent = AgentProcess(node, stack, tmp_path / "agent")
    agent.start()
    statements = 0
    try:
        rng = random.Random(7)
        for i in range(1500):
            k, c = rng.randrange(40), rng.randrange(10)
            choice = rng.randrange(10)
            if choice < 5:
                session.execute(f"INSERT INTO ag.mixed (k, c, v) VALUES ({k}, {c}, 'v{i}')")
            elif choice < 7:
                session.execute(f"UPDATE ag.mixed SET tags = tags + {{'t{i}'}}, s = 's{i}' "
                                f"WHERE k = {k} AND c = {c}")
            elif choice < 8:
                session.execute(f"DELETE FROM ag.mixed WHERE k = {k} AND c = {c}")
            elif choice < 9:
                session.execute(f"DELETE FROM ag.mixed WHERE k = {k} AND c > {c}")
            else:
                session.execute(f"DELETE FROM ag.mixed WHERE k = {k}")
            statements += 1
        _roll_segments(session)
        records = read_topic(stack.bootstrap_servers, raw_topic(agent.prefix),
                             expect_at_least=statements, table="ag.mixed")
        wait_for(lambda: not completed_segments(node.cdc_raw_dir), 60, "completed segments retired")
        # the runbook's status command, against the running agent
        status = subprocess.run([sys.executable, "-m", "casscade.cli", "publisher", "status",
                                 "--config", str(agent.config)], capture_output=True,
                                text=True, timeout=60)
        assert status.returncode == 0, status.stderr
        assert "current segment: CommitLog-" in status.stdout and "lag:" in status.stdout
    finally:
        assert agent.stop() == 0

    # Ground truth: decode the segments the agent archived, split them the same way.
    reader = CommitLogReader(CassandraSchemaSource(session))
    expected = {}
    for seg in sorted(agent.archive.glob("CommitLog-*.log")):
        for m in reader.read(seg):
            m.updates = [u for u in m.updates if u.table.name == "ag.mixed"]
            info = SourceInfo("node-1", "dc-test", seg.name, m.segment_id, 7, 12)
            for _u, rec in split(m, info, lambda t: t.schema_hash):
                src = rec["source"]
                expected[(src["segment_id"], src["position"], src["index"])] = rec
    got = {}
    for _p, _o, key, rec in records:
        src = rec["source"]
        got[(src["segment_id"], src["position"], src["index"])] = rec
        assert key == raw_key(rec["table_id"], rec["partition_key"])
    assert len({(k[0], k[1]) for k in expected}) == statements  # one mutation per statement
    assert set(got) == set(expected)
    for ident, rec in expected.items():
        mine = got[ident]
        for field in ("kind", "partition_key", "clustering", "deletion", "range", "liveness",
                      "cells", "complex_deletions"):
            assert mine[field] == rec[field], (ident, field)
    # One key, one partition; in that partition, in commit order.
    by_key = defaultdict(list)
    for part, offset, key, rec in records:
        by_key[key].append((part, offset, rec["source"]["segment_id"],
                            rec["source"]["position"], rec["source"]["index"]))
    for key, seen in by_key.items():
        assert len({p for p, *_ in seen}) == 1, key
        ordered = [s[2:] for s in sorted(seen, key=lambda s: s[1])]
        assert ordered == sorted(ordered), key


def test_table_created_and_altered_while_running_streams(stack, node, session, tmp_path):
    session.execute("CREATE TABLE IF NOT EXISTS ag.late_alter (k int PRIMARY KEY, v int)")
    agent = AgentProcess(node, stack, tmp_path / "agent", http_port=18101)
    agent.start()
    try:
        time.sleep(3)  # the agent is up and has read its schema
        session.execute("CREATE TABLE ag.late_new (k int PRIMARY KEY, v int) WITH cdc = true")
        session.execute("ALTER TABLE ag.late_alter WITH cdc = true")
        for i in range(200):  # straight after the DDL: no time for a periodic refresh
            session.execute(f"INSERT INTO ag.late_new (k, v) VALUES ({i}, {i})")
            session.execute(f"INSERT INTO ag.late_alter (k, v) VALUES ({i}, {i})")
        for table in ("late_new", "late_alter"):
            records = read_topic(stack.bootstrap_servers, raw_topic(agent.prefix),
                                 expect_at_least=200, table=f"ag.{table}")
            keys = {int.from_bytes(r["partition_key"], "big") for _p, _o, _k, r in records}
            assert keys == set(range(200)), table
    finally:
        assert agent.stop() == 0


def test_kill_9_twenty_times_loses_nothing(stack, node, session, tmp_path):
    session.execute("CREATE TABLE ag.crashy (k int PRIMARY KEY, v text) WITH cdc = true")
    agent = AgentProcess(node, stack, tmp_path / "agent", http_port=18102)
    rows = 50_000
    insert = session.prepare("INSERT INTO ag.crashy (k, v) VALUES (?, ?)")
    done = threading.Event()

    def write() -> None:
        for start in range(0, rows, 1000):
            execute_concurrent_with_args(session, insert,
                                         [(i, f"value-{i}") for i in range(start, start + 1000)],
                                         concurrency=64)
            if start % 10_000 == 0:
                _roll_segments(session)  # complete segments along the way
        done.set()

    writer = threading.Thread(target=write)
    writer.start()
    rng = random.Random(2026)
    kills = 0
    try:
        while kills < 20:
            agent.start()
            agent.wait_serving()  # kill it while it works, not while it starts up
            time.sleep(rng.uniform(0.05, 1.0))
            agent.kill()
            kills += 1
        writer.join()
        _roll_segments(session)
        agent.start()
        records = read_topic(stack.bootstrap_servers, raw_topic(agent.prefix),
                             expect_at_least=rows, timeout_s=180, table="ag.crashy")
        wait_for(lambda: not completed_segments(node.cdc_raw_dir), 60, "completed segments retired")
    finally:
        done.wait(120)
        agent.stop()
    keys = {int.from_bytes(r["partition_key"], "big") for _p, _o, _k, r in records}
    assert kills == 20
    assert keys == set(range(rows))
    print(f"\n{len(records)} records for {rows} rows after {kills} kills "
          f"({len(records) - rows} duplicates)")


def test_broker_down_for_30_seconds(stack, node, session, tmp_path):
    """Kafka away for longer than /health's 30 s with the producer's queue full (a small
    queue, so 4,000 writes fill it): the agent waits, alive (/health answers 200, so no
    probe restarts it or marks the pod beside Cassandra unready), and loses nothing."""
    session.execute("CREATE TABLE ag.outage (k int PRIMARY KEY, v text) WITH cdc = true")
    agent = AgentProcess(node, stack, tmp_path / "agent", http_port=18103, sections={
        "kafka": {"producer": {"queue.buffering.max.messages": "1000"}}})
    agent.start()
    insert = session.prepare("INSERT INTO ag.outage (k, v) VALUES (?, ?)")
    try:
        execute_concurrent_with_args(session, insert, [(i, "before") for i in range(2000)])
        time.sleep(2)
        kafka.shutdown(stack)
        try:
            execute_concurrent_with_args(session, insert,
                                         [(i, "during") for i in range(2000, 6000)])
            time.sleep(35)
            assert agent.alive(), "the agent gave up while Kafka was down"
            code, body = http_get(agent.http_port, "/health")
            assert code == 200, body
            metrics = http_get(agent.http_port, "/metrics")[1]
            assert "casscade_publisher_kafka_waiting 1" in metrics, metrics[-2000:]
        finally:
            pid = kafka.start(stack, __import__("devstack.artifacts",
                                                fromlist=["x"]).find_java())
            kafka.wait_ready(stack, pid)
        execute_concurrent_with_args(session, insert, [(i, "after") for i in range(6000, 8000)])
        records = read_topic(stack.bootstrap_servers, raw_topic(agent.prefix),
                             expect_at_least=8000, timeout_s=120, table="ag.outage")
    finally:
        agent.stop()
    keys = {int.from_bytes(r["partition_key"], "big") for _p, _o, _k, r in records}
    assert keys == set(range(8000))
    assert cassandra.running_pid(node) is not None


def test_heartbeats_move_an_idle_partition_to_its_ttl_expiry(stack, node, session, tmp_path):
    """The agent with its default heartbeats, and the materializer with its defaults (the
    partition stores): a row written with a TTL and nothing written after it still gets its
    expiry event (the heartbeats make its Kafka partition's task run), within a bounded time
    of the expiry; every partition of the raw topic carries the agent's heartbeats, and no
    event is one."""
    from confluent_kafka import KafkaException

    from shared.heartbeat import decode_heartbeat, is_heartbeat
    from shared.kafka_topics import read_to_end

    from support.materializer_harness import (
        kill_group,
        materializer_command,
        read_events,
        start_materializer,
    )

    ttl_s = 12
    session.execute("CREATE TABLE IF NOT EXISTS ag.ttl (k int PRIMARY KEY, v text) "
                    "WITH cdc = true")
    agent = AgentProcess(node, stack, tmp_path / "agent", http_port=18103)
    agent.start()
    job = None
    log = tmp_path / "job.log"
    try:
        agent.wait_serving(60)
        events_topic = f"{agent.prefix}.ag.ttl"

        def ops(k: int) -> list[str]:
            try:
                events = read_events(stack.bootstrap_servers, events_topic, timeout_s=5)
            except (AssertionError, KafkaException):  # not made yet, or no leader yet
                return []
            return [v["op"] for _p, _o, key, v in events if v and key == {"k": k}]

        def wait_event(k: int, op: str, limit_s: float, what: str) -> None:
            try:
                wait_for(lambda: op in ops(k), limit_s, what)
            except AssertionError as exc:
                raise AssertionError(f"{exc}; the job's log ends:\n"
                                     f"{log.read_text()[-4000:]}") from None

        # the agent publishes the module's earlier writes too (its node's cdc_raw): the job
        # works through them first, so the TTL'd row is written once it has
        session.execute("INSERT INTO ag.ttl (k, v) VALUES (0, 'caught up')")
        job = start_materializer(
            materializer_command(stack, agent.prefix, tmp_path / "ckpt",
                                 available_now=False), log)  # the default: partition stores
        wait_event(0, "c", 300, "the job through the backlog")
        session.execute(f"INSERT INTO ag.ttl (k, v) VALUES (1, 'expires') USING TTL {ttl_s}")
        expires_at = time.time() + ttl_s
        wait_event(1, "d", 120, "the expiry event")
        late_s = time.time() - expires_at
        print(f"\nthe expiry event came {late_s:.1f} s after the row's expiry (heartbeats "
              "every 5 s, trigger 1 s)")
        assert ops(1) == ["c", "d"]
        assert ops(0) == ["c"]  # the idle row stays
        assert late_s < 20, late_s  # heartbeat interval + trigger + a micro-batch, with room
        beats = [m for m in read_to_end(stack.bootstrap_servers, raw_topic(agent.prefix))
                 if is_heartbeat(m.value())]
        assert {m.partition() for m in beats} == {0, 1, 2}
        assert {decode_heartbeat(m.value()).host for m in beats} == {"node-1"}
        assert {m.key() for m in beats} == {b"node-1"}
    finally:
        if job is not None:
            kill_group(job)
        assert agent.stop() == 0


# The base install's budget (issue 49): its own dependencies make about 87 MB
PUBLISHER_VENV_MB = 100
ENGINE = ("pyspark", "py4j", "pyarrow", "pandas", "numpy")


def test_the_agent_from_the_built_wheel_alone_publishes(stack, node, session, tmp_path):
    """`make dist`'s wheel installed as an operator installs it beside a Cassandra node
    (`pip install casscade` into a clean venv, no extra): none of the materializer's engine
    comes with it, the venv stays within its budget, the compiled reader is in, and the
    agent run from it (not from the checkout) publishes a table's writes; the materializer's
    commands say which install they need instead of failing on an import."""
    dist, venv, elsewhere = tmp_path / "dist", tmp_path / "venv", tmp_path / "run"
    elsewhere.mkdir()
    built = subprocess.run([sys.executable, "-m", "build", "--outdir", str(dist),
                            str(repo_root())], capture_output=True, text=True, timeout=900)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    wheels = list(dist.glob("casscade-*.whl"))
    assert len(wheels) == 1 and list(dist.glob("casscade-*.tar.gz")), sorted(dist.iterdir())
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # nothing of the checkout
    pip = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet",
                          "--disable-pip-version-check", str(wheels[0])],
                         capture_output=True, text=True, timeout=900, env=env)
    assert pip.returncode == 0, pip.stderr[-3000:]

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(venv / "bin" / "casscade"), *args], capture_output=True,
                              text=True, timeout=120, cwd=elsewhere, env=env)

    probe = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import importlib.util, publisher; "
         "from shared.rowupdate_reader import COMPILED; print(publisher.__file__, COMPILED, "
         f"[m for m in {ENGINE!r} if importlib.util.find_spec(m)])"],
        capture_output=True, text=True, timeout=60, cwd=elsewhere, env=env)
    where, compiled, engine = probe.stdout.split(" ", 2)
    assert where.startswith(str(venv)) and compiled == "True", probe.stdout + probe.stderr
    assert engine.strip() == "[]", engine  # no pyspark, py4j, pyarrow, pandas, numpy
    size_mb = sum(f.stat().st_size for f in venv.rglob("*") if f.is_file()
                  and not f.is_symlink()) / 2**20
    print(f"[wheel] the publisher's venv: {size_mb:.1f} MB")
    assert size_mb <= PUBLISHER_VENV_MB, size_mb
    listed = run("--help")
    assert all(c in listed.stdout for c in ("publisher", "snapshot", "ops", "verify")), listed
    refused = run("materializer", "run")
    assert refused.returncode != 0 and "Traceback" not in refused.stderr, refused.stderr
    assert "pip install 'casscade[materializer]'" in refused.stderr, refused.stderr

    session.execute("CREATE TABLE ag.wheel (k int PRIMARY KEY, v text) WITH cdc = true")
    agent = AgentProcess(node, stack, tmp_path / "agent", http_port=18104,
                         command=[str(venv / "bin" / "casscade")], cwd=elsewhere,
                         env={"PYTHONPATH": ""})
    agent.start()
    try:
        agent.wait_serving(60)
        for k in range(50):
            session.execute(f"INSERT INTO ag.wheel (k, v) VALUES ({k}, 'v{k}')")
        records = read_topic(stack.bootstrap_servers, raw_topic(agent.prefix),
                             expect_at_least=50, table="ag.wheel")
    finally:
        assert agent.stop() == 0, agent.log.read_text()[-3000:]
    assert len({key for _p, _o, key, _rec in records}) == 50, records[:3]  # one per row
    shutil.rmtree(venv, ignore_errors=True)
