"""The Structured Streaming query: the raw topic → partition stores (no shuffle) → event
topics."""

from __future__ import annotations

import contextlib
import logging
import os
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from materializer.checkpoint import records
from materializer.checkpoint.files import is_uri
from materializer.kafka import truncate_barrier
from materializer.kafka.changelog import ChangelogJob
from materializer.kafka.start_topics import create_event_topics, raw_partitions
from materializer.kafka.truncate_barrier import Render, TruncateBarrierWriter
from materializer.output.event_settings import EventSettings
from materializer.rules.truncate_barrier import Due
from materializer.settings import DRIVER_JIT, MaterializerConfig, SparkSettings
from materializer.spark import (
    class_archive,
    hadoop_files,
    partition_job,
    pyspark_internals,
    warm_workers,
)
from materializer.store.layout import state_root
from materializer.task.worker_clients import key_handler
from shared import topic_names
from shared.kafka_reach import cluster_id
from shared.pids import pid_alive

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

log = logging.getLogger(__name__)
CONSUMER_CACHE = "spark.kafka.consumer.cache.capacity"
SPARK_CONSUMER_CACHE = 64  # Spark's default capacity
LOCALITY_WAITS = ("spark.locality.wait", "spark.locality.wait.process")
# How long a task waits for the executor that holds its store (Spark's
# default for every level: 3 s). Spark's Kafka source spreads topic partitions over the
# executors by hash, so one executor often has more tasks; after 3 s an idle one took a
# task and rebuilt its store from the changelog (8.4 s per million keys), and the next
# batch moved it back. Spark's guide advises a longer wait for stateful queries. The price:
# when an executor is lost, the batch then running waits this long once before its tasks
# run elsewhere.
PARTITION_LOCALITY_WAIT = "10s"
# The source's consumers' fetch.max.wait.ms (Kafka's default 500), unless kafka.consumer sets
# it. A task's consumer that has read its range to the end of the partition leaves a fetch
# waiting at the broker; its next task, a micro-batch later, waits for that fetch to come
# back before it can fetch again. With 80 raw topic partitions (20 tables) that was 80 x
# 500 ms of every micro-batch: 23 s instead of 3.6 s for a batch of 160,000 copies on
# local[2] (bench_many_tables, Spark's own source -> sink).
FETCH_MAX_WAIT_MS = "10"


def event_settings(cfg: MaterializerConfig) -> EventSettings:
    """The event settings for the workers: checked, the registry's password read now."""
    return cfg.events.resolved()


def archive_plan(cfg: MaterializerConfig) -> class_archive.Plan | None:
    """How the driver JVM uses a class archive (None: off, or a JVM spark-submit started)."""
    s = cfg.spark
    if not s.class_archive_dir or s.master == "submit":
        return None
    import pyspark

    flags = " ".join([os.environ.get("SPARK_SUBMIT_OPTS", ""), driver_java_options(s),
                      s.driver_memory])
    key = class_archive.archive_key(class_archive.java_identity(), pyspark.__version__,
                                    _jars(cfg).split(","), flags)
    return class_archive.plan(Path(s.class_archive_dir).expanduser(), key, pid_alive)


def open_session(cfg: MaterializerConfig, available_now: bool = False
                 ) -> tuple[SparkSession, class_archive.Plan | None]:
    """session() with the driver's class archive (archive_plan); pass both to close."""
    archive = archive_plan(cfg)
    return session(cfg, available_now, archive), archive


def close_session(spark: SparkSession, archive: class_archive.Plan | None) -> None:
    """Stop Spark; a run that writes the class archive waits for its JVM to exit and keeps
    the archive only if it exited cleanly."""
    spark.stop()
    if archive is not None and archive.creating:
        kept = class_archive.finish(archive, stop_driver())
        log.info("class archive " + ("written" if kept else "not written"),
                 extra={"archive": str(archive.archive)})


def stop_driver() -> int | None:
    """Close the driver JVM's stdin (its signal to exit) and wait: its exit code."""
    proc = pyspark_internals.driver_process()
    if proc is None:
        return None
    with contextlib.suppress(OSError):
        proc.stdin.close()
    try:
        return proc.wait(300)  # writing an archive takes ~10 s
    except subprocess.TimeoutExpired:
        return None


def kill_driver() -> None:
    """SIGKILL the driver JVM this process started (a stop Spark could not finish)."""
    proc = pyspark_internals.driver_process()
    if proc is not None:
        proc.kill()
        proc.wait(60)


