"""One Spark query over what a prefix's raw topic holds, in a process of its own: the job
(partition stores) or a floor of jvm_floors, availableNow, and the figures Spark reports.

Read here: BENCH_MASTER, a cluster's master (spark://...) instead of local[cores], a run's
cores then its executors' cores. Read by the query's process (RUN): BENCH_FORMAT (through
raw_workload), BENCH_DRIVER_JIT (spark.driver_jit: tiered to compare with the default
c1), BENCH_EXTRA_CP (local mode: a jar for the driver's class path, which is the
executor's), BENCH_SPARK_CONF (spark.conf entries to try, name=value;name=value) and
BENCH_KAFKA_TUNED (the Kafka client settings of a query named with "+kafka":
comma-separated c:name=value for the source's consumer, p:name=value for the sink's
producer). A query named with "+alo" is the job with `events.delivery: at-least-once`
(Spark's Kafka sink); without, the job's default, exactly-once.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from devstack.settings import StackSettings

CLUSTER = os.environ.get("BENCH_MASTER")

RUN = r"""
import json, os, sys, time
from pathlib import Path
from materializer.spark import job
from materializer.settings import MaterializerConfig
from raw_workload import FORMAT
api, cores, master, bootstrap, prefix, ckpt, per_batch = sys.argv[1:8]
page_rows = int(sys.argv[8]) if len(sys.argv) > 8 else None
cfg = MaterializerConfig()
if page_rows is not None:
    cfg.spark.state_page_rows = page_rows
cfg.kafka.bootstrap_servers, cfg.kafka.topic_prefix = bootstrap, prefix
cfg.kafka.max_offsets_per_trigger = int(per_batch)
cfg.spark.master = master  # BENCH_MASTER's cluster (`cores` then its executors'), or local
cfg.spark.checkpoint = ckpt
cfg.spark.driver_memory = "2g"
if api.startswith("jvm-floor"):  # its shuffle and state store, which the job no longer sets
    cfg.spark.conf.update({
        "spark.sql.shuffle.partitions": cores,
        "spark.sql.streaming.stateStore.providerClass":
            "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
        "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true"})
if os.environ.get("BENCH_DRIVER_JIT"):
    cfg.spark.driver_jit = os.environ["BENCH_DRIVER_JIT"]
if os.environ.get("BENCH_DEDUPE_S"):
    cfg.spark.dedupe_window_s = int(os.environ["BENCH_DEDUPE_S"])
cfg.events.format = FORMAT  # the events' encoding
if os.environ.get("BENCH_EVENT_PARTITIONS"):
    cfg.events.partitions = int(os.environ["BENCH_EVENT_PARTITIONS"])
if os.environ.get("BENCH_EXTRA_CP"):  # local mode: the driver's class path is the executor's
    cfg.spark.conf["spark.driver.extraClassPath"] = os.environ["BENCH_EXTRA_CP"]
for item in filter(None, os.environ.get("BENCH_SPARK_CONF", "").split(";")):
    name, value = item.split("=", 1)  # spark.conf entries to try, name=value;name=value
    cfg.spark.conf[name] = value
if "+kafka" in api:  # the Kafka client settings of BENCH_KAFKA_TUNED (c:name=v,p:name=v)
    api = api.replace("+kafka", "")
    for item in filter(None, os.environ.get("BENCH_KAFKA_TUNED", "").split(",")):
        side, setting = item.split(":", 1)
        name, value = setting.split("=", 1)
        (cfg.kafka.consumer if side == "c" else cfg.kafka.producer)[name] = value
if "+alo" in api:  # the job with events.delivery: at-least-once (Spark's Kafka sink)
    api = api.replace("+alo", "")
    cfg.events.delivery = "at-least-once"
if api != "partition" and "floor" not in api:
    sys.exit(f"unknown query {api!r}: partition or a floor of jvm_floors")
spark = job.session(cfg, available_now=True)
spark.sparkContext.setLogLevel("ERROR")
barrier = None  # the job's truncate barrier writer (nothing is truncated here)
if api == "partition":
    query, barrier = job.start(spark, cfg, available_now=True)
else:
    from jvm_floors import start_floor
    query = start_floor(spark, cfg, api)
query.awaitTermination()
if barrier is not None:
    barrier.close()
assert query.exception() is None, query.exception()
from cpu_use import python_workers_cpu_s  # before the stop: the workers go with it
print(f"PYCPU {python_workers_cpu_s()}")
done = [p for p in query.recentProgress if p["numInputRows"]]
print("OBSERVED " + json.dumps([{k: v.asDict() for k, v in (p.observedMetrics or {}).items()}
                                for p in done]))
print("PROGRESS " + json.dumps([(p["numInputRows"], p["durationMs"].get("triggerExecution", 0))
                                for p in done]))
print("DETAIL " + json.dumps([{"durationMs": p["durationMs"], "operators": [
    {k: o.get(k) for k in ("operatorName", "numRowsTotal", "numRowsUpdated", "numRowsRemoved",
                           "allUpdatesTimeMs", "allRemovalsTimeMs", "commitTimeMs",
                           "memoryUsedBytes", "numRowsDroppedByWatermark", "customMetrics")}
    for o in p.get("stateOperators", [])],
    "sources": [{k: s.get(k) for k in ("startOffset", "endOffset")}
                for s in p.get("sources", [])]} for p in done]))
