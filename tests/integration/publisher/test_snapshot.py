"""Bootstrap snapshot on the real stack: existing rows plus writes during the snapshot,
through the publisher and the Spark job, end equal to `SELECT` with no double creation."""

from __future__ import annotations

import random
import subprocess
import sys
import threading
import time
import uuid
from collections import defaultdict

import pytest

from devstack.settings import repo_root
from shared.schema import catalog_from_json
from shared.system_schema import read_system_schema

from support.materializer_harness import (
    canonical,
    final_rows,
    materializer_command,
    oracle_rows,
    publish_new_cdc,
    read_events,
    run_materializer,
)
from support.reference import cdc_offsets

pytestmark = pytest.mark.integration
ROWS = 600


def _snapshot(stack, ks: str, prefix: str, state_dir, *extra: str) -> str:
    cmd = [sys.executable, "-m", "casscade.cli", "snapshot", "--table", f"{ks}.t",
           "--set", f"kafka.bootstrap_servers={stack.bootstrap_servers}",
           "--set", f"kafka.topic_prefix={prefix}", "--set", "kafka.partitions=3",
           "--set", f"cassandra.port={stack.cql_port}", "--set", f"state.path={state_dir}",
           "--splits", "16", *extra]
    out = subprocess.run(cmd, cwd=repo_root(), capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


def test_snapshot_and_live_cdc_merge_without_gap_or_double_create(stack, cql, tmp_path):
    ks = f"snap_{uuid.uuid4().hex[:8]}"
    cql.execute(f"CREATE KEYSPACE {ks} WITH replication = "
                "{'class': 'SimpleStrategy', 'replication_factor': 1}")
    cql.execute(f"CREATE TYPE {ks}.pt (a int, b text)")
    cql.execute(f"CREATE TABLE {ks}.t (p int, c int, s int static, v text, n bigint, "
                f"st set<int>, m map<text, int>, l list<text>, u pt, PRIMARY KEY (p, c)) "
                f"WITH cdc = true")
    insert = cql.prepare(f"INSERT INTO {ks}.t (p, c, s, v, n, st, m, l, u) "
                         f"VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) USING TTL ?")
    for i in range(ROWS):  # rows that exist before anyone streams the table
        cql.execute(insert, (i % 50, i, i % 7, f"v{i}", i * 1000, {i, i + 1},
                             {"a": i, "b": -i}, [f"x{i}", f"y{i}"], (i, f"u{i}"),
                             100_000 if i % 5 == 0 else 0))
    before = cdc_offsets(stack.cdc_raw_dir)  # the publisher starts here: older data unseen
    prefix = f"b{uuid.uuid4().hex[:8]}"
    stop = threading.Event()
    touched: set[tuple[int, int | None]] = set()  # rows (p, c) and partitions (p, None)

    def writer() -> None:  # live writes while the snapshot runs
        rnd = random.Random(5)
        while not stop.is_set():
            i = rnd.randrange(ROWS + 100)
            kind = rnd.randrange(4)
            touched.add((i % 50, None if kind == 2 else i))
            if kind == 0:
                cql.execute(f"UPDATE {ks}.t SET v = 'live{i}', st = st + {{{i * 7}}} "
                            f"WHERE p = {i % 50} AND c = {i}")
            elif kind == 1:
                cql.execute(f"DELETE FROM {ks}.t WHERE p = {i % 50} AND c = {i}")
            elif kind == 2:
                cql.execute(f"UPDATE {ks}.t SET s = {i} WHERE p = {i % 50}")
            else:
                cql.execute(f"UPDATE {ks}.t SET m['z'] = {i}, u.a = {i} "
                            f"WHERE p = {i % 50} AND c = {i}")
            time.sleep(0.005)

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        out = _snapshot(stack, ks, prefix, tmp_path / "state", "--rate", "300")
    finally:
        stop.set()
        thread.join()
    assert "16/16 ranges" in out
    # resumable: a rerun finds every range done and reads nothing
    assert "0 rows published, 16/16" in _snapshot(stack, ks, prefix, tmp_path / "state")

    publish_new_cdc(stack, cql, before, prefix, tmp_path / "pub", from_before=True)
    run_materializer(materializer_command(stack, prefix, tmp_path / "ckpt"),
                     tmp_path / "job.log")
    table = next(t for t in catalog_from_json(read_system_schema(cql)).values()
                 if (t.keyspace, t.table) == (ks, "t"))
    events = read_events(stack.bootstrap_servers, f"{prefix}.{ks}.t")
    got, want = final_rows(events), oracle_rows(cql, table)
    assert len(want) >= ROWS // 2
    diff = [k for k in sorted(got.keys() | want.keys()) if got.get(k) != want.get(k)]
    assert not diff, (f"{len(diff)} keys differ, e.g. {diff[0]}: events "
                      f"{canonical(got.get(diff[0]))} != select {canonical(want.get(diff[0]))}")
    live: dict[str, bool] = defaultdict(bool)
    ops: dict[str, int] = defaultdict(int)
    for _p, _o, key, value in sorted(events, key=lambda e: (e[0], e[1])):
        if value is None:
            continue
        k = canonical(key)
        ops[value["op"]] += 1
        if value["op"] in ("c", "r"):
            assert not live[k], f"{k} created twice without a delete between"
            live[k] = True
        elif value["op"] == "d":
            live[k] = False
    # a row nobody wrote to during the snapshot arrives once, as a snapshot read
    untouched = [canonical({"c": i, "p": i % 50}) for i in range(ROWS)
                 if (i % 50, i) not in touched and (i % 50, None) not in touched]
    assert len(untouched) >= 20
    per_key: dict[str, list[str]] = defaultdict(list)
    for _p, _o, key, value in events:
        if value is not None:
            per_key[canonical(key)].append(value["op"])
    assert all(per_key[k] == ["r"] for k in untouched), [per_key[k] for k in untouched][:5]
    assert ops["r"] >= len(untouched) and ops["u"] and ops["d"], dict(ops)
    cql.execute(f"DROP KEYSPACE {ks}")
