"""The run loop of the job's query (materializer.spark.query_runner), with a stand-in for
Spark's query: what is started again, what ends the run, what it counts."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from materializer.checkpoint.files import CheckpointFileError
from materializer.checkpoint.records import CheckpointRefused
from materializer.settings import MaterializerConfig
from materializer.spark import query_runner
from materializer.spark.progress import ProgressMetrics
from materializer.spark.stopping import StopRequest
from shared.metrics import Registry


class _Ended:
    """A query that has ended, failed with `error` (a message) or not (None)."""

    def __init__(self, error: str | None) -> None:
        self.error = error
        self.recentProgress: list[dict] = []

    def awaitTermination(self, _timeout: float) -> bool:
        return True

    def exception(self) -> Any:
        return self.error


class _NoBarrier:
    """A truncate barrier with nothing due."""

    tables_written = 0

    def poll(self, to_end: bool = False) -> list[Any]:
        return []

    def close(self) -> None:
        pass


class _Clock:
    """time.monotonic and time.sleep without waiting."""

    def __init__(self) -> None:
        self.now = 0.0
        self.slept = 0.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds
        self.slept += seconds


def _run(monkeypatch: pytest.MonkeyPatch, starts: list[Any], lease: Any = None,
         clock: _Clock | None = None) -> tuple[list[Any], Registry, _Clock]:
    """run_query over `starts`: each start returns the next query, or raises it."""
    clock = clock or _Clock()
    monkeypatch.setattr(query_runner, "time", clock)

    def start(_spark: Any, _cfg: Any, available_now: bool = False) -> Any:
        item = starts.pop(0)
        if isinstance(item, Exception):
            raise item
        return item, _NoBarrier()

    monkeypatch.setattr(query_runner.job, "start", start)
    registry = Registry()
    running: list[Any] = []
    spark = type("Spark", (), {"sparkContext": SimpleNamespace(setLogLevel=lambda _l: None)})()
    query_runner.run_query(spark, MaterializerConfig(), ProgressMetrics(registry),
                           StopRequest(), running, lease=lease)
    return running, registry, clock


def test_a_transient_failure_is_started_again_after_a_backoff_and_counted(monkeypatch) -> None:
    failed = _Ended("org.apache.kafka.common.errors.TimeoutException: broker gone")
    running, registry, clock = _run(monkeypatch, [failed, _Ended(None)])
    assert len(running) == 2
    assert clock.slept >= 5.0  # spark.restart_backoff_s, the default
    assert 'reason="TimeoutException"} 1' in registry.render()


def test_a_permanent_failure_ends_the_run_with_its_reason(monkeypatch) -> None:
    lost = _Ended("OffsetOutOfRangeException: were deleted before the job read them")
    with pytest.raises(query_runner.QueryFailed, match=r"raw records were deleted"):
        _run(monkeypatch, [lost])


def test_the_checkpoint_unreachable_at_the_first_start_ends_it_at_a_restart_is_ridden_out(
        monkeypatch) -> None:
    unreachable = CheckpointFileError("checkpoint file hdfs://nn/c/x: reading failed: "
                                      "java.net.ConnectException")
    with pytest.raises(CheckpointFileError):
        _run(monkeypatch, [unreachable])
    running, _registry, clock = _run(monkeypatch, [
        _Ended("ConnectException: NameNode away"), unreachable, _Ended(None)])
    assert len(running) == 2 and clock.slept >= 5.0 + 10.0  # backoff doubles


def test_kafka_away_at_a_query_start_is_ridden_out(monkeypatch) -> None:
    """A broker restarting as the query restarts (the start reads the raw topic's partitions
    from Kafka): started again after a backoff, not a traceback that ends the job."""
    away = KafkaException(KafkaError(KafkaError._TRANSPORT, "Failed to get metadata"))
    running, registry, clock = _run(monkeypatch, [
        _Ended("TimeoutException: broker gone"), away, _Ended(None)])
    assert len(running) == 2 and clock.slept >= 5.0 + 10.0
    assert "casscade_materializer_query_restarts_total" in registry.render()


def test_a_refused_start_is_raised_as_it_is(monkeypatch) -> None:
    with pytest.raises(CheckpointRefused, match="another job"):
        _run(monkeypatch, [CheckpointRefused("checkpoint belongs to another job")])


def test_too_many_failures_in_a_row_end_the_run(monkeypatch) -> None:
    flaky = [_Ended("SparkException: executor lost") for _ in range(11)]
    with pytest.raises(query_runner.QueryFailed, match=r"10 restarts in a row failed"):
        _run(monkeypatch, flaky)


class _JavaException:
    """What Py4J hands over of a Java exception: its toString and its cause."""

    _target_id = "o1"  # (Py4J names the object on the JVM side)

    def __init__(self, text: str, cause: _JavaException | None = None) -> None:
        self.text, self.cause = text, cause

    def toString(self) -> str:
        return self.text

    def getCause(self) -> _JavaException | None:
        return self.cause


def test_a_start_the_jvm_fails_is_one_line_and_started_again(monkeypatch) -> None:
    from py4j.protocol import Py4JJavaError

    spawn = Py4JJavaError("An error occurred while calling o87.start.\n", _JavaException(
        "org.apache.spark.SparkException: the Python worker could not start",
        _JavaException("java.io.IOException: Cannot run program \"python3\": error=11, "
                       "Resource temporarily unavailable")))
    assert query_runner.start_failure(spawn) == (
        "org.apache.spark.SparkException: the Python worker could not start; caused by "
        "java.io.IOException: Cannot run program \"python3\": error=11, Resource "
        "temporarily unavailable")
    running, registry, clock = _run(monkeypatch, [spawn, _Ended(None)])
    assert len(running) == 1 and clock.slept >= 5.0
    assert 'reason="SparkException"} 1' in registry.render()


def test_a_start_the_jvm_fails_for_good_ends_the_run_in_one_line(monkeypatch) -> None:
    from py4j.protocol import Py4JJavaError

    bad = Py4JJavaError("An error occurred while calling o87.start.\n", _JavaException(
        "java.lang.IllegalArgumentException: bad option"))
    with pytest.raises(query_runner.QueryFailed) as failed:
        _run(monkeypatch, [bad])
    assert "\n" not in str(failed.value) and "bad option" in str(failed.value)


class _Running:
    """A query that runs until stopped."""

    def __init__(self) -> None:
        self.recentProgress: list[dict] = []
        self.status = {"isTriggerActive": True}
        self.stopped = False

    def awaitTermination(self, _timeout: float) -> bool:
        return self.stopped

    def stop(self) -> None:
        self.stopped = True


class _Lease:
    """A job lease that another job takes once the query has run a while."""

    def __init__(self, query: _Running, after: int) -> None:
        self.query, self.after, self.looks = query, after, 0

    @property
    def lost(self) -> str | None:
        self.looks += 1
        return "another job took over" if self.looks > self.after else None

    def unrenewed_s(self) -> float | None:
        return None  # renewed all along, until another job took over


def test_a_lost_lease_stops_the_query_at_once_and_ends_the_run(monkeypatch) -> None:
    from materializer.kafka.job_lease import LeaseLost

    query = _Running()
    lease = _Lease(query, after=3)
    with pytest.raises(LeaseLost, match="another job took over"):
        _run(monkeypatch, [query], lease)
    assert query.stopped


class _Unrenewed:
    """A job lease whose renewals fail from its `from_look`-th look on, until the clock
    reaches `renewed_at`."""

    lease_s, lost = 30.0, None

    def __init__(self, clock: Any, from_look: int, renewed_at: float) -> None:
        self.clock, self.from_look, self.renewed_at, self.looks = clock, from_look, renewed_at, 0

    def unrenewed_s(self) -> float | None:
        self.looks += 1
        assert self.looks < 10_000, "the query was never stopped"
        if self.looks >= self.from_look and self.clock.now < self.renewed_at:
            return 21.0
        return None


def test_a_lease_not_renewed_stops_the_query_until_it_is(monkeypatch) -> None:
    """Renewals that keep failing while the tasks could still commit (issue 71, case 5):
    the query stops before another job may take the prefix, and starts again once a
    renewal commits; before, the job kept writing."""
    first, second = _Running(), _Ended(None)
    clock = _Clock()
    lease = _Unrenewed(clock, from_look=4, renewed_at=90.0)
    running, registry, clock = _run(monkeypatch, [first, second], lease, clock)
    assert first.stopped and running == [first, second]
    assert clock.now >= 90.0  # the second start waited for the renewal
    assert 'restarts_total{reason="LeaseRenewalError"} 1' in registry.render()


class _Barrier(_NoBarrier):
    """A truncate barrier whose read to the end finds `due` truncations once."""

    def __init__(self, due: int) -> None:
        self.due = due
        self.polls: list[bool] = []

    def poll(self, to_end: bool = False) -> list[Any]:
        self.polls.append(to_end)
        if not to_end or not self.due:
            return []
        self.due = 0
        self.tables_written += 1
        return [SimpleNamespace(written=SimpleNamespace(name="ks.t"))]


def _run_available_now(monkeypatch: pytest.MonkeyPatch, barriers: list[Any]
                       ) -> tuple[list[bool], Registry]:
    """run_query with --available-now, each start ending at once with the next of
    `barriers` (each start makes its own): the starts' available_now flags, the metrics."""
    starts: list[bool] = []

    def start(_spark: Any, _cfg: Any, available_now: bool = False) -> Any:
        starts.append(available_now)
        return _Ended(None), barriers[len(starts) - 1]

    monkeypatch.setattr(query_runner.job, "start", start)
    monkeypatch.setattr(query_runner, "time", _Clock())
    registry = Registry()
    spark = type("Spark", (), {"sparkContext": SimpleNamespace(setLogLevel=lambda _l: None)})()
    query_runner.run_query(spark, MaterializerConfig(), ProgressMetrics(registry),
                           StopRequest(), [], available_now=True)
    return starts, registry


