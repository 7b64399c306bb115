"""The pipeline at RF=3 on a ring of three real Cassandra nodes: a publisher per node, every
change arriving three times, and the materializer folding the copies into one event stream.

Every scenario makes the same three checks on the events (tests/support/ring_harness.py):
the last `after` of every key equals `SELECT` at ALL, no event shows no visible change, and
every `before` is the previous `after` of its key.
"""

from __future__ import annotations

import os
import re
import signal
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from cassandra import ConsistencyLevel
from cassandra.query import SimpleStatement

from devstack import cassandra
from devstack import stack as devstack
from materializer.store.layout import STATE_DIR
from shared.pids import pid_alive
from shared.topic_names import raw_topic

from support.materializer_harness import (
    kill_group,
    materializer_command,
    read_events,
    run_materializer,
    start_materializer,
)
from support.raw_copies import copy_raw
from support.ring_harness import (
    batch_partitions,
    check_events,
    committed_batches,
    job_caught_up,
    keyspace_tables,
    no_hints_left,
    nodetool_each,
    raw_records,
    rf3_keyspace,
    run_ring_workload,
    submit_command,
    without_replays,
    write_probe,
)
from support.services import http_get, metric, wait_until

pytestmark = pytest.mark.integration

STATEMENTS = 3_024
PAUSE_S = 10  # the chaos run's broker pause
COVER = ("INSERT", "DELETE FROM", "c1 >", "USING TTL", "TIMESTAMP", "m[", "u.a", ".ctr",
         "BATCH", "IF NOT EXISTS", " IF v_int", "s_int, v_int")
# the differential's statements in flight at once (one at a time: 87 s here)
WORKERS = 4
# a short workload's counter table ends with rows: ten counter updates at least
CTR = (".ctr",)


@pytest.fixture(scope="module")
def staged(env, spark_cluster, packed_env):
    """Three scenarios written one after another, then one run of the job over all of them
    (a job's start costs 30-60 s here): the RF=3 differential, static columns written with
    rows, and a read repair. The job runs on the Spark standalone cluster and loses a worker
    on the way (the cluster scenario). Each test below checks its own keyspace."""
    out: dict = {}
    for name, stage in (("differential", _write_differential), ("phantom", _write_phantom),
                        ("read_repair", _write_read_repair)):
        started = time.monotonic()
        out[name] = stage(env)
        print(f"[staged] {name} written in {time.monotonic() - started:.0f}s")
    started = time.monotonic()
    out["cluster"] = _run_on_cluster(env, spark_cluster, "staged", out["differential"]["ks"],
                                     packed_env)
    print(f"[staged] the job on the cluster: {time.monotonic() - started:.0f}s")
    return out


def _run_on_cluster(env, spark_cluster, name: str, ks: str, packed: Path) -> dict:
    """`deploy/spark/submit.sh` to the standalone cluster (a master, two one-core workers)
    over the prefix's raw topics, --available-now: one micro-batch (the default limit of
    records per batch holds them all, so no mutation straddles two batches); worker 2 killed
    with SIGKILL once a task of that batch runs in its Python worker, so the task's store
    and part of its changelog writes are there. Returns the exit code, what the kill hit
    and the log's end."""
    import os
    import subprocess
    import sys

    from devstack import spark_cluster as cluster
    from devstack.settings import repo_root

    ring, work = env["ring"], env["work"]
    checkpoint = work / f"ckpt-{name}"
    cmd = submit_command(cluster.master_url(spark_cluster), packed, ring.bootstrap_servers,
                         env["prefix"], str(checkpoint))
    log = work / f"{name}.log"
    apps = cluster.worker_dir(spark_cluster, 2) / "work"
    earlier = set(apps.glob("app-*"))  # the session's cluster may have run other jobs
    every_app = "worker-*/work/app-*"  # both workers' application folders
    before = set(apps.parent.parent.glob(every_app))
    proc = subprocess.Popen(cmd, cwd=repo_root(), env=dict(os.environ, PYTHON=sys.executable),
                            stdout=log.open("ab"), stderr=subprocess.STDOUT,
                            start_new_session=True)
    try:
        # Worker 2 dies once its executor runs a task's Python: the task has opened its
        # partition store there, and the batch is not committed
        def running_a_task() -> bool:
            return proc.poll() is not None or any(
                "Starting Python task execution" in f.read_text(errors="replace")
                for app in set(apps.glob("app-*")) - earlier for f in app.glob("*/stderr"))

        wait_until(running_a_task, 300, "worker 2's executor running a task", interval_s=0.2)
        mid_batch = proc.poll() is None and not (checkpoint / "commits" / "0").exists()
        killed = mid_batch and cluster.kill_worker(spark_cluster, 2)
        code = proc.wait(900)
    finally:
        kill_group(proc)
        cluster.start_worker(spark_cluster, 2)
    text = log.read_text()
    # the executors ran the archive's python, unpacked beside their logs
    unpacked = [e for app in set(apps.parent.parent.glob(every_app)) - before
                for e in app.glob("*/environment/bin/python")]
    return {"code": code, "mid_batch": mid_batch, "killed": killed, "unpacked": unpacked,
            "lost_executor": "Lost executor" in text,
            "batches": len(list((checkpoint / "commits").glob("[0-9]*"))), "log": text[-4000:]}


