"""The running system a soak works on, with a way to kill and restart each part of it.

Three Cassandra nodes at RF=3 (a ring of the soak's own, beside the stack's Kafka), a
publisher per node, the materializer as `casscade materializer run` (local[2], or with
`spark.master` on the stack's standalone cluster), all under one topic prefix.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from devstack import artifacts, cassandra, kafka
from devstack import spark_cluster as cluster
from devstack import stack as devstack
from devstack.process import pid_alive
from devstack.settings import StackSettings
from shared.topic_names import raw_topic

from support.materializer_harness import kill_group, materializer_command, start_materializer
from support.ring_harness import RingPublishers, no_hints_left, pinned_sessions, session_at_all
from support.services import http_get, wait_until

# the ring's own ports and state: it may run while the test ring's state is kept
RING = {"cql_port": 9152, "storage_port": 7110, "jmx_port": 7310}
JOB_PORT = 18391
WORKERS = (1, 2)


@dataclass
class Rig:
    """The parts of the pipeline and what is down right now."""

    stack: StackSettings
    work: Path
    prefix: str
    master: str  # "local" or "cluster"
    delivery: str = "exactly-once"  # the job's events.delivery
    ring: StackSettings = field(init=False)
    publishers: RingPublishers = field(init=False)
    sessions: dict[int, Any] = field(default_factory=dict)
    truth: Any = None
    job: subprocess.Popen | None = None
    down: set[int] = field(default_factory=set)  # nodes down
    started: list[str] = field(default_factory=list)  # what `up` started (stopped at the end)

    def __post_init__(self) -> None:
        self.ring = replace(self.stack, state_dir=self.work / "ring", cluster_name="casscade-soak",
                            nodes=3, **RING)
        self.publishers = RingPublishers(self.ring, self.work, self.prefix)

    # ---- start and stop -------------------------------------------------------------
    def up(self) -> None:
        """Kafka (the stack's), the ring, the cluster (if used), the publishers, the job."""
        report = devstack.up(self.stack, log=_say, with_cassandra=False)
        if report.kafka_started:
            self.started.append("kafka")
        devstack.up(self.ring, log=_say, with_kafka=False)
        self.started.append("ring")
        if self.master == "cluster" and "master" in cluster.up(
                self.stack, workers=len(WORKERS), log=_say).started:
            self.started.append("spark")
        self.sessions = pinned_sessions(self.ring)
        self.truth = session_at_all(self.ring)
        self.publishers.start()
        self.start_job()

    def down_all(self) -> None:
        """Stop what `up` started; the ring's state is kept under `work` for a look."""
        if self.job is not None:
            kill_group(self.job)
        self.publishers.stop()
        for s in (*self.sessions.values(), self.truth):
            if s is not None:
                s.cluster.shutdown()
        for node in self.ring.all_nodes():
            cassandra.shutdown(node, drain=False)
        if "spark" in self.started:
            cluster.down(self.stack)
        if "kafka" in self.started:
            kafka.shutdown(self.stack)

    # ---- the job ----------------------------------------------------------------------
    def job_command(self) -> list[str]:
        """`casscade materializer run`, continuous, tuned to come back fast after a fault."""
        sets = [f"http.port={JOB_PORT}", "spark.restart_backoff_s=2", "spark.max_restarts=0",
                f"events.delivery={self.delivery}",
                'kafka.producer={"delivery.timeout.ms": "30000", "request.timeout.ms": '
                '"10000"}']
        if self.master == "cluster":
            sets.append(f"spark.master={cluster.master_url(self.stack)}")
        return materializer_command(self.ring, self.prefix, self.checkpoint, *sets,
                                    available_now=False)

    @property
    def checkpoint(self) -> Path:
        """The job's checkpoint."""
        return self.work / "checkpoint"

    def start_job(self) -> None:
        """Start the job and wait for its first progress report."""
        self.job = start_materializer(self.job_command(), self.work / "job.log")
        wait_until(lambda: '"batchId"' in http_get(JOB_PORT, "/status")[1]
                   or self.job.poll() is not None, 300, "the job's first progress report")
        if self.job.poll() is not None:
            raise RuntimeError(f"the job exited: {(self.work / 'job.log').read_text()[-3000:]}")

    # ---- faults -----------------------------------------------------------------------
    def kill_node(self, n: int) -> None:
        """SIGKILL Cassandra node n (a crash: its unsynced commit log is lost)."""
        self.down.add(n)
        assert cassandra.kill(self.ring.node(n)), f"node {n} was not running"

    def start_node(self, n: int) -> None:
        """Start node n again; the others replay their hints to it."""
        devstack.start_node(self.ring.node(n), log=_say)
        self.down.discard(n)

    def kill_publisher(self, n: int) -> None:
        """SIGKILL node n's publisher."""
        self.publishers.agents[n].kill()

    def start_publisher(self, n: int) -> None:
        """Start node n's publisher again (from its saved offsets)."""
        self.publishers.start(n)

    def kill_driver(self) -> None:
        """SIGKILL the job's driver (its process group: the driver JVM included)."""
        assert self.job is not None
        kill_group(self.job, signal.SIGKILL)

    def kill_worker(self, n: int) -> None:
        """SIGKILL Spark worker n with its executors."""
        assert cluster.kill_worker(self.stack, n), f"worker {n} was not running"

    def start_worker(self, n: int) -> None:
        """Start Spark worker n again."""
        cluster.start_worker(self.stack, n)

    def kill_broker(self) -> None:
        """SIGKILL the Kafka broker."""
        pid = kafka.running_pid(self.stack)
        assert pid is not None, "the broker was not running"
        os.kill(pid, signal.SIGKILL)
        wait_until(lambda: not pid_alive(pid), 30, "the broker gone")

    def start_broker(self) -> None:
        """Start the broker again (its log dir recovers) and wait until it answers."""
        kafka.wait_ready(self.stack, kafka.start(self.stack, artifacts.find_java()), 180)

    def flush(self, n: int) -> None:
        """`nodetool flush` on node n (its memtables to SSTables)."""
        cassandra.nodetool(self.ring.node(n), "flush")

    # ---- the end ----------------------------------------------------------------------
    def settle(self, ks: str, timeout_s: float = 1800) -> float:
        """Wait until every hint is delivered, every publisher has published what its node
        synced and the job has read the raw topic to its end; returns the seconds."""
        t0 = time.monotonic()
        wait_until(lambda: no_hints_left(self.ring), timeout_s, "every hint delivered",
                   interval_s=2)
        self.publishers.wait_caught_up(timeout_s)
        from support.ring_harness import job_caught_up

        wait_until(lambda: job_caught_up(self.checkpoint, self.ring.bootstrap_servers,
                                         raw_topic(self.prefix))
                   or self.job.poll() is not None, timeout_s,
                   "the job at the end of the raw topics", interval_s=3)
        if self.job.poll() is not None:
            raise RuntimeError(f"the job exited: {(self.work / 'job.log').read_text()[-3000:]}")
        return time.monotonic() - t0


def _say(line: str) -> None:
    print(f"[rig] {line}", flush=True)