DAEMON_MODULE = "materializer.spark.pyspark_daemon"


def _jars(cfg: MaterializerConfig) -> str:
    """spark.jars: the Kafka connector's jars ("" when spark-submit provides them)."""
    s = cfg.spark
    if s.kafka_jars == "auto":
        from materializer.spark.connector_jars import connector_jars

        return ",".join(str(j) for j in connector_jars())
    return "" if s.kafka_jars == "provided" else s.kafka_jars


def session(cfg: MaterializerConfig, available_now: bool = False,
            archive: class_archive.Plan | None = None) -> SparkSession:
    """The SparkSession: loopback when local, the Kafka connector, the scheduling the stores
    need;
    `archive` (archive_plan): the driver JVM maps or writes a class archive."""
    from pyspark.sql import SparkSession

    s = cfg.spark
    builder = SparkSession.builder.appName(s.app_name)
    local = s.master.startswith("local")
    if s.master != "submit":  # "submit": spark-submit's --master and driver settings stand
        builder = builder.master(s.master)
    if local or s.master.startswith(("spark://127.0.0.1:", "spark://localhost:")):
        # a master on this machine (the local stack's cluster): loopback only, and the
        # executors' Python workers run this interpreter (its venv), not the system python3
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        builder = (builder.config("spark.driver.bindAddress", "127.0.0.1")
                   .config("spark.driver.host", "127.0.0.1"))
    if local:
        builder = (builder.config("spark.ui.enabled", "false")
                   .config("spark.driver.memory", s.driver_memory))
    jars = _jars(cfg)
    if jars:
        builder = builder.config("spark.jars", jars)
    builder = (builder
               # Python workers talk to the JVM over a Unix socket, not loopback TCP
               .config("spark.python.unix.domain.socket.enabled", "true")
               # PySpark's daemon, quiet about the workers the JVM leaves at its stop
               .config("spark.python.daemon.module", DAEMON_MODULE)
               # a Python worker that dies of a signal (a native library's crash) leaves
               # its Python stack in the task's error, not "exited unexpectedly" alone
               # (PySpark opens a faulthandler file per worker for it)
               .config("spark.python.worker.faulthandler.enabled", "true")
               .config("spark.ui.showConsoleProgress", "false"))
    if CONSUMER_CACHE not in s.conf:
        raw = raw_partitions(cfg.kafka.client(), cfg.kafka.topic_prefix)
        builder = builder.config(CONSUMER_CACHE, str(consumer_cache_capacity(raw)))
    for key, value in spark_conf(s).items():
        builder = builder.config(key, value)
    options = driver_java_options(s, archive)
    if options and s.master != "submit":
        builder = builder.config("spark.driver.extraJavaOptions", options)
    with pyspark_internals.jvm_in_own_session():
        return builder.getOrCreate()


def driver_java_options(s: SparkSettings, archive: class_archive.Plan | None = None) -> str:
    """spark.driver.extraJavaOptions for a driver JVM casscade starts: the JIT flag of
    spark.driver_jit, then the user's own (a later flag wins), then the class archive's."""
    return " ".join(filter(None, [DRIVER_JIT[s.driver_jit],
                                  s.conf.get("spark.driver.extraJavaOptions", "").strip(),
                                  archive.options if archive is not None else ""]))


def files_session(cfg: MaterializerConfig) -> SparkSession:
    """A Spark session on a local master for its Hadoop file systems only (an offline
    command on a checkpoint URI), with the job's spark.conf: its spark.hadoop.* settings
    reach the file system as they do in the job."""
    local = replace(cfg.spark, master="local[1]", kafka_jars="provided",
                    app_name=f"{cfg.spark.app_name}-files")
    return session(replace(cfg, spark=local))


def scheduling_conf(s: SparkSettings) -> dict[str, str]:
    """Scheduler settings the partition stores need, unless the user set them (spark.conf)."""
    if not any(k in s.conf for k in LOCALITY_WAITS):
        return {"spark.locality.wait.process": PARTITION_LOCALITY_WAIT}
    return {}


def sweep_budget(s: SparkSettings, available_now: bool) -> int:
    """The most keys of table sweeps a task goes through a micro-batch (0: no bound): a run
    to the raw topic's end has no later batch to leave the rest to."""
    return 0 if available_now else s.sweep_keys


