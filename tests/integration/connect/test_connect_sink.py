"""casscade's events through Kafka Connect and Debezium's own JDBC sink into PostgreSQL,
as JSON and as Avro through the real schema registry.

A randomized workload over every CQL type (decimals of up to 21 significant digits, varints
beyond 64 bits, tuples, UDTs, maps, static columns, row, range and partition deletes, TTLs)
runs on the real node; the publisher and the materializer (with the relational settings of
deploy/connect/materializer-relational.yaml) turn it into event topics; a real Connect worker
runs the sink with deploy/connect/jdbc-sink-postgres.json; at the end every PostgreSQL table
equals Cassandra's SELECT, row for row and value for value. The workload runs twice, into
two keyspaces: once with JSON events, once with Avro events registered with the stack's
Apicurio registry (Confluent wire format) and read by the sink through Apicurio's
AvroConverter (deploy/connect/avro-apicurio-converters.json); Confluent's own registry
client and Avro deserializer read every Avro event too, across the ALTER TABLE.
"""

from __future__ import annotations

import datetime as dt
import json
import struct
import time
import uuid
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import psycopg
import pytest
import yaml
from psycopg.types.string import TextLoader

from devstack import connect, postgres, registry
from devstack.settings import StackSettings, repo_root
from materializer.output.values import ValueModes, to_connect
from shared.cqltype import CqlType
from shared.kafka_topics import read_to_end
from shared.schema import TableSchema, catalog_from_json
from shared.system_schema import read_system_schema

from support.materializer_harness import (
    final_rows,
    materializer_command,
    oracle_rows,
    publish_new_cdc,
    registry_events,
    run_materializer,
)
from support.reference import cdc_offsets, settled_offsets
from support.services import started_here, wait_until
from support.workload import create_workload_tables, run_workload

pytestmark = pytest.mark.integration

STATEMENTS = 2_100
RELATIONAL = yaml.safe_load((repo_root() / "deploy/connect/materializer-relational.yaml")
                            .read_text())["events"]
MODES = ValueModes(decimal=RELATIONAL["decimal_mode"], structs=RELATIONAL["struct_mode"],
                   maps=RELATIONAL["map_mode"])
_EPOCH = dt.datetime(1970, 1, 1)
# decimals of 20+ significant digits (a double keeps 15-17), varints beyond 64 bits
EXACT = [("12345678901234.56789", "123456789012345678901234567890"),
         ("-0.000000000012345678901234567891", "-98765432109876543210"),
         ("99999999999999999999.9", str(2**64))]


@pytest.fixture(scope="module")
def sink_stack(stack: StackSettings) -> Iterator[StackSettings]:
    """PostgreSQL and a Connect worker beside the stack's Kafka; stopped after if started."""
    pg_started, connect_started = postgres.up(stack), False
    try:  # (a worker that fails to start must not leave PostgreSQL running)
        connect_started = connect.up(stack, log=lambda msg: print(f"[connect] {msg}"))
        yield stack
    finally:
        if connect_started:
            connect.down(stack)
        if pg_started:
            postgres.down(stack)


@pytest.fixture(scope="module")
def registry_up(stack: StackSettings) -> Iterator[StackSettings]:
    """The stack's schema registry (built if needed); stopped after if started here."""
    with started_here(lambda: registry.up(stack, log=lambda m: print(f"[registry] {m}")),
                      lambda: registry.down(stack)):
        yield stack


