"""The soak's writes: random statements over every supported type and operation
(support.workload's, ring_statement's lightweight transactions and static batches), several
in flight, each to a random node that is up at a random consistency level.

A statement whose outcome a fault makes unknown (a timeout, a replica gone) is counted, not
retried: Cassandra's `SELECT` at ALL stays the truth the stream must meet.
"""

from __future__ import annotations

import random
import threading
import time
import warnings
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from support.ring_harness import ring_statement
from support.workload import draw_statements

CHUNK = 2_000  # statements drawn at a time (hypothesis: ~1.5 s per 2,000 here)


@dataclass
class LoadReport:
    """What the writes did."""

    executed: int = 0
    unknown: Counter[str] = field(default_factory=Counter)  # outcome unknown, by error
    seconds: float = 0.0


def statements(ks: str, partitions: int) -> Iterator[str]:
    """Random statements without end, drawn CHUNK at a time."""
    from hypothesis.errors import HypothesisDeprecationWarning

    # the driver's and the faults' threads use the global `random` while hypothesis draws
    # here, which it warns of; the statements do not depend on it
    warnings.filterwarnings("ignore", category=HypothesisDeprecationWarning)
    while True:
        yield from draw_statements(ring_statement(ks, partitions), CHUNK)


def run_load(sessions: dict[int, Any], ks: str, count: int, seed: int,
             down: Callable[[], set[int]], partitions: int = 500, workers: int = 4,
             stop: threading.Event | None = None,
             progress: Callable[[int], None] = lambda _n: None) -> LoadReport:
    """`count` statements (or fewer if `stop` is set), `workers` in flight; lightweight
    transactions alone (two at once on one partition contend and answer "unknown")."""
    from cassandra import ConsistencyLevel as CL
    from cassandra.query import SimpleStatement

    rng = random.Random(seed)
    lock = threading.Lock()
    report = LoadReport()
    started = time.monotonic()

    def execute(text: str) -> None:
        with lock:
            gone = set(down())
            up = [n for n in sessions if n not in gone]
            node = rng.choice(up)
            cl = rng.choice([CL.ONE, CL.QUORUM] + ([] if gone else [CL.ALL]))
        for attempt in [node] + [n for n in up if n != node]:
            try:
                sessions[attempt].execute(SimpleStatement(text, consistency_level=cl),
                                          timeout=30)
                return
            except Exception as exc:
                name = type(exc).__name__
                if name == "NoHostAvailable":
                    continue  # the driver has not reconnected to that node yet: next one
                if name in ("InvalidRequest", "SyntaxException"):
                    raise  # the workload's own bug, not a fault's
                with lock:
                    report.unknown[name] += 1
                return
        with lock:
            report.unknown["NoHostAvailable"] += 1

    source = statements(ks, partitions)
    with ThreadPoolExecutor(workers) as pool:
        batch: list[str] = []
        while report.executed < count and not (stop and stop.is_set()):
            text = next(source)
            if " IF " in text:  # a lightweight transaction: alone
                list(pool.map(execute, batch))
                execute(text)
                batch = []
            else:
                batch.append(text)
            report.executed += 1
            if len(batch) >= workers * 25:
                list(pool.map(execute, batch))
                batch = []
                progress(report.executed)
        list(pool.map(execute, batch))
    report.seconds = time.monotonic() - started
    return report
