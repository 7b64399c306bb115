"""What the job's state holds: partitions, row pages and bytes per raw topic; the widest.

Read through Spark's state data source (`format("statestore")`, the MapStates "partitions"
and "pages"), from the checkpoint's last committed micro-batch.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def state_report(spark: SparkSession, checkpoint: Path, top: int = 5) -> dict[str, Any]:
    """Per raw topic: partitions, row pages, state bytes; and the `top` partitions with the
    most pages (partition key in hex)."""
    from pyspark.sql import functions as F

    if not (checkpoint / "state").is_dir():
        raise FileNotFoundError(f"{checkpoint}: no state directory (not a materializer "
                                f"checkpoint, or no micro-batch committed yet)")
    spark.streams.active  # noqa: B018  creates the state store coordinator the reader needs
    zero = F.lit(0).cast("long")
    parts = (_entries(spark, checkpoint, "partitions")
             .select("topic", "pk", F.col("bytes").alias("entry_bytes"),
                     zero.alias("pages"), zero.alias("page_bytes")))
    pages = (_entries(spark, checkpoint, "pages").groupBy("topic", "pk")
             .agg(F.count("*").alias("pages"), F.sum("bytes").alias("page_bytes"))
             .select("topic", "pk", zero.alias("entry_bytes"), "pages", "page_bytes"))
    per_key = (parts.unionByName(pages).groupBy("topic", "pk")
               .agg(F.sum("pages").alias("pages"),
                    (F.sum("entry_bytes") + F.sum("page_bytes")).alias("bytes")).cache())
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


def _entries(spark: SparkSession, checkpoint: Path, name: str) -> DataFrame:
    from pyspark.sql import functions as F

    return (spark.read.format("statestore").option("path", str(checkpoint))
            .option("stateVarName", name).load()
            .select(F.col("key.topic").alias("topic"), F.col("user_map_key.pk").alias("pk"),
                    F.length("user_map_value.blob").cast("long").alias("bytes")))