def test_partition_stores_follow_their_partitions_on_the_cluster(env, staged, spark_cluster,
                                                                packed_env) -> None:
    """The RF=3 differential's raw records through the job on the
    standalone cluster (submit.sh, the packed environment, the checkpoint given as a Hadoop
    URI), in small micro-batches: while both workers run, no store is read back (each topic
    partition's task waits for the executor that holds its store); worker 2 is SIGKILLed,
    so worker 1's executor takes its partitions and rebuilds their stores from the
    changelogs; worker 2 is started again while the job runs. The three checks pass on the
    events."""
    import os
    import subprocess
    import sys

    from devstack import spark_cluster as cluster
    from devstack.settings import repo_root

    ks, work = staged["differential"]["ks"], env["work"]
    prefix = f"pc{uuid.uuid4().hex[:6]}"
    sent = copy_raw(env["ring"], env["prefix"], prefix, 1, seed=22)
    checkpoint = work / "ckpt-partition-cluster"
    commits = checkpoint / "commits"
    # the checkpoint as a Hadoop URI, as a cluster's is (hdfs://, s3a://): the driver's
    # records go through Spark's file systems
    cmd = submit_command(cluster.master_url(spark_cluster), packed_env,
                         env["ring"].bootstrap_servers, prefix, f"file://{checkpoint}",
                         f"kafka.max_offsets_per_trigger={max(300, sent // 30)}")
    log = work / "partition-cluster.log"
    apps = [cluster.worker_dir(spark_cluster, n) / "work" for n in (1, 2)]
    earlier = {a for w in apps for a in w.glob("app-*")}
    proc = subprocess.Popen(cmd, cwd=repo_root(), env=dict(os.environ, PYTHON=sys.executable),
                            stdout=log.open("ab"), stderr=subprocess.STDOUT,
                            start_new_session=True)

    def batches() -> int:
        return len(list(commits.glob("[0-9]*"))) if commits.is_dir() else 0

    try:
        wait_until(lambda: proc.poll() is not None or batches() >= 6, 300,
                   "six committed micro-batches")
        killed_at = batches() if proc.poll() is None else None
        assert killed_at is not None and cluster.kill_worker(spark_cluster, 2), \
            log.read_text()[-3000:]
        wait_until(lambda: proc.poll() is not None or batches() >= killed_at + 3, 300,
                   "three micro-batches on the survivor")
        restarted_at = batches() if proc.poll() is None else None
        cluster.start_worker(spark_cluster, 2)
        code = proc.wait(900)
    finally:
        kill_group(proc)
        cluster.start_worker(spark_cluster, 2)
    text = log.read_text()
    assert code == 0, text[-4000:]
    assert restarted_at is not None, f"the job ended before worker 2 came back:\n{text[-3000:]}"
    executors = {n: "".join(f.read_text(errors="replace") for a in set(w.glob("app-*")) - earlier
                            for f in a.glob("*/stderr"))
                 for n, w in zip((1, 2), apps, strict=True)}
    # rebuilt, or caught up where worker 1 ran that partition before it settled on worker 2
    assert re.search(r"(rebuilt|caught up) from its changelog", executors[1]), \
        executors[1][-3000:]
    records = checkpoint / STATE_DIR
    # (Hadoop's local file system adds a .crc file beside each)
    assert {p.name for p in records.iterdir() if not p.name.endswith(".crc")} == {
        "changelog.json", "delivery.json", "owner.json", "partitions.json"}
    end = next(line for line in reversed(text.splitlines()) if "materializer run ended" in line)
    assert int(end.split("stores_restored=")[1].split()[0]) >= 1, end
    restored = {int(m.group(1)): int(m.group(2)) for m in re.finditer(
        r"partition stores restored from their changelogs batch=(\d+) stores=(\d+)", text)}
    # steady state (both executors up, after the first two batches placed the partitions):
    # every topic partition's task runs where its store is, so nothing is read back
    steady = [b for b in range(2, killed_at - 1) if b in restored]
    print(f"\nstores restored per micro-batch: {restored} (worker 2 killed after batch "
          f"{killed_at - 1}, started again after batch {restarted_at - 1})")
    assert not steady, (restored, killed_at)
    check_events(env["ring"].bootstrap_servers, prefix, env["truth"],
                 keyspace_tables(env["truth"], ks, only=("r", "ctr")))