def _mirror(s: StackSettings, cql, work, avro: bool) -> Iterator[dict[str, Any]]:
    """The workload written to Cassandra, materialized and sunk into PostgreSQL."""
    ks = f"sink_{uuid.uuid4().hex[:8]}"
    cql.execute(f"CREATE KEYSPACE {ks} WITH replication = "
                "{'class': 'SimpleStrategy', 'replication_factor': 1}")
    create_workload_tables(cql, ks)
    before = cdc_offsets(s.cdc_raw_dir)
    cover = ("INSERT", "DELETE FROM", "c1 >", "USING TTL", "m[", "u.a", ".ctr", "s_set")
    # PostgreSQL's text cannot hold U+0000 (Cassandra's can): the sink task would fail on it
    executed = run_workload(cql, ks, STATEMENTS, cover=cover, keep=lambda c: "\x00" not in c)
    assert len(executed) >= 2000
    for i, (d, v) in enumerate(EXACT):  # outside the workload's keys: they stay
        cql.execute(f"INSERT INTO {ks}.r (p1, p2, c1, c2, v_decimal, v_varint) "
                    f"VALUES ({100 + i}, 'exact', 0, 'x', {d}, {v})")
    # the last nanosecond of a day: rounded to microseconds, it wraps to 00:00:00
    cql.execute(f"INSERT INTO {ks}.r (p1, p2, c1, c2, v_time) "
                "VALUES (110, 'midnight', 0, 'x', '23:59:59.999999999')")
    (work / "statements.cql").write_text(";\n".join(executed) + ";\n")
    prefix = f"k{uuid.uuid4().hex[:8]}"
    # published before the ALTER, as a live agent would: these records name version 1
    published = publish_new_cdc(s, cql, before, prefix, work / "before-alter")
    altered = settled_offsets(s.cdc_raw_dir)
    # a column added mid-stream: the sink widens its table (schema.evolution=basic); with
    # Avro the table's value schema gets a second, compatible version in the registry
    cql.execute(f"ALTER TABLE {ks}.r ADD v_added text")
    for i in range(3):
        cql.execute(f"INSERT INTO {ks}.r (p1, p2, c1, c2, v_added, v_int) "
                    f"VALUES ({200 + i}, 'added', 0, 'x', 'new {i}', {i})")
    cql.execute(f"UPDATE {ks}.r SET v_added = 'later' WHERE p1 = 0 AND p2 = 'a' AND c1 = 0 "
                f"AND c2 = 'x'")
    published += publish_new_cdc(s, cql, altered, prefix, work / "after-alter",
                                 from_before=True)
    assert published >= 2000
    sets = [f"events.{k}={str(v).lower() if isinstance(v, bool) else v}"
            for k, v in RELATIONAL.items()]
    if avro:
        sets += ["events.format=avro", f"events.schema_registry_url={registry.url(s)}"]
    run_materializer(materializer_command(s, prefix, work / "ckpt", *sets), work / "job.log")
    name = f"pg-{prefix}"
    connect.put_connector(s, name, connect.sink_config(s, prefix, ks, avro=avro))
    tables = {t.table: t for t in catalog_from_json(read_system_schema(cql)).values()
              if t.keyspace == ks}
    try:
        yield {"ks": ks, "prefix": prefix, "tables": tables, "connector": name, "s": s,
               "work": work, "sets": sets}
    finally:
        connect.delete_connector(s, name)
        cql.execute(f"DROP KEYSPACE {ks}")


@pytest.fixture(scope="module")
def mirrored_json(sink_stack, cql, tmp_path_factory) -> Iterator[dict[str, Any]]:
    """The workload through JSON events (schemas in every message)."""
    yield from _mirror(sink_stack, cql, tmp_path_factory.mktemp("json"), avro=False)


@pytest.fixture(scope="module")
def mirrored_avro(sink_stack, registry_up, cql, tmp_path_factory) -> Iterator[dict[str, Any]]:
    """The workload through Avro events and the stack's registry."""
    yield from _mirror(sink_stack, cql, tmp_path_factory.mktemp("avro"), avro=True)


@pytest.fixture(params=["json", "avro"])
def mirrored(request: pytest.FixtureRequest) -> dict[str, Any]:
    """Each event format's run, in turn."""
    return request.getfixturevalue(f"mirrored_{request.param}")


def _pg_table(m: dict[str, Any], table: str) -> str:
    # the sink's default naming: the topic, dots as underscores
    return f"{m['prefix']}_{m['ks']}_{table}"


def _caught_up(m: dict[str, Any]) -> None:
    """Wait until the sink's consumer group has committed the end of every event topic."""
    from confluent_kafka import Consumer, TopicPartition

    s = m["s"]
    group = f"connect-{m['connector']}"
    consumer = Consumer({"bootstrap.servers": s.bootstrap_servers, "group.id": group,
                         "enable.auto.commit": False})
    try:
        topics = [f"{m['prefix']}.{m['ks']}.{t}" for t in m["tables"]]
        parts = [TopicPartition(t, p) for t in topics
                 for p in consumer.list_topics(t, timeout=10).topics[t].partitions]
        # the sink commits the offset after the last record it took, and a transaction's
        # commit marker takes the offset after that: the ends are the last records'
        ends = {(tp.topic, tp.partition): 0 for tp in parts}
        for topic in topics:
            for msg in read_to_end(s.bootstrap_servers, topic):
                ends[(topic, msg.partition())] = msg.offset() + 1
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            status = connect.connector_status(s, m["connector"])
            failed = [t for t in status["tasks"] if t["state"] == "FAILED"]
            assert not failed, f"the sink task failed:\n{failed[0].get('trace', '')[:3000]}"
            done = consumer.committed(parts, timeout=10)
            if all(tp.offset >= ends[(tp.topic, tp.partition)] for tp in done):
                return
            time.sleep(2)
        raise AssertionError(f"the sink did not commit the end of {topics} within 240 s: "
                             f"{status}")
    finally:
        consumer.close()


