"""`casscade materializer rescale`: a job outgrows its state partitions, on the real stack.

A randomized workload in two parts is published. One job runs with 2 state partitions over
part 1, is rescaled to 4 (its state, timers and Kafka position go to a new checkpoint), and
the rescaled job processes part 2. The reference is the job's own merge and event rule
(KeyHandler) run in this process over the same two micro-batches without a rescale (a
second Spark job did the same in 45 s more). Both parts' events must be the reference's,
key by key; the final rows must be Cassandra's; no event may come from a part-1 record
after the rescale; and a TTL timer set before the rescale must fire after it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from collections import defaultdict
from pathlib import Path

import pytest
from confluent_kafka import KafkaException
from materializer_harness import (
    canonical,
    final_rows,
    handler_streams,
    kill_group,
    materializer_command,
    oracle_rows,
    publish_new_cdc,
    read_events,
    run_materializer,
    start_materializer,
)
from reference import cdc_offsets
from support import wait_until
from test_decode_random_workload import create_workload_tables, run_workload

from devstack.settings import StackSettings, repo_root
from publisher.commitlog.schema_source import read_system_schema
from shared.schema import catalog_from_json

pytestmark = pytest.mark.integration

STATEMENTS = 900  # per part
# The TTL row must outlive job A's run (its `c`, and its timer in the state that moves), and
# runs out while the jobs are stopped or rescaled: the moved timer is already due when the
# rescaled job starts, so the test does not wait for it (it waited 240 s before).
TTL_S = 120
# rows in pages of 2: the workload's partitions (up to 18 rows) page, so pages move too
PAGES = "spark.state_page_rows=2"


def _rescale(stack: StackSettings, prefix: str, old: Path, new: Path,
             *sets: str) -> subprocess.CompletedProcess:
    """`casscade materializer rescale` as an operator runs it."""
    cmd = [sys.executable, "-m", "casscade.cli", "materializer", "rescale",
           "--from-checkpoint", str(old),
           "--set", f"kafka.bootstrap_servers={stack.bootstrap_servers}",
           "--set", f"kafka.topic_prefix={prefix}", "--set", f"spark.checkpoint={new}",
           "--set", "log.format=text", "--set", PAGES]
    for s in sets:
        cmd += ["--set", s]
    return subprocess.run(cmd, cwd=repo_root(), capture_output=True, text=True, timeout=900,
                          start_new_session=True)


def _ends(stack: StackSettings, topics: list[str]) -> dict[str, dict[int, int]]:
    """Per event topic and partition: the offset after its last event (0: none yet)."""
    out: dict[str, dict[int, int]] = {}
    for topic in topics:
        ends: dict[int, int] = defaultdict(int)
        for p, o, _k, _v in read_events(stack.bootstrap_servers, topic):
            ends[p] = max(ends[p], o + 1)
        out[topic] = ends
    return out


def _streams(events: list[tuple]) -> dict[str, list]:
    """Per key: its events' (op, before, after) in order (tombstones as None)."""
    out: dict[str, list] = defaultdict(list)
    for _p, _o, key, value in sorted(events, key=lambda e: (e[0], e[1])):
        out[canonical(key)].append(None if value is None else
                                   (value["op"], value["before"], value["after"]))
    return dict(out)


def _ttl_ops(stack: StackSettings, topic: str) -> list[tuple[int, str, int | None]]:
    try:
        events = read_events(stack.bootstrap_servers, topic, timeout_s=5)
    except (AssertionError, KafkaException):
        return []
    return [(k["k"], v["op"], o) for _p, o, k, v in events if v]


def test_rescaled_job_continues_exactly_where_the_old_one_stopped(stack, cql, tmp_path) -> None:
    ks = f"rsc_{uuid.uuid4().hex[:8]}"
    # every row on the local node, even when the dev node has (possibly down) ring peers
    # from a `stack up --nodes 3`: its CDC must see every write, and writes at ONE succeed
    nodes = 1 + len(list(cql.execute("SELECT peer FROM system.peers")))
    cql.execute(f"CREATE KEYSPACE {ks} WITH replication = "
                f"{{'class': 'SimpleStrategy', 'replication_factor': {nodes}}}")
    try:
        _run(stack, cql, ks, tmp_path)
    finally:
        cql.execute(f"DROP KEYSPACE {ks}")