spark.stop()
"""


def spark_master(cores: int) -> str:
    """The master of a run on `cores` cores: BENCH_MASTER's cluster, else local[cores]."""
    return CLUSTER or f"local[{cores}]"


def run_job(stack: StackSettings, api: str, cores: int, prefix: str, ckpt: Path,
            per_batch: int, *extra: str, dedupe_s: int | None = None,
            details: list[dict] | None = None, observed: list[dict] | None = None,
            master: str | None = None,
            python_cpu: list[float] | None = None,
            event_partitions: int | None = None) -> list[tuple[int, int]]:
    """Query `api` (RUN: the job or a floor) over what the raw topic holds now: (rows, ms)
    of each non-empty batch; `extra`: the state's page rows (spark.state_page_rows);
    `dedupe_s`: spark.dedupe_window_s (default: the job's own);
    `details` gets each such batch's durations (ms) and state operators' metrics (only
    jvm-floor has any) from Spark's progress report, `observed` its observed metrics,
    `python_cpu` the CPU seconds its Python workers used over the run (start included);
    `master`: a cluster's (default: spark_master(cores)); `event_partitions`: the event
    topics' (events.partitions; default: the job's own)."""
    here = Path(__file__).parent
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(here), os.getcwd()]),
               BENCH_DEDUPE_S="" if dedupe_s is None else str(dedupe_s),
               BENCH_EVENT_PARTITIONS="" if event_partitions is None else str(event_partitions))
    out = subprocess.run([sys.executable, "-c", RUN, api, str(cores),
                          master or spark_master(cores), stack.bootstrap_servers, prefix,
                          str(ckpt), str(per_batch), *extra],
                         env=env, capture_output=True, text=True, timeout=1800)
    if out.returncode != 0:  # the first error (what failed) and the end (how it ended)
        first = min((i for i in (out.stderr.find("Traceback"), out.stderr.find(" ERROR "))
                     if i >= 0), default=0)
        raise AssertionError(f"{out.stderr[first:first + 4000]}\n...\n{out.stderr[-2000:]}")
    if details is not None:
        details.extend(json.loads(out.stdout.split("DETAIL ", 1)[1].splitlines()[0]))
    if observed is not None:  # each such batch's observed metrics (the partition stores')
        observed.extend(json.loads(out.stdout.split("OBSERVED ", 1)[1].splitlines()[0]))
    if python_cpu is not None:
        python_cpu.append(float(out.stdout.split("PYCPU ", 1)[1].splitlines()[0]))
    return json.loads(out.stdout.split("PROGRESS ", 1)[1].splitlines()[0])


def breakdown(batches: list[dict], cores: int, changes: float) -> str:
    """Where the steady batches' time went, from Spark's progress reports (run_job's
    `details`): wall time per phase and state operator, and core time per logical change
    (wall x cores / changes)."""
    def total(get: Callable[[dict], float | None]) -> float:
        return sum(get(b) or 0 for b in batches)

    trigger = total(lambda b: b["durationMs"].get("triggerExecution"))
    add = total(lambda b: b["durationMs"].get("addBatch"))
    parts = [f"triggerExecution {trigger / 1000:.1f}s", f"addBatch {add / 1000:.1f}s",
             f"outside addBatch {(trigger - add) / 1000:.1f}s"]
    names = [o["operatorName"] for o in batches[0]["operators"]] if batches else []
    for i, name in enumerate(names):
        upd = total(lambda b, i=i: b["operators"][i]["allUpdatesTimeMs"])
        rem = total(lambda b, i=i: b["operators"][i]["allRemovalsTimeMs"])
        com = total(lambda b, i=i: b["operators"][i]["commitTimeMs"])
        rows = batches[-1]["operators"][i]["numRowsTotal"]
        parts.append(f"{name}: updates {upd / 1000:.1f}s, removals {rem / 1000:.1f}s, "
                     f"commit {com / 1000:.1f}s, {rows:,} state rows")
    per_change = trigger * 1000 * cores / changes if changes else 0.0
    return f"  breakdown: {'; '.join(parts)}; {per_change:,.0f} us of core time per change"


def transactions_line(stats: list[str] | None) -> str:
    """A micro-batch's transactions as its tasks reported them (`TaskStats.txn`, in the
    job's observed metrics): producers initialised, and the commits their Python workers
    made since their last report (each worker's commits come in its next task's report)."""
    made, init_s, commits, commit_s, topics = [0.0] * 5
    for line in stats or ():
        txn = json.loads(line).get("txn") or [0] * 5
        made, init_s, commits = made + txn[0], init_s + txn[1], commits + txn[2]
        commit_s, topics = commit_s + txn[3], topics + txn[4]
    text = f", {made:.0f} producers initialised ({init_s:.2f}s)" if made else ""
    if commits:
        text += (f", {commits:.0f} earlier commits of {commit_s / commits * 1000:.0f} ms "
                 f"and {topics / commits:.0f} topics each")
    return text
