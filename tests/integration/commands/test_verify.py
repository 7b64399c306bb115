"""`casscade verify` on the real stack: a correct stream verifies clean; a copy of it with
a dropped event, a stale event repeated, a wrong value and an extra key is caught, each key
named with its verdict and both sides; a change not streamed yet is pending, not wrong."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections import defaultdict
from pathlib import Path

import pytest
from confluent_kafka import Producer

from devstack.settings import StackSettings, repo_root
from shared.kafka_topics import TopicCreator, read_to_end

from support.materializer_harness import (
    materializer_command,
    publish_new_cdc,
    run_materializer,
)
from support.reference import cdc_offsets

pytestmark = pytest.mark.integration
PARTITIONS = 60


def _verify(stack: StackSettings, prefix: str, ks: str, *flags: str
            ) -> tuple[int, dict, str]:
    """Exit code, the JSON report and stderr of `casscade verify` on one table."""
    out = subprocess.run(
        [sys.executable, "-m", "casscade.cli", "verify", "--table", f"{ks}.t", "--json",
         "--set", f"cassandra.port={stack.cql_port}",
         "--set", f"kafka.bootstrap_servers={stack.bootstrap_servers}",
         "--set", f"kafka.topic_prefix={prefix}", "--set", "log.format=text", *flags],
        cwd=repo_root(), capture_output=True, text=True, timeout=300,
        stdin=subprocess.DEVNULL)
    assert "Traceback" not in out.stderr, out.stderr
    assert out.stdout.strip(), out.stderr
    return out.returncode, json.loads(out.stdout)["tables"][0], out.stderr


def _write(cql, ks: str) -> None:
    """Rows with clustering, static, collection and null cells; updates and deletes."""
    cql.execute(f"CREATE TABLE {ks}.t (id int, ck int, s text static, v text, n bigint, "
                "tags set<text>, m map<int, text>, PRIMARY KEY (id, ck)) WITH cdc = true")
    ins = cql.prepare(f"INSERT INTO {ks}.t (id, ck, s, v, n, tags, m) "
                      "VALUES (?, ?, ?, ?, ?, ?, ?)")
    for i in range(PARTITIONS):
        for ck in range(3):
            cql.execute(ins, (i, ck, f"s{i}", f"v{i}.{ck}", i * 10 + ck if ck else None,
                              {f"t{ck}", "x"}, {ck: "m"}))
    for i in range(0, PARTITIONS, 2):  # updates: a value, a collection, the static
        cql.execute(f"UPDATE {ks}.t SET v = 'new{i}', tags = tags + {{'up'}} "
                    f"WHERE id = {i} AND ck = 1")
        cql.execute(f"UPDATE {ks}.t SET s = 'S{i}' WHERE id = {i}")
    for i in range(0, PARTITIONS, 5):
        cql.execute(f"DELETE FROM {ks}.t WHERE id = {i} AND ck = 2")
    for i in range(3, PARTITIONS, 10):
        cql.execute(f"DELETE FROM {ks}.t WHERE id = {i}")


def _faulty_copy(stack: StackSettings, source: str, target: str) -> dict[str, str]:
    """`source` copied to `target` (same partitions, same order) with four faults; returns
    each faulty key (its JSON text) → the verdict verify must give it."""
    bootstrap = stack.bootstrap_servers
    messages = [m for m in read_to_end(bootstrap, source) if m.value() is not None]
    by_key: dict[bytes, list] = defaultdict(list)
    for m in messages:
        by_key[m.key()].append(m)
    once = next(k for k, ms in by_key.items() if len(ms) == 1)  # a `c`, never changed
    twice = next(k for k, ms in by_key.items()
                 if len(ms) >= 2 and json.loads(ms[-1].value())["op"] == "u")
    wrong = next(k for k, ms in by_key.items() if k not in (once, twice)
                 and json.loads(ms[-1].value())["after"] is not None)
    TopicCreator(bootstrap, 6, 1).ensure(target)
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for m in messages:
        value = m.value()
        if m.key() == once:
            continue  # the dropped event
        if m.key() == wrong and m is by_key[wrong][-1]:
            doc = json.loads(value)
            doc["after"]["v"] = "not what the table holds"
            value = json.dumps(doc).encode()
        producer.produce(target, key=m.key(), value=value, partition=m.partition())
    stale = by_key[twice][0]  # an old event of the key, written again after its newest
    producer.produce(target, key=stale.key(), value=stale.value(), partition=stale.partition())
    extra = json.loads(by_key[wrong][0].value())
    extra["after"] = dict(extra["after"], id=10_000)
    producer.produce(target, key=json.dumps({"id": 10_000, "ck": 0}).encode(),
                     value=json.dumps(extra).encode(), partition=0)
    assert producer.flush(30) == 0

    def text(key: bytes) -> str:
        return json.dumps(json.loads(key), sort_keys=True, separators=(",", ":"))

    return {text(once): "missing", text(twice): "different", text(wrong): "different",
            text(json.dumps({"id": 10_000, "ck": 0}).encode()): "extra"}


def test_verify_passes_a_correct_stream_and_names_each_fault(stack: StackSettings, cql,
                                                             tmp_path: Path) -> None:
    ks = f"vf_{uuid.uuid4().hex[:8]}"
    cql.execute(f"CREATE KEYSPACE {ks} WITH replication = "
                "{'class': 'SimpleStrategy', 'replication_factor': 1}")
    try:
        before = cdc_offsets(stack.cdc_raw_dir)
        _write(cql, ks)
        prefix = f"vf{uuid.uuid4().hex[:6]}"
        assert publish_new_cdc(stack, cql, before, prefix, tmp_path / "first") > PARTITIONS
        run_materializer(materializer_command(stack, prefix, tmp_path / "ckpt"),
                         tmp_path / "job.log")
        rows = list(cql.execute(f"SELECT id, ck FROM {ks}.t"))

        # the correct stream: every key equal (deleted keys too), exit 0
        code, report, err = _verify(stack, prefix, ks)
        assert code == 0, (report, err)
        assert report["counts"]["equal"] > len(rows) >= 2 * PARTITIONS, report["counts"]
        assert sum(report["counts"].values()) == report["counts"]["equal"], report
        assert report["rows"] == len(rows)

        # a copy with four faults: each caught, each named, exit 3
        faulty = f"vb{uuid.uuid4().hex[:6]}"
        expected = _faulty_copy(stack, f"{prefix}.{ks}.t", f"{faulty}.{ks}.t")
        code, report, err = _verify(stack, faulty, ks, "--grace", "0.5", "--rechecks", "1")
        assert code == 3, (report, err)
        found = {json.dumps(d["key"], sort_keys=True, separators=(",", ":")): d
                 for d in report["differences"]}
        assert {k: d["verdict"] for k, d in found.items()} == expected, found
        for key, d in found.items():  # both sides, as each fault left them
            assert (d["table"] is None) == (expected[key] == "extra"), d
            assert (d["stream"] is None) == (expected[key] == "missing"), d
            if expected[key] == "different":
                assert d["table"] != d["stream"], d
        assert report["counts"]["missing"] == 1 and report["counts"]["extra"] == 1
        assert report["counts"]["different"] == 2 and report["counts"]["pending"] == 0

        # a change the pipeline has not carried yet: pending (exit 4), then equal once it has
        between = cdc_offsets(stack.cdc_raw_dir)
        cql.execute(f"UPDATE {ks}.t SET v = 'late' WHERE id = 1 AND ck = 0")
        code, report, err = _verify(stack, prefix, ks, "--grace", "0.5", "--rechecks", "1")
        assert code == 4, (report, err)
        assert report["pending"] == [{"id": 1, "ck": 0}], report
        assert report["counts"]["pending"] == 1 and not report["differences"], report
        publish_new_cdc(stack, cql, between, prefix, tmp_path / "second", from_before=True)
        run_materializer(materializer_command(stack, prefix, tmp_path / "ckpt"),
                         tmp_path / "job2.log")
        code, report, err = _verify(stack, prefix, ks, "--sample", "0.5", "--seed", "7",
                                    "--metrics-file", str(tmp_path / "verify.prom"))
        assert code == 0, (report, err)
        assert 0 < report["rows"] < len(rows), report  # half the ring: about half the rows
        metrics = (tmp_path / "verify.prom").read_text()
        assert f'casscade_verify_mismatched_keys{{table="{ks}.t"}} 0' in metrics, metrics
        assert f'casscade_verify_keys{{table="{ks}.t",verdict="equal"}} ' in metrics
    finally:
        cql.execute(f"DROP KEYSPACE {ks}")
