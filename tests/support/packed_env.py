"""The packed Python environment a Spark cluster's executors run (`deploy/spark/submit.sh
--build-env`), built from this checkout (test code only)."""

from __future__ import annotations

import sys
from pathlib import Path

from support.builds import Build

ARCHIVE = "casscade-env.tar.gz"


def start_env_build(directory: Path, nice: int = 10) -> Build:
    """`submit.sh --build-env <directory>/casscade-env.tar.gz` started in the background
    (support.builds.Build)."""
    return Build.start(["deploy/spark/submit.sh", "--build-env", str(directory / ARCHIVE)],
                       {"PYTHON": sys.executable, "CASSCADE_BUILD_DIR": str(directory / "build")},
                       nice)


def finish_env_build(build: Build, directory: Path, timeout_s: float = 900) -> Path:
    """The archive a build started by start_env_build made, once it has ended; fails with
    the build's output if it failed."""
    code, out = build.wait(timeout_s)
    archive = directory / ARCHIVE
    assert code == 0 and archive.is_file(), out[-4000:]
    return archive
