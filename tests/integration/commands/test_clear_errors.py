"""What every command says when a service is not there: one line naming the endpoint and
the reason, within 30 s, a non-zero exit, no traceback (the real commands, as a user runs
them)."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

from devstack.settings import StackSettings, repo_root

from support.materializer_harness import materializer_command
from support.services import free_port

pytestmark = pytest.mark.integration


def _run(*args: str, timeout_s: float = 60) -> tuple[int, list[str], float]:
    """The command's exit code, its output lines (stdout and stderr) and its seconds."""
    started = time.monotonic()
    out = subprocess.run([sys.executable, "-m", "casscade.cli", *args], cwd=repo_root(),
                         capture_output=True, text=True, timeout=timeout_s,
                         stdin=subprocess.DEVNULL)
    lines = [line for line in (out.stdout + out.stderr).splitlines() if line.strip()]
    return out.returncode, lines, time.monotonic() - started


def _one_error(code: int, lines: list[str], took: float) -> str:
    """The one error line of a failed command, checked for the rules above."""
    assert code != 0, lines
    assert took < 30, (took, lines)
    assert not any("Traceback" in line for line in lines), "\n".join(lines)
    errors = [line for line in lines if line.startswith("Error: ")]
    assert len(errors) == 1, "\n".join(lines)
    return errors[0]


# Each command below meets a port nothing listens on and waits out its 15-s reach timeout
# before it fails: they run side by side (one fixture starts them all), 15 s instead of 90.
def _cases(stack: StackSettings, tmp: Path) -> dict[str, tuple[int, tuple[str, ...]]]:
    """{case: (the port nothing listens on, the command's arguments)}."""
    ports = {name: free_port() for name in (
        "materializer-kafka", "publisher-cassandra", "publisher-kafka", "registry",
        "reshard-kafka", "verify-kafka", "verify-cassandra")}
    for name in ("publisher-cassandra", "publisher-kafka"):
        (tmp / name / "cdc_raw").mkdir(parents=True)

    def publisher(name: str, *more: str) -> tuple[str, ...]:
        return ("publisher", "run", "--set", f"cdc.cdc_raw={tmp / name / 'cdc_raw'}",
                "--set", f"state.path={tmp / name / 'state'}", *more, "--set", "http.port=0")

    return {name: (ports[name], args) for name, args in {
        "materializer-kafka": (
            "materializer", "run", "--set", f"spark.checkpoint={tmp / 'm1'}",
            "--set", f"kafka.bootstrap_servers=127.0.0.1:{ports['materializer-kafka']}",
            "--set", "http.port=0"),
        "publisher-cassandra": publisher(
            "publisher-cassandra", "--set", f"cassandra.port={ports['publisher-cassandra']}"),
        "publisher-kafka": publisher(
            "publisher-kafka", "--set", f"cassandra.port={stack.cql_port}",
            "--set", f"kafka.bootstrap_servers=127.0.0.1:{ports['publisher-kafka']}"),
        "registry": (
            "materializer", "run", "--set", f"spark.checkpoint={tmp / 'm2'}",
            "--set", f"kafka.bootstrap_servers={stack.bootstrap_servers}",
            "--set", "events.format=avro",
            "--set", f"events.schema_registry_url=http://127.0.0.1:{ports['registry']}",
            "--set", "http.port=0"),
        "reshard-kafka": (
            "materializer", "reshard", "--partitions", "8",
            "--set", f"spark.checkpoint={tmp / 'm3'}",
            "--set", f"kafka.bootstrap_servers=127.0.0.1:{ports['reshard-kafka']}"),
        "verify-kafka": (
            "verify", "--set", f"kafka.bootstrap_servers=127.0.0.1:{ports['verify-kafka']}"),
        "verify-cassandra": (
            "verify", "--set", f"kafka.bootstrap_servers={stack.bootstrap_servers}",
            "--set", f"cassandra.port={ports['verify-cassandra']}"),
    }.items()}


@pytest.fixture(scope="module")
def unreachable(stack: StackSettings, tmp_path_factory: pytest.TempPathFactory
                ) -> Iterator[dict[str, tuple[int, Future]]]:
    """{case: (its port, the future of _run's result)}, every case started at once."""
    cases = _cases(stack, tmp_path_factory.mktemp("unreachable"))
    with ThreadPoolExecutor(len(cases)) as pool:
        yield {name: (port, pool.submit(_run, *args)) for name, (port, args) in cases.items()}