def _run(stack: StackSettings, cql, ks: str, work: Path) -> None:
    create_workload_tables(cql, ks)
    cql.execute(f"CREATE TABLE {ks}.t (k int PRIMARY KEY, v text) WITH cdc = true")
    res = f"rs{uuid.uuid4().hex[:8]}"
    topics = {name: f"{{}}.{ks}.{name}" for name in ("r", "ctr", "t")}
    old, new = work / "ckpt-2", work / "ckpt-4"

    # part 1, and a row whose TTL runs out only after the rescale
    before = cdc_offsets(stack.cdc_raw_dir)
    assert len(run_workload(cql, ks, STATEMENTS)) >= STATEMENTS * 0.9
    cql.execute(f"INSERT INTO {ks}.t (k, v) VALUES (1, 'expires') USING TTL {TTL_S}")
    written = time.monotonic()
    publish_new_cdc(stack, cql, before, res, work / f"p1-{res}", from_before=True)
    # rescale moves Spark's state store: job A runs in that mode (not the default's)
    run_materializer(materializer_command(stack, res, old, "spark.state_mode=spark",
                                          "spark.shuffle_partitions=2", PAGES),
                     work / "job-2.log")
    assert time.monotonic() - written < TTL_S - 20, "job A ran too late to see the TTL row"
    assert (1, "c") in [(k, op) for k, op, _o in _ttl_ops(stack, topics["t"].format(res))]
    marks = _ends(stack, [t.format(res) for t in topics.values()])

    # part 2, published while the old job is stopped
    before = cdc_offsets(stack.cdc_raw_dir)
    assert len(run_workload(cql, ks, STATEMENTS)) >= STATEMENTS * 0.9
    publish_new_cdc(stack, cql, before, res, work / f"p2-{res}", from_before=True)

    # refusals first: each leaves the new checkpoint untouched
    for sets, why in ((("spark.shuffle_partitions=1",), "fewer than the old"),
                      (("spark.shuffle_partitions=4", "spark.state_buckets=32"),
                       "another bucket than spark.state_buckets=32")):
        out = _rescale(stack, res, old, new, *sets)
        assert out.returncode != 0 and why in out.stderr, out.stderr[-3000:]
        assert not new.exists()
    (work / "empty").mkdir()
    for path, why in ((work / "missing", "no such checkpoint"),
                      (work / "empty", "no committed micro-batch")):
        out = _rescale(stack, res, path, new, "spark.shuffle_partitions=4")
        assert out.returncode != 0 and why in out.stderr, out.stderr[-3000:]

    started = time.monotonic()
    out = _rescale(stack, res, old, new, "spark.shuffle_partitions=4")
    (work / "rescale.log").write_text(out.stdout + out.stderr)
    assert out.returncode == 0, out.stderr[-4000:]
    print(f"\n[rescale] {time.monotonic() - started:.0f}s")
    report = json.loads(out.stdout)
    carried = report["carried"]
    assert report["old_partitions"] == 2 and report["new_partitions"] == 4
    assert carried["partitions"] >= 8 and carried["pages"] >= 3 and carried["misplaced"] == 0
    assert carried["expiries"] >= 1 and carried["timers"] >= carried["expiries"]
    assert sorted(p.name for p in (new / "state" / "0").iterdir() if p.name.isdigit()) == \
        ["0", "1", "2", "3"]
    again = _rescale(stack, res, old, new, "spark.shuffle_partitions=4")
    assert again.returncode != 0 and "not empty" in again.stderr

    # both parts' events: the reference's (part 1 from job A, part 2 from the rescale's
    # run), none of part 2 from a record the old job had processed
    start = report["starting_offsets"]
    tables = {t.table: t for t in catalog_from_json(read_system_schema(cql)).values()
              if t.keyspace == ks}
    for name in ("r", "ctr"):
        raw = f"{res}.raw.{ks}.{name}"
        part1 = {int(p): o for p, o in start[raw].items()}
        want1, want2 = handler_streams(stack.bootstrap_servers, res, raw,
                                       [part1, {p: 1 << 62 for p in part1}])
        events = read_events(stack.bootstrap_servers, topics[name].format(res))
        mark = marks[topics[name].format(res)]
        assert _streams([e for e in events if e[1] < mark[e[0]]]) == want1 and want1, name
        got = [e for e in events if e[1] >= mark[e[0]]]
        assert got, name
        assert _streams(got) == want2, name
        for _p, _o, _k, value in got:
            src = value and value["source"]
            if src and src["kafka_offset"] is not None:
                assert src["kafka_offset"] >= start[src["kafka_topic"]][
                    str(src["kafka_partition"])], src
        assert final_rows(events) == oracle_rows(cql, tables[name]), name

    # the TTL timer came along: with the job running again (one new record starts its
    # micro-batches), the row expires with a `d` no raw record caused, and only once. The
    # job keeps the default spark.state_mode auto: the rescaled checkpoint keeps its mode
    ttl_topic = topics["t"].format(res)
    proc = start_materializer(materializer_command(stack, res, new, PAGES, available_now=False),
                              work / "job-4.log")
    try:
        before = cdc_offsets(stack.cdc_raw_dir)
        cql.execute(f"INSERT INTO {ks}.t (k, v) VALUES (2, 'wakes the job')")
        publish_new_cdc(stack, cql, before, res, work / "p3", from_before=True)
        wait_until(lambda: (2, "c") in [(k, op) for k, op, _o in _ttl_ops(stack, ttl_topic)],
                   300, "the new record's event")
        wait_until(lambda: (1, "d") in [(k, op) for k, op, _o in _ttl_ops(stack, ttl_topic)],
                   TTL_S + 60, "the TTL row's expiry")
    finally:
        kill_group(proc)
    assert "state mode state_mode=spark" in (work / "job-4.log").read_text()
    assert time.monotonic() - written >= TTL_S - 1
    expiry = [(p, o, v) for p, o, k, v in read_events(stack.bootstrap_servers, ttl_topic)
              if v and v["op"] == "d" and k["k"] == 1]
    assert len(expiry) == 1 and expiry[0][2]["source"]["kafka_offset"] is None
    assert expiry[0][1] >= marks[ttl_topic][expiry[0][0]]  # emitted after the rescale
