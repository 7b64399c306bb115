"""Integration tests only: the Spark drivers they start are short-lived, so their JVMs run
with SerialGC and the C1 compiler alone, the launcher's too (the job's driver has C1 alone
by default, spark.driver_jit; measured before that default, 3 interleaved rounds: a
2,000-record `materializer run --available-now` in 26.2-27.3 s instead of 28.8-32.0 s on
this 2-core machine), and map a class archive (spark.class_archive_dir, under the state
directory: the first job that ends cleanly writes it; measured, 4 interleaved rounds of a
500-record run: 19.3-22.9 s instead of 27.5-30.6 s). -Xshare:on makes a driver that cannot
map its archive fail to start instead of running slower unnoticed. The launcher reads
SPARK_LAUNCHER_OPTS, the driver SPARK_SUBMIT_OPTS; Cassandra, Kafka and the Spark daemons
do not read either. Benchmarks (tests/benchmarks) keep the job's defaults and no archive.

The stack's own JVMs (Cassandra nodes, nodetool, Kafka, Connect, the registry) run C1
alone too (CASSCADE_SERVER_JIT, devstack.settings.server_jit): make test is CPU-bound on
two cores, and a node's start and writes took about half the CPU (numbers by the setting).
The setting's default, the JVM's own, runs in `make demo`, the benchmarks and
test_stack_lifecycle's private stack."""

from __future__ import annotations

import os

import pytest

from devstack.settings import StackSettings

from support.publisher_harness import own_node

_SHORT_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
os.environ.setdefault("SPARK_LAUNCHER_OPTS", _SHORT_JVM)
os.environ.setdefault("SPARK_SUBMIT_OPTS", f"{_SHORT_JVM} -Xshare:on")
os.environ.setdefault("CASSCADE_SERVER_JIT", "c1")
os.environ.setdefault("CASSCADE_SPARK__CLASS_ARCHIVE_DIR",
                      str(StackSettings.from_env().state_dir / "class-archives"))


@pytest.fixture(scope="session")
def agent_node(stack, tmp_path_factory):
    """A Cassandra node of its own for the tests that run a publisher on a node's cdc_raw
    (the agent, image and monitoring modules), started once for all three (a node's start
    and stop cost about a minute here). An agent publishes every CDC table of its node, the
    earlier modules' too: each test reads its own keyspace's records."""
    yield from own_node(stack, tmp_path_factory.mktemp("agent-node"))