def _write_differential(env) -> dict:
    """3,000 random statements over the three nodes at ONE, QUORUM and ALL."""
    ks = rf3_keyspace(env["truth"])
    done = run_ring_workload(env["sessions"], ks, STATEMENTS, seed=13, cover=COVER,
                             workers=WORKERS)
    env["publishers"].wait_caught_up()
    return {"ks": ks, "done": done, "hosts": Counter(r["source"]["host"]
                                                      for r in raw_records(env, ks, "r"))}


def test_rf3_differential_events_end_at_select_all(env, staged) -> None:
    """3,000 random statements over the three nodes at ONE, QUORUM and ALL: every change
    arrives once per replica and comes out as one event; the three checks pass."""
    ks, done, hosts = (staged["differential"][k] for k in ("ks", "done", "hosts"))
    assert len(done.executed) >= 3000 and done.unavailable < 30, done.unavailable
    for marker in COVER:
        assert sum(marker in text for *_, text in done.executed) >= 10, marker
    assert {node for node, *_ in done.executed} == {1, 2, 3}
    assert {cl for _, cl, _ in done.executed} == {"ONE", "QUORUM", "ALL"}
    # every change arrives once per replica: the three nodes' publishers sent the same
    # number of copies of the regular table
    assert set(hosts) == {"node-1", "node-2", "node-3"}, hosts
    assert max(hosts.values()) - min(hosts.values()) <= 0.02 * max(hosts.values()), hosts
    counts = check_events(env["ring"].bootstrap_servers, env["prefix"], env["truth"],
                          keyspace_tables(env["truth"], ks))
    # three copies in, one event out (events + tombstones < copies / 2)
    assert counts["r"] < sum(hosts.values()) / 2, (counts, hosts)


def test_rf3_differential_on_a_local_master_ends_at_select_all(env, staged) -> None:
    """The same raw records (every replica's copy, as the three publishers sent them) through
    the job on its default local master: the three checks pass, and the copies were dropped
    in the partition stores."""
    ks, work = staged["differential"]["ks"], env["work"]
    prefix = f"part{uuid.uuid4().hex[:6]}"
    sent = copy_raw(env["ring"], env["prefix"], prefix, 1, seed=21)
    log = work / "partition.log"
    run_materializer(materializer_command(env["ring"], prefix, work / "ckpt-partition"), log)
    counts = check_events(env["ring"].bootstrap_servers, prefix, env["truth"],
                          keyspace_tables(env["truth"], ks))
    hosts = staged["differential"]["hosts"]
    assert counts["r"] < sum(hosts.values()) / 2, (counts, hosts)
    end = next(line for line in reversed(log.read_text().splitlines())
               if "materializer run ended" in line)
    dropped = int(end.split("copies_dropped=")[1].split()[0])
    assert sent / 2 < dropped < sent, (dropped, sent)


