"""Resolve the stack's jars from Maven Central (cached in ~/.m2) and find a Java 17 runtime."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
from pathlib import Path

from devstack.process import StackError
from devstack.settings import repo_root

COMPONENTS = ("kafka", "cassandra", "spark-kafka")
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


def fetch(lib_root: Path, component: str, log=print) -> Path:
    """Copy `component`'s runtime jars into its lib dir unless they match its POM already.

    Maven's local repository (~/.m2, or MAVEN_REPO_LOCAL) caches downloads, so a second
    fetch — or one in a fresh clone on the same machine — works offline in seconds.
    """
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
