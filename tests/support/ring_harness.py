"""Test harness for a ring of three real Cassandra nodes at RF=3: a publisher process per
node, a randomized workload spread over the nodes at mixed consistency levels, and the
checks every RF=3 scenario makes on the change events (test code only)."""

from __future__ import annotations

import json
import os
import random
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from devstack import cassandra
from devstack.settings import StackSettings
from materializer.store import consumed_offsets
from materializer.store.layout import STATE_DIR
from shared.kafka_topics import read_to_end
from shared.rowupdate import is_row_update
from shared.rowupdate_reader import read_row_update
from shared.schema import TableSchema
from shared.topic_names import changelog_topic, raw_topic

from support.materializer_harness import (
    canonical,
    change_of,
    duplicates,
    final_rows,
    oracle_rows,
    read_events,
)
from support.phases import phased
from support.publisher_harness import AgentProcess
from support.reference import settled_offsets
from support.services import http_get, wait_until
from support.workload import (
    ALL_COLUMNS,
    INT,
    P1,
    P2,
    TEXT,
    create_workload_tables,
    draw_statements,
    node_columns,
    statement,
)

# each node's agent's /status port: 18201-18203, or from CASSCADE_RING_AGENT_PORT + n (the
# test ring's agents beside a soak's, which use the defaults)
AGENT_PORTS = {n: int(os.environ.get("CASSCADE_RING_AGENT_PORT", "18200")) + n
               for n in (1, 2, 3)}


class RingPublishers:
    """`casscade publisher run` beside each node of the ring, all into one prefix."""

    def __init__(self, ring: StackSettings, workdir: Path, prefix: str,
                 sections: dict[str, dict] | None = None,
                 http_ports: dict[int, int] | None = None) -> None:
        """`sections` adds settings to every agent's config (AgentProcess); `http_ports`:
        each node's agent's port (default AGENT_PORTS: another ring's agents need others)."""
        self.ring = ring
        self.prefix = prefix
        ports = http_ports or AGENT_PORTS
        self.agents = {node.node_index: AgentProcess(
            node, ring, workdir / f"agent-{node.node_index}", prefix,
            http_port=ports[node.node_index], host_name=f"node-{node.node_index}",
            sections=sections)
            for node in ring.all_nodes()}

    def start(self, *nodes: int) -> None:
        """Start the agents of `nodes` (default: all) and wait until each serves."""
        for n in nodes or self.agents:
            self.agents[n].start()
        for n in nodes or self.agents:
            self.agents[n].wait_serving(60)

    def stop(self) -> None:
        """SIGTERM every agent still running."""
        for agent in self.agents.values():
            agent.stop()

    def wait_caught_up(self, timeout_s: float = 120, nodes: Sequence[int] = ()) -> None:
        """Block until every agent (of `nodes`, default all) has every record its node has
        synced acknowledged."""
        for n, agent in self.agents.items():
            if nodes and n not in nodes:
                continue
            node = self.ring.node(n)
            offsets = settled_offsets(node.cdc_raw_dir, allow_empty=True)

            def caught_up(agent: AgentProcess = agent, offsets: dict = offsets,
                          cdc_raw: Path = node.cdc_raw_dir) -> bool:
                code, body = http_get(agent.http_port, "/status")
                if code != 200:
                    return False
                segments = json.loads(body).get("segments", {})
                for name, offset in offsets.items():
                    seg = segments.get(name.split("-")[2].split(".")[0])
                    if (cdc_raw / name).exists() and (
                            seg is None or seg["acked_position"] < offset):
                        return False
                return True

            wait_until(caught_up, timeout_s, f"node {n}'s agent to publish what it synced")


def submit_command(master: str, packed: Path, bootstrap: str, prefix: str, checkpoint: str,
                   *settings: str) -> list[str]:
    """`deploy/spark/submit.sh` of the job, --available-now, to the standalone cluster at
    `master` with the packed environment and the jars the stack fetched; `settings`: more
    --set items (KEY=VALUE)."""
    cmd = ["deploy/spark/submit.sh", "--master", master, "--local-jars", "--env", str(packed),
           "--"]
    for item in (f"kafka.bootstrap_servers={bootstrap}", f"kafka.topic_prefix={prefix}",
                 f"spark.checkpoint={checkpoint}", *settings, "log.format=text",
                 "http.port=0"):
        cmd += ["--set", item]
    return [*cmd, "--available-now"]


