"""Two jobs with checkpoints of their own on one topic prefix never both write: the second
is refused at start while the first runs, naming it; a job that lost its lease (paused past
it while another took over) stops with one line naming the other; a clean stop frees the
prefix at once."""

from __future__ import annotations

import os
import signal
import time
import uuid
from pathlib import Path

import pytest

from devstack.settings import StackSettings
from materializer.kafka.job_lease import JobLease

from support.materializer_harness import (
    descendants,
    inserted_rows,
    kill_group,
    materializer_command,
    publish_inserts,
    start_materializer,
    wait_for_log,
)
from support.services import wait_until

pytestmark = pytest.mark.integration
ROWS = 50
LEASE_S = 10


def _claim_age_s(lease: JobLease) -> float:
    claim = lease.last_claim()
    assert claim is not None
    return time.time() - claim.at_ms / 1000


def _signal_all(job, sig: int) -> None:
    """`sig` to the job's process group and every process under it (the driver JVM runs in
    a session of its own)."""
    for pid in [job.pid, *descendants(job.pid)]:
        os.kill(pid, sig)


def test_a_second_job_on_a_prefix_is_refused_and_a_paused_one_is_fenced(
        stack: StackSettings, tmp_path: Path) -> None:
    prefix = f"lease{uuid.uuid4().hex[:6]}"
    publish_inserts(stack.bootstrap_servers, prefix, {0: range(0, ROWS, 2),
                                                      1: range(1, ROWS, 2)})
    first_ckpt, second_ckpt = tmp_path / "first", tmp_path / "second"
    first_log, second_log = tmp_path / "first.log", tmp_path / "second.log"
    # the first with a short lease (renewed every 10/6 s), the others with the default
    first = start_materializer(materializer_command(stack, prefix, first_ckpt,
                                                    f"kafka.job_lease_s={LEASE_S}",
                                                    available_now=False), first_log)
    second = None
    try:
        wait_for_log(first_log, "first micro-batch done", first)
        # a local checkpoint: Spark's logs in it written through Hadoop's FileSystem
        assert "spark_logs_through=FileSystemBasedCheckpointFileManager" in first_log.read_text()
        # the second checkpoint's job: refused while the first runs
        refused = start_materializer(materializer_command(stack, prefix, second_ckpt),
                                     second_log)
        assert refused.wait(120) == 1, second_log.read_text()[-3000:]
        text = second_log.read_text()
        assert f"Error: topic prefix {prefix}: the job with checkpoint " in text
        assert f":{first_ckpt} (host " in text and "one job per prefix" in text
        assert "Traceback" not in text and "starting Spark" not in text
        assert not second_ckpt.exists() or not any(second_ckpt.iterdir())

        # the first paused past its own lease: the second (default lease, 30 s) takes the
        # prefix over, judging the claim by the holder's lease
        _signal_all(first, signal.SIGSTOP)
        lease = JobLease({"bootstrap.servers": stack.bootstrap_servers}, prefix, "-", 1, 30)
        wait_until(lambda: _claim_age_s(lease) > LEASE_S, 60, "the first job's lease lapsed",
                   interval_s=0.5)
        second_log.unlink()
        second = start_materializer(materializer_command(
            stack, prefix, second_ckpt, available_now=False), second_log)
        wait_for_log(second_log, "first micro-batch done", second)
        _signal_all(first, signal.SIGCONT)  # its next renewal is fenced: it stops
        # rows written while both run: the first's tasks are fenced by the second's, so
        # each of them has one event (the second's own checkpoint wrote the first rows
        # again: a new job reads from the earliest offset)
        publish_inserts(stack.bootstrap_servers, prefix, {0: range(ROWS, 2 * ROWS)})
        assert first.wait(120) == 1, first_log.read_text()[-3000:]
        text = first_log.read_text()
        lost = text[text.index("took over this prefix's lease"):]
        assert f":{second_ckpt} (host " in text[text.index("Error: topic prefix"):]
        assert "Traceback" not in lost, lost[-3000:]

        # the second goes on alone; a clean stop frees the prefix for a third at once
        wait_until(lambda: len({e[2]["p"] for e in inserted_rows(
            stack.bootstrap_servers, prefix)}) >= 2 * ROWS, 120, "the second job's events",
            interval_s=1)
        later = [e for e in inserted_rows(stack.bootstrap_servers, prefix)
                 if e[2]["p"] >= ROWS]
        assert sorted(e[2]["p"] for e in later) == list(range(ROWS, 2 * ROWS))
        second.send_signal(signal.SIGTERM)
        assert second.wait(120) == 0, second_log.read_text()[-3000:]
        third = start_materializer(materializer_command(stack, prefix, tmp_path / "third"),
                                   tmp_path / "third.log")
        assert third.wait(300) == 0, (tmp_path / "third.log").read_text()[-3000:]
    finally:
        for job in (first, second):
            if job is not None:
                with_cont = job.poll() is None
                if with_cont:
                    _signal_all(job, signal.SIGCONT)
                kill_group(job)
