"""Reading a query's progress reports in the driver, as the job does once a second: PySpark's
`recentProgress` (every report Spark keeps, 100 by default, each rendered to JSON in the
JVM, sent over py4j and parsed) against `pyspark_internals.progress_since` (the reports
newer than the last one seen, read from the newest back).

A local[1] query over Spark's rate-micro-batch source (10 rows a batch, an observed metric
with a list, as the job's tasks report theirs, a noop sink) runs with a 100-ms trigger
past 150 micro-batches (Spark then keeps its last 99 reports) and stops; then each way of
reading is timed over READS calls, each looking for the one report newer than the one
before it (the job's steady state: a micro-batch since the last read). Prints wall and
CPU ms per call: this process's and the driver JVM's (/proc).
"""

from __future__ import annotations

import os
import time

from cpu_use import process_cpu_s

from materializer.spark import pyspark_internals

READS = int(os.environ.get("PROGRESS_READS", "30"))


def test_bench_progress_reads() -> None:
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    spark = (SparkSession.builder.master("local[1]").appName("bench-progress")
             .config("spark.ui.enabled", "false")
             .config("spark.driver.bindAddress", "127.0.0.1")
             .config("spark.driver.host", "127.0.0.1").getOrCreate())
    jvm = pyspark_internals.driver_process()
    assert jvm is not None, "the driver JVM's process is not known"
    try:
        rows = spark.readStream.format("rate-micro-batch").option("rowsPerBatch", 10).load()
        observed = rows.observe("m", F.count("value").alias("n"),
                                F.collect_list(F.col("value").cast("string")).alias("stats"))
        query = (observed.writeStream.format("noop").trigger(processingTime="100 milliseconds")
                 .start())
        try:
            deadline = time.monotonic() + 180
            # past the buffer's size (Spark drops the oldest beyond it; it keeps 99 of the
            # default 100): read with lastProgress, which renders one report
            while (query.lastProgress or {}).get("batchId", -1) < 150:
                assert time.monotonic() < deadline, "under 150 micro-batches in 180 s"
                time.sleep(0.5)
        finally:
            query.stop()  # its reports stay; the JVM's CPU is then the reads' alone
        kept = query.recentProgress
        since = kept[-2]["timestamp"]  # one new report: the job's steady state
        print(f"\nreading the progress reports of a query that keeps {len(kept)}, one of "
              f"them new, {READS} reads:")
        for name in ("recentProgress", "progress_since"):
            here, there = process_cpu_s(os.getpid()), process_cpu_s(jvm.pid)
            started = time.perf_counter()
            for _ in range(READS):
                if name == "recentProgress":
                    reports = [r for r in query.recentProgress if r["timestamp"] > since]
                else:
                    reports = pyspark_internals.progress_since(query, since)
                assert [r["batchId"] for r in reports] == [kept[-1]["batchId"]]
            wall = time.perf_counter() - started
            cpu, jvm_cpu = (process_cpu_s(os.getpid()) - here,
                            process_cpu_s(jvm.pid) - there)
            print(f"  {name}: {1000 * wall / READS:.1f} ms a read; CPU "
                  f"{1000 * cpu / READS:.1f} ms in Python, {1000 * jvm_cpu / READS:.1f} ms "
                  "in the driver JVM")
    finally:
        spark.stop()
