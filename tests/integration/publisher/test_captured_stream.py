"""Capture rules on the real stack: an excluded table and column and masked columns never
reach Kafka in clear, and the events equal `SELECT` with the same projection and masks."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from devstack.settings import StackSettings, repo_root
from shared.capture import CaptureSettings
from shared.kafka_topics import read_to_end
from shared.rowupdate import is_row_update
from shared.rowupdate_reader import read_row_update
from shared.topic_names import raw_topic

from support.materializer_harness import (
    canonical,
    final_rows,
    materializer_command,
    publish_new_cdc,
    read_events,
    run_materializer,
)
from support.reference import cdc_offsets

pytestmark = pytest.mark.integration
SALT = "pepper-for-the-test"
ROWS = 300


def _email(n: int) -> str:
    return f"person{n}@example.com"


def _ssn(n: int) -> str:
    return f"{n:03d}-55-{n * 7 % 10000:04d}"


def _note(n: int) -> str:
    return f"private note {n}"


def test_masked_and_excluded_values_never_reach_kafka_and_events_equal_select(
        stack: StackSettings, cql, tmp_path: Path) -> None:
    ks = f"cap_{uuid.uuid4().hex[:8]}"
    cql.execute(f"CREATE KEYSPACE {ks} WITH replication = "
                "{'class': 'SimpleStrategy', 'replication_factor': 1}")
    try:
        cql.execute(f"CREATE TABLE {ks}.people (id int PRIMARY KEY, email text, ssn text, "
                    "notes text, age int) WITH cdc = true")
        cql.execute(f"CREATE TABLE {ks}.audit (id int PRIMARY KEY, what text) WITH cdc = true")
        before = cdc_offsets(stack.cdc_raw_dir)
        insert = cql.prepare(f"INSERT INTO {ks}.people (id, email, ssn, notes, age) "
                             "VALUES (?, ?, ?, ?, ?)")
        for n in range(ROWS):
            cql.execute(insert, (n, _email(n), _ssn(n), _note(n), 20 + n % 50))
            cql.execute(f"INSERT INTO {ks}.audit (id, what) VALUES ({n}, 'audited {n}')")
        for n in range(0, ROWS, 3):  # updates of a masked, an excluded and a kept column
            cql.execute(f"UPDATE {ks}.people SET email = '{_email(n + 1000)}', "
                        f"notes = '{_note(n + 1000)}' WHERE id = {n}")
        for n in range(1, ROWS, 10):
            cql.execute(f"UPDATE {ks}.people SET notes = '{_note(n + 2000)}' WHERE id = {n}")
        for n in range(2, ROWS, 25):
            cql.execute(f"DELETE FROM {ks}.people WHERE id = {n}")
        prefix = f"cap{uuid.uuid4().hex[:6]}"
        capture = CaptureSettings(
            table_exclude_list=[f"{ks}\\.audit"], column_exclude_list=[f"{ks}\\.people\\.notes"],
            column_mask_hash=[f"{ks}\\.people\\.email"], column_mask_hash_salt=SALT,
            column_mask_chars=[f"{ks}\\.people\\.ssn"])
        assert publish_new_cdc(stack, cql, before, prefix, tmp_path, capture=capture) > ROWS

        # the raw topic: no audit record, and no clear value of a masked or excluded column
        records = [m.value() for m in read_to_end(stack.bootstrap_servers, raw_topic(prefix))
                   if is_row_update(m.value())]
        decoded = [read_row_update(v) for v in records]
        # (the copy may hold other tests' late writes: only this keyspace's are judged)
        tables = {r["table"] for r in decoded if r["keyspace"] == ks}
        assert tables == {"people"}, tables
        raw = b"".join(v for v, r in zip(records, decoded, strict=True) if r["keyspace"] == ks)
        for n in (*range(ROWS), *range(1000, 1000 + ROWS)):
            for clear in (_email(n), _note(n)):
                assert clear.encode() not in raw, clear
        for n in range(ROWS):
            assert _ssn(n).encode() not in raw, _ssn(n)
        schemas = b"".join(m.value() or b"" for m in read_to_end(stack.bootstrap_servers,
                                                                 f"{prefix}.schemas"))
        assert b'"notes"' not in schemas and SALT.encode() not in schemas + raw

        # the events equal SELECT, projected and masked the same way
        run_materializer(materializer_command(stack, prefix, tmp_path / "checkpoint"),
                         tmp_path / "job.log")
        got = final_rows(read_events(stack.bootstrap_servers, f"{prefix}.{ks}.people"))
        want = {}
        for row in cql.execute(f"SELECT id, email, ssn, age FROM {ks}.people"):
            want[canonical({"id": row.id})] = {
                "id": row.id, "age": row.age, "ssn": "********",
                "email": hashlib.sha256(SALT.encode() + row.email.encode()).hexdigest()}
        assert len(want) >= ROWS - ROWS // 25 - 1
        assert got == want

        # `casscade verify` with the publisher's capture rules masks the table side alike
        checked = subprocess.run(
            [sys.executable, "-m", "casscade.cli", "verify", "--table", f"{ks}.people",
             "--grace", "1", *(f for kv in [
                 f"cassandra.port={stack.cql_port}",
                 f"kafka.bootstrap_servers={stack.bootstrap_servers}",
                 f"kafka.topic_prefix={prefix}",
                 f"capture.column_exclude_list={json.dumps(capture.column_exclude_list)}",
                 f"capture.column_mask_hash={json.dumps(capture.column_mask_hash)}",
                 f"capture.column_mask_chars={json.dumps(capture.column_mask_chars)}"]
                for f in ("--set", kv))],
            cwd=repo_root(), capture_output=True, text=True, timeout=300,
            stdin=subprocess.DEVNULL,
            env=dict(os.environ, CASSCADE_CAPTURE__COLUMN_MASK_HASH_SALT=SALT))
        assert checked.returncode == 0, checked.stdout + checked.stderr
        keys = len(got) + len(range(2, ROWS, 25))  # the deleted ones are equal too
        assert f"verified: all {keys:,} keys equal" in checked.stdout, checked.stdout
    finally:
        cql.execute(f"DROP KEYSPACE {ks}")
