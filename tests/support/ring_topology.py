"""Test harness for topology changes on the test ring (tests/integration/ring): the ring
workload in a thread of its own while a change runs, the raw records each publisher sent
meanwhile, a publisher for a node that joins or replaces another, and the ring put back to
nodes 1-3 UN for the session's other tests (test code only)."""

from __future__ import annotations

import struct
import subprocess
import threading
from collections import Counter
from collections.abc import Iterable
from typing import Any

from devstack import cassandra, topology
from devstack import stack as devstack
from devstack.process import StackError
from devstack.settings import MAX_NODES
from shared.kafka_topics import read_to_end
from shared.rowupdate import is_row_update
from shared.rowupdate_reader import read_row_update
from shared.topic_names import raw_topic

from support.publisher_harness import AgentProcess
from support.ring_harness import nodetool_each, run_ring_workload, topic_ends

RING = (1, 2, 3)  # the session's ring: what every other ring test expects
AGENT_PORT_BASE = 18200  # node n's publisher serves on 18200 + n (ring_harness.AGENT_PORTS)
CHUNK = 36  # statements per run_ring_workload call (two hypothesis examples)


class BackgroundWrites:
    """The ring workload, a short run after another, in a thread of its own while the block
    runs: the writes that flow during a topology change. Statements go through the nodes
    not in `down` (a frozenset the caller replaces as nodes go and come back)."""

    def __init__(self, sessions: dict[int, Any], ks: str, seed: int,
                 pause_s: float = 0.2) -> None:
        """`pause_s` between runs: a steady stream, not a load test, on two cores that
        also stream, compact and run the job."""
        self.sessions, self.ks, self.seed, self.pause_s = sessions, ks, seed, pause_s
        self.down: frozenset[int] = frozenset()
        self.statements = 0
        self.unavailable = 0
        self.timeouts = 0
        self.failures = 0
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ring-writes", daemon=True)

    def __enter__(self) -> BackgroundWrites:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(120)
        assert not self._thread.is_alive(), "the writes did not stop"
        if self.error is not None and exc[0] is None:
            raise AssertionError(f"the writes failed: {self.error!r}") from self.error

    def _run(self) -> None:
        from cassandra import OperationTimedOut, ReadTimeout, WriteFailure

        run = 0
        while not self._stop.is_set():
            try:
                done = run_ring_workload(self.sessions, self.ks, CHUNK, seed=self.seed + run,
                                         down=lambda: set(self.down))
                self.statements += len(done.executed)
                self.unavailable += done.unavailable
            except (ReadTimeout, OperationTimedOut):
                # a lightweight transaction's read, or the client's own timeout, while the
                # ring streams on two cores: the run's other statements go unsent; landed or
                # not, SELECT at ALL is the truth the events must meet
                self.timeouts += 1
            except WriteFailure:
                # while ranges move, a replica whose view of the ring is a step ahead of the
                # coordinator's refuses the write (5.0.8's node log: "Receiving Paxos
                # operation(s) for token(s) neither owned nor pending"; the driver: "UNKNOWN
                # from /127.0.0.3"): the client sees a failed write that may have landed on
                # the other replicas; SELECT at ALL is still the truth
                self.failures += 1
            except BaseException as exc:  # noqa: BLE001 — handed to the test at the block's end
                self.error = exc
                return
            run += 1
            self._stop.wait(self.pause_s)


def raw_marks(env: dict) -> dict[int, int]:
    """The end of each partition of the ring's raw topic now: where a change's records
    start."""
    return topic_ends(env["ring"].bootstrap_servers, raw_topic(env["prefix"]))


def records_since(env: dict, marks: dict[int, int], ks: str) -> Counter[tuple[str, str]]:
    """The raw records (row updates) published since `marks`, by (publisher host, table):
    the tables of keyspace `ks` by name, and "*" for every table of every keyspace (what
    the session's earlier tests left in the ring streams too)."""
    counts: Counter[tuple[str, str]] = Counter()
    for msg in read_to_end(env["ring"].bootstrap_servers, raw_topic(env["prefix"]),
                           start=marks):
        if not is_row_update(msg.value()):
            continue  # heartbeats, truncation and table records
        record = read_row_update(msg.value())
        host = record["source"]["host"]
        counts[(host, "*")] += 1
        if record["keyspace"] == ks:
            counts[(host, record["table"])] += 1
    return counts


def replicated_on(truth: Any, ks: str, keys: Iterable[int], host: str) -> int:
    """How many of these int partition keys of `ks` have `host` among their replicas now (by
    the driver's token map, rebuilt first)."""
    cluster = truth.cluster
    cluster.refresh_nodes(force_token_rebuild=True)
    return sum(any(h.address == host
                   for h in cluster.metadata.get_replicas(ks, struct.pack(">i", k)))
               for k in keys)


def new_publisher(env: dict, n: int, name: str) -> AgentProcess:
    """A publisher for node `n` with a state of its own (as on a new machine), in the
    session's prefix, put in the session's RingPublishers (its wait_caught_up waits for it,
    the session's end stops it); not started."""
    ring = env["ring"]
    agent = AgentProcess(ring.node(n), ring, env["work"] / name, env["prefix"],
                         http_port=AGENT_PORT_BASE + n, host_name=f"node-{n}")
    env["publishers"].agents[n] = agent
    return agent


def retire_publisher(env: dict, n: int) -> None:
    """Node `n` is stopped: wait until its publisher has published everything the node
    synced, then stop the publisher and take it out of the session's publishers."""
    publishers = env["publishers"]
    publishers.wait_caught_up(180, nodes=(n,))
    code = publishers.agents.pop(n).stop()
    assert code == 0, f"node {n}'s publisher exited {code}"


def restore_ring(env: dict, replaced: int | None = None) -> None:
    """Put the ring back as the session's other tests expect it, whatever a topology test
    left: nodes 4 and up out of the ring and stopped, without a publisher; nodes 1-3
    running, UN, with hinted handoff on and a publisher each. `replaced`: the node a
    replacement was under way for; if it is not running, it is replaced again (its disks
    may be half filled)."""
    ring, publishers = env["ring"], env["publishers"]
    states = cassandra.ring_states(ring.node(1))
    for extra in (ring.node(n) for n in range(len(RING) + 1, MAX_NODES + 1)):
        if extra.host in states:
            try:
                topology.decommission(extra)
            except (StackError, subprocess.TimeoutExpired) as exc:
                print(f"[restore] node {extra.node_index} did not decommission ({exc}); "
                      "removing it")
                cassandra.kill(extra)
                topology.remove_dead(extra)
        cassandra.shutdown(extra, drain=False)
        if extra.node_index in publishers.agents:
            publishers.agents.pop(extra.node_index).stop()
    for n in RING:
        node = ring.node(n)
        if cassandra.running_pid(node) is None:
            if n == replaced:
                topology.replace_dead(node)
            else:
                devstack.start_node(node)
        if not publishers.agents[n].alive():
            publishers.start(n)
    devstack.wait_ring(ring)
    nodetool_each([(ring.node(n), "enablehandoff") for n in RING])