def _want(cql, table: TableSchema) -> dict[tuple, dict[str, Any]]:
    """Cassandra's rows in PostgreSQL's terms, by primary key (static-only rows skipped,
    as the relational settings do)."""
    types = {c.name: c.type for c in table.columns}
    keys = [c.name for c in (*table.partition_key, *table.clustering)]
    out = {}
    for row in cql.execute(f"SELECT * FROM {table.keyspace}.{table.table}"):
        d = row._asdict()
        if any(d[c.name] is None for c in table.clustering):
            continue
        out[tuple(_cell(types[k], to_connect(types[k], d[k], MODES)) for k in keys)] = {
            name: _cell(t, to_connect(t, d[name], MODES)) for name, t in types.items()}
    return out


def _got(m: dict[str, Any], table: TableSchema) -> dict[tuple, dict[str, Any]]:
    types = {c.name: c.type for c in table.columns}
    keys = [c.name for c in (*table.partition_key, *table.clustering)]
    with psycopg.connect(postgres.url(m["s"])) as conn:
        # time as PostgreSQL's text: it rounds 23:59:59.9999995 and later up to 24:00:00,
        # which Python's datetime.time cannot hold (psycopg would give 00:00)
        conn.adapters.register_loader("time", TextLoader)
        cur = conn.execute(f'SELECT * FROM "{_pg_table(m, table.table)}"')
        names = [c.name for c in cur.description]
        rows = [dict(zip(names, r, strict=True)) for r in cur.fetchall()]
    return {tuple(_pg(types[k], r[k]) for k in keys): {n: _pg(types[n], r[n]) for n in types}
            for r in rows}


def _f32(x: float) -> float:
    return struct.unpack(">f", struct.pack(">f", x))[0]


def _cell(t: CqlType, v: Any) -> Any:
    """An event value (its Connect form) as the comparison's canonical value."""
    if v is None:
        return None
    n = t.name
    if n == "time":
        # PostgreSQL's time holds microseconds: it rounds the nanoseconds, half to even;
        # the last half microsecond of a day lands as 00:00:00, not 24:00:00 (seen with the
        # sink 3.4.3 and PostgreSQL 15; the README's "what PostgreSQL cannot hold")
        us, ns = divmod(v, 1000)
        return (us + (ns > 500 or (ns == 500 and us % 2 == 1))) * 1000 % (86_400 * 10**9)
    if n in ("float",):
        return _f32(v)
    if n == "vector" or (n in ("list", "set") and t.params[0].name == "float"):
        return [_f32(x) for x in v]
    if n == "blob":
        return bytes(v)
    if n in ("tuple", "udt", "map") and isinstance(v, str):
        return json.loads(v)
    if n == "decimal":
        return Decimal(v)
    return v


def _pg(t: CqlType, v: Any) -> Any:
    """A PostgreSQL value as the comparison's canonical value."""
    if v is None:
        return None
    n = t.name
    if n == "date":
        return (v - _EPOCH.date()).days
    if n == "timestamp":
        return (v - _EPOCH) // dt.timedelta(milliseconds=1)
    if n == "time":  # text: HH:MM:SS[.ffffff], up to 24:00:00
        hours, minutes, seconds = v.split(":")
        return (int(hours) * 3600 + int(minutes) * 60) * 10**9 + int(
            Decimal(seconds) * 10**9)
    if n in ("uuid", "timeuuid"):
        return str(v)
    if n == "float":
        return _f32(v)
    if n == "vector" or (n in ("list", "set") and t.params[0].name == "float"):
        return [_f32(x) for x in v]
    if n == "blob":
        return bytes(v)
    if n == "decimal":
        return Decimal(v)
    if n in ("tuple", "udt", "map") and isinstance(v, str):
        return json.loads(v)
    return v