def pinned_sessions(ring: StackSettings) -> dict[int, Any]:
    """One CQL session per node, each sending every request to its own node."""
    from devstack.cassandra import cql_cluster

    return {node.node_index: cql_cluster(node, pinned=True).connect()
            for node in ring.all_nodes()}


def session_at_all(ring: StackSettings) -> Any:
    """A session whose reads and writes default to consistency ALL (the truth of the ring)."""
    from cassandra import ConsistencyLevel
    from cassandra.cluster import EXEC_PROFILE_DEFAULT

    from devstack.cassandra import cql_cluster

    cluster = cql_cluster(ring)
    cluster.profile_manager.profiles[EXEC_PROFILE_DEFAULT].consistency_level = \
        ConsistencyLevel.ALL
    return cluster.connect()


RF3 = "{'class': 'SimpleStrategy', 'replication_factor': 3}"


def rf3_keyspace(truth: Any, tables: str = "workload") -> str:
    """A new keyspace at RF=3 (`tables` "workload": with the workload's tables, "none":
    empty); its name."""
    ks = f"rf3_{uuid.uuid4().hex[:8]}"
    truth.execute(f"CREATE KEYSPACE {ks} WITH replication = {RF3}")
    if tables == "workload":
        create_workload_tables(truth, ks)
    return ks


def keyspace_tables(truth: Any, ks: str, only: Sequence[str] | None = None
                    ) -> dict[str, TableSchema]:
    """The schemas of keyspace `ks`'s tables as the ring has them, by table name (`only`:
    those tables)."""
    from shared.schema import catalog_from_json
    from shared.system_schema import read_system_schema

    return {t.table: t for t in catalog_from_json(read_system_schema(truth)).values()
            if t.keyspace == ks and (only is None or t.table in only)}


@st.composite
def ring_statement(draw: Any, ks: str, partitions: int = 4,
                   columns: tuple[str, ...] = ALL_COLUMNS) -> str:
    """A statement of the random workload, or one that only a ring makes interesting: a
    static column written with rows in one mutation, and lightweight transactions
    (`partitions`, `columns`: as `statement`'s)."""
    kind = draw(st.sampled_from(["plain"] * 8 + ["static_row", "static_batch", "lwt"]))
    if kind == "plain":
        return draw(statement(ks, partitions, columns))
    p1 = draw(P1 if partitions == 4 else st.integers(0, partitions - 1))
    p2 = draw(P2)
    pk, where_pk = f"{p1}, {p2}", f"p1 = {p1} AND p2 = {p2}"
    c1 = draw(st.integers(0, 5))
    if kind == "static_row":
        return (f"INSERT INTO {ks}.r (p1, p2, c1, c2, s_int, v_int) VALUES ({pk}, {c1}, 'x', "
                f"{draw(INT)}, {draw(INT)})")
    if kind == "static_batch":  # one partition: Cassandra makes it one mutation
        rows = "; ".join(f"INSERT INTO {ks}.r (p1, p2, c1, c2, v_text) VALUES ({pk}, {c}, "
                         f"'y', {draw(TEXT)})" for c in draw(st.lists(
                             st.integers(0, 5), min_size=1, max_size=3, unique=True)))
        return (f"BEGIN BATCH UPDATE {ks}.r SET s_int = {draw(INT)} WHERE {where_pk}; "
                f"{rows}; APPLY BATCH")
    if draw(st.booleans()):
        return (f"INSERT INTO {ks}.r (p1, p2, c1, c2, v_int) VALUES ({pk}, {c1}, 'z', "
                f"{draw(INT)}) IF NOT EXISTS")
    return (f"UPDATE {ks}.r SET v_text = {draw(TEXT)} WHERE {where_pk} AND c1 = {c1} "
            f"AND c2 = 'z' IF v_int > 0")


@dataclass
class Workload:
    """What a ring workload did: statements, where they went, what failed."""

    executed: list[tuple[int, str, str]] = field(default_factory=list)  # node, CL, CQL
    unavailable: int = 0


