"""deploy/systemd/*.service as systemd reads them: `systemd-analyze verify` finds nothing to
say (in a scratch root holding the host's own units and the paths the units name), and the
settings a clean stop and a supervised driver rest on are there. The driver's ExecStart line
itself runs against the stack's Spark cluster in tests/integration/spark/test_systemd_driver.py."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from materializer.settings import SparkSettings

from support.paths import ROOT
from support.systemd_units import read_unit

UNITS = sorted((ROOT / "deploy" / "systemd").glob("*.service"))
HOST_UNITS = Path("/usr/lib/systemd/system")
DRIVER = ROOT / "deploy" / "systemd" / "casscade-materializer.service"


@pytest.mark.parametrize("unit", UNITS, ids=lambda p: p.name)
def test_systemd_analyze_verify_finds_nothing(unit: Path, tmp_path: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    assert analyze, "systemd-analyze is not installed (Debian's systemd package)"
    assert HOST_UNITS.is_dir(), f"{HOST_UNITS} missing: systemd's own units are needed"
    root = tmp_path / "root"
    shutil.copytree(HOST_UNITS, root / HOST_UNITS.relative_to("/"), symlinks=True)
    for line in read_unit(unit)["Service"].get("ExecStart", []):
        exe = root / line.split()[0].lstrip("/")  # verify wants the program to exist
        exe.parent.mkdir(parents=True, exist_ok=True)
        exe.write_text("#!/bin/sh\n")
        exe.chmod(0o755)
    placed = root / "etc" / "systemd" / "system" / unit.name
    placed.parent.mkdir(parents=True)
    shutil.copy(unit, placed)
    done = subprocess.run([analyze, "verify", f"--root={root}", str(placed)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and not (done.stdout + done.stderr).strip(), \
        done.stdout + done.stderr


def test_the_driver_unit_stops_the_driver_alone_and_waits_for_its_stop() -> None:
    service = {k: v[-1] for k, v in read_unit(DRIVER)["Service"].items()}
    assert service["ExecStart"].split()[1:3] == ["materializer", "run"]
    # SIGTERM to the Python driver only: its JVM is its child and must outlive the stop
    assert service["KillSignal"] == "SIGTERM" and service["KillMode"] == "mixed"
    # the job's own stop: stop_timeout_s for the micro-batch, then 30 s for its JVM
    assert int(service["TimeoutStopSec"]) > SparkSettings.stop_timeout_s + 30
    assert service["Restart"] == "always" and int(service["RestartSec"]) >= 5
    assert read_unit(DRIVER)["Unit"]["StartLimitIntervalSec"] == ["0"]  # never given up