def test_node_publisher_and_job_killed_mid_workload_lose_nothing(env, broker) -> None:
    """Node 3 killed with SIGKILL while writes go on at the other two, then restarted and
    its hints replayed; a TRUNCATE of the table the hints were for, and rows written to it
    again (its truncate barrier's `r` events); a publisher killed with SIGKILL and
    restarted; the broker paused (SIGSTOP) for PAUSE_S; the materializer killed with
    SIGKILL and restarted; all during one workload. The restarted node's publisher
    publishes every hinted copy; every table ends at SELECT at ALL with no event twice
    (issue 71's fault run: barriers and broker pauses among the faults)."""
    from devstack import kafka

    ring, publishers, work = env["ring"], env["publishers"], env["work"]
    ks = rf3_keyspace(env["truth"])
    truth = env["truth"]
    truth.execute(f"CREATE TABLE {ks}.hinted (id int PRIMARY KEY, v int) WITH cdc = true")
    down: set[int] = set()
    job: list = []
    # latest: the prefix's earlier scenarios are not this job's (their topics exist); this
    # keyspace's topics are new, and partitions found after the start are read from their
    # beginning. A first progress report: the query has fixed its starting offsets.
    cmd = materializer_command(ring, env["prefix"], work / "ckpt-chaos", "http.port=18291",
                               "kafka.starting_offsets=latest", available_now=False)
    job.append(start_materializer(cmd, work / "chaos.log"))
    wait_until(lambda: '"batchId"' in http_get(18291, "/status")[1], 240,
               "the job's first progress report")

    def kill_node() -> None:
        assert cassandra.kill(ring.node(3))
        down.add(3)
        # writes the dead node misses: the coordinators keep them as hints for it
        for i in range(300):
            env["sessions"][1 + i % 2].execute(
                f"INSERT INTO {ks}.hinted (id, v) VALUES ({i}, {i})", timeout=30)

    def start_node() -> None:
        devstack.start_node(ring.node(3), log=print)
        down.discard(3)

    def truncate() -> None:  # once the hints are in (a hint after it would bring rows back)
        wait_until(lambda: no_hints_left(ring), 120, "every hint delivered", interval_s=1)
        wait_until(lambda: _truncated(truth, f"{ks}.hinted"), 120, "TRUNCATE at every node",
                   interval_s=1)
        for i in range(1000, 1050):  # (through nodes 1 and 2: node 3's session may not
            env["sessions"][1 + i % 2].execute(  # have seen it back yet)
                f"INSERT INTO {ks}.hinted (id, v) VALUES ({i}, {i})", timeout=30)

    paused: list[float] = []

    def pause_broker() -> None:
        pid = kafka.running_pid(broker)
        assert pid is not None
        os.kill(pid, signal.SIGSTOP)
        paused.append(time.monotonic())

    def resume_broker() -> None:  # (a fault of PAUSE_S at least, whatever the write rate)
        time.sleep(max(0.0, paused[0] + PAUSE_S - time.monotonic()))
        pid = kafka.running_pid(broker)
        assert pid is not None
        os.kill(pid, signal.SIGCONT)

    # half the differential's statements: each fault still falls between writes
    hooks = {
        300: kill_node,
        600: start_node,
        650: truncate,
        750: lambda: publishers.agents[2].kill(),
        900: lambda: publishers.start(2),
        950: pause_broker,
        1000: resume_broker,
        1050: lambda: kill_group(job[-1]),
        1200: lambda: job.append(start_materializer(cmd, work / "chaos.log")),
    }
    try:
        done = run_ring_workload(env["sessions"], ks, STATEMENTS // 2, seed=29,
                                 down=lambda: down, at=hooks)
        assert len(done.executed) >= 1500 and not hooks, hooks
        wait_until(lambda: no_hints_left(ring), 120, "every hint delivered", interval_s=1)
        publishers.wait_caught_up()
        # the restarted job (from its checkpoint) reads on to the end of the raw topic
        wait_until(lambda: job_caught_up(work / "ckpt-chaos", ring.bootstrap_servers,
                                         raw_topic(env["prefix"]))
                   or job[-1].poll() is not None, 300, "the job at the end of the raw topics",
                   interval_s=2)
        assert job[-1].poll() is None, (work / "chaos.log").read_text()[-3000:]
    finally:
        if paused:
            resume_broker()  # (a second SIGCONT is nothing)
        if 3 in down:
            devstack.start_node(ring.node(3), log=print)
        for proc in job:
            kill_group(proc)
    hinted = {host: {r["partition_key"] for r in raw_records(env, ks, "hinted")
                     if r["source"]["host"] == host} for host in ("node-1", "node-2", "node-3")}
    # (the 300 hinted rows, and the 50 written after the TRUNCATE)
    assert [len(hinted[h]) for h in sorted(hinted)] == [350, 350, 350], \
        {h: len(v) for h, v in hinted.items()}
    # at 1,500 statements the counter table can end with few rows (4 in one run): its events
    # are checked all the same, and there must be some
    counts = check_events(ring.bootstrap_servers, env["prefix"], truth,
                          keyspace_tables(env["truth"], ks, only=("r", "ctr", "hinted")),
                          min_rows=1)
    assert counts["r"] >= 100 and counts["ctr"] >= 10, counts
    # hinted: 300 rows, each removed by the TRUNCATE, one truncate event, 50 rows again
    ops = Counter(e[3]["op"] for e in read_events(ring.bootstrap_servers,
                                                  f"{env['prefix']}.{ks}.hinted")
                  if e[3] is not None)
    assert ops["d"] == 300 and ops["t"] == 1 and ops["c"] + ops["r"] >= 350, ops


def _truncated(truth: Any, table: str) -> bool:
    """TRUNCATE `table` (False: not every node took it yet, a node just back)."""
    from cassandra import OperationTimedOut, Unavailable
    from cassandra.protocol import TruncateError

    try:
        truth.execute(f"TRUNCATE {table}", timeout=60)
    except (Unavailable, TruncateError, OperationTimedOut):
        return False
    return True