def _kafka_refused(port: int) -> str:
    """How a command's error line starts when nothing listens at Kafka's `port` (librdkafka
    may add "(after 0ms in state CONNECT, 1 identical error(s) suppressed)")."""
    return (f"Error: Kafka at 127.0.0.1:{port} did not answer within 15 s: Connect to "
            f"ipv4#127.0.0.1:{port} failed: Connection refused")


def _error(unreachable: dict[str, tuple[int, Future]], case: str) -> tuple[int, str]:
    """The port of `case` and its command's one error line."""
    port, result = unreachable[case]
    return port, _one_error(*result.result())


def test_the_materializer_names_an_unreachable_kafka(unreachable) -> None:
    port, line = _error(unreachable, "materializer-kafka")
    assert line.startswith(_kafka_refused(port)), line


def test_the_publisher_names_an_unreachable_cassandra(unreachable) -> None:
    port, line = _error(unreachable, "publisher-cassandra")
    assert line == (f"Error: Cassandra did not answer within 15 s (127.0.0.1:{port}: "
                    "Connection refused)"), line


def test_the_publisher_names_an_unreachable_kafka(unreachable) -> None:
    port, line = _error(unreachable, "publisher-kafka")
    assert line.startswith(f"Error: Kafka at 127.0.0.1:{port} did not answer within 15 s: "), line


def test_the_materializer_names_a_schema_registry_that_is_down(unreachable) -> None:
    port, line = _error(unreachable, "registry")
    assert line == (f"Error: schema registry http://127.0.0.1:{port} did not answer within "
                    "15 s: [Errno 111] Connection refused"), line


def test_reshard_names_an_unreachable_kafka(unreachable) -> None:
    port, line = _error(unreachable, "reshard-kafka")
    assert line.startswith(f"Error: Kafka at 127.0.0.1:{port} did not answer within 15 s: "), \
        line


def test_verify_names_an_unreachable_kafka(unreachable) -> None:
    port, line = _error(unreachable, "verify-kafka")
    assert line.startswith(_kafka_refused(port)), line


def test_verify_names_an_unreachable_cassandra(unreachable) -> None:
    port, line = _error(unreachable, "verify-cassandra")
    assert line == (f"Error: Cassandra did not answer within 15 s (127.0.0.1:{port}: "
                    "Connection refused)"), line


def test_a_checkpoint_of_another_job_is_refused(stack: StackSettings, tmp_path: Path) -> None:
    """Refused before Spark starts (a local checkpoint). The first job's record of itself is
    written as a job's start writes it (check_owner on a new checkpoint), not by a job
    run, which would cost a Spark start."""
    from materializer.checkpoint import records
    from materializer.checkpoint.files import LocalFiles
    from shared.kafka_reach import cluster_id

    checkpoint = tmp_path / "checkpoint"
    first, second = (f"own{uuid.uuid4().hex[:6]}" for _ in range(2))
    checkpoint.mkdir()
    records.check_owner(LocalFiles(checkpoint), cluster_id({"bootstrap.servers":
                                                            stack.bootstrap_servers}), first)
    cmd = materializer_command(stack, second, checkpoint)
    code, lines, took = _run(*cmd[cmd.index("materializer"):], timeout_s=120)
    line = _one_error(code, lines, took)
    assert not any("starting Spark" in text for text in lines), lines
    assert (f"belongs to the job that reads {first}.raw on Kafka cluster " in line
            and f"this config reads {second}.raw on Kafka cluster " in line
            and "give this job a spark.checkpoint of its own" in line), line


def test_raw_topics_of_the_per_table_layout_are_refused_before_spark_starts(
        stack: StackSettings, tmp_path: Path) -> None:
    """A topic prefix that still holds per-table raw topics of an earlier casscade: one line
    naming one of them and what to do, before the driver JVM starts."""
    from shared.kafka_topics import TopicCreator

    prefix = f"old{uuid.uuid4().hex[:6]}"
    TopicCreator(stack.bootstrap_servers, 1, 1).ensure_many(
        [f"{prefix}.raw.ks.a", f"{prefix}.raw.ks.b"])
    line = _one_error(*_run("materializer", "run", "--set", f"spark.checkpoint={tmp_path}",
                            "--set", f"kafka.bootstrap_servers={stack.bootstrap_servers}",
                            "--set", f"kafka.topic_prefix={prefix}", "--set", "http.port=0"))
    assert line == (f"Error: Kafka holds 2 raw topics of the per-table layout of an earlier "
                    f"casscade ({prefix}.raw.ks.a and 1 more), which this one does not read: "
                    f"delete them once nothing needs them, or give this job another "
                    f"kafka.topic_prefix (docs/operations.md \"One raw topic\")"), line


