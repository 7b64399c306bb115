"""Hypothesis-driven CQL over every type against the real node, decoded from its commit log.

Hypothesis draws statements (INSERT/UPDATE/DELETE of rows, cells, collection elements,
static columns, ranges and partitions; TTLs; out-of-order USING TIMESTAMP; batches; counter
increments) over a small key space so they collide (tests/support/workload.py). They run
against the real Cassandra; then the CDC segments are decoded with the node's own schema,
folded by tests/support/reference.py, and compared with what Cassandra returns for every
row: each value, WRITETIME and TTL.
"""

from __future__ import annotations

import pytest

from publisher.commitlog.schema_source import CassandraSchemaSource

from support.reference import cdc_offsets, compare_with_select, fold_new_cdc
from support.workload import create_workload_tables, run_workload

pytestmark = pytest.mark.integration

STATEMENTS = 5400
COVER = ("INSERT", "UPDATE", "DELETE FROM", " FROM ", "c1 >", "BATCH", ".ctr", "USING TTL",
         "TIMESTAMP", "l = [", "+ l", "s = s -", "m[", "u.a", "s_set")


def test_random_statements_decode_to_what_cassandra_returns(stack, cql, keyspace) -> None:
    create_workload_tables(cql, keyspace)
    before = cdc_offsets(stack.cdc_raw_dir)
    executed = run_workload(cql, keyspace, STATEMENTS, cover=COVER, floor=20)
    assert len(executed) >= 5000
    # The draw really covered every kind of write, many times over.
    for marker in COVER:
        assert sum(marker in c for c in executed) >= 20, marker

    tables = fold_new_cdc(stack.cdc_raw_dir, before, CassandraSchemaSource(cql), keyspace)
    assert set(tables) == {"r", "ctr"}
    problems = compare_with_select(cql, keyspace, tables, min_rows=5)
    assert not problems, "\n".join(problems[:10])
