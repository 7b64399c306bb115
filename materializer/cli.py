"""`casscade materializer ...`: the Spark job's commands."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from materializer.spark.progress import ProgressMetrics
from materializer.spark.stopping import StopHung, StopRequest
from shared.cli_config import config_option, load_config, set_option
from shared.metrics import Registry
from shared.reach import reach_or_exit
from shared.topic_names import raw_topic

if TYPE_CHECKING:
    from materializer.output.event_settings import EventSettings
    from materializer.settings import MaterializerConfig

log = logging.getLogger("casscade.materializer")
_CONFIG = config_option("deploy/materializer.yaml")
_SET = set_option


@click.group(name="materializer")
def materializer() -> None:
    """The Spark Structured Streaming job: the raw topic -> change events with full rows."""


# What `pip install 'casscade[materializer]'` adds to the base install (the publisher's)
ENGINE = ("pyspark", "py4j", "pyarrow", "pandas")


def require_engine() -> None:
    """ClickException naming the install line when the materializer's engine is missing
    (a base install: the publisher's, beside a Cassandra node)."""
    import importlib.util

    missing = [name for name in ENGINE if importlib.util.find_spec(name) is None]
    if missing:
        raise click.ClickException(
            f"the materializer needs {', '.join(missing)}, which this install lacks (the "
            "base install is the publisher's): pip install 'casscade[materializer]'")


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
    One job per topic prefix: a job with another checkpoint is refused while this one runs
    (kafka.job_lease_s).
    """
    from shared.config import to_dict

    cfg = _config(config_file, overrides)
    if print_config:
        click.echo(json.dumps(to_dict(cfg), indent=1))
        return
    require_engine()  # before the modules that import it
    from materializer.checkpoint.files import CheckpointFileError
    from materializer.checkpoint.records import CheckpointRefused
    from materializer.kafka.job_lease import LeaseLost
    from materializer.kafka.start_topics import OldRawLayout
    from materializer.spark import job
    from materializer.spark.query_runner import QueryFailed, run_query
    from shared.logs import setup_logging

    try:  # a bad event or security setting fails here, not after Spark has started
        events = job.event_settings(cfg)
        kafka = cfg.kafka.client()
    except ValueError as exc:  # ConfigError is one
        raise click.UsageError(str(exc)) from exc
    setup_logging(cfg.log.level, cfg.log.format)
    _check_kafka(cfg, events, kafka)
    _check_local_checkpoint(cfg, kafka)
    progress = ProgressMetrics(Registry())
    raw_age = _watch_raw_age(cfg, kafka, progress)
    running: list[Any] = []  # the query, once started (for /health)
    lease = _lease(cfg)  # first: a prefix another job writes fails before Spark starts,
    try:
        http = _serve(cfg, running, progress)  # and so does a taken port
    except click.ClickException:
        lease.release()
        raise
    stop = StopRequest(cfg.spark.stop_timeout_s)
    stop.install()  # a signal while Spark starts: stop once it has
    # a fresh start takes 20-50 s before the first events: say what it is doing meanwhile
    log.info("starting Spark (the driver JVM)", extra={"master": cfg.spark.master})
    spark, archive = _open_session(cfg, available_now, lease, http, raw_age)
    stop.install()  # PySpark's SparkContext installs a SIGINT handler of its own
    spark.sparkContext.setLogLevel("WARN")
    try:
        run_query(spark, cfg, progress, stop, running, available_now, lease)
    except (CheckpointRefused, OldRawLayout, CheckpointFileError, QueryFailed,
            LeaseLost) as exc:
        raise click.ClickException(str(exc)) from exc
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
        lease.release()
        if http is not None:
            http.shutdown()
        raw_age.close()
        if not stop.hung:
            stop.finish()
            job.close_session(spark, archive)


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
    to delete. A raw topic given partitions by hand: reshard to the count it has now, taken
    when every record not yet processed is in its key's partition for that count.
    """
    from materializer.checkpoint.files import CheckpointFileError, is_uri
    from materializer.kafka.start_topics import OldRawLayout
    from materializer.reshard import ReshardRefused
    from materializer.reshard import reshard as reshard_stores
    from shared.logs import setup_logging

    require_engine()  # (a checkpoint URI is reached through Spark's Hadoop file systems)
    from materializer.spark import hadoop_files, job

    cfg = _config(config_file, overrides)
    setup_logging(cfg.log.level, cfg.log.format)
    reach_or_exit(cfg.kafka.client())
    # a checkpoint URI (hdfs://, s3a://) is reached as the job reaches it: through Spark's
    # Hadoop file systems, in a local session with the job's spark.conf
    spark = job.files_session(cfg) if is_uri(cfg.spark.checkpoint) else None
    try:
        report = reshard_stores(cfg.kafka.client(), cfg.kafka.topic_prefix,
                                hadoop_files.files(spark, cfg.spark.checkpoint), partitions,
                                partitioner, cfg.events.replication_factor)
    except (ReshardRefused, OldRawLayout, CheckpointFileError) as exc:
        raise click.ClickException(f"reshard refused: {exc}") from exc
    finally:
        if spark is not None:
            spark.stop()
    click.echo(json.dumps(report, indent=1))


def _check_kafka(cfg: MaterializerConfig, events: EventSettings, kafka: dict[str, str]
                 ) -> None:
    """Before Spark, one line each: Kafka or the registry not there, the raw topics of an
    earlier layout, event producer settings the Kafka client refuses, a transaction timeout
    the brokers refuse."""
    from materializer.kafka.avro_registry import registry_checks
    from materializer.kafka.start_topics import OldRawLayout, raw_partitions
    from materializer.kafka.transactions import (
        ProducerRefused,
        TimeoutRefused,
        check_producer,
        check_timeout,
    )

    reach_or_exit(kafka, *registry_checks(events))
    try:
        raw_partitions(kafka, cfg.kafka.topic_prefix)
        if events.exactly_once:
            check_producer(kafka, cfg.kafka.producer, int(events.transaction_timeout_s * 1000))
            check_timeout(kafka, events.transaction_timeout_s)
    except (OldRawLayout, TimeoutRefused, ProducerRefused) as exc:
        raise click.ClickException(str(exc)) from None


def _check_local_checkpoint(cfg: MaterializerConfig, kafka: dict[str, str]) -> None:
    """Before Spark: a local checkpoint of another job is refused in one line (the job's
    start checks any checkpoint again, through Spark's file systems)."""
    from materializer.checkpoint.files import LocalFiles, is_uri
    from materializer.checkpoint.records import (
        OWNER_RECORD,
        CheckpointRefused,
        refuse_another_owner,
    )
    from shared.kafka_reach import cluster_id

    if is_uri(cfg.spark.checkpoint):
        return
    files = LocalFiles(cfg.spark.checkpoint)
    owner = files.read_text(OWNER_RECORD)
    if owner is None:
        return  # a new checkpoint: its start records this job
    try:
        refuse_another_owner(files.location, owner, cluster_id(kafka), cfg.kafka.topic_prefix)
    except CheckpointRefused as exc:
        raise click.ClickException(str(exc)) from None


def _open_session(cfg: MaterializerConfig, available_now: bool, lease: Any, http: Any,
                  raw_age: Any) -> tuple[Any, Any]:
    """job.open_session; a driver JVM that cannot start is one line, with the lease released
    (the next job need not wait for it to lapse) and the job's threads closed."""
    from materializer.spark import job

    try:
        return job.open_session(cfg, available_now=available_now)
    except Exception as exc:  # noqa: BLE001 (PySpark's, py4j's, the OS's: no Java, a JVM option refused)
        lease.release()
        if http is not None:
            http.shutdown()
        raw_age.close()
        raise click.ClickException(f"Spark's driver JVM could not start: {exc}".strip()
                                   ) from None


def _lease(cfg: MaterializerConfig) -> Any:
    """This job's lease on its topic prefix, taken (one line if another job holds it)."""
    from confluent_kafka import KafkaException

    from materializer.kafka.job_lease import JobLease, LeaseRefused

    lease = JobLease(cfg.kafka.client(), cfg.kafka.topic_prefix, str(cfg.spark.checkpoint),
                     cfg.events.replication_factor, cfg.kafka.job_lease_s)
    try:
        lease.acquire()
    except (LeaseRefused, KafkaException) as exc:
        raise click.ClickException(str(exc)) from None
    return lease


def _watch_raw_age(cfg: MaterializerConfig, kafka: dict[str, str],
                   progress: ProgressMetrics) -> Any:
    """The raw topic's retention and the job's oldest unread record, read on a thread of
    their own into /metrics (materializer.kafka.raw_age); close() it at the end."""
    from materializer.kafka.raw_age import RawAgeProbe

    probe = RawAgeProbe(kafka, raw_topic(cfg.kafka.topic_prefix))
    progress.watch_raw_age(probe.latest)
    probe.start(lambda: progress.end_offsets.get(probe.raw_topic))
    return probe


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