def test_available_now_runs_again_after_writing_truncate_events(monkeypatch) -> None:
    """--available-now: a run whose last batches made truncate events due writes them when
    its query ends and runs the query once more, so the tasks meet the barriers."""
    barriers = [_Barrier(due=1), _Barrier(due=0)]
    starts, registry = _run_available_now(monkeypatch, barriers)
    assert starts == [True, True]  # once more after the truncate events, then done
    assert [b.polls.count(True) for b in barriers] == [1, 1]
    assert 'casscade_materializer_truncate_events_total{table="ks.t"} 1' in registry.render()


def test_available_now_runs_again_after_truncate_events_written_while_it_ran(
        monkeypatch) -> None:
    """--available-now: truncate events written between its micro-batches (the query fixed
    its end before their barriers) also make it run once more, though nothing is due at
    its end."""
    written_mid_run = _NoBarrier()
    written_mid_run.tables_written = 1
    starts, _registry = _run_available_now(monkeypatch, [written_mid_run, _NoBarrier()])
    assert starts == [True, True]  # once more for the barriers, then done


class _FailsAfterABatch:
    """A query whose last micro-batch completed just before it failed: its report is in
    recentProgress, never polled while it ran."""

    def __init__(self) -> None:
        self.recentProgress = [{"batchId": 7, "numInputRows": 112,
                                "timestamp": "2026-11-29T14:01:10.000Z"}]

    def awaitTermination(self, _timeout: float) -> bool:
        from pyspark.errors import StreamingQueryException

        raise StreamingQueryException(message="FENCED_LEADER_EPOCH")

    def exception(self) -> Any:
        return "FENCED_LEADER_EPOCH"


def test_the_last_batch_of_a_failed_query_is_counted(monkeypatch) -> None:
    """A batch that completes in the second before its query fails counts toward /metrics
    (the restart is a new query, which does not report it)."""
    progress = ProgressMetrics(Registry())
    monkeypatch.setattr(query_runner, "_poll", lambda *_a: None)
    error = query_runner._await(_FailsAfterABatch(), progress, query_runner.RestartPolicy(),
                                StopRequest(), lambda: None)
    assert error is not None and "FENCED_LEADER_EPOCH" in error
    assert progress.batches.get() == 1
    assert progress.input_rows.get() == 112
