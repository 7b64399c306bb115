"""Shared test fixtures: the real local stack (Kafka + Cassandra), CQL sessions, CDC tables.

The `stack` fixture starts whatever part of the local stack is not running yet and stops, at
the end of the session, only what it started. Nothing is ever skipped for a missing service:
if the stack cannot start, every test that needs it errors with the reason.
"""

from __future__ import annotations

import contextlib
import os
import re
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace

import pytest

from devstack import stack as devstack
from devstack.settings import StackSettings

pytest_plugins = (
    "support.suite_times",  # the suite's time by test file, at the end
    "support.background_builds",  # images and packed_env: built from the run's start
)


@pytest.fixture(scope="session")
def stack_settings() -> StackSettings:
    """Where the test stack lives (CASSCADE_* env vars apply)."""
    return StackSettings.from_env()


# The starts begun when collection ends, if a collected test needs them, so they run beside
# the tests before the first that needs them (the unit tests, on one core) instead of
# holding it up: the stack (or Kafka alone, for a run whose tests need no node of the
# stack's, as the `ring` section of `make test`), then the ring. By name: (the start, the
# lines it logged); a name is dropped when its fixture takes it.
_early: dict[str, tuple[Future, list[str]]] = {}
# The test ring: three nodes on 127.0.0.1-3 with ports of their own, so it runs beside the
# one-node stack (whose tests need a node that holds every row) and a developer's own ring.
RING_PORTS = {"cql_port": 9142, "storage_port": 7100, "jmx_port": 7300}


def _ring_settings(s: StackSettings) -> StackSettings:
    return replace(s, state_dir=s.state_dir / "ring", cluster_name="casscade-ring", nodes=3,
                   **RING_PORTS)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Start the stack (or Kafka alone) and the ring in the background, one after the
    other, when a collected test needs them."""
    if session.config.option.collectonly:
        return
    wanted = {name for item in session.items for name in getattr(item, "fixturenames", ())}
    pool = ThreadPoolExecutor(1, thread_name_prefix="early-start")
    if wanted & {"stack", "broker"}:
        lines: list[str] = []
        _early["stack"] = (pool.submit(devstack.up, StackSettings.from_env(), log=lines.append,
                                       with_cassandra="stack" in wanted), lines)
    if "ring" in wanted:
        ring_lines: list[str] = []
        _early["ring"] = (pool.submit(devstack.up, _ring_settings(StackSettings.from_env()),
                                      log=ring_lines.append, with_kafka=False), ring_lines)
    pool.shutdown(wait=False)


def _take(name: str) -> devstack.UpReport | None:
    """The early start of `name`, once ended (its lines printed), if there was one and no
    fixture took it yet."""
    if name not in _early:
        return None
    start, lines = _early.pop(name)
    try:
        return start.result()
    finally:
        for line in lines:
            print(f"[{name}] {line}")


def _stop_started(s: StackSettings, report: devstack.UpReport) -> None:
    """Stop only what this session started; a stack the developer started stays up."""
    from devstack import cassandra, kafka

    if report.cassandra_started:
        cassandra.shutdown(s)
    if report.kafka_started:
        kafka.shutdown(s)


@pytest.fixture(scope="session")
def stack(stack_settings: StackSettings) -> Iterator[StackSettings]:
    """The running local stack (Kafka and a Cassandra node); started for the session if
    needed, stopped if we started it."""
    yield from _started(stack_settings, with_cassandra=True)


@pytest.fixture(scope="session")
def broker(stack_settings: StackSettings) -> Iterator[StackSettings]:
    """The stack's Kafka broker alone, for tests with nodes of their own (the rings) or
    none; the same broker as `stack`'s when a run has both."""
    yield from _started(stack_settings, with_cassandra=False)


def _started(s: StackSettings, with_cassandra: bool) -> Iterator[StackSettings]:
    """The early start's outcome (the first fixture to ask takes it: it then stops what it
    started), else a start of its own; `up` reuses what already runs."""
    report = _take("stack") or devstack.up(s, log=lambda msg: print(f"[stack] {msg}"),
                                           with_cassandra=with_cassandra)
    try:
        yield s
    finally:
        _stop_started(s, report)


@pytest.fixture(scope="session")
def ring(broker: StackSettings) -> Iterator[StackSettings]:
    """A ring of three Cassandra nodes (RF=3 tests), started once per session beside the
    stack's Kafka; stopped at the end if this session started it."""
    s = _ring_settings(broker)
    report = _take("ring") or devstack.up(s, log=lambda msg: print(f"[ring] {msg}"),
                                          with_kafka=False)
    print(f"[ring] three nodes ready in {report.ring_seconds:.1f}s")
    try:
        yield s
    finally:
        _stop_ring(s, report)


def _stop_ring(s: StackSettings, report: devstack.UpReport) -> None:
    """Stop the ring's nodes this session started, side by side (about 3x faster)."""
    from devstack import cassandra

    started = [n for n in s.all_nodes() if n.node_index in report.nodes_started]
    with ThreadPoolExecutor(max(1, len(started))) as pool:
        list(pool.map(lambda node: cassandra.shutdown(node, drain=False), started))