def spark_conf(s: SparkSettings) -> dict[str, str]:
    """The Spark settings of `s.conf` over the job's scheduling (scheduling_conf), with what
    exactly-once needs over both: no speculation. A speculative second attempt of a task
    would be a second writer of its partition store and changelog; SparkSettings refuses
    the setting in spark.conf, and this wins over spark-submit's --conf and
    spark-defaults.conf."""
    return {**scheduling_conf(s), **s.conf, "spark.speculation": "false"}


def consumer_cache_capacity(raw_partitions: dict[str, int]) -> int:
    """How many Kafka consumers an executor keeps between micro-batches: one per raw
    partition there is now, and Spark's default (64) over that (a reshard adds some).

    Spark's Kafka source reads each topic partition with a consumer of its own from a pool
    of this capacity, and beyond it closes idle ones and makes new ones every batch (100
    tables of 4 partitions: steady batches 15 % shorter with room for all, bench_many_tables).
    """
    return sum(raw_partitions.values()) + SPARK_CONSUMER_CACHE


def start(spark: SparkSession, cfg: MaterializerConfig, available_now: bool = False
          ) -> tuple[StreamingQuery, TruncateBarrierWriter]:
    """Start the query; `available_now` processes what is in Kafka now, then stops. With it,
    the truncate barrier's writer, for the driver to poll while the query runs."""
    warm_workers.start(spark)  # while the driver reads Kafka and plans the query
    k = cfg.kafka
    raw = raw_partitions(k.client(), k.topic_prefix)
    made = frozenset(create_event_topics(k.client(), k.topic_prefix, cfg.events))
    truncate_barrier.ensure_topic(k.client(), k.topic_prefix, cfg.events.replication_factor)
    events = _events(spark, cfg, raw, made, available_now)
    job_id = records.job_id(hadoop_files.files(spark, cfg.spark.checkpoint))
    barrier = TruncateBarrierWriter(
        k.client(), k.topic_prefix, job_id, raw, cfg.events.exactly_once,
        _truncate_events(cfg, made), int(cfg.events.transaction_timeout_s * 1000))
    return write_events(events, cfg, available_now), barrier


def _truncate_events(cfg: MaterializerConfig, made: frozenset[str]) -> Render:
    """How the driver renders a table's truncate event: with the workers' KeyMaterializer
    (the same envelope, format and schemas as the table's other events)."""
    k = cfg.kafka
    handler = key_handler(k.client(), k.topic_prefix, event_settings(cfg),
                          cfg.spark.state_page_rows, made)

    def render(due: Due) -> tuple[str, bytes] | None:
        if due.schema_hash is None:
            return None
        topic, _key, value = handler.truncate_event(due.schema_hash, due.written.floor_us,
                                                    int(time.time() * 1000))
        return topic, value
    return render


def _events(spark: SparkSession, cfg: MaterializerConfig, raw_partitions: dict[str, int],
            made: frozenset[str], available_now: bool = False) -> DataFrame:
    """The events (materializer.spark.partition_job), after its start checks;
    `raw_partitions`: the raw topic's partition count now ({} while it does not exist);
    `made`: the event topics made at start; `available_now`: a run to the raw topic's end,
    whose table sweeps end within it (no later batch would take them on)."""
    k = cfg.kafka
    files = hadoop_files.HadoopFiles(spark, cfg.spark.checkpoint)
    cleared = records.clear_unfinished_start(files)
    if cleared:
        log.warning("removed what a stop during the query's first start left in the "
                    "checkpoint (temporary files of its first offsets, never written)",
                    extra={"checkpoint": files.location, "files": cleared})
    records.check_start(files, files.exists("commits/0"), raw_partitions,
                                   k.topic_prefix)
    records.check_owner(files, cluster_id(k.client()), k.topic_prefix)
    records.check_delivery(files, cfg.events.delivery)
    job_id = records.job_id(files)
    # Spark's own logs (offsets, commits) of a local checkpoint: through FileSystem, which
    # forks no `readlink` a file, unless a class is set already (spark.conf, spark-submit)
    manager = pyspark_internals.checkpoint_file_manager(spark)
    if manager is None and files.is_local():
        pyspark_internals.checkpoint_logs_through_file_system(spark)
        manager = pyspark_internals.FILE_SYSTEM_CHECKPOINT_FILES
    # (an operator who lost a checkpoint deletes the old job's changelog by this name)
    log.info("checkpoint's job", extra={
        "checkpoint": files.location, "job_id": job_id,
        "changelog": topic_names.changelog_topic(k.topic_prefix, job_id),
        "spark_logs_through": manager.rsplit(".", 1)[-1] if manager else "Spark's choice"})
    changelog = ChangelogJob(k.client(), k.topic_prefix, job_id,
                             cfg.events.replication_factor,
                             transactional=cfg.events.exactly_once, producer=k.producer,
                             transaction_timeout_ms=int(cfg.events.transaction_timeout_s
                                                        * 1000))
    # made now, as the event topics were (`made`: that, for the workers); a raw topic made
    # later gets its changelog from the first task that meets it
    if raw_partitions:
        made_logs = changelog.changelogs().ensure(sum(raw_partitions.values()))
        changelog = replace(changelog, made=made_logs)
    # a local master's stores stay beside a local checkpoint (on the driver's disk, which
    # its executors share); a cluster's executors keep them in their own work directories
    local = (spark.sparkContext.master.startswith("local")
             and not is_uri(cfg.spark.checkpoint))
    root = state_root(Path(cfg.spark.checkpoint)) if local else None
    return partition_job.events(
        read_raw(spark, cfg), root, k.client(), k.topic_prefix, event_settings(cfg),
        cfg.spark.state_page_rows, cfg.spark.dedupe_window_s,
        cfg.spark.partition_tasks or (spark.sparkContext.defaultParallelism if root else 0),
        changelog, made, sweep_budget(cfg.spark, available_now))