@phased("workloads")
def run_ring_workload(sessions: dict[int, Any], ks: str, count: int, seed: int,
                      down: Callable[[], set[int]] = set,
                      at: dict[int, Callable[[], None]] | None = None,
                      cover: Sequence[str] = (), workers: int = 1) -> Workload:
    """About `count` random statements (each marker of `cover` in at least ten), each sent to
    a random node that is up at a random consistency level (ALL only while every node is
    up); `at[i]` runs before statement i and is taken out of `at` (what is left in it never
    ran). `workers` > 1: that many statements in flight at once (no `down` or `at` then):
    their order is Cassandra's to settle, and SELECT at ALL stays the truth."""
    if workers > 1:
        assert at is None and down is set, "a concurrent workload takes no faults"
        return _concurrent_workload(sessions, ks, count, seed, cover, workers)
    from cassandra import ConsistencyLevel as CL
    from cassandra import Unavailable, WriteTimeout
    from cassandra.cluster import NoHostAvailable
    from cassandra.query import SimpleStatement

    rng = random.Random(seed)
    hooks = at if at is not None else {}
    done = Workload()
    for text in draw_statements(ring_statement(ks, columns=node_columns(sessions[1])), count,
                                cover):
        hook = hooks.pop(len(done.executed), None)
        if hook is not None:
            hook()
        gone = down()
        up = [n for n in sessions if n not in gone]
        node = rng.choice(up)
        levels = [CL.ONE, CL.QUORUM] + ([] if gone else [CL.ALL])
        cl = rng.choice(levels)
        for attempt in [node] + [n for n in up if n != node]:
            try:
                sessions[attempt].execute(SimpleStatement(text, consistency_level=cl),
                                          timeout=30)
            except NoHostAvailable:
                continue  # the driver has not reconnected to a restarted node yet
            except (Unavailable, WriteTimeout):
                # a replica just went down: the write may or may not have landed; either
                # way Cassandra's SELECT at ALL is the truth the events must meet
                done.unavailable += 1
            node = attempt
            break
        else:
            raise AssertionError(f"no node took {text!r}")
        done.executed.append((node, CL.value_to_name[cl], text))
    return done


def _concurrent_workload(sessions: dict[int, Any], ks: str, count: int, seed: int,
                         cover: Sequence[str], workers: int) -> Workload:
    """run_ring_workload with `workers` statements in flight (every node up)."""
    from concurrent.futures import ThreadPoolExecutor

    from cassandra import ConsistencyLevel as CL
    from cassandra import Unavailable, WriteTimeout
    from cassandra.query import SimpleStatement

    rng = random.Random(seed)
    plan = [(rng.choice(list(sessions)), rng.choice([CL.ONE, CL.QUORUM, CL.ALL]), text)
            for text in draw_statements(ring_statement(ks, columns=node_columns(sessions[1])),
                                        count, cover)]

    def execute(step: tuple[int, int, str]) -> bool:
        node, cl, text = step
        try:
            sessions[node].execute(SimpleStatement(text, consistency_level=cl), timeout=30)
            return True
        except (Unavailable, WriteTimeout):  # landed or not: SELECT at ALL is the truth
            return False

    # Lightweight transactions go one at a time, alone: two at once on one partition
    # contend, and Paxos answers "result unknown" (seen with four in flight)
    taken: list[bool] = []
    with ThreadPoolExecutor(workers) as pool:
        start = 0
        for end in [i for i, (_n, _cl, text) in enumerate(plan) if _is_lwt(text)] + [len(plan)]:
            taken += pool.map(execute, plan[start:end])
            taken += [execute(plan[end])] if end < len(plan) else []
            start = end + 1
    return Workload([(node, CL.value_to_name[cl], text) for node, cl, text in plan],
                    taken.count(False))


def _is_lwt(text: str) -> bool:
    return " IF NOT EXISTS" in text or " IF v_int" in text