# A node of another Cassandra line (4.0, 4.1), one at a time beside the stack: ports and a
# state directory of its own; the differential runs on each line as on 5.0.
LINE_PORTS = {"cql_port": 9242, "storage_port": 7200, "jmx_port": 7400}


@pytest.fixture(scope="module", params=["5.0", "4.1", "4.0"])
def line_node(request: pytest.FixtureRequest, stack_settings: StackSettings
              ) -> Iterator[StackSettings]:
    """A one-node Cassandra of each supported line in turn: 5.0 is the stack's own node;
    4.1 and 4.0 (on the Java 11 the stack fetches) are started for the module and stopped
    after it, unless they were running (without Kafka: the differential reads cdc_raw)."""
    line = request.param
    if line == stack_settings.cassandra_version:
        yield request.getfixturevalue("stack")
        return
    stack = stack_settings
    s = replace(stack, state_dir=stack.state_dir / f"cassandra-{line}",
                cluster_name=f"casscade-{line.replace('.', '')}", nodes=1,
                cassandra_version=line, **LINE_PORTS)
    report = devstack.up(s, log=lambda msg: print(f"[cassandra {line}] {msg}"),
                         with_kafka=False)
    try:
        yield s
    finally:
        from devstack import cassandra

        if report.cassandra_started:
            cassandra.shutdown(s, drain=False)


@pytest.fixture(scope="session")
def cql(stack: StackSettings):
    """A cassandra-driver session on the local node."""
    from devstack.cassandra import cql_cluster

    cluster = cql_cluster(stack)
    session = cluster.connect()
    yield session
    cluster.shutdown()


def unique_name(prefix: str) -> str:
    """A CQL-safe unique identifier starting with `prefix`."""
    return f"{prefix}_{uuid.uuid4().hex[:10]}"


@pytest.fixture
def keyspace(cql) -> Iterator[str]:
    """A fresh SimpleStrategy RF=1 keyspace, dropped after the test."""
    name = unique_name("t")
    cql.execute(f"CREATE KEYSPACE {name} WITH replication = "
                "{'class': 'SimpleStrategy', 'replication_factor': 1}")
    yield name
    cql.execute(f"DROP KEYSPACE IF EXISTS {name}", timeout=60)


@pytest.fixture
def cdc_table(cql, keyspace: str) -> Callable[[str, str], str]:
    """Factory: `cdc_table("t", "(k int PRIMARY KEY, v text)")` → "ks.t" created WITH cdc."""

    def create(name: str, columns: str, options: str = "") -> str:
        if not re.fullmatch(r"\w+", name):
            raise ValueError(f"bad table name {name!r}")
        extra = f" AND {options}" if options else ""
        cql.execute(f"CREATE TABLE {keyspace}.{name} {columns} WITH cdc = true{extra}")
        return f"{keyspace}.{name}"

    return create


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """In CI a skipped test is a failure: services must be there, not silently missing.
    A start begun early that no test took (the run stopped first) is stopped."""
    for name, (start, _lines) in list(_early.items()):
        with contextlib.suppress(Exception):  # (a start that failed left nothing running)
            if name == "ring":
                _stop_ring(_ring_settings(StackSettings.from_env()), start.result())
            else:
                _stop_started(StackSettings.from_env(), start.result())
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    skipped = len(reporter.stats.get("skipped", [])) if reporter else 0
    if os.environ.get("CI") and skipped and exitstatus == 0:
        print(f"\nCI: {skipped} test(s) skipped; in CI every test must run. Failing the run.")
        session.exitstatus = 1


@pytest.fixture(scope="session")
def spark_cluster(stack_settings: StackSettings) -> Iterator[StackSettings]:
    """A Spark standalone cluster on loopback: a master (spark_cluster.master_url(s)) and
    two one-core workers (deploy/local/devstack/spark_cluster.py); started for the session if
    needed, stopped at the end if this session started the master (else only the workers it
    started). Yields the stack settings its state lives under (`<state_dir>/spark`); tests
    may kill and start workers with spark_cluster.kill_worker / start_worker. Needs no Kafka
    or Cassandra."""
    from devstack import spark_cluster as cluster

    report = cluster.up(stack_settings, workers=2, log=lambda msg: print(f"[spark] {msg}"))
    try:
        yield stack_settings
    finally:
        if "master" in report.started:
            cluster.down(stack_settings)
        else:  # a developer's cluster stays up; workers this session started go
            for name in report.started:
                cluster.stop_worker(stack_settings, int(name.split("-")[1]))


@pytest.fixture(scope="session")
def hdfs(stack_settings: StackSettings) -> Iterator[StackSettings]:
    """A real HDFS on loopback: a NameNode (devstack.hdfs.uri(s, PATH)) and a DataNode,
    run from Apache Hadoop's jars (deploy/local/devstack/hdfs.py); started for the session
    if needed, and stopped at the end if this session started them. Tests may stop and
    start the NameNode (hdfs.stop_daemon / start_daemon)."""
    from devstack import hdfs as daemons

    started = daemons.up(stack_settings, log=lambda msg: print(f"[hdfs] {msg}"))
    try:
        yield stack_settings
    finally:
        for daemon in reversed(started):
            daemons.stop_daemon(stack_settings, daemon)

