"""Running the job's query to its end: started, watched, started again from its
checkpoint after a transient failure, stopped between micro-batches when asked.

A query that fails on something transient (a broker restart, a lost executor, the
checkpoint's file system away for a while) is started again after a backoff
(`materializer.restarts.RestartPolicy`); a permanent failure, or too many in a row, ends
the run with `QueryFailed`. What a start refuses (`CheckpointRefused`, `OldRawLayout`; a
checkpoint it cannot reach at the first start) is raised as it is.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from confluent_kafka import KafkaException

from materializer.checkpoint.files import CheckpointFileError
from materializer.kafka.job_lease import JobLease, LeaseLost
from materializer.kafka.truncate_barrier import TruncateBarrierWriter
from materializer.restarts import RestartPolicy, permanent_reason, short_reason
from materializer.spark import job, stopping
from materializer.spark.progress import ProgressMetrics
from materializer.spark.pyspark_internals import progress_since
from materializer.spark.stopping import StopRequest

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from materializer.settings import MaterializerConfig

log = logging.getLogger("casscade.materializer")


def _jvm_failures() -> tuple[type[BaseException], ...]:
    from py4j.protocol import Py4JError
    from pyspark.errors.exceptions.captured import CapturedException

    return Py4JError, CapturedException


JVM_FAILURES = _jvm_failures()


def start_failure(exc: BaseException) -> str:
    """A query start's failure in the JVM, in one line: the Java exception and its causes
    (no stack frames)."""
    java = getattr(exc, "java_exception", None)
    causes: list[str] = []
    try:
        while java is not None and len(causes) < 5:
            causes.append(str(java.toString()))
            java = java.getCause()
    except Exception:  # noqa: BLE001 (the JVM itself may be gone: use the message)
        causes = []
    if not causes:
        causes = [line.strip() for line in str(exc).splitlines()
                  if line.strip() and not line.lstrip().startswith("at ")
                  and "stacktrace" not in line.lower()][:3]
    return "; caused by ".join(causes)[:2000] or type(exc).__name__


class QueryFailed(Exception):
    """The query failed for good: permanently, or too many restarts in a row."""


def run_query(spark: SparkSession, cfg: MaterializerConfig, progress: ProgressMetrics,
              stop: StopRequest, running: list[Any], available_now: bool = False,
              lease: JobLease | None = None) -> None:
    """Run the query until it ends (`available_now`) or `stop` is requested, restarting it
    from its checkpoint after transient failures; each query started is appended to
    `running` (for /health). StopHung from `stop` when Spark does not stop in time;
    LeaseLost (the query stopped at once) when another job took the prefix's `lease`."""
    policy = RestartPolicy(cfg.spark.max_restarts, cfg.spark.restart_backoff_s)
    restarts = progress.registry.counter(
        "casscade_materializer_query_restarts_total",
        "Failed queries started again from the checkpoint, by the failure's exception class",
        ("reason",))
    while not stop.requested:
        _wait_for_renewal(lease, stop)
        _check_lease(lease)
        if stop.requested:
            return
        try:
            query, barrier = job.start(spark, cfg, available_now=available_now)
            running.append(query)
        except JVM_FAILURES as exc:
            # the driver JVM failed to start the query (it could not start a process, a
            # source failed at its first look): Py4J's error carries the whole Java stack;
            # the restart policy gets its one-line cause
            error = start_failure(exc)
        except CheckpointFileError as exc:
            # at the first start: a checkpoint this job cannot reach, read or write (a wrong
            # URI, permissions) is refused at once; at a restart it is the file system away
            # for a while (a NameNode restarting), which the restart policy rides out like
            # any transient failure
            if not running:
                raise
            error: str | None = str(exc)
        except KafkaException as exc:
            # the start reads the raw topic's partitions and makes topics: Kafka away then
            # (a broker restarting as the query restarts) is ridden out like a failed batch
            error = f"Kafka could not be reached at the query's start: {exc}"
        else:
            log.info("query started",
                     extra={"checkpoint": str(cfg.spark.checkpoint)})
            try:
                error = _await(running[-1], progress, policy, stop,
                               lambda: spark.sparkContext.setLogLevel("ERROR"), lease, barrier)
                # --available-now: truncate events written while it ran, or due after its
                # last micro-batches, have barriers past the end it fixed at its start, so
                # it goes once more over what Kafka holds now
                again = (error is None and available_now and not stop.requested
                         and (_poll(barrier, progress, to_end=True) > 0
                              or barrier.tables_written > 0))
            finally:
                barrier.close()
            if again:
                continue
            if error is None or stop.requested:
                return
        delay = policy.next_delay(error)
        if delay is None:
            why = permanent_reason(error) or f"{policy.failures} restarts in a row failed"
            raise QueryFailed(f"materializer query failed ({why}): {error}")
        restarts.inc(1, short_reason(error))
        log.warning("materializer query failed; starting it again from its checkpoint",
                    extra={"error": error[:2000], "restart_in_s": delay,
                           "attempt": policy.failures, "max_restarts": policy.max_restarts,
                           "checkpoint": str(cfg.spark.checkpoint)})
        deadline = time.monotonic() + delay
        while time.monotonic() < deadline and not stop.requested:
            time.sleep(0.2)


