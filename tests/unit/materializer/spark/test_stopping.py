"""The stop request: a signal counts, the query stops once the batch running then is done."""

from __future__ import annotations

import signal
from typing import Any

from materializer.spark.stopping import StopRequest


class Query:
    """A running query as the stop sees it: its status and last completed batch."""

    def __init__(self, active: bool, batch: int | None) -> None:
        self.status: dict[str, Any] = {"isTriggerActive": active}
        self.lastProgress = None if batch is None else {"batchId": batch}
        self.stopped = 0

    def stop(self) -> None:
        self.stopped += 1


def test_a_stop_waits_for_the_running_batch_to_commit() -> None:
    stop, query, quiet = StopRequest(), Query(active=True, batch=4), []
    stop.stop_between_batches(query, lambda: quiet.append(1))
    assert not stop.requested and query.stopped == 0  # nothing asked: nothing done
    stop._on_signal(signal.SIGTERM, None)
    stop.stop_between_batches(query, lambda: quiet.append(1))
    assert query.stopped == 0  # batch 5 still runs
    query.lastProgress = {"batchId": 5}  # it committed (the next may have begun)
    stop.stop_between_batches(query, lambda: quiet.append(1))
    assert query.stopped == 1 and quiet == [1]


def test_an_idle_query_stops_at_once_and_a_second_signal_does_not_wait() -> None:
    stop, idle = StopRequest(), Query(active=False, batch=None)
    stop._on_signal(signal.SIGINT, None)
    stop.stop_between_batches(idle, lambda: None)
    assert idle.stopped == 1
    again, busy = StopRequest(), Query(active=True, batch=1)
    again._on_signal(signal.SIGTERM, None)
    again.stop_between_batches(busy, lambda: None)
    again._on_signal(signal.SIGTERM, None)
    again.stop_between_batches(busy, lambda: None)
    assert busy.stopped == 1