def _write_read_repair(env) -> dict:
    """Hinted handoff off on node 1, nodes 2 and 3 cut off from it (gossip off: node 1
    convicts them and sends them nothing), writes at ONE through node 1, the two back, then
    reads at ALL: the coordinator repairs the two nodes. (Killing and restarting the two
    took 85 s here; their gossip, about 35 s.)"""
    ring, truth, first = env["ring"], env["truth"], env["sessions"][1]
    ks = rf3_keyspace(env["truth"], tables="none")
    truth.execute(f"CREATE TABLE {ks}.rr (k int PRIMARY KEY, v text) WITH cdc = true "
                  "AND read_repair = 'BLOCKING'")
    truth.execute(f"CREATE TABLE {ks}.probe (k int PRIMARY KEY) WITH cdc = false")
    truth.execute(f"INSERT INTO {ks}.rr (k, v) VALUES (-1, 'schema known everywhere')")
    one, others = ring.node(1), ring.all_nodes()[1:]
    nodetool_each([(one, "disablehandoff"), *((n, "disablegossip") for n in others)])
    try:
        # node 1 refuses a write at TWO once it holds the other two replicas down
        wait_until(lambda: not write_probe(first, ks, "TWO"), 120, "node 1 to see nodes 2, 3 down",
                   interval_s=1)
        for k in range(20):
            first.execute(SimpleStatement(f"INSERT INTO {ks}.rr (k, v) VALUES ({k}, 'v{k}')",
                                          consistency_level=ConsistencyLevel.ONE))
    finally:
        nodetool_each([(n, "enablegossip") for n in others])
        wait_until(lambda: all(write_probe(node, ks, "ALL") for node in env["sessions"].values()),
                   120, "every node to see every node up", interval_s=1)
        cassandra.nodetool(one, "enablehandoff")
    env["publishers"].wait_caught_up()
    before = Counter(r["source"]["host"] for r in raw_records(env, ks, "rr"))
    values = [truth.execute(f"SELECT v FROM {ks}.rr WHERE k = {k}").one().v for k in range(20)]
    env["publishers"].wait_caught_up()
    after = Counter(r["source"]["host"] for r in raw_records(env, ks, "rr"))
    return {"ks": ks, "before": before, "after": after, "values": values}


def test_read_repair_reaches_commit_logs_and_makes_no_event(env, staged) -> None:
    """The repair mutations reach the repaired nodes' commit logs (their publishers publish
    them) and the materializer makes one event per row, not more."""
    rr = staged["read_repair"]
    ks, before, after = rr["ks"], rr["before"], rr["after"]
    assert rr["values"] == [f"v{k}" for k in range(20)]
    assert before["node-1"] == 21 and before["node-2"] == before["node-3"] == 1, before
    assert after["node-2"] == after["node-3"] == 21, after  # repaired through the log
    events = without_replays(read_events(env["ring"].bootstrap_servers,
                                         f"{env['prefix']}.{ks}.rr"))
    ops = Counter(v["op"] for *_, v in events if v is not None)
    assert ops == {"c": 21}, ops
    check_events(env["ring"].bootstrap_servers, env["prefix"], env["truth"],
                 {"rr": keyspace_tables(env["truth"], ks)["rr"]}, min_rows=21)


def _write_phantom(env) -> str:
    """A static column written with rows in one statement or one batch, on all three
    nodes."""
    ks = rf3_keyspace(env["truth"], tables="none")
    env["truth"].execute(f"CREATE TABLE {ks}.t (p int, c int, s text static, v text, "
                         "PRIMARY KEY (p, c)) WITH cdc = true")
    sessions = env["sessions"]
    for p in range(12):
        session = sessions[1 + p % 3]
        if p % 2:
            session.execute(f"INSERT INTO {ks}.t (p, c, s, v) VALUES ({p}, 1, 'st', 'val')")
        else:
            session.execute(f"BEGIN BATCH UPDATE {ks}.t SET s = 's{p}' WHERE p = {p}; "
                            f"INSERT INTO {ks}.t (p, c, v) VALUES ({p}, 1, 'a'); "
                            f"INSERT INTO {ks}.t (p, c, v) VALUES ({p}, 2, 'b'); APPLY BATCH")
    env["publishers"].wait_caught_up()
    return ks


def test_one_mutation_gives_one_change_not_a_static_phantom(env, staged) -> None:
    """The events are those of the rows a reader could see, never a static-only row."""
    ks = staged["phantom"]
    events = [v for *_, v in without_replays(read_events(
        env["ring"].bootstrap_servers, f"{env['prefix']}.{ks}.t")) if v is not None]
    phantoms = [e for e in events if (e["after"] or e["before"])["c"] is None]
    assert not phantoms, phantoms[:3]
    assert Counter(e["op"] for e in events) == {"c": 18}
    check_events(env["ring"].bootstrap_servers, env["prefix"], env["truth"],
                 keyspace_tables(env["truth"], ks))


