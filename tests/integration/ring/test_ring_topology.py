"""Topology changes on the test ring (RF=3) while the materializer job runs and writes flow:
a fourth node bootstraps into the ring and is decommissioned again; node 3 dies with its
publisher and a new machine with empty disks replaces it at its address; node 2, back from
an outage that hints did not cover, is repaired with `nodetool repair`. After each change:
no event twice, no gap, last `after` == SELECT at ALL (ring_harness.check_events), and
nothing was done for it but a publisher started beside the node that joined or replaced
another (the job runs on, untouched).

cdc_on_repair_enabled is true on every node here, as Cassandra's default and
deploy/cassandra/cassandra-cdc-dc.yaml have it, except where the first test measures false.
Why true: with false, what a node receives by streaming (bootstrap, decommission, replace,
rebuild, repair) bypasses its commit log, so the stream holds a write only if some replica
published it from its own commit log when it happened. Where no such copy exists the
stream has a gap that nothing repairs: a CDC datacenter at RF 1 (docs/operations.md §1)
gets its data through `nodetool rebuild` and whatever it missed only through repair; a
write at ONE whose one replica lost its disk before its publisher sent it survives in
Cassandra only as the copy repair made elsewhere. With true those arrive through a commit
log too. The price is volume: a node that joins, or replaces another, publishes again every
row it takes (of every CDC table), as partitions with their original write times. Those
copies are harmless to the events: the materializer drops a copy it saw in its dedupe
window (same digest and mutation id, as a one-row partition written once should be when
streamed) and merges any other last-write-wins into a state that already holds it, which
changes nothing. The `pre` table checks exactly that: its rows are written once
before any change and streamed again in every change, and they keep one event each.

Every change prints what it took and the raw records each publisher sent meanwhile (`-s`
shows them; STEPS, printed at the module's end): docs/operations.md "Topology" quotes them.

The second test is in `make test`; the first, the value not recommended, is a measurement
(`make measure`). Measured alone on the 2-core machine, ring start included: both 632 s,
the first 368 s.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

import pytest
from cassandra import ConsistencyLevel
from cassandra.query import SimpleStatement

from devstack import cassandra, topology
from shared.topic_names import raw_topic

from support.materializer_harness import kill_group, materializer_command, start_materializer
from support.ring_harness import (
    check_events,
    job_caught_up,
    keyspace_tables,
    nodetool_each,
    rf3_keyspace,
    run_ring_workload,
    write_probe,
)
from support.ring_topology import (
    RING,
    BackgroundWrites,
    new_publisher,
    raw_marks,
    records_since,
    replicated_on,
    restore_ring,
    retire_publisher,
)
from support.services import free_port, http_get, wait_until

pytestmark = pytest.mark.integration

PRE = 200  # rows written before any change and never again: later copies are streamed ones
MISSED = 100  # rows the repaired node missed
# The nodes this module starts wait 5 s, not Cassandra's 30 s, for gossip to spread a join,
# a departure or a replacement (three times per decommission and bootstrap, once per
# replacement): on loopback, with four nodes, gossip settles within two or three seconds
RING_DELAY_MS = 5_000
TABLES = ("r", "ctr", "pre")
# The node each test adds and takes away again. Not the same one twice: the others ignore
# the gossip of a node that left for twice their ring delay (1 min on the session's nodes),
# so node 4 could not join again in the next test's first seconds
OFF, ON = 4, 5


@dataclass
class Step:
    """What one topology change took and what the publishers sent meanwhile."""

    name: str
    receivers: str  # the nodes that took streamed data, and their cdc_on_repair_enabled
    seconds: float  # the change itself: its nodetool command, or a start until UN
    settle_s: float = 0.0  # then until every publisher and the job had caught up
    statements: int = 0  # written meanwhile (run_ring_workload's, through nodes 1-3)
    cut_short: int = 0  # runs of writes a timeout or a replica's refusal cut short
    records: Counter = field(default_factory=Counter)  # (host, table or "*") → raw records
    owned: int = 0  # rows of `pre` the node that joined holds a replica of

    def line(self) -> str:
        """One line for the log and for docs/operations.md's figures."""
        hosts = sorted({h for h, _t in self.records})
        sent = "; ".join(f"{h} {self.records[(h, '*')]} (pre {self.records[(h, 'pre')]}, "
                         f"missed {self.records[(h, 'missed')]})" for h in hosts)
        return (f"{self.name} [{self.receivers}]: {self.seconds:.1f} s, caught up "
                f"{self.settle_s:.1f} s later; {self.statements} statements meanwhile ("
                f"{self.cut_short} runs cut short); raw "
                f"records sent: {sent}" + (f"; pre rows on the new node: {self.owned}"
                                            if self.owned else ""))


STEPS: list[Step] = []


