"""The soak's faults: at random times drawn from a seed, one at a time, SIGKILL one part of
the pipeline and start it again after a random pause (2-12 s); between them `nodetool flush`es and
schema changes (`ALTER TABLE ... ADD`, then writes to the new column).

The kinds come in shuffled rounds, so a run of N faults has about N/kinds of each; hint
replay follows every node's restart (its peers deliver what it missed).
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from cassandra import OperationTimedOut, Unavailable, WriteTimeout

from soak.rig import WORKERS, Rig

KINDS = ("node", "publisher", "driver", "worker", "broker")


@dataclass
class FaultLog:
    """What the injector did."""

    faults: Counter[str] = field(default_factory=Counter)
    extras: Counter[str] = field(default_factory=Counter)
    lines: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)  # a restart that did not work
    # an extra's write whose outcome is unknown (a timeout at ALL beside a node just back),
    # counted as the workload counts its own: the check at ALL judges the keys either way
    unknown: Counter[str] = field(default_factory=Counter)


class Injector(threading.Thread):
    """Injects faults into `rig` every `every_s` seconds on average until stopped."""

    def __init__(self, rig: Rig, ks: str, seed: int, every_s: float,
                 kinds: tuple[str, ...], target: int = 0,
                 reached: threading.Event | None = None) -> None:
        super().__init__(name="faults", daemon=True)
        self.target, self.reached = target, reached  # set `reached` after `target` faults
        self.rig, self.ks = rig, ks
        self.rng = random.Random(seed)
        self.every_s = every_s
        self.kinds = kinds
        self.stop = threading.Event()
        self.log = FaultLog()
        self._round: list[str] = []
        self._added = 0
        self.t0 = time.monotonic()

    def run(self) -> None:
        """Until `stop`: wait a random while, then one fault or extra."""
        while not self.stop.wait(self.rng.expovariate(1 / self.every_s)):
            try:
                if self.rng.random() < 0.2:
                    self._extra()
                else:
                    self._fault()
            except Exception as exc:  # noqa: BLE001 — the soak reports it and goes on
                self._say(f"FAILED: {type(exc).__name__}: {exc}"[:500])
                self.log.failed.append(f"{type(exc).__name__}: {exc}"[:500])

    def _say(self, text: str) -> None:
        line = f"{time.monotonic() - self.t0:7.0f}s {text}"
        self.log.lines.append(line)
        print(f"[fault] {line}", flush=True)

    def _fault(self) -> None:
        if not self._round:
            self._round = list(self.kinds)
            self.rng.shuffle(self._round)
        kind = self._round.pop()
        pause = self.rng.uniform(2, 12)
        began = time.monotonic()
        name, kill, start, targets = self._plans()[kind]
        args = (self.rng.choice(targets),) if targets else ()
        self._say(f"SIGKILL {name.format(*args)}, start again in {pause:.0f}s")
        kill(*args)
        time.sleep(pause)
        start(*args)
        self.log.faults[kind] += 1
        self._say(f"{kind} back after {time.monotonic() - began:.0f}s")
        if self.target and self.reached and sum(self.log.faults.values()) >= self.target:
            self.reached.set()

    def _plans(self) -> dict[str, tuple[str, Callable[..., None], Callable[..., None],
                                        tuple[int, ...]]]:
        """Per kind: its name, how to kill it and start it again, and the numbers of its
        instances (none: there is one)."""
        rig = self.rig
        return {"node": ("cassandra node {}", rig.kill_node, rig.start_node, (1, 2, 3)),
                "publisher": ("publisher {}", rig.kill_publisher, rig.start_publisher,
                              (1, 2, 3)),
                "worker": ("spark worker {}", rig.kill_worker, rig.start_worker, WORKERS),
                "driver": ("the materializer's driver", rig.kill_driver, rig.start_job, ()),
                "broker": ("the kafka broker", rig.kill_broker, rig.start_broker, ())}

    def _extra(self) -> None:
        rig = self.rig
        if self.rng.random() < 0.7 or self._added >= 5:
            n = self.rng.choice([1, 2, 3])
            self._say(f"nodetool flush on node {n}")
            rig.flush(n)
            self.log.extras["flush"] += 1
            return
        self._added += 1
        column = f"added{self._added}"
        self._say(f"ALTER TABLE {self.ks}.r ADD {column} int, and writes to it")
        rig.truth.execute(f"ALTER TABLE {self.ks}.r ADD {column} int")
        _wait_schema_agreement(rig.truth)
        for _ in range(50):
            p1, p2 = self.rng.randrange(500), self.rng.choice("ab")
            c1, c2 = self.rng.randrange(6), self.rng.choice("xyz")
            try:
                rig.truth.execute(f"UPDATE {self.ks}.r SET {column} = "
                                  f"{self.rng.randrange(1000)} WHERE p1 = {p1} AND "
                                  f"p2 = '{p2}' AND c1 = {c1} AND c2 = '{c2}'")
            except (WriteTimeout, Unavailable, OperationTimedOut) as exc:
                self.log.unknown[type(exc).__name__] += 1
        self.log.extras["alter_add"] += 1


def _wait_schema_agreement(session: Any) -> None:
    """The driver's own check that every node has the new schema."""
    session.cluster.control_connection.wait_for_schema_agreement(wait_time=60)