def test_tables_of_every_type_come_and_go_and_a_broker_restart_keep_the_job_running(
        env, broker) -> None:
    """While the job runs: four keyspaces of the workload's tables (every CQL type, statics,
    collections, a UDT, counters) created at once, so eight event topics are new to Kafka in
    the same second; random statements over them at ONE, QUORUM and ALL, the broker
    SIGKILLed in the middle of the writes and started again; then one table of every type
    dropped (the three publishers each announce it, its keys' state is freed once), a fifth
    keyspace created after it and written, and more writes to the first. The job carries on
    or starts its query again from the checkpoint; every table left passes the checks (no
    event twice among them)."""
    from devstack import artifacts, kafka

    ring, work, truth = env["ring"], env["work"], env["truth"]
    http_port = 18290
    # latest: the prefix's earlier scenarios are not this job's; these tables' topics are
    # new, and partitions found after the start are read from their beginning
    # An idempotent producer whose batch was in flight when the broker stopped can get
    # OUT_OF_ORDER_SEQUENCE_NUMBER until its delivery timeout (2 min by default) expires the
    # batch and fails the query, which then restarts: a 30 s timeout makes that wait shorter
    producer = '{"delivery.timeout.ms": "30000", "request.timeout.ms": "10000"}'
    ckpt = work / "ckpt-tables"
    cmd = materializer_command(ring, env["prefix"], ckpt, f"http.port={http_port}",
                               "spark.restart_backoff_s=2", "kafka.starting_offsets=latest",
                               f"kafka.producer={producer}", available_now=False)
    job = start_materializer(cmd, work / "tables.log")
    freed = "casscade_materializer_dropped_table_entries_total{table=\"%s\"}"

    def entries_freed(table: str) -> float | None:
        return metric(http_port, freed % table)

    def drops_sent() -> dict[int, float]:
        """Each publisher's table-dropped records sent so far."""
        return {n: metric(agent.http_port, "casscade_publisher_table_drops_sent_total") or 0
                for n, agent in env["publishers"].agents.items()}

    def restart_broker() -> None:  # the broker killed mid-stream, away for a few seconds
        pid = kafka.running_pid(broker)  # the session's broker
        assert pid is not None
        os.kill(pid, signal.SIGKILL)  # open transactions and all: nothing shuts down cleanly
        wait_until(lambda: not pid_alive(pid), 30, "the broker gone")
        time.sleep(3)
        kafka.wait_ready(broker, kafka.start(broker, artifacts.find_java()))

    def caught_up() -> None:
        env["publishers"].wait_caught_up(180)
        wait_until(lambda: job_caught_up(ckpt, ring.bootstrap_servers, raw_topic(env["prefix"]))
                   or job.poll() is not None, 300, "the job at the end of the raw topic",
                   interval_s=2)
        assert job.poll() is None, (work / "tables.log").read_text()[-3000:]

    try:
        # a first progress report: the query has fixed its starting offsets
        wait_until(lambda: '"batchId"' in http_get(http_port, "/status")[1], 240,
                   "the job's first progress report")
        keyspaces = [rf3_keyspace(env["truth"]) for _ in range(4)]
        hooks = {150: restart_broker}
        run_ring_workload(env["sessions"], keyspaces[0], 300, seed=31, at=hooks, cover=CTR)
        assert not hooks, "the broker was not restarted"
        for i, ks in enumerate(keyspaces[1:]):
            run_ring_workload(env["sessions"], ks, 300, seed=32 + i, cover=CTR,
                              workers=WORKERS)
        caught_up()
        gone = f"{keyspaces[1]}.r"
        partitions = {(row.p1, row.p2) for row in truth.execute(f"SELECT p1, p2 FROM {gone}")}
        sent_before = drops_sent()
        truth.execute(f"DROP TABLE {gone}")
        keyspaces.append(rf3_keyspace(env["truth"]))  # a table of every type made after the drop
        run_ring_workload(env["sessions"], keyspaces[4], 300, seed=36, cover=CTR,
                          workers=WORKERS)
        # each publisher reads the schema every 30 s while idle: the first announcement
        # frees the table's keys, the others' find nothing left
        wait_until(lambda: entries_freed(gone) is not None, 180,
                   "the dropped table's state freed", interval_s=2)
        run_ring_workload(env["sessions"], keyspaces[0], 300, seed=37, cover=CTR,
                          workers=WORKERS)
        caught_up()
        first = entries_freed(gone)
        # every publisher announces the drop (at its next schema read while idle), and the
        # job reads them all: the later announcements free nothing more
        wait_until(lambda: all(drops_sent()[n] > sent_before[n] for n in sent_before), 120,
                   "every publisher's announcement of the drop", interval_s=1)
        caught_up()
        assert entries_freed(gone) == first, (first, entries_freed(gone))
        # at least one entry per partition with rows at the drop (partitions deleted earlier
        # may still hold state, so not an equality)
        assert first is not None and first >= len(partitions) > 0, (
            first, len(partitions), [line for line in (work / "tables.log").read_text()
                                     .splitlines() if "dropped" in line or "again" in line])
        assert job.poll() is None, (work / "tables.log").read_text()[-3000:]
    finally:
        kill_group(job)
    log = (work / "tables.log").read_text()
    restarts = log.count("starting it again from its checkpoint")
    print(f"[tables come and go] query restarts: {restarts}, {gone}: {first:.0f} entries "
          f"freed for {len(partitions)} partitions")
    counts: dict[str, int] = {}
    for ks in keyspaces:
        tables = {n: t for n, t in keyspace_tables(env["truth"], ks).items() if f"{ks}.{n}" != gone}
        counts |= {f"{ks}.{n}": c for n, c in check_events(
            ring.bootstrap_servers, env["prefix"], truth, tables, min_rows=1).items()}
    assert len(counts) == 9 and all(counts.values()), counts


