"""A local PySpark session wired to the spark-sql-kafka jars resolved from Maven Central."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

from shared.devstack import artifacts
from shared.devstack.settings import StackSettings

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_VERSIONED = re.compile(r"^(?P<name>.+?)-\d[\w.\-]*\.jar$")


def _artifact_name(jar: Path) -> str:
    match = _VERSIONED.match(jar.name)
    return match.group("name") if match else jar.stem


def kafka_connector_jars(s: StackSettings) -> list[Path]:
    """spark-sql-kafka and the runtime jars it needs that the pyspark wheel lacks.

    Jars the wheel already ships (scala-library, hadoop-client, lz4, ...) are left out so
    the driver never sees two versions of one library.
    """
    import pyspark

    bundled = {_artifact_name(j) for j in (Path(pyspark.__file__).parent / "jars").glob("*.jar")}
    lib = artifacts.fetch(s.lib_dir, "spark-kafka", log=lambda _msg: None)
    jars = [j for j in sorted(lib.glob("*.jar")) if _artifact_name(j) not in bundled]
    if not any(j.name.startswith("spark-sql-kafka") for j in jars):
        raise RuntimeError(f"spark-sql-kafka jar missing from {lib}")
    return jars


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
