"""The query, without shuffles: the raw topic → mapInArrow over each task's merge
(`materializer.task.merge_loop`), state in a RocksDB per raw partition → event topics.

Why it can do without Spark's state: the raw topic is keyed by table id and partition key,
so every copy of a key, from every replica's publisher, is in one Kafka partition, which one
task of the Kafka source reads in each micro-batch. That task can hold the key's state itself
(`materializer.store.partition_store`) and drop the copies it has seen, so no record is
shuffled twice and no state call crosses to the JVM.

Where the stores live: on a local master beside the checkpoint; on a cluster in each
executor's work directory. Every store write but the copy digests also goes to a compacted
changelog topic (`materializer.kafka.changelog`), so the task of partition p
that runs on an executor without p's store, or with an old one, rebuilds or catches it up
before it reads a record. Spark's Kafka source asks for the same executor for a topic
partition every batch, so in steady state nothing is read back
(`partition_stores_restored_total` on /metrics).

TTL expiry: a task fires the due expiries of every store it opens, and the publishers'
heartbeats (`shared.heartbeat`, skipped here before any merge) give every partition a
record every few seconds, so an idle partition's expiries wait about that long.

Dropped tables: a publisher that finds a captured table gone writes a table-dropped record
(`shared.table_drop`) to every raw partition; the task that meets it frees the table's
entries in its store once the batch's records are merged (`materializer.store.
dropped_tables`), and leaves out the table's records of later batches.

A raw topic that gains partitions: the job refuses to start until `casscade materializer
reshard` has moved the stores with their keys (`materializer.reshard`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from materializer.kafka.changelog import ChangelogJob
from materializer.key_materializer import KeyMaterializer
from materializer.output.event_settings import EventSettings
from materializer.rules.pages import DEFAULT_PAGE_ROWS
from materializer.spark.progress import PARTITION_METRICS
from materializer.spark.pyspark_daemon import InputCut, input_whole
from materializer.store.layout import EXECUTOR_DIR
from materializer.task.merge_loop import TASK_SCHEMA, merge_whole
from materializer.task.task_stores import TaskStores

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

log = logging.getLogger(__name__)
BATCH_ID_PROPERTY = "streaming.sql.batchId"  # the local property Spark sets for a micro-batch
METRICS = PARTITION_METRICS  # the name of the query's observed metrics


def executor_root(job: str) -> Path:
    """Where an executor of a cluster keeps the stores of job `job`: its own work directory
    (Spark's root for files it fetches), which dies with the executor; the changelog
    rebuilds what a new one needs."""
    from pyspark import SparkFiles

    return Path(SparkFiles.getRootDirectory()).resolve() / EXECUTOR_DIR / job


def merge_task(root: Path | None, handler_for: Callable[[], KeyMaterializer], window_s: int,
               changelog: ChangelogJob | None = None, sweep_keys: int = 0
               ) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """The mapInArrow function: one task's records (one Kafka partition's offset range of
    the micro-batch) merged key by key into events, copies dropped, state in its store under
    `root` (None: the executor's own directory) and in its `changelog`, at most `sweep_keys`
    keys of table sweeps (0: no bound); committed only if the JVM handed over the task's
    whole input (`pyspark_daemon.input_whole`), else aborted."""
    def run(batches: Iterator[Any]) -> Iterator[Any]:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        batch_id = ctx.getLocalProperty(BATCH_ID_PROPERTY) if ctx else None
        if batch_id is None:
            raise RuntimeError("the partition-state merge runs only in a streaming micro-batch")
        now = int(time.time() * 1000)
        where = root if root is not None else executor_root(
            changelog.job_id if changelog is not None else "local")
        stores = TaskStores(where, int(batch_id), window_s * 1000, now,
                            changelog.changelogs() if changelog is not None else None,
                            changelog.made if changelog is not None else None, changelog)
        def check_whole() -> None:
            # commit only a whole input: every raw partition read to the batch's planned end
            try:
                input_whole()
            except InputCut as exc:
                log.warning(str(exc), extra={"batch": int(batch_id), "read": {
                    f"{t}[{p}]": r for (t, p), r in stores.ranges.items()}})
                raise

        yield from merge_whole(batches, stores, handler_for(), now, check_whole, sweep_keys)
    return run


def events(raw: DataFrame, root: Path | None, kafka: dict[str, str], prefix: str,
           settings: EventSettings, page_rows: int = DEFAULT_PAGE_ROWS, window_s: int = 0,
           tasks: int = 0, changelog: ChangelogJob | None = None,
           made_topics: frozenset[str] = frozenset(), sweep_keys: int = 0) -> DataFrame:
    """The events (topic, key, value) of `raw` (the Kafka source's rows) under topic prefix
    `prefix`, with the copy counts as the query's observed metrics METRICS; the stores
    under `root` (None: in each executor's work directory); `tasks` > 0: the source's
    partitions (one per raw topic partition with records) coalesced into at most that many
    tasks; `changelog`: the stores' changelogs (None: local stores only); `made_topics`:
    the event topics the driver made at start (`worker_clients.key_handler`); `sweep_keys`:
    the most keys of table sweeps a task goes through (0: no bound).

    Why coalesce: every task costs the same start (its Python function, Arrow streams, a
    handler) whatever it reads, so 20 tables of 4 partitions each paid it 80 times a
    micro-batch. Coalescing needs no shuffle: a task reads its topic partitions one after
    the other, each whole, and a topic partition is still in one task only, which is all
    the stores need (`TaskStores` opens one per topic partition it meets)."""
    from pyspark.sql import functions as F

    from materializer.task.worker_clients import key_handler

    def handler_for() -> KeyMaterializer:
        return key_handler(kafka, prefix, settings, page_rows, made_topics)

    if root is not None:
        root.mkdir(parents=True, exist_ok=True)
    if tasks > 0:
        raw = raw.coalesce(tasks)
    merged = raw.mapInArrow(merge_task(root, handler_for, window_s, changelog, sweep_keys),
                            TASK_SCHEMA)
    return (merged.observe(METRICS, F.sum("copies_in").alias("copies_in"),
                           F.sum("copies_dropped").alias("copies_dropped"),
                           F.sum("store_keys").alias("store_keys"),
                           F.count("copies_in").alias("tasks"),
                           F.sum("stores").alias("stores_opened"),
                           F.sum("stores_restored").alias("stores_restored"),
                           F.sum("writes_restored").alias("writes_restored"),
                           F.sum("records_written").alias("records_written"),
                           F.collect_list("stats").alias("stats"))
            .where(F.col("topic").isNotNull()).select("topic", "key", "value"))

