"""The PySpark internals the job reaches, in one place: PySpark has no public API for them.

- The driver JVM's Hadoop file systems (`SparkContext._jvm`, `SparkContext._jsc`): the job
  reads and writes its records in the checkpoint through them, resolved as Spark resolves
  the checkpoint (`materializer.spark.hadoop_files`).
- The driver JVM's process (`SparkContext._gateway.proc`): a run that writes the class
  archive closes the JVM's stdin and waits for it to exit
  (`materializer.spark.class_archive`).
- How PySpark starts the driver JVM (`pyspark.core.context.launch_gateway`): in a session
  of its own, so a terminal's Ctrl-C reaches only this process (`jvm_in_own_session`).
- Spark's internal setting of the class that writes the query's own checkpoint logs
  (offsets, commits, metadata): on a local checkpoint, its class on Hadoop's FileSystem
  API instead of the default on FileContext (`checkpoint_logs_through_file_system`).
- The Java query behind PySpark's `StreamingQuery` (`_jsq`): the job reads only the
  progress reports it has not seen (`progress_since`), where `recentProgress` renders and
  parses every report Spark keeps (100 by default) at each call, once a second.

`tests/unit/materializer/spark/test_pyspark_internals.py` fails when the installed PySpark
no longer has these symbols; without the process the class archive is not written (a
WARNING says so), without the JVM handles a checkpoint file cannot be read
(CheckpointFileError), and without the launcher Ctrl-C also interrupts the running tasks
(a WARNING says so; SIGTERM still stops cleanly), and without the class Spark refuses to
start the query, naming it; without the Java query every kept report is read, as
`recentProgress` does.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import subprocess

    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)
CHECKPOINT_FILE_MANAGER = "spark.sql.streaming.checkpointFileManagerClass"
FILE_SYSTEM_CHECKPOINT_FILES = ("org.apache.spark.sql.execution.streaming.checkpointing."
                                "FileSystemBasedCheckpointFileManager")


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


@contextmanager
def jvm_in_own_session() -> Iterator[None]:
    """While the SparkSession is made: PySpark starts the driver JVM in a session of its own.

    A terminal's Ctrl-C sends SIGINT to its whole foreground process group. PySpark's JVM
    ignores it, but the Python workers it forks turn it into a KeyboardInterrupt in the
    middle of their task, and the micro-batch fails with their tracebacks. In a session of
    its own the JVM and its workers never see it; this process stops the query after its
    micro-batch instead. (The JVM still ends with this process: it exits when its stdin,
    a pipe from here, closes.)"""
    try:
        from pyspark.core import context
        original = context.launch_gateway
    except (ImportError, AttributeError):
        log.warning("PySpark's launch_gateway is not where it was (pyspark.core.context): "
                    "the driver JVM shares this terminal, and Ctrl-C also interrupts its "
                    "running tasks (SIGTERM still stops after the micro-batch)")
        yield
        return

    def launch(conf: Any = None, popen_kwargs: dict[str, Any] | None = None) -> Any:
        return original(conf, {**(popen_kwargs or {}), "start_new_session": True})

    context.launch_gateway = launch
    try:
        yield
    finally:
        context.launch_gateway = original


def checkpoint_logs_through_file_system(spark: SparkSession) -> None:
    """The queries started from now on write their checkpoint logs through Hadoop's
    FileSystem API (Spark's FileSystemBasedCheckpointFileManager).

    Spark's default goes through FileContext, which on the local file system, without
    Hadoop's native library (PySpark's install has none), forks a `readlink` process from
    the driver JVM for every status it takes of a file (about five a micro-batch), beside
    the `chmod` either API forks for a file it makes, each waiting for a core on a busy
    machine. (walCommit and commitOffsets took 50-64 ms a micro-batch on an idle machine,
    13-16 ms through FileSystem: docs/benchmarks.md "Latency and start-up".) A local rename
    is atomic through either, which is what the logs rely on."""
    spark.conf.set(CHECKPOINT_FILE_MANAGER, FILE_SYSTEM_CHECKPOINT_FILES)


def checkpoint_file_manager(spark: SparkSession) -> str | None:
    """The class the session's queries write their checkpoint logs with, None for Spark's
    own choice (FileContext where the file system has it)."""
    return spark.conf.get(CHECKPOINT_FILE_MANAGER, None)


def progress_since(query: Any, since: str) -> list[dict[str, Any]]:
    """The progress reports of `query` (PySpark's StreamingQuery) newer than `since` (a
    report's ISO-8601 UTC timestamp; "" for every one Spark keeps), oldest first, each as
    Spark's JSON form: only the new ones are rendered in the driver JVM and sent over."""
    jsq = getattr(query, "_jsq", None)
    if jsq is None:
        return [r for r in query.recentProgress if r.get("timestamp", "") > since]
    kept = jsq.recentProgress()  # the JVM's references, newest last
    new = []
    for i in range(len(kept) - 1, -1, -1):
        report = kept[i]
        if report.timestamp() <= since:
            break
        new.append(json.loads(report.json()))
    new.reverse()
    return new