def read_raw(spark: SparkSession, cfg: MaterializerConfig) -> DataFrame:
    """The raw topic as a stream (topic, key, value, partition, offset), heartbeats
    included: they make an idle partition's task run (its TTL expiries). Subscribed by
    pattern: a raw topic made after the start is read without a restart."""
    k = cfg.kafka
    reader = (spark.readStream.format("kafka")
              .option("kafka.bootstrap.servers", k.bootstrap_servers)
              .options(**_door(cfg))
              .option("subscribePattern", topic_names.raw_topic_regex(k.topic_prefix))
              .option("startingOffsets", k.starting_offsets)
              .option("failOnDataLoss", "true")
              .option("kafka.fetch.max.wait.ms", FETCH_MAX_WAIT_MS))
    if k.max_offsets_per_trigger > 0:
        reader = reader.option("maxOffsetsPerTrigger", str(k.max_offsets_per_trigger))
    for key, value in k.consumer.items():
        reader = reader.option(f"kafka.{key}", value)
    # Last, over kafka.consumer: the driver writes truncate barriers into the raw topic in
    # its transactions, and a task must never act on one whose transaction then aborts (it
    # would write the table's rows again, and again when the barrier is written anew).
    # Spark's offset reader asks for the same isolation, so a batch ends at the last
    # stable offset. The publishers' records are not transactional: read at once as before.
    reader = reader.option("kafka.isolation.level", "read_committed")
    return reader.load().select("topic", "key", "value", "partition", "offset")


def write_events(events: DataFrame, cfg: MaterializerConfig,
                 available_now: bool = False) -> StreamingQuery:
    """Start writing a stream of (topic, key, value) records to Kafka, checkpointed;
    exactly-once: the tasks wrote them in their transactions, and Spark's sink is one that
    writes nothing (the query runs for its checkpoint and its observed metrics)."""
    k = cfg.kafka
    if cfg.events.exactly_once:
        writer = events.writeStream.format("noop")
    else:
        writer = (events.writeStream.format("kafka")
                  .option("kafka.bootstrap.servers", k.bootstrap_servers)
                  .options(**_door(cfg))
                  .options(**{f"kafka.{key}": value
                              for key, value in sink_producer(k.producer).items()}))
    writer = (writer.option("checkpointLocation", str(cfg.spark.checkpoint))
              .queryName("casscade_materializer"))
    if available_now:
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=f"{cfg.spark.trigger_interval_ms} milliseconds")
    return writer.start()


def sink_producer(producer: Mapping[str, str]) -> dict[str, str]:
    """At-least-once: the settings of Spark's Kafka sink's producer (Java names): acks=all,
    idempotence and lz4, then `kafka.producer` over them. (Kafka's own linger of 5 ms
    stays: a 30-s one, which the sink's flush at each task's commit would end, gained
    nothing measurable at 1,000 tables once the event topics' indexes were small,
    docs/benchmarks.md "Many tables".)"""
    return {"acks": "all", "enable.idempotence": "true", "compression.type": "lz4"
            } | dict(producer)


def _door(cfg: MaterializerConfig) -> dict[str, str]:
    """Spark's Kafka options for the configured security (kafka.-prefixed Java names)."""
    return {f"kafka.{key}": value for key, value in cfg.kafka.security.java().items()}
