"""Test harness for the publisher agent: its own Cassandra node, the agent as a real
process, and a reader of the raw topics (test code only)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml
from confluent_kafka import Consumer, TopicPartition

from devstack import cassandra
from devstack import stack as devstack
from devstack.process import pid_alive
from devstack.settings import StackSettings, repo_root
from shared.rowupdate import is_row_update

from support import rowupdate_reference
from support.services import wait_until as wait_for

NODE_PORTS = {"cql_port": 19142, "storage_port": 17100, "jmx_port": 17299}


def start_node(base: StackSettings, state_dir: Path) -> StackSettings:
    """A fresh Cassandra node of its own (cdc_raw holds only this module's data)."""
    s = replace(base, state_dir=state_dir, cluster_name="casscade-agent-tests", **NODE_PORTS)
    devstack.up(s, log=lambda m: print(f"[agent-node] {m}"), with_kafka=False)
    return s


def stop_node(s: StackSettings) -> None:
    """Stop the node started by start_node."""
    cassandra.shutdown(s, drain=False)


def own_node(stack: StackSettings, state_dir: Path) -> Iterator[StackSettings]:
    """start_node for a module fixture (`yield from own_node(...)`): the node, stopped after."""
    s = start_node(stack, state_dir)
    try:
        yield s
    finally:
        stop_node(s)


def wait_healthy(proc: subprocess.Popen, port: int, log: Path, what: str,
                 timeout_s: float = 30) -> None:
    """Wait until an agent (`proc`, its output in `log`) answers 200 on /health at `port`;
    an agent that exited fails at once with its log's tail (never another's answer)."""
    import urllib.request

    def up() -> bool:
        if proc.poll() is not None:
            tail = log.read_text(errors="replace")[-2000:]
            raise AssertionError(f"{what} exited ({proc.returncode}) before serving on "
                                 f"port {port}:\n{tail}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1) as resp:
                return resp.status == 200
        except OSError:
            return False

    wait_for(up, timeout_s, f"{what}'s /health", interval_s=0.05)


class AgentProcess:
    """`casscade publisher run` as a child process, with its config written to a file."""

    def __init__(self, node: StackSettings, kafka: StackSettings, workdir: Path,
                 prefix: str | None = None, http_port: int = 18100,
                 host_name: str = "node-1", sections: dict[str, dict] | None = None,
                 env: dict[str, str] | None = None, command: list[str] | None = None,
                 cwd: Path | None = None, config: dict | None = None) -> None:
        """`sections` adds settings to the config's sections (security, say); `env` adds
        to the agent's environment (a password); `command` is the `casscade` it runs (the
        checkout's by default), in `cwd` (the checkout); `config`: the whole config to run
        with (a shipped file's, say) instead of the tests' own."""
        self.command = command or [sys.executable, "-m", "casscade.cli"]
        self.cwd = cwd or repo_root()
        self.prefix = prefix or f"t{uuid.uuid4().hex[:8]}"
        self.workdir = workdir
        self.archive = workdir / "archive"
        self.http_port = http_port
        self.config = workdir / "publisher.yaml"
        workdir.mkdir(parents=True, exist_ok=True)
        config = config if config is not None else {
            "kafka": {"bootstrap_servers": kafka.bootstrap_servers, "topic_prefix": self.prefix,
                      "partitions": 3},
            "cassandra": {"contact_points": [node.host], "port": node.cql_port},
            "cdc": {"cdc_raw": str(node.cdc_raw_dir), "archive_dir": str(self.archive),
                    "poll_interval_ms": 50, "unknown_retry_s": 5},
            "node": {"host": host_name, "datacenter": "dc-test"},
            "state": {"path": str(workdir / "state"), "flush_interval_ms": 200},
            "http": {"port": http_port}, "log": {"format": "json", "level": "INFO"},
        }
        for section, values in (sections or {}).items():
            config[section] = config.get(section, {}) | values
        self.config.write_text(yaml.safe_dump(config))
        self.env = env or {}
        self.proc: subprocess.Popen | None = None
        self.log = workdir / "agent.log"

    def start(self) -> None:
        """Start the agent."""
        out = open(self.log, "ab")  # noqa: SIM115 — handed to the child, closed on stop
        self.proc = subprocess.Popen(
            [*self.command, "publisher", "run", "--config", str(self.config)],
            cwd=self.cwd, stdout=out, stderr=out,
            stdin=subprocess.DEVNULL, start_new_session=True, env=os.environ | self.env)
        out.close()

    def wait_serving(self, timeout_s: float = 30) -> None:
        """Wait until the agent's HTTP endpoint answers (its loop is running)."""
        assert self.proc is not None, "the agent was not started"
        wait_healthy(self.proc, self.http_port, self.log, "the agent", timeout_s)

    def kill(self) -> None:
        """SIGKILL: no draining, no saving."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def stop(self, timeout_s: float = 60) -> int | None:
        """SIGTERM and wait for a clean exit; returns the exit code."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        code = self.proc.returncode
        assert not pid_alive(self.proc.pid)
        return code

    def alive(self) -> bool:
        """True while the agent process runs."""
        return self.proc is not None and self.proc.poll() is None


def start_latency_table(session: Any, agent: Any) -> Any:
    """lat.t (k int, written bigint) with CDC, the agent started beside it, and row -1
    written (it creates the topics); returns the prepared INSERT of (k, written µs)."""
    session.execute("CREATE KEYSPACE lat WITH replication = "
                    "{'class': 'SimpleStrategy', 'replication_factor': 1}")
    session.execute("CREATE TABLE lat.t (k int PRIMARY KEY, written bigint) WITH cdc = true")
    agent.start()
    agent.wait_serving()
    insert = session.prepare("INSERT INTO lat.t (k, written) VALUES (?, ?)")
    session.execute(insert, (-1, time.time_ns() // 1000))
    return insert


def paced(rate: int, count: int) -> Iterator[int]:
    """0 .. count-1, each yielded no earlier than its slot at `rate` per second."""
    start = time.perf_counter()
    for i in range(count):
        due = start + i / rate
        while (now := time.perf_counter()) < due:
            time.sleep(min(due - now, 0.005))
        yield i


def read_topic(bootstrap: str, topic: str, expect_at_least: int,
               timeout_s: float = 60, table: str | None = None
               ) -> list[tuple[int, int, bytes, dict[str, Any]]]:
    """Every record of `topic` as (partition, offset, key, RowUpdate), waiting up to
    `timeout_s` for at least `expect_at_least` of them; `table` ("ks.t"): only that table's
    (the raw topic holds every table's)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g{uuid.uuid4().hex}",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        deadline = time.monotonic() + timeout_s
        md = None
        while time.monotonic() < deadline:
            md = consumer.list_topics(topic, timeout=10).topics.get(topic)
            if md is not None and md.error is None and md.partitions:
                break
            time.sleep(0.5)
        assert md is not None and md.partitions, f"topic {topic} never appeared"
        consumer.assign([TopicPartition(topic, p, 0) for p in md.partitions])
        out: list[tuple[int, int, bytes, dict[str, Any]]] = []
        quiet_since = time.monotonic()
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                if len(out) >= expect_at_least and time.monotonic() - quiet_since > 2:
                    break
                continue
            assert msg.error() is None, msg.error()
            if not is_row_update(msg.value()):
                continue  # a heartbeat (the publisher's sign of life) or a table record
            record = rowupdate_reference.decode(msg.value())
            if table is None or f"{record['keyspace']}.{record['table']}" == table:
                out.append((msg.partition(), msg.offset(), msg.key(), record))
            quiet_since = time.monotonic()
        return out
    finally:
        consumer.close()