def test_postgresql_equals_cassandra_row_for_row(mirrored, cql) -> None:
    _caught_up(mirrored)
    problems: list[str] = []
    counts = {}
    for name, table in mirrored["tables"].items():
        got, want = _got(mirrored, table), _want(cql, table)
        counts[name] = (len(got), len(want))
        assert len(want) >= 3, f"{name}: the workload left too few rows to compare"
        for key in sorted(got.keys() | want.keys(), key=repr):
            g, w = got.get(key), want.get(key)
            if g != w:
                diff = {c: (g.get(c) if g else None, w.get(c) if w else None)
                        for c in (g or w) if (g or {}).get(c) != (w or {}).get(c)}
                problems.append(f"{name} {key}: postgres != cassandra in {diff}")
    print(f"[sink] rows (postgres, cassandra): {counts}")
    assert not problems, f"{len(problems)} rows differ:\n" + "\n".join(problems[:10])


def test_exact_numbers_land_exactly(mirrored, cql) -> None:
    """Decimals beyond a double's digits and varints beyond 64 bits reach PostgreSQL whole."""
    _caught_up(mirrored)
    table = mirrored["tables"]["r"]
    got = _got(mirrored, table)
    landed = {(str(r["v_decimal"]), r["v_varint"]) for key, r in got.items()
              if key[1] == "exact"}
    # as text, digit for digit: not merely equal as numbers
    assert landed == {(str(Decimal(d)), v) for d, v in EXACT}


def test_the_sink_made_the_columns_the_relational_settings_promise(mirrored) -> None:
    """Structs and maps as json, exact numbers as text, a NOT NULL primary key, and the
    column ALTER TABLE added."""
    _caught_up(mirrored)
    with psycopg.connect(postgres.url(mirrored["s"])) as conn:
        rows = conn.execute(
            "SELECT column_name, data_type, is_nullable FROM information_schema.columns "
            "WHERE table_name = %s", (_pg_table(mirrored, "r"),)).fetchall()
    types = {name: kind for name, kind, _ in rows}
    for column in ("u", "v_fudt", "v_tuple", "m", "v_fmap"):
        assert types[column] == "json", (column, types[column])
    assert types["v_decimal"] == types["v_varint"] == types["v_added"] == "text"
    assert types["v_blob"] == "bytea" and types["v_timestamp"].startswith("timestamp")
    not_null = {name for name, _, nullable in rows if nullable == "NO"}
    assert not_null == {"p1", "p2", "c1", "c2"}


def _avro_events(m: dict[str, Any], name: str) -> list[tuple[int, int, dict, dict | None, int]]:
    """Table `name`'s event topic decoded through the stack's registry (registry_events)."""
    return registry_events(m["s"].bootstrap_servers, f"{m['prefix']}.{m['ks']}.{name}",
                           m["tables"][name], {"url": registry.url(m["s"])}, MODES)


def test_a_registry_aware_consumer_decodes_every_avro_event(mirrored_avro, cql) -> None:
    """Every key and value of every table decodes through the real registry with
    Confluent's own client; the last event of each key equals Cassandra's SELECT."""
    m = mirrored_avro
    decoded = 0
    for name, table in m["tables"].items():
        events = _avro_events(m, name)
        decoded += len(events)
        got = final_rows([e[:4] for e in events])
        want = {k: row for k, row in oracle_rows(cql, table, MODES).items()
                if all(row[c.name] is not None for c in table.clustering)}
        assert len(want) >= 3, f"{name}: the workload left too few rows to compare"
        assert sum(e[3] is not None for e in events) > len(want)  # rows changed, not only put
        differ = sorted(k for k in got.keys() | want.keys() if got.get(k) != want.get(k))
        assert not differ, (f"{name}: {len(differ)} keys differ, e.g. {differ[0]}: "
                            f"{got.get(differ[0])} != {want.get(differ[0])}")
    print(f"[registry] {decoded} Avro records decoded through {registry.url(m['s'])}")