def test_standalone_cluster_job_survives_a_killed_worker(env, staged) -> None:
    """The staged run above is the materializer submitted to a Spark standalone cluster,
    with a worker killed with SIGKILL while a task of its micro-batch runs there: the job
    carries on with the other (Spark runs the lost tasks again there, which rebuild their
    stores from the changelogs and take back what the killed attempt wrote), finishes, and
    the RF=3 differential's events pass the three checks."""
    run, ks = staged["cluster"], staged["differential"]["ks"]
    assert run["mid_batch"] and run["killed"], run["log"]
    assert run["unpacked"], run["log"]  # the executors ran from the packed environment
    assert run["lost_executor"], run["log"]  # the driver saw the worker's executor go
    assert run["code"] == 0 and run["batches"] >= 1, run["log"]
    check_events(env["ring"].bootstrap_servers, env["prefix"], env["truth"],
                 keyspace_tables(env["truth"], ks, only=("r", "ctr")))


def _table_files(checkpoint: Path) -> set[str]:
    """The local partition stores' table files: a store gains one when it closes, which
    under exactly-once is right after its partition's transaction committed."""
    return {str(p) for p in (checkpoint / STATE_DIR).glob("*/[0-9]*/*.sst")}


def _batches(checkpoint: Path, log: str) -> set[int]:
    folder = checkpoint / log
    return {int(p.name) for p in folder.glob("[0-9]*")} if folder.is_dir() else set()


def _own_job(env, name: str, http_port: int) -> tuple[str, Path, Path, list[str]]:
    """A keyspace of the workload's tables and a continuous job over the ring's raw topic
    from its end (the earlier scenarios are not its): (keyspace, checkpoint, log, command)."""
    work = env["work"]
    ckpt, log = work / f"ckpt-{name}", work / f"{name}.log"
    cmd = materializer_command(env["ring"], env["prefix"], ckpt, f"http.port={http_port}",
                               "kafka.starting_offsets=latest", available_now=False)
    return rf3_keyspace(env["truth"]), ckpt, log, cmd


