"""The PySpark internals the job reaches, in one place: PySpark has no public API for them.

- The driver JVM's Hadoop file systems (`SparkContext._jvm`, `SparkContext._jsc`): the job
  reads and writes its records in the checkpoint through them, resolved as Spark resolves
  the checkpoint (`materializer.spark.checkpoint_files`).
- The driver JVM's process (`SparkContext._gateway.proc`): a run that writes the class
  archive closes the JVM's stdin and waits for it to exit
  (`materializer.spark.class_archive`).

`tests/unit/materializer/spark/test_pyspark_internals.py` fails when the installed PySpark
no longer has these symbols; without the process the class archive is not written (a
WARNING says so), and without the JVM handles a checkpoint file cannot be read
(CheckpointFileError).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import subprocess

    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)


def hadoop(spark: SparkSession) -> tuple[Any, Any]:
    """The driver's py4j JVM view and Spark's Hadoop Configuration (the one Spark resolves
    file systems with)."""
    context = spark.sparkContext
    return context._jvm, context._jsc.hadoopConfiguration()


def driver_process() -> subprocess.Popen | None:
    """The driver JVM's process when this Python started it (PySpark's gateway keeps it),
    else None with a WARNING: a JVM spark-submit started, or a PySpark without the field."""
    from pyspark import SparkContext

    proc = getattr(SparkContext._gateway, "proc", None)
    if proc is None:
        log.warning("the driver JVM's process is not reachable through PySpark's gateway "
                    "(SparkContext._gateway.proc): the class archive is not written")
    return proc