def _row_fields(schema_str: str) -> set[str]:
    """The column names of the row record (`...Value`) of an envelope's Avro schema."""
    def find(node: Any) -> set[str] | None:
        if isinstance(node, list):
            return next((f for f in map(find, node) if f is not None), None)
        if isinstance(node, dict):
            if node.get("type") == "record" and str(node.get("name")).endswith(".Value"):
                return {f["name"] for f in node["fields"]}
            return next((f for f in map(find, node.values()) if f is not None), None)
        return None

    fields = find(json.loads(schema_str))
    assert fields is not None, f"no row record in {schema_str[:300]}"
    return fields


def test_an_added_column_is_a_new_compatible_schema_that_later_events_use(
        mirrored_avro) -> None:
    """ALTER TABLE ADD gave the table's value subject a second schema (accepted under the
    registry's BACKWARD rule); rows written before it carry the first schema's id, rows
    written after it the second's. (One micro-batch holds both: which registers first
    depends on which key a worker renders first; either order is BACKWARD compatible.)"""
    from confluent_kafka.schema_registry import SchemaRegistryClient

    m = mirrored_avro
    client = SchemaRegistryClient({"url": registry.url(m["s"])})
    subject = f"{m['prefix']}.{m['ks']}.r-value"
    assert client.get_compatibility() == "BACKWARD"
    # Python workers racing to register may leave Apicurio with repeated versions of one
    # content (test_registry): count the distinct schemas
    versions = [client.get_version(subject, v) for v in client.get_versions(subject)]
    fields = {v.schema_id: _row_fields(v.schema.schema_str) for v in versions}
    assert len(fields) == 2, [(v.version, v.schema_id) for v in versions]
    old_id, = (i for i, f in fields.items() if "v_added" not in f)
    new_id, = (i for i, f in fields.items() if "v_added" in f)
    assert fields[new_id] == fields[old_id] | {"v_added"}
    last: dict[tuple, tuple[dict | None, int]] = {}
    for _p, _o, key, value, schema_id in sorted(_avro_events(m, "r"), key=lambda e: e[:2]):
        if value is not None:
            last[(key["p1"], key["p2"], key["c1"], key["c2"])] = (value["after"], schema_id)
    for i in range(len(EXACT)):  # written before the ALTER, never after
        assert last[(100 + i, "exact", 0, "x")][1] == old_id
    for i in range(3):  # written after it
        after, schema_id = last[(200 + i, "added", 0, "x")]
        assert schema_id == new_id and after["v_added"] == f"new {i}"
    after, schema_id = last[(0, "a", 0, "x")]
    assert schema_id == new_id and after["v_added"] == "later"


def test_a_table_created_later_reaches_postgresql_within_a_minute(mirrored_json, cql) -> None:
    """The shipped sink configuration subscribes by pattern, and finds a topic made after
    it started at its next metadata refresh (consumer.override.metadata.max.age.ms; Kafka's
    default is 5 minutes): a table created later has its rows in PostgreSQL within a minute
    of its events, with no connector restart."""
    m = mirrored_json
    s, ks, work = m["s"], m["ks"], m["work"]
    _caught_up(m)  # the connector runs, and has read every topic it had
    before = cdc_offsets(s.cdc_raw_dir)
    cql.execute(f"CREATE TABLE {ks}.late (k int PRIMARY KEY, v text) WITH cdc = true")
    for k in range(5):
        cql.execute(f"INSERT INTO {ks}.late (k, v) VALUES ({k}, 'late {k}')")
    publish_new_cdc(s, cql, before, m["prefix"], work / "late")
    run_materializer(materializer_command(s, m["prefix"], work / "ckpt", *m["sets"]),
                     work / "late.log")
    written = time.monotonic()

    def landed() -> bool:
        try:
            with psycopg.connect(postgres.url(s)) as conn:
                return conn.execute(f'SELECT count(*) FROM "{_pg_table(m, "late")}"'
                                    ).fetchone()[0] == 5
        except psycopg.errors.UndefinedTable:
            return False

    wait_until(landed, 60, "the new table's rows in PostgreSQL")
    print(f"\nthe new table's rows landed {time.monotonic() - written:.1f} s after its events")


def _cut_rows(s: StackSettings, pg_table: str) -> dict[int, tuple]:
    """The TRUNCATE tests' table in PostgreSQL: k → (a, b) ({} before the sink made it)."""
    try:
        with psycopg.connect(postgres.url(s)) as conn:
            return {r[0]: tuple(r[1:]) for r in conn.execute(
                f'SELECT k, a, b FROM "{pg_table}"').fetchall()}
    except psycopg.errors.UndefinedTable:
        return {}


