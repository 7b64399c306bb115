"""Replica copies dropped in the JVM, before Python: the copy dedupe of the Spark query.

At RF=3 every change reaches the raw topics three times, and merging the second and third
copy changes nothing. Each raw value from format 2 on carries a copy digest, and from
format 3 a mutation id (`shared.rowupdate`); the query drops a record whose copy key (the
digest and the mutation id: the same content in another mutation is another record) it saw
within the window. The dedupe is a stateful
operator of the query, so whether a checkpoint has it is fixed when the checkpoint starts:
Spark refuses to add or remove a stateful operator on an existing checkpoint
(STREAMING_STATEFUL_OPERATOR_NOT_MATCH_IN_STATE_METADATA, seen here).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from materializer.spark import checkpoint_files
from shared.rowupdate import COPY_KEY_SIZE

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)
DEFAULT_WINDOW_S = 120
# the query's stateful operators are numbered from its sink: the key state is operator 0,
# the dedupe (below it) operator 1
DEDUPE_OPERATOR = 1


def effective_window(configured_s: int, started: bool, has_dedupe: bool) -> tuple[int, str | None]:
    """The window a query runs with (0: no dedupe) and a warning when that is not the
    configured one: a new checkpoint takes the setting; a started one keeps what it has."""
    if not started:
        return configured_s, None
    if has_dedupe and configured_s <= 0:
        return DEFAULT_WINDOW_S, (
            f"this checkpoint was started with the copy dedupe, which Spark cannot take out "
            f"of it: running with a {DEFAULT_WINDOW_S} s window (spark.dedupe_window_s=0 "
            f"applies to a new checkpoint)")
    if not has_dedupe and configured_s > 0:
        return 0, ("this checkpoint was started without the copy dedupe, which Spark cannot "
                   "add to it: every copy goes to Python, as before (a new checkpoint, e.g. "
                   "through `casscade materializer rescale`, has it)")
    return configured_s, None


def window_for(spark: SparkSession, checkpoint: object, configured_s: int) -> int:
    """The window for a query on `checkpoint` (any Hadoop file system), logged if it is not
    the configured one."""
    files = checkpoint_files.files(spark, str(checkpoint))
    started = files.exists("commits/0")
    window, warning = effective_window(configured_s, started,
                                       started and files.exists(f"state/{DEDUPE_OPERATOR}"))
    if warning:
        log.warning(warning, extra={"checkpoint": str(checkpoint),
                                    "dedupe_window_s": window})
    return window


def drop_copies(raw: DataFrame, window_s: int) -> DataFrame:
    """The raw records without the replicas' second and third copies of a write: a record
    whose copy key (`rowupdate.copy_key_of`: bytes 2-33 of a format-3 or -4 value, 2-17 of
    format 2) was seen in the last `window_s` seconds goes no further.

    The window runs on processing time (the micro-batch's clock, never the records' own
    timestamps), so no record is ever "late" to Spark and none is dropped for its age. A
    copy that comes after the window is merged as before, and changes nothing: the window
    trades dedupe state for Python work, never correctness. Format-1 records carry no
    digest and stand for themselves (their Kafka position is their key).
    """
    from pyspark.sql import functions as F

    value = F.col("value")
    own = F.concat(F.lit(b"\x00"), F.encode(F.concat_ws("/", "topic", "partition", "offset"),
                                            "UTF-8"))
    version = F.substring(value, 1, 1)
    key = own
    for v, size in COPY_KEY_SIZE.items():
        key = F.when(version == F.lit(bytes([v])), F.substring(value, 2, size)).otherwise(key)
    # the column keeps its first name: it is the dedupe state's key in existing checkpoints
    return (raw.withColumn("copy_digest", key)
            .withColumn("seen_at", F.current_timestamp())
            .withWatermark("seen_at", f"{window_s} seconds")
            .dropDuplicatesWithinWatermark(["copy_digest"]))