def _poll(barrier: TruncateBarrierWriter | None, progress: ProgressMetrics,
          to_end: bool = False) -> int:
    """Let the truncate barrier write what is due (`to_end`: after reading the truncations
    topic to its end); how many tables' truncate events it wrote (Kafka failing: none,
    the next poll retries)."""
    if barrier is None:
        return 0
    try:
        written = barrier.poll(to_end)
    except (KafkaException, LookupError, ValueError, OSError) as exc:
        # Kafka away, a table's schema not readable yet: the reports stay, the next poll
        # (a second later) writes them
        log.warning("truncate events could not be written; trying again",
                    extra={"error": f"{type(exc).__name__}: {exc}"[:2000]})
        return 0
    for due in written:
        progress.truncate_events.inc(1, due.written.name)
    return len(written)


def _wait_for_renewal(lease: JobLease | None, stop: StopRequest) -> None:
    """While the `lease` is not renewed (JobLease.unrenewed_s), wait for a renewal, its loss,
    or a stop, saying so every minute."""
    said = -60.0
    while (lease is not None and lease.lost is None and not stop.requested
           and (unrenewed := lease.unrenewed_s()) is not None):
        if time.monotonic() - said >= 60:
            said = time.monotonic()
            log.warning("the job lease is not renewed; the query starts again once it is",
                        extra={"unrenewed_s": round(unrenewed), "lease_s": lease.lease_s})
        time.sleep(0.5)


def _check_lease(lease: JobLease | None) -> None:
    """LeaseLost if another job took the prefix's lease."""
    if lease is not None and lease.lost is not None:
        raise LeaseLost(lease.lost)


def _await(query: Any, progress: ProgressMetrics, policy: RestartPolicy,
           stop: StopRequest, quiet: Callable[[], None], lease: JobLease | None = None,
           barrier: TruncateBarrierWriter | None = None) -> str | None:
    """Wait for `query` to end; its error (message with causes), or None when it stopped
    (`quiet`: turns Spark's log down before a requested stop); LeaseLost, the query
    stopped at once, when the `lease` is lost; meanwhile the truncate `barrier` writes
    what is due."""
    from pyspark.errors import StreamingQueryException

    batches = progress.batches.get()
    try:
        # wake every second to hand Spark's new progress reports to /metrics and to stop
        # between micro-batches when asked
        while not query.awaitTermination(0.05 if stop.requested else 1):
            if lease is not None and lease.lost is not None:
                quiet()
                stopping.stop_now(query)  # its tasks' commits are fenced already
                _observe_last(query, progress)
                raise LeaseLost(lease.lost)
            unrenewed = lease.unrenewed_s() if lease is not None else None
            if unrenewed is not None:  # (the lease has a third of itself left)
                quiet()
                stopping.stop_now(query)
                _observe_last(query, progress)
                # (the restart metric's reason: the first "...Error" named)
                return (f"LeaseRenewalError: the job lease was not renewed for "
                        f"{unrenewed:.0f} s (its lease "
                        f"{lease.lease_s:g} s): the query stops before another job may "
                        "take the prefix, and starts again once the lease is renewed")
            stop.stop_between_batches(query, quiet)
            progress.observe_new(progress_since(query, progress.newest()))
            _poll(barrier, progress)
            if progress.batches.get() > batches:
                if not batches:
                    log.info("first micro-batch done", extra={
                        "raw_records": int(progress.input_rows.get()),
                        "batch_ms": int(progress.batch_ms.get())})
                batches = progress.batches.get()
                policy.progressed()
    except StreamingQueryException as exc:  # raised here when the query failed
        _observe_last(query, progress)
        return str(exc)
    progress.observe_new(progress_since(query, progress.newest()))
    error = query.exception()
    return None if error is None else str(error)


def _observe_last(query: Any, progress: ProgressMetrics) -> None:
    """Account the reports of an ended query not yet seen: a micro-batch that completed
    within the last second before the query failed is reported by this query only (the
    next start is a new query), and its rows and events count toward /metrics."""
    try:
        progress.observe_new(progress_since(query, progress.newest()))
    except JVM_FAILURES as exc:
        log.warning("the ended query's last progress reports could not be read",
                    extra={"error": str(exc)[:300]})