def test_a_truncated_table_empties_in_postgresql(mirrored_json, cql) -> None:
    """A TRUNCATE reaches PostgreSQL through the shipped sink configuration: the rows it
    removed are deleted there (their `d` events), a row written again after it holds only
    what was written after it, and PostgreSQL equals Cassandra."""
    m = mirrored_json
    s, ks, work = m["s"], m["ks"], m["work"]
    cql.execute(f"CREATE TABLE {ks}.cut (k int PRIMARY KEY, a text, b text) WITH cdc = true")
    before = cdc_offsets(s.cdc_raw_dir)
    for k in range(5):
        cql.execute(f"INSERT INTO {ks}.cut (k, a, b) VALUES ({k}, 'a{k}', 'b{k}')")
    publish_new_cdc(s, cql, before, m["prefix"], work / "cut-1")
    run_materializer(materializer_command(s, m["prefix"], work / "ckpt", *m["sets"]),
                     work / "cut-1.log")

    def pg_rows() -> dict[int, tuple]:
        return _cut_rows(s, _pg_table(m, "cut"))

    wait_until(lambda: len(pg_rows()) == 5, 90, "the rows in PostgreSQL")
    before = cdc_offsets(s.cdc_raw_dir)
    cql.execute(f"TRUNCATE {ks}.cut")
    cql.execute(f"UPDATE {ks}.cut SET a = 'again' WHERE k = 1")
    cql.execute(f"INSERT INTO {ks}.cut (k, a, b) VALUES (9, 'a9', 'b9')")
    publish_new_cdc(s, cql, before, m["prefix"], work / "cut-2", truncations=True)
    run_materializer(materializer_command(s, m["prefix"], work / "ckpt", *m["sets"]),
                     work / "cut-2.log")
    want = {r.k: (r.a, r.b) for r in cql.execute(f"SELECT k, a, b FROM {ks}.cut")}
    assert want == {1: ("again", None), 9: ("a9", "b9")}
    wait_until(lambda: pg_rows() == want, 90, "PostgreSQL equal to Cassandra after a TRUNCATE")


def test_truncate_enabled_on_a_one_partition_topic_truncates_and_ends_equal(
        mirrored_json, cql) -> None:
    """The sink with `truncate.enabled` on a table whose event topic has one partition: it
    truncates the PostgreSQL table on the truncate event, the live rows come again after
    it, and PostgreSQL equals Cassandra. (With more partitions a sink that truncates the
    whole table on any partition's truncate event can lose rows written after the
    TRUNCATE: docs/connect.md "TRUNCATE".)"""
    from confluent_kafka.admin import AdminClient, NewTopic

    m = mirrored_json
    s, work, prefix = m["s"], m["work"], m["prefix"]
    ks = f"sinkt_{uuid.uuid4().hex[:8]}"  # not in the module connector's topics
    cql.execute(f"CREATE KEYSPACE {ks} WITH replication = "
                "{'class': 'SimpleStrategy', 'replication_factor': 1}")
    topic = f"{prefix}.{ks}.cut"
    admin = AdminClient({"bootstrap.servers": s.bootstrap_servers})  # (alive until done)
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    name = f"pg-trunc-{prefix}"
    try:
        cql.execute(f"CREATE TABLE {ks}.cut (k int PRIMARY KEY, a text, b text) "
                    "WITH cdc = true")
        before = cdc_offsets(s.cdc_raw_dir)
        for k in range(5):
            cql.execute(f"INSERT INTO {ks}.cut (k, a, b) VALUES ({k}, 'a{k}', 'b{k}')")
        publish_new_cdc(s, cql, before, prefix, work / "tcut-1")
        run_materializer(materializer_command(s, prefix, work / "ckpt", *m["sets"]),
                         work / "tcut-1.log")
        connect.put_connector(s, name, connect.sink_config(s, prefix, ks)
                              | {"truncate.enabled": "true"})

        def pg_rows() -> dict[int, tuple]:
            return _cut_rows(s, f"{prefix}_{ks}_cut")

        wait_until(lambda: len(pg_rows()) == 5, 90, "the rows in PostgreSQL")
        before = cdc_offsets(s.cdc_raw_dir)
        cql.execute(f"TRUNCATE {ks}.cut")
        cql.execute(f"UPDATE {ks}.cut SET a = 'again' WHERE k = 1")
        cql.execute(f"INSERT INTO {ks}.cut (k, a, b) VALUES (9, 'a9', 'b9')")
        publish_new_cdc(s, cql, before, prefix, work / "tcut-2", truncations=True)
        run_materializer(materializer_command(s, prefix, work / "ckpt", *m["sets"]),
                         work / "tcut-2.log")
        events = [(None if msg.key() is None else json.loads(msg.key())["payload"]["k"],
                   json.loads(msg.value())["payload"]["op"])
                  for msg in read_to_end(s.bootstrap_servers, topic) if msg.value()]
        ops = [op for _k, op in events]
        assert ops.count("t") == 1, events  # its one partition's truncate event
        after_t = events[ops.index("t") + 1:]
        # rows 1 and 9 again after it (`r`: written again at the barrier)
        assert sorted(after_t) == [(1, "r"), (9, "r")], events
        want = {r.k: (r.a, r.b) for r in cql.execute(f"SELECT k, a, b FROM {ks}.cut")}
        assert want == {1: ("again", None), 9: ("a9", "b9")}
        wait_until(lambda: pg_rows() == want, 90,
                   "PostgreSQL equal to Cassandra after the sink truncated")
        status = connect.connector_status(s, name)
        assert all(t["state"] == "RUNNING" for t in status["tasks"]), status
    finally:
        connect.delete_connector(s, name)
        cql.execute(f"DROP KEYSPACE {ks}")


