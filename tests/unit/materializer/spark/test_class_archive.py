"""The driver's class archive: named by what it depends on; one creator; only a complete
archive is ever used (a cut-short one crashes the JVM that maps it)."""

from __future__ import annotations

import os
from pathlib import Path

from materializer.spark.class_archive import archive_key, finish, plan

JARS = ["/lib/kafka-clients.jar", "/lib/spark-sql-kafka.jar"]


def test_the_key_follows_the_jdk_spark_jars_and_flags_and_nothing_else() -> None:
    key = archive_key("/jvm/17/bin/java:1", "4.2.0", JARS, "-XX:+UseSerialGC  1g")
    assert key == archive_key("/jvm/17/bin/java:1", "4.2.0", JARS[::-1], "-XX:+UseSerialGC 1g")
    assert key == archive_key("/jvm/17/bin/java:1", "4.2.0", JARS, "-Xshare:on -XX:+UseSerialGC 1g")
    others = {archive_key("/jvm/21/bin/java:1", "4.2.0", JARS, "-XX:+UseSerialGC 1g"),
              archive_key("/jvm/17/bin/java:1", "4.1.0", JARS, "-XX:+UseSerialGC 1g"),
              archive_key("/jvm/17/bin/java:1", "4.2.0", JARS[:1], "-XX:+UseSerialGC 1g"),
              archive_key("/jvm/17/bin/java:1", "4.2.0", JARS, "-XX:+UseSerialGC 2g")}
    assert key not in others and len(others) == 4


def test_one_creator_and_the_archive_only_after_a_clean_exit(tmp_path: Path) -> None:
    first = plan(tmp_path, "k", alive=lambda pid: True)
    assert first.creating and f"-XX:ArchiveClassesAtExit={first.partial}" in first.options
    assert first.lock.read_text() == str(os.getpid())
    # a second run while the first is alive: no archive flags at all
    second = plan(tmp_path, "k", alive=lambda pid: True)
    assert not second.creating and second.options == ""
    first.partial.write_bytes(b"classes")  # what the JVM writes at its exit
    assert finish(first, 0) and first.archive.read_bytes() == b"classes"
    assert not first.lock.exists() and not first.partial.exists()
    third = plan(tmp_path, "k", alive=lambda pid: False)
    assert not third.creating and f"-XX:SharedArchiveFile={first.archive}" in third.options


def test_a_failed_or_killed_creator_leaves_no_archive_and_the_next_run_creates_it(
        tmp_path: Path) -> None:
    failed = plan(tmp_path, "k", alive=lambda pid: True)
    failed.partial.write_bytes(b"cut sh")
    assert not finish(failed, 137)  # killed while writing: the partial goes
    assert not failed.archive.exists() and not failed.partial.exists()
    killed = plan(tmp_path, "k", alive=lambda pid: True)
    killed.partial.write_bytes(b"cut")  # never finished: its lock stays behind
    after = plan(tmp_path, "k", alive=lambda pid: False)  # the lock's process is gone
    assert after.creating and not after.partial.exists() and not after.archive.exists()
    assert not finish(plan(tmp_path, "x", alive=lambda pid: True), None)
