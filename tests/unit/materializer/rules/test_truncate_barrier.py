"""When a table's truncate events are due (materializer.rules.truncate_barrier): once every
raw partition of this job has applied a truncation newer than the last written by more
than a TRUNCATE's window; the replicas' later times of one TRUNCATE get none of their own."""

from __future__ import annotations

import uuid

from materializer.rules.truncate_barrier import (
    TRUNCATE_WINDOW_US,
    Applied,
    TruncationProgress,
    Written,
)

T = uuid.UUID(int=42)
RAW = [("p.raw", 0), ("p.raw", 1)]
F = 1_800_000_000_000_000  # a truncation floor, µs


def _applied(progress: TruncationProgress, part: int, floor: int, job: str = "job-1",
             schema_hash: str | None = "h1") -> None:
    progress.add(*Applied(job, T, "shop", "orders", floor, "p.raw", part,
                          schema_hash).record())


def test_due_once_every_partition_applied_it_at_the_lowest_floor_among_them() -> None:
    progress = TruncationProgress("job-1")
    _applied(progress, 0, F + 5)
    assert progress.due(RAW, 1) == []  # partition 1 has not applied it yet
    _applied(progress, 1, F, schema_hash=None)  # (no key of the table in its store)
    (due,) = progress.due(RAW, 1)
    assert (due.written.name, due.written.floor_us, due.schema_hash) == ("shop.orders", F,
                                                                        "h1")
    # written (read back from the topic): not due again, nor for another replica's time
    progress.add(*due.written.record())
    _applied(progress, 1, F + 900_000)
    assert progress.due(RAW, 2) == []


def test_a_later_truncate_is_due_again_and_another_jobs_reports_do_not_count() -> None:
    progress = TruncationProgress("job-1")
    progress.add(*Written(T, "shop", "orders", F).record())
    later = F + TRUNCATE_WINDOW_US + 1
    _applied(progress, 0, later, job="job-0")  # an earlier checkpoint's stores
    _applied(progress, 1, later, job="job-0")
    assert progress.due(RAW, 1) == []
    _applied(progress, 0, later)
    _applied(progress, 1, later)
    assert [d.written.floor_us for d in progress.due(RAW, 1)] == [later]
    progress.wrote(Written(T, "shop", "orders", later))
    assert progress.due(RAW, 1) == []


def test_a_lower_report_does_not_lower_a_partitions_floor_nor_lose_its_version() -> None:
    progress = TruncationProgress("job-1")
    _applied(progress, 0, F + 10)
    _applied(progress, 0, F, schema_hash="h0")  # read out of order: the older is ignored
    _applied(progress, 0, F + 20, schema_hash=None)
    _applied(progress, 1, F + 30, schema_hash=None)
    (due,) = progress.due(RAW, 1)
    assert (due.written.floor_us, due.schema_hash) == (F + 20, "h1")


def test_a_reset_soon_after_a_truncate_is_due_at_once() -> None:
    progress = TruncationProgress("job-1")
    for part in (0, 1):
        _applied(progress, part, F)
    (due,) = progress.due(RAW, 1)
    progress.add(*due.written.record())
    reset = F + 5_000_000  # 5 s later, well inside a TRUNCATE's window
    progress.add(*Applied("job-1", T, "shop", "orders", reset, "p.raw", 0, "h1", True).record())
    assert progress.due(RAW, 2) == []  # partition 1 has not applied it yet
    progress.add(*Applied("job-1", T, "shop", "orders", reset, "p.raw", 1, "h1", True).record())
    (due,) = progress.due(RAW, 3)
    assert due.written.floor_us == reset
    # a replica's truncation time as close is still no truncate event of its own
    progress.add(*due.written.record())
    _applied(progress, 0, reset + 1)
    _applied(progress, 1, reset + 1)
    assert progress.due(RAW, 4) == []
