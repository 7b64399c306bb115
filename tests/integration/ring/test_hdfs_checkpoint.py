"""The job with its checkpoint on a real HDFS (a NameNode and a DataNode from Apache Hadoop's
jars, deploy/local/devstack/hdfs.py): on the stack's Spark standalone cluster, submitted as a
cluster user submits it (`deploy/spark/submit.sh` with the packed environment and
`spark.checkpoint=hdfs://...`), where a driver is killed; on the local master where only the
driver's side matters (the NameNode stopped, a refused directory, a run after a reshard).

The raw records are an RF=3 differential's (every replica's copy, as the ring's publishers
sent them), copied to a prefix of each test's own so each run has a fixed end. Every run
ends with the ring checks (tests/support/ring_harness.py): exactly once (no event twice, by
the change's source position), no gap, last `after` == SELECT at ALL.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from devstack import hdfs as daemons
from devstack import spark_cluster as cluster
from devstack.settings import StackSettings, repo_root
from materializer.store.layout import STATE_DIR
from shared.topic_names import raw_topic

from support.materializer_harness import (
    kill_group,
    materializer_command,
    read_events,
    start_materializer,
)
from support.raw_copies import copy_raw
from support.ring_harness import (
    check_events,
    keyspace_tables,
    rf3_keyspace,
    run_ring_workload,
    submit_command,
)
from support.services import wait_until

pytestmark = pytest.mark.integration

STATEMENTS = 1_000
BATCHES = 12  # micro-batches a copy of the raw records takes (kafka.max_offsets_per_trigger)
CHECKED = ("r", "ctr")


@pytest.fixture(scope="module")
def written(env) -> Iterator[dict]:
    """An RF=3 differential of its own keyspace, published by the three nodes' publishers."""
    ks = rf3_keyspace(env["truth"])
    done = run_ring_workload(env["sessions"], ks, STATEMENTS, seed=31, workers=4)
    assert len(done.executed) >= STATEMENTS * 0.95, done.unavailable
    env["publishers"].wait_caught_up()
    yield {"ks": ks, "tables": keyspace_tables(env["truth"], ks, only=CHECKED)}


@dataclass
class Run:
    """One test's job: a copy of the ring's raw records (this module's keyspace among them)
    under a prefix of its own, and its checkpoint on HDFS."""

    env: dict
    hdfs: StackSettings
    spark: StackSettings
    packed: Path
    prefix: str
    sent: int

    @classmethod
    def copied(cls, env, hdfs, spark, packed, name: str, seed: int) -> Run:
        """The raw records copied under a new prefix starting with `name`."""
        prefix = f"{name}{uuid.uuid4().hex[:6]}"
        return cls(env, hdfs, spark, packed, prefix,
                   copy_raw(env["ring"], env["prefix"], prefix, 1, seed=seed))

    @property
    def path(self) -> str:
        return f"/casscade/{self.prefix}"

    @property
    def checkpoint(self) -> str:
        return daemons.uri(self.hdfs, self.path)

    @property
    def log(self) -> Path:
        return self.env["work"] / f"{self.prefix}.log"

    def submit(self, checkpoint: str | None = None, user: str | None = None,
               on_cluster: bool = True) -> subprocess.Popen:
        """The job, --available-now in about BATCHES micro-batches (`user`: its HDFS user):
        on the standalone cluster through submit.sh and the packed environment, or
        (`on_cluster=False`) `casscade materializer run` on its default local master.
        Either way only the driver reads and writes the checkpoint (the partition stores
        live on the executors' disks, their changelogs in Kafka), so a test about the
        checkpoint alone runs locally: a cluster start costs a minute more here."""
        limit = f"kafka.max_offsets_per_trigger={max(200, self.sent // BATCHES)}"
        extra = {"HADOOP_USER_NAME": user} if user else {}
        if not on_cluster:  # start_materializer: the stack's jars, its own process group
            return start_materializer(materializer_command(
                self.env["ring"], self.prefix, checkpoint or self.checkpoint, limit),
                self.log, extra)
        cmd = submit_command(cluster.master_url(self.spark), self.packed,
                             self.env["ring"].bootstrap_servers, self.prefix,
                             checkpoint or self.checkpoint, limit)
        return subprocess.Popen(cmd, cwd=repo_root(),
                                env=dict(os.environ, PYTHON=sys.executable, **extra),
                                stdout=self.log.open("ab"), stderr=subprocess.STDOUT,
                                start_new_session=True)

    def commits(self) -> set[int]:
        """The micro-batches its checkpoint on HDFS has committed (WebHDFS)."""
        names = daemons.list_names(self.hdfs, f"{self.path}/commits") or []
        return {int(n) for n in names if n.isdigit()}

    def two_batches_in(self, proc: subprocess.Popen) -> set[int]:
        """Wait until the running job has committed two micro-batches; their ids."""
        wait_until(lambda: proc.poll() is not None or len(self.commits()) >= 2, 300,
                   "two micro-batches committed on HDFS")
        assert proc.poll() is None, self.log.read_text()[-3000:]
        return self.commits()

    def to_the_end(self, proc: subprocess.Popen | None = None, timeout_s: float = 900,
                   on_cluster: bool = True) -> int:
        """The exit code of `proc` (default: a new submit) once it ends."""
        proc = proc or self.submit(on_cluster=on_cluster)
        try:
            return proc.wait(timeout_s)
        finally:
            kill_group(proc)

    def check(self, written: dict) -> None:
        """Exactly once, no gap, last `after` == SELECT at ALL (a short workload leaves the
        counter table a few rows)."""
        check_events(self.env["ring"].bootstrap_servers, self.prefix, self.env["truth"],
                     written["tables"], min_rows=1)