def test_masked_and_excluded_columns_land_as_published(sink_stack, cql, tmp_path) -> None:
    """Capture rules through the JDBC sink: PostgreSQL gets the masked values and no
    column for the excluded one (the sink makes its table from the published schema)."""
    import hashlib

    from shared.capture import CaptureSettings

    ks, salt = f"sinkcap_{uuid.uuid4().hex[:8]}", "sink-salt"
    cql.execute(f"CREATE KEYSPACE {ks} WITH replication = "
                "{'class': 'SimpleStrategy', 'replication_factor': 1}")
    try:
        cql.execute(f"CREATE TABLE {ks}.people (id int PRIMARY KEY, email text, ssn text, "
                    "notes text, age int) WITH cdc = true")
        before = cdc_offsets(sink_stack.cdc_raw_dir)
        for n in range(50):
            cql.execute(f"INSERT INTO {ks}.people (id, email, ssn, notes, age) VALUES "
                        f"({n}, 'p{n}@example.com', '{n:03d}-12-3456', 'note {n}', {n})")
        prefix = f"kc{uuid.uuid4().hex[:6]}"
        capture = CaptureSettings(column_exclude_list=[f"{ks}\\.people\\.notes"],
                                  column_mask_hash=[f"{ks}\\.people\\.email"],
                                  column_mask_hash_salt=salt,
                                  column_mask_chars=[f"{ks}\\.people\\.ssn"])
        assert publish_new_cdc(sink_stack, cql, before, prefix, tmp_path / "pub",
                               capture=capture) >= 50
        sets = [f"events.{k}={str(v).lower() if isinstance(v, bool) else v}"
                for k, v in RELATIONAL.items()]
        run_materializer(materializer_command(sink_stack, prefix, tmp_path / "ckpt", *sets),
                         tmp_path / "job.log")
        name = f"pg-{prefix}"
        connect.put_connector(sink_stack, name, connect.sink_config(sink_stack, prefix, ks))
        m = {"s": sink_stack, "prefix": prefix, "ks": ks, "connector": name,
             "tables": {"people": None}}
        try:
            _caught_up(m)
            with psycopg.connect(postgres.url(sink_stack)) as conn:
                cur = conn.execute(f'SELECT * FROM "{_pg_table(m, "people")}" ORDER BY id')
                names = [c.name for c in cur.description]
                rows = [dict(zip(names, r, strict=True)) for r in cur.fetchall()]
        finally:
            connect.delete_connector(sink_stack, name)
        assert sorted(names) == ["age", "email", "id", "ssn"]  # no notes column
        assert rows == [{"id": n, "age": n, "ssn": "********",
                         "email": hashlib.sha256(f"{salt}p{n}@example.com".encode()).hexdigest()}
                        for n in range(50)]
    finally:
        cql.execute(f"DROP KEYSPACE {ks}")
