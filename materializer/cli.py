"""`casscade materializer ...`: the Spark job's commands."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from materializer.restarts import RestartPolicy, permanent_reason, short_reason
from materializer.spark.progress import ProgressMetrics
from materializer.spark.stopping import StopHung, StopRequest
from shared.cli_config import config_option, load_config, set_option
from shared.metrics import Registry
from shared.reach import reach_or_exit

if TYPE_CHECKING:
    from materializer.settings import MaterializerConfig

log = logging.getLogger("casscade.materializer")
_CONFIG = config_option("deploy/materializer.yaml")
_SET = set_option


@click.group(name="materializer")
def materializer() -> None:
    """The Spark Structured Streaming job: raw topics -> change events with full rows."""


def _config(config_file: Path | None, overrides: tuple[str, ...]) -> Any:
    from materializer.settings import MaterializerConfig

    return load_config(MaterializerConfig, config_file, overrides)


@materializer.command()
@_CONFIG
@_SET
@click.option("--print-config", is_flag=True, help="Print the effective config and exit.")
@click.option("--available-now", is_flag=True,
              help="Process what the raw topic holds now, then stop (backfills, tests).")
def run(config_file: Path | None, overrides: tuple[str, ...], print_config: bool,
        available_now: bool) -> None:
    """Run the materializer: read the raw topic <prefix>.raw, merge every replica's copies
    with Cassandra's rules, write c/u/d events with complete before/after rows to
    <prefix>.<keyspace>.<table>.

    Runs in Spark local mode by default (spark.master local[2]); `deploy/spark/submit.sh`
    runs the same job on a cluster. Progress and state live in spark.checkpoint: a restart
    continues from there. SIGTERM or Ctrl-C stops the query after the current micro-batch
    (a second one: at once; that micro-batch runs again at the next start).
    A query that fails on something transient (a broker restart, a lost executor) is
    started again from its checkpoint (spark.max_restarts, spark.restart_backoff_s);
    a permanent failure (data lost, a checkpoint that does not fit) ends the run.
    """
    from materializer.kafka.avro_registry import registry_checks
    from materializer.spark import job
    from materializer.spark.checkpoint_files import CheckpointFileError
    from materializer.spark.checkpoint_records import CheckpointRefused
    from shared.config import to_dict
    from shared.logs import setup_logging

    cfg = _config(config_file, overrides)
    if print_config:
        click.echo(json.dumps(to_dict(cfg), indent=1))
        return
    try:  # a bad event or security setting fails here, not after Spark has started
        events = job.event_settings(cfg)
        kafka = cfg.kafka.client()
    except ValueError as exc:  # ConfigError is one
        raise click.UsageError(str(exc)) from exc
    setup_logging(cfg.log.level, cfg.log.format)
    # before Spark: one line if Kafka or the registry is not there
    reach_or_exit(kafka, *registry_checks(events))
    try:
        job.raw_partitions(kafka, cfg.kafka.topic_prefix)  # the raw layout, before Spark too
    except job.OldRawLayout as exc:
        raise click.ClickException(str(exc)) from None
    progress = ProgressMetrics(Registry())
    running: list[Any] = []  # the query, once started (for /health)
    http = _serve(cfg, running, progress)  # first: a taken port fails before Spark starts
    stop = StopRequest(cfg.spark.stop_timeout_s)
    stop.install()  # a signal while Spark starts: stop once it has
    # a fresh start takes 20-50 s before the first events: say what it is doing meanwhile
    log.info("starting Spark (the driver JVM)", extra={"master": cfg.spark.master})
    spark, archive = job.open_session(cfg, available_now=available_now)
    stop.install()  # PySpark's SparkContext installs a SIGINT handler of its own
    spark.sparkContext.setLogLevel("WARN")
    policy = RestartPolicy(cfg.spark.max_restarts, cfg.spark.restart_backoff_s)
    restarts = progress.registry.counter(
        "casscade_materializer_query_restarts_total",
        "Failed queries started again from the checkpoint, by the failure's exception class",
        ("reason",))
    try:
        while not stop.requested:
            try:
                running.append(job.start(spark, cfg, available_now=available_now))
            except (CheckpointRefused, job.OldRawLayout) as exc:
                raise click.ClickException(str(exc)) from exc
            except CheckpointFileError as exc:
                # at the first start: a checkpoint this job cannot reach, read or write (a
                # wrong URI, permissions) is refused at once; at a restart it is the file
                # system away for a while (a NameNode restarting), which the restart
                # policy rides out like any transient failure
                if not running:
                    raise click.ClickException(str(exc)) from exc
                error: str | None = str(exc)
            else:
                log.info("query started; its first micro-batch also starts the Python "
                         "workers", extra={"checkpoint": str(cfg.spark.checkpoint)})
                error = _await(running[-1], progress, policy, stop,
                               lambda: spark.sparkContext.setLogLevel("ERROR"))
                if error is None or stop.requested:
                    return
            delay = policy.next_delay(error)
            if delay is None:
                why = permanent_reason(error) or f"{policy.failures} restarts in a row failed"
                raise click.ClickException(f"materializer query failed ({why}): {error}")
            restarts.inc(1, short_reason(error))
            log.warning("materializer query failed; starting it again from its checkpoint",
                        extra={"error": error[:2000], "restart_in_s": delay,
                               "attempt": policy.failures, "max_restarts": policy.max_restarts,
                               "checkpoint": str(cfg.spark.checkpoint)})
            deadline = time.monotonic() + delay
            while time.monotonic() < deadline and not stop.requested:
                time.sleep(0.2)
    except StopHung as exc:
        log.error(f"{exc}; killing the driver JVM (the micro-batch it ran runs again at the "
                  "next start)")
        job.kill_driver()
        raise SystemExit(1) from None
    finally:
        log.info("materializer run ended", extra={
            "batches": int(progress.batches.get()),
            "raw_records": int(progress.input_rows.get()),
            "copies_dropped": int(progress.copies_dropped.get()),
            "stores_restored": int(progress.stores_restored.get()),
            "records_written": int(progress.output_rows.get())})
        if http is not None:
            http.shutdown()
        if not stop.hung:
            stop.finish()
            job.close_session(spark, archive)


def _await(query: Any, progress: ProgressMetrics, policy: RestartPolicy,
           stop: StopRequest, quiet: Callable[[], None]) -> str | None:
    """Wait for `query` to end; its error (message with causes), or None when it stopped
    (`quiet`: turns Spark's log down before a requested stop)."""
    from pyspark.errors import StreamingQueryException

    batches = progress.batches.get()
    try:
        # wake every second to hand Spark's new progress reports to /metrics and to stop
        # between micro-batches when asked
        while not query.awaitTermination(0.05 if stop.requested else 1):
            stop.stop_between_batches(query, quiet)
            progress.observe_new(query.recentProgress)
            if progress.batches.get() > batches:
                if not batches:
                    log.info("first micro-batch done", extra={
                        "raw_records": int(progress.input_rows.get()),
                        "batch_ms": int(progress.batch_ms.get())})
                batches = progress.batches.get()
                policy.progressed()
    except StreamingQueryException as exc:  # raised here when the query failed
        return str(exc)
    progress.observe_new(query.recentProgress)
    error = query.exception()
    return None if error is None else str(error)


@materializer.command()
@click.option("--partitions", required=True, type=click.IntRange(min=1),
              help="The partition count the raw topic gets (at least its count now).")
@click.option("--partitioner", default="consistent_random", show_default=True,
              help="The publishers' producer partitioner (librdkafka's `partitioner`: "
                   "consistent_random, murmur2_random, ...).")
@_CONFIG
@_SET
def reshard(partitions: int, partitioner: str, config_file: Path | None,
            overrides: tuple[str, ...]) -> None:
    """Give the raw topic more partitions, moving a stopped job's partition stores with
    their keys (spark.checkpoint is kept): no state lost, no event.

    First stop the publishers and run the job with --available-now to the end of the raw
    topic (refused otherwise: records left in an old partition would meet a moved state).
    Then this writes every store's entries to a new changelog topic at their keys' new
    partitions, adds the partitions to the raw topic, and records both in the checkpoint;
    start the publishers and the job. Prints a JSON summary, with the old changelog topic
    to delete.
    """
    from materializer.spark import checkpoint_files, job
    from materializer.spark.checkpoint_files import CheckpointFileError, is_uri
    from materializer.spark.job import OldRawLayout
    from materializer.spark.partition_reshard import ReshardRefused
    from materializer.spark.partition_reshard import reshard as reshard_stores
    from shared.logs import setup_logging

    cfg = _config(config_file, overrides)
    setup_logging(cfg.log.level, cfg.log.format)
    reach_or_exit(cfg.kafka.client())
    # a checkpoint URI (hdfs://, s3a://) is reached as the job reaches it: through Spark's
    # Hadoop file systems, in a local session with the job's spark.conf
    spark = job.files_session(cfg) if is_uri(cfg.spark.checkpoint) else None
    try:
        report = reshard_stores(cfg.kafka.client(), cfg.kafka.topic_prefix,
                                checkpoint_files.files(spark, cfg.spark.checkpoint), partitions,
                                partitioner, cfg.events.replication_factor)
    except (ReshardRefused, OldRawLayout, CheckpointFileError) as exc:
        raise click.ClickException(f"reshard refused: {exc}") from exc
    finally:
        if spark is not None:
            spark.stop()
    click.echo(json.dumps(report, indent=1))


def _serve(cfg: MaterializerConfig, running: list[Any], progress: ProgressMetrics) -> Any:
    """/metrics, /health (a report within the stale window and the query running), /status."""
    from shared.http_server import serve

    if not cfg.http.port:
        return None
    # Spark reports at least every 10 s when idle; a gap of many trigger intervals is a stall
    stale_s = max(120.0, 10 * cfg.spark.trigger_interval_ms / 1000)

    def last_loop() -> float:
        active = bool(running) and running[-1].isActive
        return time.monotonic() - (progress.age_s() if active else 10 * stale_s)

    try:
        return serve(cfg.http.host, cfg.http.port, progress.registry, progress.status,
                     last_loop, stale_s)
    except OSError as exc:
        raise click.ClickException(
            f"cannot serve /metrics on {cfg.http.host}:{cfg.http.port}: {exc} "
            "(set http.port; 0 turns the server off)") from exc