def check_events(bootstrap: str, prefix: str, truth: Any, tables: dict[str, TableSchema],
                 min_rows: int = 5, exactly_once: bool = True) -> dict[str, int]:
    """The checks of every RF=3 scenario, on the events a read_committed consumer reads;
    returns events per table.

    For every primary key the last event's `after` (or its absence after a `d`) equals
    `SELECT` at ALL; no event shows no visible change; every event's `before` equals the
    previous `after` of its key; no event repeats an earlier one (same change, same source
    position: a replay). `exactly_once` False (events.delivery: at-least-once): a repeat
    is allowed, and counted once.
    """
    problems: list[str] = []
    counts = {}
    for name, table in tables.items():
        events = read_events(bootstrap, f"{prefix}.{table.keyspace}.{name}")
        if exactly_once:
            problems += [f"{name} {d}" for d in duplicates(events)]
        else:
            events = without_replays(events)
        counts[name] = len(events)
        got, want = final_rows(events), oracle_rows(truth, table)
        assert len(want) >= min_rows, f"{name}: only {len(want)} rows to compare"
        for key in sorted(got.keys() | want.keys()):
            if got.get(key) != want.get(key):
                problems.append(f"{name} {key}: events {canonical(got.get(key))} != "
                                f"select at ALL {canonical(want.get(key))}")
        no_ops, broken = event_chain(events)
        problems += [f"{name} {problem}" for problem in no_ops + broken]
    assert not problems, f"{len(problems)} problems:\n" + "\n".join(problems[:10])
    return counts


def event_chain(events: list[tuple[int, int, dict, dict | None]]) -> tuple[list[str],
                                                                          list[str]]:
    """Per key in offset order: the events that show no visible change, and those whose
    `before` is not the key's previous `after`, each named by key and position. After a
    truncate event (no key) a key of its partition starts a chain again: a consumer that
    truncated on it holds nothing of it, whatever the key's next `before` says. A truncate
    barrier's `r` (source file `truncate`) may also restate a row that an event of the key
    gave after the truncate event (docs/architecture.md "Truncate events"): its `before`
    is null and its `after` must be that event's `after`."""
    no_ops: list[str] = []
    broken: list[str] = []
    last: dict[str, Any] = {}
    partition_of: dict[str, int] = {}
    for p, o, key, value in sorted(events, key=lambda e: (e[0], e[1])):
        if value is None:
            continue  # the tombstone after a delete
        if key is None and value["op"] == "t":
            for k in [k for k, part in partition_of.items() if part == p]:
                del partition_of[k]
                last[k] = _ANY
            continue
        k = canonical(key)
        partition_of[k] = p
        # as JSON text: 0.0 and -0.0 are two CQL values (SELECT shows them apart) that
        # Python's == calls equal
        if canonical(value["before"]) == canonical(value["after"]):
            no_ops.append(f"{k} @{p}/{o}: {value['op']} with no visible change")
        if (last.get(k) is not _ANY and not _restates(last.get(k), value)
                and not _follows(last.get(k), value["before"])):
            broken.append(f"{k} @{p}/{o}: before {canonical(value['before'])} != the "
                          f"previous after {canonical(last.get(k))}")
        last[k] = value["after"]
    return no_ops, broken


_ANY = object()  # a key's chain starts again (after a truncate event)


def _restates(previous: Any, value: dict) -> bool:
    """`value` is a truncate barrier's `r` that gives again the row a key's previous event
    gave (`previous`: its `after`)."""
    source = value.get("source") or {}
    return (value["op"] == "r" and source.get("file") == "truncate"
            and value["before"] is None and previous is not None
            and value["after"] is not None and _follows(previous, value["after"]))


def _follows(previous: dict | None, before: dict | None) -> bool:
    """`before` is the `previous` after on the table's columns now: a column added since
    is null in `before` and absent from `previous`; a dropped one is gone from `before`."""
    if previous is None or before is None:
        return previous is None and before is None
    return all(previous[c] == v if c in previous else v is None for c, v in before.items())


def without_replays(events: list[tuple[int, int, dict, dict | None]]
                     ) -> list[tuple[int, int, dict, dict | None]]:
    """The events with repeats of an earlier event of the same key left out (a replayed
    micro-batch or task writes the same events again, tombstones included; a re-run task
    may keep another replica's copy of a record, so which copy made the event is left out
    of the comparison)."""
    seen: set[str] = set()
    out = []
    for p, o, key, value in sorted(events, key=lambda e: (e[0], e[1])):
        if value is None:
            if out and out[-1][3] is not None and out[-1][2] == key:
                out.append((p, o, key, value))  # the tombstone right after a kept delete
            continue
        ident = change_of(key, value) + (f" in {p}" if key is None else "")  # (op t)
        if ident not in seen:
            seen.add(ident)
            out.append((p, o, key, value))
    return out


