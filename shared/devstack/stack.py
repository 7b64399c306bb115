"""Bring the whole local stack (Kafka + Cassandra) up and down, idempotently."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from shared.devstack import artifacts, cassandra, kafka
from shared.devstack.process import StackError, port_in_use, require_free_ports
from shared.devstack.settings import HOST, StackSettings

Log = Callable[[str], None]


@dataclass
class UpReport:
    """What `up` did: per service, whether it was started or reused, and the seconds it took."""

    kafka_started: bool
    kafka_seconds: float
    cassandra_started: bool
    cassandra_seconds: float
    cassandra_version: str


def fetch(s: StackSettings, log: Log = print) -> dict[str, float]:
    """Resolve every component's jars; returns their sizes in MB."""
    artifacts.find_java()
    sizes = {}
    for component in artifacts.COMPONENTS:
        sizes[component] = artifacts.jar_size_mb(artifacts.fetch(s.lib_dir, component, log))
    return sizes


def up(s: StackSettings, log: Log = print, with_kafka: bool = True) -> UpReport:
    """Start whatever of the stack is not running yet and wait until each part answers."""
    java = artifacts.find_java()
    kafka_pid = kafka.running_pid(s) if with_kafka else None
    cass_pid = cassandra.running_pid(s)
    # Check every port we are about to bind before starting anything, so a conflict fails
    # fast and leaves nothing half-started.
    wanted: dict[str, int] = {}
    if with_kafka and kafka_pid is None:
        wanted |= {"kafka": s.kafka_port, "kafka-controller": s.kafka_controller_port}
    if cass_pid is None:
        wanted |= {"cassandra-cql": s.cql_port, "cassandra-storage": s.storage_port,
                   "cassandra-jmx": s.jmx_port}
    require_free_ports(wanted)
    fetch(s, log)

    kafka_started, kafka_s = False, 0.0
    if with_kafka:
        t0 = time.monotonic()
        if kafka_pid is None:
            kafka_pid = kafka.start(s, java)
            kafka_started = True
            log(f"kafka: starting (pid {kafka_pid}) on {s.bootstrap_servers}")
        kafka.wait_ready(s, kafka_pid)
        kafka_s = time.monotonic() - t0

    t0 = time.monotonic()
    cass_started = cass_pid is None
    if cass_pid is None:
        cass_pid = cassandra.start(s, java)
        log(f"cassandra: starting (pid {cass_pid}) on {HOST}:{s.cql_port}")
    try:
        version = cassandra.wait_ready(s, cass_pid)
    except StackError:
        if cass_started:
            cassandra.shutdown(s, drain=False)
        raise
    cass_s = time.monotonic() - t0
    report = UpReport(kafka_started, kafka_s, cass_started, cass_s, version)
    if with_kafka:
        log(f"kafka: {'started' if kafka_started else 'already running'}, ready in "
            f"{kafka_s:.1f}s")
    log(f"cassandra {version}: {'started' if cass_started else 'already running'}, ready in "
        f"{cass_s:.1f}s (cdc_raw: {s.cdc_raw_dir})")
    return report


def down(s: StackSettings, log: Log = print) -> None:
    """Stop the processes this state directory started (by pid file), Cassandra first."""
    log("cassandra: " + ("stopped" if cassandra.shutdown(s) else "not running"))
    log("kafka: " + ("stopped" if kafka.shutdown(s) else "not running"))


def status(s: StackSettings) -> list[tuple[str, str]]:
    """One (service, description) line per part of the stack."""
    return [
        ("kafka", _describe(kafka.running_pid(s), s.kafka_port,
                            f"{s.bootstrap_servers} (controller {HOST}:"
                            f"{s.kafka_controller_port}), log {kafka.log_file(s)}")),
        ("cassandra", _describe(cassandra.running_pid(s), s.cql_port,
                                f"CQL {HOST}:{s.cql_port}, JMX {HOST}:{s.jmx_port}, storage "
                                f"{HOST}:{s.storage_port}, log {cassandra.log_file(s)}")),
        ("cdc_raw", str(s.cdc_raw_dir)),
        ("state", str(s.state_dir)),
    ]


def _describe(pid: int | None, port: int, where: str) -> str:
    if pid:
        return f"running, pid {pid}, {where}"
    busy = " (port taken by another process)" if port_in_use(port) else ""
    return f"not running{busy}"


def log_files(s: StackSettings) -> dict[str, list]:
    """The log files of each service, most useful first."""
    return {
        "kafka": [kafka.log_file(s)],
        "cassandra": [cassandra.log_file(s), cassandra.stdout_file(s)],
    }
