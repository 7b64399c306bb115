"""A local PySpark session wired to the spark-sql-kafka jars resolved from Maven Central."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from devstack import artifacts
from devstack.settings import StackSettings

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def kafka_connector_jars(s: StackSettings) -> list[Path]:
    """spark-sql-kafka and the runtime jars it needs that the pyspark wheel lacks (fetched
    from Maven Central into the stack's lib dir first if they are not there)."""
    from materializer.spark.connector_jars import connector_jars

    artifacts.fetch(s.lib_dir, "spark-kafka", log=lambda _msg: None)
    return connector_jars(s.lib_dir)


def local_session(s: StackSettings, app_name: str, cores: int = 2,
                  conf: dict[str, str] | None = None) -> SparkSession:
    """A `local[cores]` SparkSession bound to loopback with the Kafka connector on its path."""
    from pyspark.sql import SparkSession

    # Bind the driver and block manager to loopback, not the host's first interface.
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = (
        SparkSession.builder.master(f"local[{cores}]").appName(app_name)
        .config("spark.jars", ",".join(str(j) for j in kafka_connector_jars(s)))
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", str(max(1, cores)))
        .config("spark.sql.streaming.stateStore.providerClass",
                "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider")
        .config("spark.driver.memory", "1g")
    )
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    return builder.getOrCreate()
