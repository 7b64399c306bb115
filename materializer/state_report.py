"""What the job's state holds: partitions, pages and bytes per raw topic, widest partitions.

Read through Spark's state data source (`format("statestore")`, the MapState "partitions"),
from the checkpoint's last committed micro-batch.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from materializer.processor import HEAD

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def state_report(spark: SparkSession, checkpoint: Path, top: int = 5) -> dict[str, Any]:
    """Per raw topic: partitions, pages, state bytes; and the `top` partitions with most
    pages (hex partition key)."""
    from pyspark.sql import functions as F

    if not (checkpoint / "state").is_dir():
        raise FileNotFoundError(f"{checkpoint}: no state directory (not a materializer "
                                f"checkpoint, or no micro-batch committed yet)")
    spark.streams.active  # noqa: B018  creates the state store coordinator the reader needs
    entries = (spark.read.format("statestore").option("path", str(checkpoint))
               .option("stateVarName", "partitions").load()
               .select(F.col("key.topic").alias("topic"), F.col("user_map_key.pk").alias("pk"),
                       F.col("user_map_key.page").alias("page"),
                       F.length("user_map_value.blob").alias("bytes")))
    per_key = (entries.groupBy("topic", "pk")
               .agg(F.sum(F.when(F.col("page") != HEAD, 1).otherwise(0)).alias("pages"),
                    F.sum("bytes").alias("bytes")).cache())
    topics = {r["topic"]: {"partitions": r["partitions"], "pages": r["pages"],
                           "bytes": r["bytes"]}
              for r in per_key.groupBy("topic").agg(
                  F.count("*").alias("partitions"), F.sum("pages").alias("pages"),
                  F.sum("bytes").alias("bytes")).collect()}
    widest = [{"topic": r["topic"], "partition_key": bytes(r["pk"]).hex(),
               "pages": r["pages"], "bytes": r["bytes"]}
              for r in per_key.orderBy(F.desc("pages"), F.desc("bytes")).limit(top).collect()]
    per_key.unpersist()
    return {"checkpoint": str(checkpoint), "topics": topics, "widest": widest}