@pytest.fixture(scope="module")
def topo(env):
    """A continuous job over the ring's raw topic from its end (the session's earlier
    scenarios are not its own); a keyspace of the workload's tables, seeded, with `pre`
    (PRE rows), `missed` (written during the repair's outage) and `probe` (no CDC)."""
    ring, truth, work = env["ring"], env["truth"], env["work"]
    port = free_port()
    log = work / "topology.log"
    ckpt = work / "ckpt-topology"
    cmd = materializer_command(ring, env["prefix"], ckpt, f"http.port={port}",
                               "kafka.starting_offsets=latest", available_now=False)
    job = start_materializer(cmd, log)
    try:
        # its first progress report: the query has fixed its starting offsets
        wait_until(lambda: '"batchId"' in http_get(port, "/status")[1]
                   or job.poll() is not None, 240, "the job's first progress report")
        assert job.poll() is None, log.read_text()[-3000:]
        ks = rf3_keyspace(truth)
        for table in ("pre", "missed"):
            truth.execute(f"CREATE TABLE {ks}.{table} (k int PRIMARY KEY, v text) "
                          "WITH cdc = true")
        truth.execute(f"CREATE TABLE {ks}.probe (k int PRIMARY KEY) WITH cdc = false")
        insert = truth.prepare(f"INSERT INTO {ks}.pre (k, v) VALUES (?, ?)")  # at ALL
        for k in range(PRE):
            truth.execute(insert, (k, f"pre{k}"))
        run_ring_workload(env["sessions"], ks, 300, seed=48, cover=(".ctr",), workers=4)
        out = {"ks": ks, "job": job, "ckpt": ckpt, "log": log}
        _settle(env, out)
        yield out
    finally:
        kill_group(job)
        print("\n[topology] " + "\n[topology] ".join(step.line() for step in STEPS))


def _settle(env: dict, topo: dict) -> float:
    """Wait until every publisher has published what its node synced and the job has
    processed the raw topic to its end; the seconds that took."""
    started = time.monotonic()
    env["publishers"].wait_caught_up(180)
    job, ring = topo["job"], env["ring"]
    wait_until(lambda: job_caught_up(topo["ckpt"], ring.bootstrap_servers,
                                     raw_topic(env["prefix"])) or job.poll() is not None,
               300, "the job at the end of the raw topic", interval_s=2)
    assert job.poll() is None, topo["log"].read_text()[-3000:]
    return time.monotonic() - started


def _finish(env: dict, topo: dict, step: Step, marks: dict[int, int],
            *tables: str) -> Step:
    """Settle, count what each publisher sent since `marks`, run the ring's checks on the
    keyspace's tables (and `tables`); `pre` keeps one event per row."""
    step.settle_s = _settle(env, topo)
    step.records = records_since(env, marks, topo["ks"])
    STEPS.append(step)
    print(f"\n[topology] {step.line()}")
    counts = check_events(env["ring"].bootstrap_servers, env["prefix"], env["truth"],
                          keyspace_tables(env["truth"], topo["ks"], only=TABLES + tables),
                          min_rows=1)
    # one `c` each: none of the streamed copies made an event
    assert counts["pre"] == PRE, (counts, step.line())
    return step


def _writes(env: dict, topo: dict) -> BackgroundWrites:
    """The writes that flow during the next change, a seed of their own per change."""
    return BackgroundWrites(env["sessions"], topo["ks"], seed=1000 * (len(STEPS) + 1))


def _bootstrap(env: dict, topo: dict, n: int, on_repair: bool) -> Step:
    """Node `n`, with empty disks, joins the ring with auto_bootstrap while writes flow,
    and a publisher of its own starts beside it once it answers CQL (the agent reads the
    schema through its node); all that was done for it."""
    ring = env["ring"]
    node = replace(ring.node(n), cdc_on_repair_enabled=on_repair, ring_delay_ms=RING_DELAY_MS)
    cassandra.wipe(node)  # an earlier run's node left its disks; a new machine's are empty
    marks = raw_marks(env)
    with _writes(env, topo) as writes:
        seconds = topology.join(node, log=print)
        agent = new_publisher(env, n, f"agent-{n}")
        agent.start()
        agent.wait_serving(60)
    step = Step("bootstrap", f"node {n}: {str(on_repair).lower()}", seconds,
                statements=writes.statements,
                cut_short=writes.timeouts + writes.failures)
    step.owned = replicated_on(env["truth"], topo["ks"], range(PRE), node.host)
    return _finish(env, topo, step, marks)


def _decommission(env: dict, topo: dict, n: int) -> Step:
    """Node `n` leaves with `nodetool decommission` while writes flow: its ranges stream
    to the nodes of 1-3 that take them back; stopped, its publisher sends what it had and
    stops."""
    marks = raw_marks(env)
    with _writes(env, topo) as writes:
        seconds = topology.decommission(env["ring"].node(n))
    retire_publisher(env, n)
    step = Step("decommission", "nodes 1-3: true", seconds, statements=writes.statements,
                cut_short=writes.timeouts + writes.failures)
    return _finish(env, topo, step, marks)


