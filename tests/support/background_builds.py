"""A pytest plugin: the builds some tests wait for start when the run starts, if a collected
test asks for what they make, so they overlap the tests before it instead of holding up
the first test that needs them.

- `images` (deploy/images/build.sh): about 4 minutes from nothing here, about one core
  (measured: 227 s, 242 cpu-s, `/usr/bin/time deploy/images/build.sh --force
  --refresh-base`); much of it waits on Debian's mirror and the disk.
- `packed_env` (`deploy/spark/submit.sh --build-env`): 72 s, 58 cpu-s; built once for
  both sessions of `make test` (support.packed_env.shared_dir).

Both run at a lower priority than the tests. A fixture of the same name waits for its build
and fails with the build's output if it failed; one that was not started (the run's tests
were selected after collection) is built on the spot. A run that ends first stops them.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.builds import Build
from support.images import build_images, start_build
from support.packed_env import finish_env_build, shared_dir, start_env_build

_images: list[Build] = []
_envs: list[tuple[Build, Path]] = []


def pytest_collection_finish(session: pytest.Session) -> None:
    """Start the builds the collected tests will wait for."""
    if session.config.option.collectonly:
        return
    wanted = {name for item in session.items for name in getattr(item, "fixturenames", ())}
    if "images" in wanted:
        _images.append(start_build())
    if "packed_env" in wanted:
        directory = shared_dir() or Path(tempfile.mkdtemp(prefix="casscade-spark-env-"))
        _envs.append((start_env_build(directory), directory))


@pytest.fixture(scope="session")
def images() -> dict[str, str]:
    """Both container images, built for this session's sources (kept if already built from
    them): {name: image}."""
    return build_images(_images[0] if _images else None)


@pytest.fixture(scope="session")
def packed_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The packed environment a cluster's executors run (`deploy/spark/submit.sh
    --build-env`: casscade as a wheel, compiled reader included, its dependencies but
    PySpark), built once per session from this checkout."""
    if not _envs:
        directory = tmp_path_factory.mktemp("spark-env")
        _envs.append((start_env_build(directory, nice=0), directory))
    build, directory = _envs[0]
    yield finish_env_build(build, directory)


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Stop builds still running; remove the packed environment's directory."""
    for build in _images:
        build.stop()
    for build, directory in _envs:
        build.stop()
        if directory != shared_dir() and directory.name.startswith("casscade-spark-env-"):
            shutil.rmtree(directory, ignore_errors=True)
