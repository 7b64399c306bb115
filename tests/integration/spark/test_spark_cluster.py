"""The local Spark standalone cluster (`stack spark ...`): a job runs on both workers; a
worker killed with SIGKILL shows as down, and `start` brings it back."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from devstack import spark_cluster as cluster
from devstack.process import pid_alive, read_pid
from devstack.settings import StackSettings, repo_root

pytestmark = pytest.mark.integration

# The driver runs in a process of its own (as a real submit does), so this pytest process
# never holds a SparkContext bound to the cluster. Each task reports the executor JVM it ran
# in (its Python worker's parent is pyspark.daemon, whose parent is the executor) and that
# JVM's parent, the worker that launched it.
JOB = r"""
import json, os, sys, time
from pyspark.sql import SparkSession

builder = (SparkSession.builder.master(sys.argv[1]).appName("casscade-cluster-check")
           .config("spark.driver.host", "127.0.0.1")
           .config("spark.driver.bindAddress", "127.0.0.1").config("spark.ui.enabled", "false"))
if len(sys.argv) > 2:  # a packed environment: the executors unpack it and run its python
    builder = builder.config("spark.archives", sys.argv[2] + "#environment")
spark = builder.getOrCreate()
sc = spark.sparkContext
deadline = time.monotonic() + 120
while sc._jsc.sc().getExecutorMemoryStatus().size() < 3 and time.monotonic() < deadline:
    time.sleep(0.5)  # the driver's block manager + one per executor

def part(rows):
    def ppid(pid):
        return int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])
    time.sleep(0.3)  # long enough that both executors get tasks
    executor = ppid(os.getppid())
    from shared.rowupdate_reader import COMPILED
    return [(executor, ppid(executor), sys.executable, sum(rows), COMPILED)]

out = sc.parallelize(range(1, 100_001), 8).mapPartitions(part).collect()
print("RESULT " + json.dumps({"sum": sum(r[3] for r in out),
                              "executors": sorted({r[0] for r in out}),
                              "workers": sorted({r[1] for r in out}),
                              "pythons": sorted({r[2] for r in out}),
                              "compiled": sorted({r[4] for r in out})}))
spark.stop()
"""


def _run_job(s: StackSettings, packed: Path | None = None) -> dict:
    """JOB on the cluster; `packed`: its executors run that packed environment's python."""
    env = {"SPARK_LOCAL_IP": "127.0.0.1",
           "PYSPARK_PYTHON": "./environment/bin/python" if packed else sys.executable}
    out = subprocess.run([sys.executable, "-c", JOB, cluster.master_url(s),
                          *([str(packed)] if packed else [])], cwd=repo_root(),
                         env={**os.environ, **env}, capture_output=True,
                         text=True, timeout=300, start_new_session=True)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-4000:]
    return json.loads(out.stdout.split("RESULT ", 1)[1].splitlines()[0])


def _worker_pids(s: StackSettings) -> set[int | None]:
    return {read_pid(cluster.pid_file(s, f"worker-{n}")) for n in (1, 2)}


def _status_cli() -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c",
                           "from devstack.spark_cli import spark; spark()", "status"],
                          cwd=repo_root(), capture_output=True, text=True, timeout=60)


def test_job_runs_tasks_on_both_workers(spark_cluster: StackSettings) -> None:
    result = _run_job(spark_cluster)
    assert result["sum"] == 100_000 * 100_001 // 2
    assert len(result["executors"]) == 2, result
    # each executor JVM is a child of one of our two workers: one executor per worker
    assert set(result["workers"]) == _worker_pids(spark_cluster)
    assert result["pythons"] == [sys.executable]  # the venv's python ran the tasks


def test_packed_environment_runs_the_executors(spark_cluster: StackSettings,
                                               packed_env: Path) -> None:
    """With `submit.sh --build-env`'s archive the executors' Python workers run the
    archive's interpreter, unpacked in each executor's directory, not this checkout's venv,
    and read RowUpdates with the compiled reader it carries."""
    result = _run_job(spark_cluster, packed_env)
    assert result["sum"] == 100_000 * 100_001 // 2 and len(result["executors"]) == 2, result
    work = cluster.worker_dir(spark_cluster, 1).parent
    assert all(p.startswith(str(work)) and p.endswith("/environment/bin/python")
               for p in result["pythons"]), (result["pythons"], work)
    assert result["compiled"] == [True], result


def test_killed_worker_is_down_and_start_brings_it_back(spark_cluster: StackSettings) -> None:
    s = spark_cluster
    status = _status_cli()
    assert status.returncode == 0, status.stdout
    old = read_pid(cluster.pid_file(s, "worker-2"))
    try:
        assert cluster.kill_worker(s, 2)
        assert old is not None and not pid_alive(old)
        rows = dict(cluster.status(s))
        assert rows["worker 2"].startswith("stopped"), rows
        assert rows["worker 1"].startswith("running") and rows["master"].startswith("running")
        status = _status_cli()
        assert status.returncode == 3, status.stdout
        assert "worker 2   stopped" in status.stdout
    finally:
        cluster.start_worker(s, 2)  # waits until the master lists it ALIVE
    rows = dict(cluster.status(s))
    assert rows["worker 2"].startswith("running"), rows
    assert read_pid(cluster.pid_file(s, "worker-2")) != old
    assert _status_cli().returncode == 0
    states = cluster.worker_states(cluster.master_json(cluster.ClusterConfig.from_env()),
                                   cluster.ClusterConfig.from_env(), 2)
    assert states[2][0] == "ALIVE"
    # and the restarted worker takes work again
    result = _run_job(s)
    assert len(result["executors"]) == 2 and set(result["workers"]) == _worker_pids(s)
