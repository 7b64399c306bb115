"""deploy/systemd/casscade-materializer.service's ExecStart line, run as systemd runs it (its
WorkingDirectory, the install layout its header gives, mapped onto this machine) against
the stack's Spark standalone cluster in client mode, with the packed environment on the
executors; then stopped as the unit stops it (KillSignal to the main process alone,
KillMode=mixed): the driver ends within TimeoutStopSec, exit 0, no traceback, every event
written once. (A restart going on from its checkpoint, what Restart= relies on, is
tests/integration/materializer/test_clean_stops.py's.)"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import yaml

from devstack import spark_cluster as cluster
from devstack.settings import StackSettings
from devstack.spark import kafka_connector_jars

from support.materializer_harness import inserted_rows, kill_group, publish_inserts
from support.paths import ROOT
from support.services import wait_until
from support.systemd_units import exec_start, read_unit, working_directory

pytestmark = pytest.mark.integration

UNIT = ROOT / "deploy" / "systemd" / "casscade-materializer.service"
ROWS = 400


def _install(tmp_path: Path, broker: StackSettings, packed: Path, prefix: str) -> dict[str, str]:
    """The unit header's layout under tmp_path: /opt/casscade (venv: this interpreter's,
    environment -> venv, the packed environment, the connector jars) and the config."""
    opt = tmp_path / "opt-casscade"
    opt.mkdir()
    (opt / "venv").symlink_to(sys.prefix)
    (opt / "environment").symlink_to("venv")
    (opt / "casscade-env.tar.gz").symlink_to(packed)
    jars = opt / "jars"
    jars.mkdir()
    for jar in kafka_connector_jars(broker):
        (jars / jar.name).symlink_to(jar)
    config = tmp_path / "materializer.yaml"
    config.write_text(yaml.safe_dump({
        "kafka": {"bootstrap_servers": broker.bootstrap_servers, "topic_prefix": prefix},
        "spark": {"master": cluster.master_url(broker),
                  "checkpoint": str(tmp_path / "checkpoint"),
                  "kafka_jars": ",".join(str(j) for j in sorted(jars.iterdir())),
                  "conf": {"spark.archives": f"{opt / 'casscade-env.tar.gz'}#environment",
                           "spark.pyspark.python": "./environment/bin/python"}},
        "http": {"port": 0}, "log": {"format": "text"}}))
    return {"/opt/casscade": str(opt), "/etc/casscade/materializer.yaml": str(config)}


def _start(paths: dict[str, str], log: Path) -> subprocess.Popen:
    """ExecStart in WorkingDirectory with the unit's Environment= lines (systemd gives a
    service a bare environment: PATH and those)."""
    env = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/root")}
    env.update(line.split("=", 1) for line in read_unit(UNIT)["Service"].get("Environment", []))
    return subprocess.Popen(exec_start(UNIT, paths), cwd=working_directory(UNIT, paths),
                            env=env, stdout=log.open("ab"), stderr=subprocess.STDOUT,
                            start_new_session=True)


def _stop_as_systemd(proc: subprocess.Popen) -> int:
    """KillSignal to the main process alone (KillMode=mixed); its exit code, or the test
    fails once TimeoutStopSec passes (systemd would SIGKILL the rest then)."""
    service = {k: v[-1] for k, v in read_unit(UNIT)["Service"].items()}
    assert service["KillMode"] == "mixed"
    proc.send_signal(getattr(signal, service["KillSignal"]))
    return proc.wait(float(service["TimeoutStopSec"]))


def test_the_driver_unit_runs_on_the_cluster_and_stops_cleanly(
        broker: StackSettings, spark_cluster: StackSettings, packed_env: Path,
        tmp_path: Path) -> None:
    prefix = f"sd{uuid.uuid4().hex[:6]}"
    publish_inserts(broker.bootstrap_servers, prefix,
                    {0: range(0, ROWS, 2), 1: range(1, ROWS, 2)})
    paths = _install(tmp_path, spark_cluster, packed_env, prefix)
    log = tmp_path / "driver.log"
    proc = _start(paths, log)
    try:
        wait_until(lambda: proc.poll() is not None or len(inserted_rows(
            broker.bootstrap_servers, prefix)) >= ROWS, 300, "every row's event")
        assert proc.poll() is None, log.read_text()[-3000:]
        asked = time.monotonic()
        code = _stop_as_systemd(proc)
        took = time.monotonic() - asked
    finally:
        kill_group(proc)
    text = log.read_text()
    assert code == 0 and "Traceback" not in text, text[-3000:]
    print(f"\nthe driver stopped {took:.1f}s after SIGTERM")
    assert f"master={cluster.master_url(spark_cluster)}" in text, text[-3000:]
    events = inserted_rows(broker.bootstrap_servers, prefix)
    assert len(events) == ROWS and {e[2]["p"] for e in events} == set(range(ROWS)), \
        len(events)