def test_driver_killed_on_the_cluster_resumes_from_its_hdfs_checkpoint(
        env, written, hdfs, spark_cluster, packed_env) -> None:
    """The driver SIGKILLed after two committed micro-batches; the same command again
    resumes from the checkpoint on HDFS (Spark's logs and the job's own records there), and
    the events are exact: nothing lost, nothing twice. Then `materializer reshard` on that
    checkpoint (read and written through Spark's Hadoop client) moves the stores to a raw
    topic of 5 partitions: every change published again adds no event."""
    run = Run.copied(env, hdfs, spark_cluster, packed_env, "hd", seed=32)
    proc = run.submit()
    try:
        at_kill = run.two_batches_in(proc)
    finally:
        kill_group(proc)
    assert len(at_kill) < BATCHES - 2, at_kill
    code = run.to_the_end()
    assert code == 0, run.log.read_text()[-4000:]
    after = run.commits()
    assert max(after) > max(at_kill) and at_kill < after, (at_kill, after)
    assert {"changelog.json", "owner.json", "partitions.json"} <= set(
        daemons.list_names(hdfs, f"{run.path}/{STATE_DIR}") or []), "the job's records on HDFS"
    run.check(written)

    # reshard the drained checkpoint on HDFS, then publish every change again
    topics = [f"{run.prefix}.{written['ks']}.{t}" for t in CHECKED]
    bootstrap = env["ring"].bootstrap_servers
    events = {t: len(read_events(bootstrap, t)) for t in topics}
    done = subprocess.run(
        [sys.executable, "-m", "casscade.cli", "materializer", "reshard", "--partitions", "5",
         "--set", f"kafka.bootstrap_servers={bootstrap}",
         "--set", f"kafka.topic_prefix={run.prefix}",
         "--set", f"spark.checkpoint={run.checkpoint}", "--set", "log.format=text"],
        capture_output=True, text=True, timeout=600, cwd=repo_root())
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout)["raw_topics"] == {raw_topic(run.prefix): [3, 5]}, done.stdout
    copy_raw(env["ring"], env["prefix"], run.prefix, 1, seed=33)  # every change again
    assert run.to_the_end(on_cluster=False) == 0, run.log.read_text()[-4000:]
    assert {t: len(read_events(bootstrap, t)) for t in topics} == events
    run.check(written)


def test_namenode_stopped_mid_stream_then_a_restart_resumes_exactly(
        env, written, hdfs, spark_cluster, packed_env) -> None:
    """The NameNode stopped (SIGTERM) for 20 s after two committed micro-batches, then
    started again: the job's query restarts (5, 10, 20 s apart) meet it away. The job
    either rides it out or stops with one line naming the checkpoint (no traceback); run
    again, it ends where it should: events exact. On the local master: only the driver
    reads and writes the checkpoint."""
    run = Run.copied(env, hdfs, spark_cluster, packed_env, "nn", seed=34)
    proc = run.submit(on_cluster=False)
    try:
        before = run.two_batches_in(proc)
        assert daemons.stop_daemon(hdfs, "namenode")
        time.sleep(20)
        daemons.start_daemon(hdfs, "namenode")
        code = proc.wait(900)
    finally:
        kill_group(proc)
        daemons.start_daemon(hdfs, "namenode")
    text = run.log.read_text()
    print(f"\nthe NameNode stopped after batches {sorted(before)}; the job exited {code}")
    # Spark's own class for its logs on HDFS (FileSystem is the local checkpoint's)
    assert "spark_logs_through=Spark's choice" in text, text[-4000:]
    if code != 0:
        assert "Traceback" not in text, text[-4000:]
        last = [ln for ln in text.splitlines() if ln.strip()][-1]
        assert run.checkpoint in last, text[-4000:]
        assert run.to_the_end(on_cluster=False) == 0, run.log.read_text()[-4000:]
    assert max(run.commits()) > max(before)
    run.check(written)


def test_a_checkpoint_the_job_may_not_write_is_refused_at_start(
        env, hdfs, spark_cluster, packed_env) -> None:
    """A checkpoint under a directory the job's HDFS user may not write (HDFS permissions):
    the job stops at its start with one line naming the checkpoint and the refusal."""
    locked = f"/locked-{uuid.uuid4().hex[:6]}"
    daemons.fs(hdfs, "-mkdir", "-p", locked)
    daemons.fs(hdfs, "-chmod", "755", locked)  # the superuser's: others read only
    run = Run.copied(env, hdfs, spark_cluster, packed_env, "rw", seed=35)
    checkpoint = daemons.uri(hdfs, f"{locked}/ckpt")
    code = run.to_the_end(run.submit(checkpoint, user="casscade-reader", on_cluster=False),
                          timeout_s=300)
    text = run.log.read_text()
    assert code != 0, text[-3000:]
    assert "Traceback" not in text, text[-4000:]
    last = [ln for ln in text.splitlines() if ln.strip()][-1]
    assert checkpoint in last and "Permission denied: user=casscade-reader" in last, last
    assert daemons.list_names(hdfs, f"{locked}/ckpt/commits") is None  # no batch ran