def job_caught_up(checkpoint: Path, bootstrap: str, topic: str,
                  ends: dict[int, int] | None = None) -> bool:
    """The job's last committed micro-batch reached the end of every partition of the raw
    topic `topic` (its events are written: a batch commits after its sink); `ends`: these
    offsets by partition instead of the ends now (a topic still being written)."""
    from materializer.checkpoint.files import LocalFiles
    from materializer.checkpoint.records import last_batch, parse_offset_log

    batch = last_batch(LocalFiles(checkpoint).names("commits"))
    if batch is None:
        return False
    _conf, sources = parse_offset_log((checkpoint / "offsets" / str(batch)).read_text())
    done = (sources[0] or {}).get(topic, {})
    ends = topic_ends(bootstrap, topic) if ends is None else ends
    return all(done.get(str(p), 0) >= high for p, high in ends.items())


def topic_ends(bootstrap: str, topic: str) -> dict[int, int]:
    """The end offset of each partition of `topic` now ({} while it does not exist)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "ring-caught-up",
                         "enable.auto.commit": False})
    try:
        meta = consumer.list_topics(timeout=10).topics.get(topic)
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                for p in (meta.partitions if meta is not None else {})}
    finally:
        consumer.close()


def no_hints_left(ring: StackSettings) -> bool:
    """No node of the ring holds a hint file."""
    return not any(any(node.cassandra_dir.joinpath("hints").glob("*.hints"))
                   for node in ring.all_nodes())


def nodetool_each(calls: list[tuple]) -> None:
    """`nodetool` on several nodes side by side (each call starts a JVM: ~4 s)."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(len(calls)) as pool:
        list(pool.map(lambda call: cassandra.nodetool(*call), calls))


def write_probe(session, ks: str, level: str) -> bool:
    """Whether a write at `level` through `session`'s node is taken (False: Unavailable, the
    node holds too few replicas up; nothing is written then)."""
    from cassandra import ConsistencyLevel, Unavailable
    from cassandra.cluster import NoHostAvailable
    from cassandra.query import SimpleStatement

    try:
        session.execute(SimpleStatement(f"INSERT INTO {ks}.probe (k) VALUES (0)",
                                        consistency_level=getattr(ConsistencyLevel, level)),
                        timeout=10)
        return True
    except Unavailable:
        return False
    except NoHostAvailable as exc:  # a pinned session's one host answered Unavailable
        if all(isinstance(e, Unavailable) for e in exc.errors.values()):
            return False
        raise


def raw_records(env: dict, ks: str, table: str) -> list[dict]:
    """Every raw record of a table in a ring test's `env` (from the raw topic), decoded."""
    records = (read_row_update(m.value())
               for m in read_to_end(env["ring"].bootstrap_servers, raw_topic(env["prefix"]))
               if is_row_update(m.value()))
    return [r for r in records if (r["keyspace"], r["table"]) == (ks, table)]


def committed_batches(bootstrap: str, prefix: str, checkpoint: Path) -> dict[int, int]:
    """Per raw partition, the last micro-batch whose transaction committed (exactly-once):
    the batch of the last raw-offsets record in the job's changelog, read committed."""
    job_id = json.loads((checkpoint / STATE_DIR / "changelog.json").read_text())["job_id"]
    found: dict[int, int] = {}
    for msg in read_to_end(bootstrap, changelog_topic(prefix, job_id)):
        if msg.key() == consumed_offsets.CHANGELOG_KEY and msg.value() is not None:
            found[msg.partition()] = consumed_offsets.decode(msg.value())[0]
    return found


def batch_partitions(checkpoint: Path, batch: int) -> set[int]:
    """The raw partitions whose offsets advanced in micro-batch `batch` (from the offset
    log: those its tasks read records of)."""
    from materializer.checkpoint.records import parse_offset_log

    def offsets(b: int) -> dict[int, int]:
        path = checkpoint / "offsets" / str(b)
        if not path.exists():
            return {}
        source = parse_offset_log(path.read_text())[1][0] or {}
        return {int(p): o for topic in source.values() for p, o in topic.items()}

    before, after = offsets(batch - 1), offsets(batch)
    return {p for p, o in after.items() if o > before.get(p, 0)}
