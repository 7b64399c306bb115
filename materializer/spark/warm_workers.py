"""Start the executors' Python workers while the driver sets the query up.

A micro-batch's Python runs in PySpark's workers, which an executor forks from its Python
daemon the first time a task needs one and then keeps for the next tasks
(`spark.python.worker.reuse`, on by default). Without a warm-up, the query's first
micro-batch with input pays for all of it: the daemon's start, a fork per task slot, and in
each worker the import of pyarrow, pandas and casscade's merge with its clients (Spark's
event log of a new job's first micro-batch: 0.9 s to start and 1.3 s to initialise a worker
on an idle 2-core machine, 3 s and 10 s with three Cassandra nodes busy on the same cores).

`start` runs a small job of the query's own kind (a mapInArrow over one row per task slot)
in a thread of its own as the query starts (`materializer.spark.job.start`, so a restart
after a failure runs it again and finds the workers still running), while the driver reads
the raw topic's partitions, makes the event topics and plans the query. The job starts
each executor's daemon, which loads the merge's modules before it forks a worker
(`preload`), and a worker per slot. The workers it leaves idle have the same pool key as
the query's (the same Python, worker and daemon modules and environment: a DataFrame's
Python function, not an RDD's), so the first micro-batch's tasks take them; a task that
finds none idle (its slot freed a moment before the worker went back to the pool) has the
daemon fork one, loaded already. On a cluster, the slots are those of the executors
registered when it runs (at least 2): executors that register later start their workers
in the first batch.

A failure here changes nothing but the first batch's time: it is logged at DEBUG and the
query starts its workers itself, as it would without the warm-up.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)
THREAD_NAME = "casscade-warm-python-workers"
DESCRIPTION = "casscade: start the Python workers"


def preload() -> None:
    """Import what a merge task needs (the merge and its clients, pyarrow, pandas), so that
    a worker forked from this process starts with it (PySpark's daemon, which forks them,
    calls this before its first fork: `materializer.spark.pyspark_daemon`)."""
    import pyarrow as pa

    import materializer.spark.partition_job  # noqa: F401

    # pyarrow imports pandas at the first array it builds from Python objects, as the
    # task's output does (0.2-0.3 s on an idle core)
    pa.array([0], pa.int64())


def ready(batches: Iterator[Any]) -> Iterator[Any]:
    """The warm-up's mapInArrow function: what the merge task needs loaded (preload; done
    already in a worker forked from a daemon that preloaded it), the rows passed through."""
    preload()
    yield from batches


def _run(spark: SparkSession, slots: int) -> None:
    try:
        # (a local property of this thread: what Spark's UI and event log call the job)
        spark.sparkContext.setJobDescription(DESCRIPTION)
        spark.range(0, slots, 1, slots).mapInArrow(ready, "id long").collect()
        log.debug("Python workers started", extra={"tasks": slots})
    except Exception as exc:  # noqa: BLE001  (Spark stopping, an executor lost: no harm)
        log.debug("Python workers' warm-up did not finish", extra={"error": str(exc)[:300]})


def start(spark: SparkSession) -> threading.Thread:
    """Start the Python workers of every task slot Spark knows of now, in the background:
    the thread, which ends with the warm-up job."""
    slots = max(1, spark.sparkContext.defaultParallelism)
    thread = threading.Thread(target=_run, args=(spark, slots), name=THREAD_NAME,
                              daemon=True)
    thread.start()
    return thread