def _replace(env: dict, topo: dict, n: int, on_repair: bool) -> Step:
    """Node `n` and its publisher are SIGKILLed together while writes flow (the machine is
    lost, with whatever its publisher had not sent); a new machine with empty disks takes
    its address and tokens (replace_address_first_boot), streaming its ranges from the
    other two, and a new publisher, with a state of its own, starts beside it."""
    ring, publishers = env["ring"], env["publishers"]
    marks = raw_marks(env)
    with _writes(env, topo) as writes:
        writes.down = frozenset({n})
        assert cassandra.kill(ring.node(n))
        publishers.agents[n].kill()
        agent = new_publisher(env, n, f"agent-{n}-replacement")
        seconds = topology.replace_dead(
            replace(ring.node(n), cdc_on_repair_enabled=on_repair,
                    ring_delay_ms=RING_DELAY_MS), log=print)
        agent.start()
        agent.wait_serving(60)
        writes.down = frozenset()
    step = Step("replace", f"node {n}: {str(on_repair).lower()}", seconds,
                statements=writes.statements,
                cut_short=writes.timeouts + writes.failures)
    return _finish(env, topo, step, marks)


def _repair(env: dict, topo: dict, n: int) -> Step:
    """Node `n` misses writes that no hint will bring (hinted handoff off on the others,
    its gossip off so they see it down and send it nothing; no restart needed), gossips
    again, and `nodetool repair <keyspace>` on it, while writes flow, streams it what it
    missed."""
    ring, ks, sessions = env["ring"], topo["ks"], env["sessions"]
    others = [m for m in RING if m != n]
    marks = raw_marks(env)
    with _writes(env, topo) as writes:
        writes.down = frozenset({n})
        nodetool_each([*((ring.node(m), "disablehandoff") for m in others),
                       (ring.node(n), "disablegossip")])
        try:
            # a write at ALL is refused once a node holds node n down
            wait_until(lambda: not any(write_probe(sessions[m], ks, "ALL") for m in others),
                       120, f"nodes {others} to see node {n} down", interval_s=1)
            for k in range(MISSED):
                sessions[others[k % 2]].execute(SimpleStatement(
                    f"INSERT INTO {ks}.missed (k, v) VALUES ({k}, 'm{k}')",
                    consistency_level=ConsistencyLevel.QUORUM), timeout=30)
        finally:
            cassandra.nodetool(ring.node(n), "enablegossip")
            wait_until(lambda: all(write_probe(s, ks, "ALL") for s in sessions.values()),
                       120, "every node to see every node up", interval_s=1)
            nodetool_each([(ring.node(m), "enablehandoff") for m in others])
        writes.down = frozenset()
        started = time.monotonic()
        cassandra.nodetool(ring.node(n), "repair", ks, timeout_s=600)
        seconds = time.monotonic() - started
    step = Step("repair", f"node {n}: true", seconds, statements=writes.statements,
                cut_short=writes.timeouts + writes.failures)
    return _finish(env, topo, step, marks, "missed")


def _sent(step: Step, hosts: Iterable[int], table: str) -> int:
    """The raw records of `table` that the publishers of `hosts` sent during `step`."""
    return sum(step.records[(f"node-{h}", table)] for h in hosts)


@pytest.mark.measurement  # the value not recommended, measured once: `make measure`
def test_a_node_that_joins_with_cdc_on_repair_off_publishes_none_of_what_it_streamed(
        env, topo) -> None:
    """The other value, measured: node 4 joins with cdc_on_repair_enabled false. Its
    publisher sends the writes it takes as a replica and none of the rows it streamed;
    the events stay exact, as every row streamed to it was published by the replicas that
    took it when it was written. It then leaves again, to nodes 1-3 (true)."""
    try:
        boot = _bootstrap(env, topo, OFF, on_repair=False)
        assert boot.statements > 0 and boot.owned > 0, boot.line()
        assert boot.records[(f"node-{OFF}", "pre")] == 0, boot.line()
        assert boot.records[(f"node-{OFF}", "*")] > 0, boot.line()  # the writes it took
        leave = _decommission(env, topo, OFF)
        # what nodes 1-3 took back from it went through their commit logs
        assert _sent(leave, RING, "pre") >= boot.owned, leave.line()
    finally:
        restore_ring(env)


def test_bootstrap_decommission_replace_and_repair_keep_the_events_exact(env, topo) -> None:
    """With cdc_on_repair_enabled true (the value recommended): node 5 joins, every row it
    takes reaches its publisher; it leaves, and what it held reaches the publishers of the
    nodes that take it back; node 3 is lost and replaced, and its new publisher sends every
    row (a node of three at RF=3 holds them all); node 2, repaired, publishes the rows it
    missed. After each, the ring's checks pass and `pre` has one event per row."""
    try:
        boot = _bootstrap(env, topo, ON, on_repair=True)
        assert boot.statements > 0 and boot.owned > 0, boot.line()
        assert boot.records[(f"node-{ON}", "pre")] >= boot.owned, boot.line()
        leave = _decommission(env, topo, ON)
        assert _sent(leave, RING, "pre") >= boot.owned, leave.line()
        swap = _replace(env, topo, 3, on_repair=True)
        assert swap.records[("node-3", "pre")] >= PRE, swap.line()
        fix = _repair(env, topo, 2)
        assert fix.records[("node-2", "missed")] >= MISSED, fix.line()
    finally:
        restore_ring(env, replaced=3)
