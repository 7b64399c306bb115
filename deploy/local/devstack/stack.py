"""Bring the whole local stack (Kafka + a ring of Cassandra nodes) up and down, idempotently."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from devstack import artifacts, cassandra, kafka, secure
from devstack.process import StackError, port_in_use, require_free_ports
from devstack.settings import HOST, MAX_NODES, StackSettings

Log = Callable[[str], None]


@dataclass
class UpReport:
    """What `up` did: per service, whether it was started or reused, and the seconds it took
    (Cassandra: node 1; `nodes_started` lists every node this call started);
    `cassandra_version` is the release node 1 reports (`SELECT release_version`)."""

    kafka_started: bool
    kafka_seconds: float
    cassandra_started: bool
    cassandra_seconds: float
    cassandra_version: str
    nodes_started: list[int] = field(default_factory=list)
    ring_seconds: float = 0.0


def fetch(s: StackSettings, log: Log = print) -> dict[str, float]:
    """Resolve every component's jars (Cassandra's of the chosen line) and, for a 4.x line,
    its Java 11 runtime; returns their sizes in MB by lib dir name."""
    artifacts.find_java()
    sizes = {}
    for component in ("kafka", s.cassandra_line.component, "spark-kafka"):
        sizes[component] = artifacts.jar_size_mb(artifacts.fetch(s.lib_dir, component, log))
    if s.cassandra_line.java == 11:
        artifacts.fetch_java11(s.lib_dir, log)
        sizes["java11"] = artifacts.runtime_size_mb(artifacts.java11_home(s.lib_dir))
    return sizes


def require_bindable(host: str) -> None:
    """StackError unless this machine can bind `host` (127.0.0.2 and up are not everywhere)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, 0))
        except OSError as exc:
            raise StackError(
                f"cannot bind {host}: {exc}. A ring of several nodes puts node n on 127.0.0.n; "
                "Linux routes all of 127.0.0.0/8 to loopback, macOS needs an alias first "
                f"(sudo ifconfig lo0 alias {host})") from exc


def _wanted_ports(s: StackSettings, with_kafka: bool, with_cassandra: bool = True
                  ) -> list[tuple[str, str, int]]:
    """(name, host, port) of everything `up` is about to bind: what is not running yet."""
    wanted = []
    if with_kafka and kafka.running_pid(s) is None:
        wanted += [("kafka", HOST, s.kafka_port),
                   ("kafka-controller", HOST, s.kafka_controller_port)]
    for node in s.all_nodes() if with_cassandra else []:
        if cassandra.running_pid(node) is None:
            n = node.node_index
            wanted += [(f"node {n} CQL", node.host, node.cql_port),
                       (f"node {n} storage", node.host, node.storage_port),
                       (f"node {n} JMX", HOST, node.node_jmx_port)]
    return wanted


def up(s: StackSettings, log: Log = print, with_kafka: bool = True,
       with_cassandra: bool = True) -> UpReport:
    """Start whatever of the stack is not running yet (Kafka, then `s.nodes` Cassandra nodes
    one after another) and wait until each part answers and the ring shows every node UN;
    `with_cassandra` False: Kafka only (a caller with nodes of its own)."""
    java = artifacts.find_java()
    for node in s.all_nodes()[1:] if with_cassandra else []:
        require_bindable(node.host)
    # Check every port we are about to bind before starting anything, so a conflict fails
    # fast and leaves nothing half-started.
    for name, host, port in _wanted_ports(s, with_kafka, with_cassandra):
        require_free_ports({name: port}, host)
    fetch(s, log)

    kafka_started, kafka_s = False, 0.0
    if with_kafka:
        t0 = time.monotonic()
        kafka_pid = kafka.running_pid(s)
        if kafka_pid is None:
            kafka_pid = kafka.start(s, java)
            kafka_started = True
            log(f"kafka: starting (pid {kafka_pid}) on {s.bootstrap_servers}")
        kafka.wait_ready(s, kafka_pid)
        kafka_s = time.monotonic() - t0
        log(f"kafka: {'started' if kafka_started else 'already running'}, ready in "
            f"{kafka_s:.1f}s")

    t_ring = time.monotonic()
    started: list[int] = []
    seconds: dict[int, float] = {1: 0.0}
    version = ""
    # Kafka's Java is 17; a 4.x node runs on the Java 11 that fetch() just made sure of
    node_java = cassandra.server_java(s) if with_cassandra else java
    for node in s.all_nodes() if with_cassandra else []:
        t0 = time.monotonic()
        version = start_node(node, node_java, log, started)
        seconds[node.node_index] = time.monotonic() - t0
    if s.nodes > 1 and with_cassandra:
        wait_ring(s)
        log(f"ring of {s.nodes} nodes: every node UN after {time.monotonic() - t_ring:.1f}s")
    return UpReport(kafka_started, kafka_s, 1 in started, seconds[1], version, started,
                    time.monotonic() - t_ring)


