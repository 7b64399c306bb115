"""Wide rows on the real node: 70 regular columns (the >= 64 column-subset encoding, both
index-list forms) and 34 clustering columns (clustering headers past one 32-value batch)."""

from __future__ import annotations

import pytest

from publisher.commitlog.schema_source import CassandraSchemaSource

from support.reference import cdc_offsets, compare_with_select, fold_new_cdc

pytestmark = pytest.mark.integration
REGULAR = 70
CLUSTERING = 34


def test_wide_tables_decode_to_what_cassandra_returns(stack, cql, keyspace) -> None:
    cols = ", ".join(f"v{i} int" for i in range(REGULAR))
    cql.execute(f"CREATE TABLE {keyspace}.wide (k int, c int, {cols}, PRIMARY KEY (k, c)) "
                "WITH cdc = true")
    cks = ", ".join(f"c{i} int" for i in range(CLUSTERING))
    ck_names = ", ".join(f"c{i}" for i in range(CLUSTERING))
    cql.execute(f"CREATE TABLE {keyspace}.deep (k int, {cks}, v text, "
                f"PRIMARY KEY (k, {ck_names})) WITH cdc = true")
    before = cdc_offsets(stack.cdc_raw_dir)
    for c, present in enumerate([1, 3, 20, 34, 35, 50, 69, 70]):
        names = ", ".join(f"v{i}" for i in range(present))
        values = ", ".join(str(c * 100 + i) for i in range(present))
        cql.execute(f"INSERT INTO {keyspace}.wide (k, c, {names}) VALUES (1, {c}, {values})")
    # Updates touching scattered columns: rows with few, half and most of the header.
    for c, step in ((0, 13), (1, 2), (2, 1)):
        sets = ", ".join(f"v{i} = {i}" for i in range(0, REGULAR, step))
        cql.execute(f"UPDATE {keyspace}.wide SET {sets} WHERE k = 1 AND c = {c}")
    cql.execute(f"BEGIN UNLOGGED BATCH UPDATE {keyspace}.wide SET v5 = 5 WHERE k = 2 AND c = 0;"
                f" UPDATE {keyspace}.wide SET v66 = 66, v67 = 67 WHERE k = 2 AND c = 1; "
                "APPLY BATCH")
    # One partition, one mutation, rows with different column sets: the header lists all 70
    # columns, so each row carries a >= 64-column subset (present or missing index lists).
    rows = {0: range(REGULAR), 1: [5], 2: range(REGULAR - 1), 3: range(0, REGULAR, 2),
            4: range(40), 5: [1, 64, 69]}
    statements = []
    for c, present in rows.items():
        names = ", ".join(f"v{i}" for i in present)
        values = ", ".join(str(i + c) for i in present)
        statements.append(f"INSERT INTO {keyspace}.wide (k, c, {names}) VALUES (3, {c}, "
                          f"{values})")
    cql.execute("BEGIN UNLOGGED BATCH " + "; ".join(statements) + "; APPLY BATCH")
    for row in range(6):
        values = ", ".join(str((row + i) % 3) for i in range(CLUSTERING))
        cql.execute(f"INSERT INTO {keyspace}.deep (k, {ck_names}, v) VALUES (1, {values}, "
                    f"'row{row}')")
    prefix = " AND ".join(f"c{i} = {i % 3}" for i in range(CLUSTERING - 1))
    cql.execute(f"DELETE FROM {keyspace}.deep WHERE k = 1 AND {prefix} AND c{CLUSTERING - 1} > 0")

    tables = fold_new_cdc(stack.cdc_raw_dir, before, CassandraSchemaSource(cql), keyspace)
    assert set(tables) == {"wide", "deep"}
    problems = compare_with_select(cql, keyspace, tables, min_rows=3)
    assert not problems, "\n".join(problems[:10])
