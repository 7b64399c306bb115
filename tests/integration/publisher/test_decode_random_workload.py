"""Hypothesis-driven CQL over every type against the real node, decoded from its commit log.

It runs on a node of each supported Cassandra line: 5.0 (the stack's), 4.1 and 4.0.

Hypothesis draws statements (INSERT/UPDATE/DELETE of rows, cells, collection elements,
static columns, ranges and partitions; TTLs; out-of-order USING TIMESTAMP; batches; counter
increments) over a small key space so they collide (tests/support/workload.py). They run
against the real Cassandra; then the CDC segments are decoded with the node's own schema,
folded by tests/support/reference.py, and compared with what Cassandra returns for every
row: each value, WRITETIME and TTL.
"""

from __future__ import annotations

import uuid

import pytest

from publisher.commitlog.schema_source import CassandraSchemaSource

from support.reference import cdc_offsets, compare_with_select, fold_new_cdc
from support.workload import create_workload_tables, run_workload

pytestmark = pytest.mark.integration

STATEMENTS = 5400
COVER = ("INSERT", "UPDATE", "DELETE FROM", " FROM ", "c1 >", "BATCH", ".ctr", "USING TTL",
         "TIMESTAMP", "l = [", "+ l", "s = s -", "m[", "u.a", "s_set")


@pytest.fixture
def node_cql(line_node):
    """A session on the line's node, with a fresh RF=1 keyspace (dropped after)."""
    from devstack.cassandra import cql_cluster

    cluster = cql_cluster(line_node)
    session = cluster.connect()
    keyspace = f"w_{uuid.uuid4().hex[:10]}"
    session.execute(f"CREATE KEYSPACE {keyspace} WITH replication = "
                    "{'class': 'SimpleStrategy', 'replication_factor': 1}")
    try:
        yield session, keyspace
    finally:
        session.execute(f"DROP KEYSPACE IF EXISTS {keyspace}", timeout=60)
        cluster.shutdown()


def test_random_statements_decode_to_what_cassandra_returns(line_node, node_cql) -> None:
    cql, keyspace = node_cql
    release = cql.execute("SELECT release_version FROM system.local").one().release_version
    assert release.startswith(line_node.cassandra_version + "."), release
    create_workload_tables(cql, keyspace)
    before = cdc_offsets(line_node.cdc_raw_dir)
    executed = run_workload(cql, keyspace, STATEMENTS, cover=COVER, floor=20)
    assert len(executed) >= 5000
    # The draw really covered every kind of write, many times over.
    for marker in COVER:
        assert sum(marker in c for c in executed) >= 20, marker

    tables = fold_new_cdc(line_node.cdc_raw_dir, before, CassandraSchemaSource(cql),
                          keyspace)
    assert set(tables) == {"r", "ctr"}
    problems = compare_with_select(cql, keyspace, tables, min_rows=5)
    assert not problems, "\n".join(problems[:10])