def start_node(node: StackSettings, java: Path | None = None, log: Log = print,
               started: list[int] | None = None, timeout_s: float = 180.0) -> str:
    """Start one node unless it runs, wait until it answers CQL; returns its version.
    `java`: the node line's (cassandra.server_java), found when None; `timeout_s`: for
    CQL (a node that streams as it joins answers only once it has joined)."""
    java = java or cassandra.server_java(node)
    n = node.node_index
    pid = cassandra.running_pid(node)
    fresh = pid is None
    t0 = time.monotonic()
    if pid is None:
        require_free_ports({f"node {n} CQL": node.cql_port,
                            f"node {n} storage": node.storage_port}, node.host)
        require_free_ports({f"node {n} JMX": node.node_jmx_port})
        pid = cassandra.start(node, java)
        log(f"cassandra node {n}: starting (pid {pid}) on {node.host}:{node.cql_port}")
    try:
        version = cassandra.wait_ready(node, pid, timeout_s)
        if node.secure and node.node_index == 1 and secure.lock_cassandra(node):
            log(f"cassandra node {n}: locked (superuser password and component roles in "
                f"{secure.secrets_dir(node)})")
    except StackError:
        if fresh:
            cassandra.shutdown(node, drain=False)
        raise
    if fresh and started is not None:
        started.append(n)
    log(f"cassandra node {n} {version}: {'started' if fresh else 'already running'}, ready "
        f"in {time.monotonic() - t0:.1f}s (cdc_raw: {node.cdc_raw_dir})")
    return version


def wait_ring(s: StackSettings, timeout_s: float = 180.0) -> dict[str, str]:
    """Block until node 1's `nodetool status` shows every node of the ring UN."""
    want = {node.host for node in s.all_nodes()}
    deadline = time.monotonic() + timeout_s
    states: dict[str, str] = {}
    while time.monotonic() < deadline:
        with contextlib.suppress(StackError, subprocess.TimeoutExpired):
            states = cassandra.ring_states(s.node(1))
            if all(states.get(host) == "UN" for host in want):
                return states
        time.sleep(2.0)
    raise StackError(f"the ring did not show every node UN within {timeout_s:.0f}s: "
                     f"{states or 'nodetool status did not answer'}")


def node_dirs(s: StackSettings) -> list[StackSettings]:
    """Settings of every node this state directory holds (node 1, and cassandra-n/ dirs)."""
    found = {1}
    for d in s.state_dir.glob("cassandra-*"):
        suffix = d.name.split("-", 1)[1]
        if suffix.isdigit() and 1 < int(suffix) <= MAX_NODES:
            found.add(int(suffix))
    return [s.node(n) for n in sorted(found | set(range(1, s.nodes + 1)))]


def down(s: StackSettings, log: Log = print) -> None:
    """Stop the processes this state directory started (by pid file), Cassandra nodes
    (last first) before Kafka."""
    for node in reversed(node_dirs(s)):
        name = "cassandra" if node.node_index == 1 else f"cassandra node {node.node_index}"
        log(f"{name}: " + ("stopped" if cassandra.shutdown(node) else "not running"))
    log("kafka: " + ("stopped" if kafka.shutdown(s) else "not running"))


def status(s: StackSettings) -> list[tuple[str, str]]:
    """One (service, description) line per part of the stack, one per Cassandra node."""
    rows = [("kafka", _describe(kafka.running_pid(s), HOST, s.kafka_port,
                                f"{s.bootstrap_servers} (controller {HOST}:"
                                f"{s.kafka_controller_port}), log {kafka.log_file(s)}"))]
    for node in node_dirs(s):
        name = "cassandra" if node.node_index == 1 else f"node {node.node_index}"
        rows.append((name, _describe(
            cassandra.running_pid(node), node.host, node.cql_port,
            f"CQL {node.host}:{node.cql_port}, JMX {HOST}:{node.node_jmx_port}, storage "
            f"{node.host}:{node.storage_port}, cdc_raw {node.cdc_raw_dir}, "
            f"log {cassandra.log_file(node)}")))
    rows.append(("state", str(s.state_dir)))
    return rows


def _describe(pid: int | None, host: str, port: int, where: str) -> str:
    if pid:
        return f"running, pid {pid}, {where}"
    busy = " (port taken by another process)" if port_in_use(port, host) else ""
    return f"not running{busy}"


def log_files(s: StackSettings) -> dict[str, list]:
    """The log files of each service, most useful first."""
    files: dict[str, list] = {"kafka": [kafka.log_file(s)]}
    for node in node_dirs(s):
        name = "cassandra" if node.node_index == 1 else f"node{node.node_index}"
        files[name] = [cassandra.log_file(node), cassandra.stdout_file(node)]
    return files
