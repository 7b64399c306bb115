"""The stop request: a signal counts, the query stops once the batch running then is done."""

from __future__ import annotations

import signal
import time
from typing import Any

from materializer.spark.stopping import StopRequest


def _stopped(query: Query) -> int:
    """The stop calls made so far, once the stop thread had a moment."""
    for _ in range(100):
        if query.stopped:
            break
        time.sleep(0.01)
    return query.stopped


class Query:
    """A running query as the stop sees it: its status and last completed batch."""

    def __init__(self, active: bool, batch: int | None) -> None:
        self.status: dict[str, Any] = {"isTriggerActive": active}
        self.lastProgress = None if batch is None else {"batchId": batch}
        self.stopped = 0

    def stop(self) -> None:
        self.stopped += 1


def test_a_stop_waits_for_a_moment_between_batches() -> None:
    stop, query, quiet = StopRequest(), Query(active=True, batch=4), []
    stop.stop_between_batches(query, lambda: quiet.append(1))
    assert not stop.requested and query.stopped == 0  # nothing asked: nothing done
    stop._on_signal(signal.SIGTERM, None)
    stop.stop_between_batches(query, lambda: quiet.append(1))
    query.lastProgress = {"batchId": 5}  # it committed, and the next one began at once
    stop.stop_between_batches(query, lambda: quiet.append(1))
    assert query.stopped == 0  # still inside a batch: no stop
    query.status["isTriggerActive"] = False  # waiting for its next trigger
    stop.stop_between_batches(query, lambda: quiet.append(1))
    assert _stopped(query) == 1 and quiet == [1]


def test_an_idle_query_stops_at_once_and_a_second_signal_does_not_wait() -> None:
    stop, idle = StopRequest(), Query(active=False, batch=None)
    stop._on_signal(signal.SIGINT, None)
    stop.stop_between_batches(idle, lambda: None)
    assert _stopped(idle) == 1
    again, busy = StopRequest(), Query(active=True, batch=1)
    again._on_signal(signal.SIGTERM, None)
    again.stop_between_batches(busy, lambda: None)
    again._on_signal(signal.SIGTERM, None)
    again.stop_between_batches(busy, lambda: None)
    assert _stopped(busy) == 1


def test_a_batch_that_does_not_commit_is_stopped_and_a_stop_that_hangs_is_named(
        monkeypatch) -> None:
    import pytest

    from materializer.spark import stopping

    clock = [1000.0]
    monkeypatch.setattr(stopping.time, "monotonic", lambda: clock[0])
    stop, stuck = StopRequest(timeout_s=45), Query(active=True, batch=7)
    stop._on_signal(signal.SIGTERM, None)
    stop.stop_between_batches(stuck, lambda: None)
    clock[0] += 44
    stop.stop_between_batches(stuck, lambda: None)
    assert stuck.stopped == 0  # still waiting for batch 8 to commit
    clock[0] += 2
    stop.stop_between_batches(stuck, lambda: None)
    for _ in range(100):  # query.stop runs in a thread of its own
        if stuck.stopped:
            break
        time.sleep(0.01)
    assert stuck.stopped == 1 and not stop.hung
    clock[0] += stopping.STOP_HANG_S + 1
    with pytest.raises(stopping.StopHung, match="did not stop the query within 30 s"):
        stop.stop_between_batches(stuck, lambda: None)
    assert stop.hung
