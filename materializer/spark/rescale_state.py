"""The Spark side of a rescale: the old checkpoint's state as transformWithState's initial
state, and the one-off query that seeds a new checkpoint with it.

PySpark 4.2.0 (checked in its sources and jar): `transformWithState(..., initialState=)`
takes a GroupedData keyed like the input; in micro-batch 0 only (IncrementalExecution sets
hasInitialState for batch 0) every initial-state row of a partition is handed to
`StatefulProcessor.handleInitialState` before any input row of that partition
(TransformWithStateInPySparkExec sends the initial-state groups first), so a bucket's state
is complete before its first new records are merged. Later batches and restarts ignore it.

The state is read with the state data source (format "statestore") at the old checkpoint's
last committed batch: the MapStates "partitions", "pages", "expiries", the ValueState
"bucket_timer" and the registered processing-time timers (option readRegisteredTimers), so
every timer the old job would fire, the new one fires.
"""

from __future__ import annotations

import json
import logging
import re
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from materializer.rescale import (
    OldCheckpoint,
    RescaleRefused,
    last_commit,
    lost_partitions,
    starting_offsets,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, GroupedData, SparkSession

    from materializer.settings import MaterializerConfig

log = logging.getLogger(__name__)
TIMERS = "$procTimers_keyToTimestamp"  # how the state metadata names processing-time timers
KINDS = ("partitions", "pages", "expiries", "bucket_timer", "timers")
# Initial-state rows carry many entries each, written with one pipelined call: a row per
# entry would cost a state-server round trip per entry (~0.1 ms). A bucket's entries of one
# kind are spread over this many rows, which bounds a row's size for big states.
CHUNKS = 64
ITEM = "pk BINARY, page LONG, blob BINARY, hash STRING, at LONG"


def _read(spark: SparkSession, old: OldCheckpoint, **options: str) -> DataFrame:
    reader = (spark.read.format("statestore").option("path", str(old.path))
              .option("batchId", str(old.batch)).option("operatorId", "0"))
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def state_variables(spark: SparkSession, old: OldCheckpoint) -> set[str]:
    """The state variables operator 0 of the old checkpoint declares (a checkpoint from
    before row pages has no "pages", for example)."""
    rows = (spark.read.format("state-metadata").load(str(old.path))
            .where("operatorId = 0").collect())
    if not rows:
        raise RescaleRefused(f"{old.path}: no state metadata for operator 0 (written by a "
                             f"Spark before 4.0?)")
    props = json.loads(rows[0]["operatorProperties"])
    return {v["stateName"] for v in props.get("stateVariables", [])}


def _items(spark: SparkSession, old: OldCheckpoint, kind: str) -> DataFrame:
    """One kind of state as rows (topic, bucket, kind, item) with item of type ITEM."""
    from pyspark.sql import functions as F

    def null(t: str) -> Any:
        return F.lit(None).cast(t)

    if kind == "partitions":
        df = _read(spark, old, stateVarName=kind)
        item = (F.col("user_map_key.pk"), null("long"), F.col("user_map_value.blob"),
                F.col("user_map_value.schema_hash"), F.col("user_map_value.timer_ms"))
    elif kind == "pages":
        df = _read(spark, old, stateVarName=kind)
        item = (F.col("user_map_key.pk"), F.col("user_map_key.page"),
                F.col("user_map_value.blob"), null("string"), null("long"))
    elif kind == "expiries":
        df = _read(spark, old, stateVarName=kind)
        item = (null("binary"), null("long"), F.col("user_map_value.pks"), null("string"),
                F.col("user_map_key.at_ms"))
    elif kind == "bucket_timer":
        df = _read(spark, old, stateVarName=kind)
        item = (null("binary"), null("long"), null("binary"), null("string"),
                F.col("value.timer_ms"))
    else:
        df = _read(spark, old, readRegisteredTimers="true")
        item = (null("binary"), null("long"), null("binary"), null("string"),
                F.col("expiration_timestamp_ms"))
    names = [f.split()[0] for f in ITEM.split(", ")]
    return df.select(F.col("key.topic").alias("topic"), F.col("key.bucket").alias("bucket"),
                     F.lit(kind).alias("kind"),
                     F.struct(*[c.alias(n) for c, n in zip(item, names, strict=True)])
                     .alias("item"))


def old_state(spark: SparkSession, old: OldCheckpoint) -> DataFrame:
    """Every piece of the old state the processor keeps, one row per entry or timer."""
    present = state_variables(spark, old)
    wanted = [k for k in KINDS if (TIMERS if k == "timers" else k) in present]
    if "partitions" not in wanted:
        raise RescaleRefused(f"{old.path}: no MapState 'partitions' (not a materializer "
                             f"checkpoint of this state layout)")
    frames = [_items(spark, old, k) for k in wanted]
    out = frames[0]
    for df in frames[1:]:
        out = out.unionByName(df)
    return out


def initial_state(entries: DataFrame) -> GroupedData:
    """`old_state` rows packed CHUNKS to a bucket and kind, grouped like the job's input."""
    from pyspark.sql import functions as F

    chunk = F.pmod(F.xxhash64("item.pk", "item.page", "item.at"), F.lit(CHUNKS))
    return (entries.withColumn("chunk", chunk)
            .groupBy("topic", "bucket", "kind", "chunk")
            .agg(F.collect_list("item").alias("items"))
            .select("topic", "bucket", "kind", "items")
            .groupBy("topic", "bucket"))


def summary(entries: DataFrame, buckets: int) -> dict[str, int]:
    """Entries per kind, and how many partition entries sit in another bucket than
    pmod(xxhash64(key), `buckets`) puts them (not 0: the old job used other state_buckets)."""
    from pyspark.sql import functions as F

    from materializer.spark.processor import bucket_column

    wrong = (F.col("kind") == "partitions") & (
        bucket_column(F.col("item.pk"), buckets) != F.col("bucket"))
    rows = (entries.groupBy("kind")
            .agg(F.count("*").alias("n"), F.sum(F.when(wrong, 1).otherwise(0)).alias("bad"))
            .collect())
    out = {k: 0 for k in KINDS}
    out.update({r["kind"]: r["n"] for r in rows})
    out["misplaced"] = sum(r["bad"] for r in rows)
    return out


def kafka_partitions(bootstrap: str | Mapping[str, str], pattern: str,
                     timeout_s: float = 30) -> dict[str, int]:
    """Topic -> partition count of every topic the job's subscribePattern matches now."""
    from confluent_kafka.admin import AdminClient

    from shared.kafka_security import client_conf

    topics = AdminClient(client_conf(bootstrap)).list_topics(
        timeout=timeout_s).topics
    regex = re.compile(pattern)
    return {t: len(m.partitions) for t, m in topics.items() if regex.fullmatch(t)}


def seed(spark: SparkSession, cfg: MaterializerConfig, old: OldCheckpoint) -> dict[str, Any]:
    """Run the job once (availableNow) on the new, empty checkpoint: batch 0 takes the old
    state and starts at the old committed offsets; then what Kafka holds is processed.
    Returns what was carried over. A run that failed before committing batch 0 removes the
    new checkpoint (it was empty: nothing of value is lost) so that it can be run again."""
    from materializer.spark import job

    new = Path(cfg.spark.checkpoint)
    spark.streams.active  # noqa: B018  creates the state store coordinator the reader needs
    entries = old_state(spark, old)
    counts = summary(entries, cfg.spark.state_buckets)
    if counts["misplaced"]:
        raise RescaleRefused(
            f"{counts['misplaced']} of {counts['partitions']} state entries sit in another "
            f"bucket than spark.state_buckets={cfg.spark.state_buckets} puts them: use the "
            f"old job's state_buckets (it is fixed for the life of the state)")
    current = kafka_partitions(cfg.kafka.client(),
                               job.raw_topic_pattern(cfg.kafka.topic_prefix))
    start = starting_offsets(old.offsets, current)
    lost = lost_partitions(old.offsets, current)
    if lost:
        log.warning("raw topic partitions the old job read are gone from Kafka",
                    extra={"partitions": lost})
    cfg.kafka.starting_offsets = json.dumps(start)
    log.info("seeding the new checkpoint", extra={
        "old_checkpoint": str(old.path), "old_batch": old.batch,
        "old_partitions": old.partitions, "new_checkpoint": str(new),
        "new_partitions": cfg.spark.shuffle_partitions, **counts})
    try:
        query = job.start(spark, cfg, available_now=True, initial_state=initial_state(entries))
        query.awaitTermination()
        error = query.exception()
        if error is not None:
            raise RuntimeError(str(error))
    except BaseException:
        if last_commit(new) is None and new.exists():
            shutil.rmtree(new)  # batch 0 never committed: the seed did not happen
            log.warning("removed the new checkpoint: its first micro-batch did not commit",
                        extra={"checkpoint": str(new)})
        raise
    if last_commit(new) is None:
        raise RuntimeError(f"{new}: the seeding run committed no micro-batch")
    if last_commit(old.path) != old.batch:
        raise RescaleRefused(
            f"{old.path} committed micro-batch {last_commit(old.path)} while the rescale ran "
            f"(it read {old.batch}): the old job is still running. Stop it, remove {new} and "
            f"rescale again")
    return {"old_checkpoint": str(old.path), "old_batch": old.batch,
            "old_partitions": old.partitions, "new_checkpoint": str(new),
            "new_partitions": cfg.spark.shuffle_partitions,
            "new_batches": last_commit(new) + 1, "carried": counts,
            "starting_offsets": start, "lost_partitions": lost}
