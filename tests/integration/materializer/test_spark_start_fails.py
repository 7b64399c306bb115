"""A driver JVM that cannot start (here, a heap too small for it) ends the job with one
line, and the prefix's lease released: the next job need not wait for it to lapse
(issue 71, case 6). Before, the job ended in PySpark's traceback, its lease kept."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from devstack.settings import StackSettings
from materializer.kafka.job_lease import JobLease

from support.materializer_harness import materializer_command, publish_inserts, start_materializer

pytestmark = pytest.mark.integration


def test_a_driver_jvm_that_cannot_start_is_one_line_and_frees_the_prefix(
        broker: StackSettings, tmp_path: Path) -> None:
    prefix = f"nojvm{uuid.uuid4().hex[:6]}"
    publish_inserts(broker.bootstrap_servers, prefix, {0: range(3)})
    log = tmp_path / "job.log"
    job = start_materializer(materializer_command(
        broker, prefix, tmp_path / "checkpoint",
        # (not an unknown -XX option: Spark's launcher adds -XX:+IgnoreUnrecognizedVMOptions)
        "spark.driver_memory=1k"), log)
    assert job.wait(300) == 1, log.read_text()[-3000:]
    text = log.read_text()
    assert "Error: Spark's driver JVM could not start: " in text, text[-3000:]
    assert "Traceback" not in text, text[-3000:]
    claim = JobLease({"bootstrap.servers": broker.bootstrap_servers}, prefix, "-", 1,
                     30).last_claim()
    assert claim is not None and claim.released
