"""A class archive for the driver JVM (AppCDS): a job's start-up about 7 s shorter.

A Spark driver loads and verifies some 20,000 classes before its first micro-batch. The JDK
can write the classes a run loaded into an archive when it exits (`-XX:ArchiveClassesAtExit`)
and map that archive at the next start (`-XX:SharedArchiveFile`) instead. An archive fits
one JDK, one class path and one set of JVM flags, so its name carries a digest of them: an
upgrade makes a new one. One run at a time creates it (a lock file holds its pid): it writes
`<name>.partial`, and only once its JVM has exited cleanly does the partial become the
archive (a cut-short archive crashes the JVM that maps it). Runs that find none, or find a
creator at work, start without one. `spark.class_archive_dir` turns it on (docs/configuration.md).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

# The flags that map an archive; a JVM that cannot use it (another JDK or class path) starts
# without it, silently: the run is only slower.
USE = "-XX:SharedArchiveFile={path} -Xlog:cds=off -Xlog:cds+dynamic=off"
CREATE = "-XX:ArchiveClassesAtExit={path} -Xlog:cds=off -Xlog:cds+dynamic=off"


@dataclass(frozen=True)
class Plan:
    """What this run does: `options` for the driver JVM; `creating`: it writes the archive."""

    options: str
    creating: bool
    archive: Path
    partial: Path
    lock: Path


def archive_key(java: str, pyspark_version: str, jars: Iterable[str], flags: str) -> str:
    """A digest of what an archive depends on: the JDK, Spark, the extra jars, JVM flags
    (but -Xshare:*, which only says whether sharing is required)."""
    kept = " ".join(f for f in flags.split() if not f.startswith("-Xshare"))
    text = "\n".join([java, pyspark_version, *sorted(jars), kept])
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


def java_identity() -> str:
    """The java binary a driver starts with (JAVA_HOME, else PATH), resolved, with mtime."""
    home = os.environ.get("JAVA_HOME")
    java = str(Path(home) / "bin" / "java") if home else shutil.which("java") or "java"
    path = Path(java).resolve()
    with contextlib.suppress(OSError):
        return f"{path}:{path.stat().st_mtime_ns}"
    return str(path)


def plan(directory: Path, key: str, alive: Callable[[int], bool]) -> Plan:
    """Use the archive if there is one, else become its creator unless a live one works."""
    archive = directory / f"driver-{key}.jsa"
    partial, lock = directory / f"driver-{key}.jsa.partial", directory / f"driver-{key}.lock"
    none = Plan("", False, archive, partial, lock)
    if archive.exists():
        return Plan(USE.format(path=archive), False, archive, partial, lock)
    directory.mkdir(parents=True, exist_ok=True)
    owner = _pid_in(lock)
    if owner is not None and alive(owner):
        return none  # another run is creating it
    if owner is not None or lock.exists():  # its creator ended without finishing
        lock.unlink(missing_ok=True)
    try:
        fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        return none  # another run took the lock just now
    with os.fdopen(fd, "w") as f:
        f.write(str(os.getpid()))
    partial.unlink(missing_ok=True)
    return Plan(CREATE.format(path=partial), True, archive, partial, lock)


def finish(p: Plan, jvm_exit_code: int | None) -> bool:
    """After the creating run's JVM is gone: keep the partial if it exited cleanly."""
    if not p.creating:
        return False
    kept = jvm_exit_code == 0 and p.partial.exists() and p.partial.stat().st_size > 0
    if kept:
        p.partial.replace(p.archive)
    else:
        p.partial.unlink(missing_ok=True)
    p.lock.unlink(missing_ok=True)
    return kept


def _pid_in(lock: Path) -> int | None:
    try:
        text = lock.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None
