"""The packed Python environment a Spark cluster's executors run (`deploy/spark/submit.sh
--build-env`), built from this checkout (test code only)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from support.builds import Build

ARCHIVE = "casscade-env.tar.gz"
# A directory the sessions of one `make test` share (support.suite_sections sets it): the
# first to build there builds, the other waits for it and takes its archive.
SHARED_DIR = "CASSCADE_TEST_SPARK_ENV_DIR"


def shared_dir() -> Path | None:
    """The directory this run's sessions share the packed environment in, if any."""
    value = os.environ.get(SHARED_DIR)
    return Path(value) if value else None


def start_env_build(directory: Path, nice: int = 10) -> Build:
    """`submit.sh --build-env <directory>/casscade-env.tar.gz` started in the background
    (support.builds.Build), under a lock on the directory: an archive another session
    built there already is taken as it is (it is moved into place only once complete)."""
    directory.mkdir(parents=True, exist_ok=True)
    partial = directory / f"{os.getpid()}-{ARCHIVE}"
    script = (f'[ -f "$1/{ARCHIVE}" ] || {{ deploy/spark/submit.sh --build-env "$2" && '
              f'mv "$2" "$1/{ARCHIVE}"; }}')
    return Build.start(["flock", str(directory / ".lock"), "sh", "-c", script, "sh",
                        str(directory), str(partial)],
                       {"PYTHON": sys.executable, "CASSCADE_BUILD_DIR": str(directory / "build")},
                       nice)


def finish_env_build(build: Build, directory: Path, timeout_s: float = 900) -> Path:
    """The archive a build started by start_env_build made, once it has ended; fails with
    the build's output if it failed."""
    code, out = build.wait(timeout_s)
    archive = directory / ARCHIVE
    assert code == 0 and archive.is_file(), out[-4000:]
    return archive
