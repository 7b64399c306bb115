"""Where a test's time goes, by phase: the test helpers mark what they do with `phase(KIND)`,
and support.suite_times adds each test phase's seconds to its file and prints the sums.

The kinds (PHASES):
- `starts`: a service fixture's setup (a node, a ring, the broker, the Spark cluster, HDFS,
  Connect, the registry, agents, builds: suite_times.SERVICE_FIXTURES);
- `stops`: every teardown (what a fixture started, stopped; a job killed at a test's end);
- `jobs`: waiting on a materializer job (an `--available-now` run from its start to its
  end, or a line its log is waited for);
- `workloads`: writing a test's input (CQL workloads, raw records published);
- `polls`: polling a condition (support.services.wait_until);
- `sleeps`: a test module's own `time.sleep`, a wait of fixed length;
- `rest`: the rest of a test's time (its reads of topics, its checks, helpers unmarked).

A nested phase takes its seconds from the one around it: a poll inside a job's run counts as
`polls`. Only the main thread's phases count (a workload's writer threads do not).
"""

from __future__ import annotations

import functools
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")

PHASES = ("starts", "stops", "jobs", "workloads", "polls", "sleeps", "rest")


class PhaseClock:
    """Seconds by (file, phase); the innermost open phase is the one that runs."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.seconds: dict[tuple[str, str], float] = defaultdict(float)
        self.file = ""
        self._open: list[list[Any]] = []  # [kind, since] from outermost to innermost

    def enter(self, kind: str) -> None:
        """Start `kind`: the phase around it stops counting until `kind` ends."""
        if kind not in PHASES:
            raise ValueError(f"unknown phase {kind!r}; the phases are {PHASES}")
        now = self.clock()
        if self._open:
            outer = self._open[-1]
            self.seconds[(self.file, outer[0])] += now - outer[1]
        self._open.append([kind, now])

    def leave(self) -> None:
        """End the innermost phase: the one around it counts again."""
        kind, since = self._open.pop()
        now = self.clock()
        self.seconds[(self.file, kind)] += now - since
        if self._open:
            self._open[-1][1] = now

    def marked(self, file: str) -> float:
        """The seconds of `file` that some phase claimed."""
        return sum(s for (f, _kind), s in self.seconds.items() if f == file)


CLOCK = PhaseClock()


@contextmanager
def phase(kind: str) -> Iterator[None]:
    """The block's time counts as `kind` (one of PHASES) in the running test's file."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    CLOCK.enter(kind)
    try:
        yield
    finally:
        CLOCK.leave()


def phased(kind: str) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """A helper's every call counts as `kind` (`@phased("workloads")`)."""

    def wrap(helper: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(helper)
        def timed(*args: P.args, **kwargs: P.kwargs) -> R:
            with phase(kind):
                return helper(*args, **kwargs)

        return timed

    return wrap