def test_driver_killed_after_its_tasks_committed_writes_no_event_twice(env) -> None:
    """While writes go on, the job (local master, exactly-once, the default) is SIGKILLed
    once every task of a micro-batch has committed its transaction and before Spark
    commits the batch; restarted, Spark runs the batch again and every partition skips it.
    Then: no event twice, none missing, last `after` == SELECT at ALL."""
    ring, prefix = env["ring"], env["prefix"]
    ks, ckpt, log, cmd = _own_job(env, "committed", 18293)
    landed: list[dict] = []
    job = [start_materializer(cmd, log)]
    wait_until(lambda: '"batchId"' in http_get(18293, "/status")[1], 240,
               "the job's first progress report")

    def kill_between_commits() -> None:
        """Kill the job once every partition of a running batch committed (its store
        flushed a table file) and before Spark's commit; try a few batches."""
        for _ in range(6):
            done = _batches(ckpt, "commits")
            wait_until(lambda done=done: _batches(ckpt, "offsets") - done
                       - {max(done, default=-1)},
                       60, "a micro-batch running", interval_s=0.005)
            batch = max(_batches(ckpt, "offsets"))
            parts = batch_partitions(ckpt, batch)
            base = _table_files(ckpt)

            def stores_flushed(base: set[str] = base, parts: set[int] = parts) -> bool:
                new = {int(Path(f).parent.name) for f in _table_files(ckpt) - base}
                return bool(parts) and parts <= new

            try:
                wait_until(lambda b=batch: stores_flushed() or b in _batches(ckpt, "commits"),
                           60, "the batch's stores flushed", interval_s=0.002)
            finally:
                if stores_flushed() and batch not in _batches(ckpt, "commits"):
                    kill_group(job[-1])
            if job[-1].poll() is not None:
                # what had committed at the kill (a store's table files can also come from a
                # RocksDB compaction, before its partition's commit)
                at_kill = committed_batches(ring.bootstrap_servers, prefix, ckpt)
                if (batch not in _batches(ckpt, "commits")
                        and all(at_kill.get(p, -1) == batch for p in parts)):
                    landed.append({"batch": batch, "partitions": parts})
                    return
                job.append(start_materializer(cmd, log))  # not between: try another batch
        raise AssertionError("no kill landed between the tasks' commits and Spark's")

    hooks = {600: kill_between_commits,
             700: lambda: job.append(start_materializer(cmd, log))}
    try:
        done = run_ring_workload(env["sessions"], ks, STATEMENTS // 3, seed=31, at=hooks)
        assert not hooks and len(done.executed) >= 900, hooks
        env["publishers"].wait_caught_up()
        wait_until(lambda: job_caught_up(ckpt, ring.bootstrap_servers, raw_topic(prefix))
                   or job[-1].poll() is not None, 300, "the job at the end of the raw topic",
                   interval_s=2)
        assert job[-1].poll() is None, log.read_text()[-3000:]
    finally:
        for proc in job:
            kill_group(proc)
    batch, parts = landed[0]["batch"], landed[0]["partitions"]
    print(f"\nkilled in micro-batch {batch}: partitions {sorted(parts)} had committed it")
    # the rerun found every partition's transaction of that batch committed
    text = log.read_text()
    assert all(f"micro-batch {batch} of {raw_topic(prefix)}[{p}] committed already" in text
               for p in parts), text[-3000:]
    check_events(ring.bootstrap_servers, prefix, env["truth"],
                 keyspace_tables(env["truth"], ks, only=("r", "ctr")), min_rows=1)


def test_sigterm_during_a_long_batch_then_a_restart_write_no_event_twice(env) -> None:
    """A backlog makes a long micro-batch; SIGTERM during it, and again (stop at once: the
    batch is cancelled mid-way, its open transactions left behind); the job ends without a
    traceback, and restarted it runs the batch again. No event twice, none missing."""
    ring, prefix = env["ring"], env["prefix"]
    ks, ckpt, log, cmd = _own_job(env, "sigterm", 18294)
    job = start_materializer(cmd, log)
    try:  # started before the backlog ("latest"), stopped, then the backlog is written
        wait_until(lambda: '"batchId"' in http_get(18294, "/status")[1], 240,
                   "the job's first progress report")
        job.send_signal(signal.SIGTERM)
        assert job.wait(120) == 0, log.read_text()[-3000:]
        done = run_ring_workload(env["sessions"], ks, STATEMENTS, seed=37)
        assert len(done.executed) >= 3000
        env["publishers"].wait_caught_up()
        committed = _batches(ckpt, "commits")
        job = start_materializer(cmd, log)
        wait_until(lambda: _batches(ckpt, "offsets") - committed - {max(committed)}, 240,
                   "the backlog's micro-batch running", interval_s=0.05)
        batch = max(_batches(ckpt, "offsets"))
        time.sleep(1.0)  # its tasks are merging and writing
        in_flight = batch not in _batches(ckpt, "commits")
        job.send_signal(signal.SIGTERM)
        time.sleep(0.5)
        job.send_signal(signal.SIGTERM)
        code = job.wait(180)
        text = log.read_text()
        assert code == 0 and "Traceback" not in text, text[-3000:]
        print(f"\nSIGTERM in micro-batch {batch} (running then: {in_flight}); committed "
              f"after the stop: {batch in _batches(ckpt, 'commits')}")
        assert in_flight
        job = start_materializer(cmd, log)
        wait_until(lambda: job_caught_up(ckpt, ring.bootstrap_servers, raw_topic(prefix))
                   or job.poll() is not None, 300, "the job at the end of the raw topic",
                   interval_s=2)
        assert job.poll() is None, log.read_text()[-3000:]
    finally:
        kill_group(job)
    check_events(ring.bootstrap_servers, prefix, env["truth"],
                 keyspace_tables(env["truth"], ks, only=("r", "ctr")), min_rows=1)
