"""The job starts its Python workers while the driver sets the query up
(`materializer.spark.warm_workers`): the first micro-batch's tasks take workers that are
already running, or have the running daemon fork one, instead of starting Python.

Read from Spark's own event log: a task reports its "time to start Python workers" (none
when it took an idle worker from the pool). The same job's log also shows the driver JVM's
Java options: the JIT's first tier only, spark.driver_jit's default.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from devstack.settings import StackSettings
from materializer.spark.warm_workers import DESCRIPTION

from support.materializer_harness import (
    inserted_rows,
    kill_group,
    materializer_command,
    publish_inserts,
    start_materializer,
)

pytestmark = pytest.mark.integration
BOOT = "time to start Python workers"
RUN = "time to run Python workers"
ROWS = 200


def _python_tasks(events_dir: Path) -> tuple[list[dict[str, int]], list[dict[str, int]]]:
    """The Python timings (name → ms) of each task that ran Python: the streaming query's
    tasks, and the warm-up's."""
    stages: dict[int, str] = {}  # stage → "query" or "warm-up"
    tasks: dict[str, list[dict[str, int]]] = {"query": [], "warm-up": []}
    for event in _events(events_dir):
        if event["Event"] == "SparkListenerJobStart":
            props = event.get("Properties") or {}
            kind = ("query" if "sql.streaming.queryId" in props else "warm-up"
                    if props.get("spark.job.description") == DESCRIPTION else None)
            if kind:
                stages.update(dict.fromkeys(event["Stage IDs"], kind))
        elif event["Event"] == "SparkListenerTaskEnd" and event["Stage ID"] in stages:
            times = {a["Name"]: int(a.get("Update", 0))
                     for a in event["Task Info"].get("Accumulables", [])
                     if "Python workers" in a.get("Name", "")}
            if RUN in times:
                tasks[stages[event["Stage ID"]]].append(times)
    return tasks["query"], tasks["warm-up"]


@pytest.fixture(scope="module")
def events_dir(stack: StackSettings, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Spark's event log of a new job, with its defaults, over ROWS inserts."""
    tmp_path = tmp_path_factory.mktemp("warm-workers")
    prefix = f"warm{uuid.uuid4().hex[:6]}"
    publish_inserts(stack.bootstrap_servers, prefix,
                    {0: range(0, ROWS, 2), 1: range(1, ROWS, 2)})
    events = tmp_path / "spark-events"
    events.mkdir()
    log = tmp_path / "job.log"
    job = start_materializer(materializer_command(
        stack, prefix, tmp_path / "checkpoint",
        "spark.conf.spark.eventLog.enabled=true",
        f"spark.conf.spark.eventLog.dir={events.as_uri()}",
        "spark.conf.spark.eventLog.compress=false"), log)
    try:
        assert job.wait(300) == 0, log.read_text()[-4000:]
    finally:
        kill_group(job)
    assert len(inserted_rows(stack.bootstrap_servers, prefix)) == ROWS
    return events


def _events(events_dir: Path) -> list[dict]:
    logs = list(events_dir.rglob("events_*"))  # (Spark 4's rolling log: a directory)
    assert logs, f"no Spark event log under {events_dir}"
    return [json.loads(line) for log in logs for line in log.read_text().splitlines()]


def test_the_driver_jvm_compiles_with_the_first_tier_only(events_dir: Path) -> None:
    env = next(e for e in _events(events_dir) if e["Event"] == "SparkListenerEnvironmentUpdate")
    options = env["Spark Properties"].get("spark.driver.extraJavaOptions", "")
    # (Spark puts its own options first; of a repeated flag the JVM takes the last)
    tiers = [o for o in options.split() if o.startswith("-XX:TieredStopAtLevel=")]
    assert tiers[-1:] == ["-XX:TieredStopAtLevel=1"], options


def test_the_first_micro_batch_takes_workers_started_before_it(events_dir: Path) -> None:
    query, warm_up = _python_tasks(events_dir)
    assert warm_up and all(t.get(BOOT, 0) > 0 for t in warm_up), \
        f"the warm-up's tasks did not start Python workers: {warm_up}"
    assert query, "no task of the query ran Python"
    # a task that takes an idle worker reports no start; one that finds none idle (its
    # slot freed a moment before the warm-up's worker went back to the pool) has the
    # running daemon fork one: a fraction of starting the daemon, which the warm-up paid
    daemon_start = min(t[BOOT] for t in warm_up)
    assert [t for t in query if t.get(BOOT, 0) >= daemon_start / 2] == [], \
        f"a task of the query started Python as if nothing ran (the warm-up's: {warm_up}): " \
        f"{query}"
