"""Random CQL over every type, drawn by hypothesis: the workload tables, the statements, runs."""

from __future__ import annotations

import datetime as dt
import struct
import time
import uuid
from collections.abc import Callable, Sequence

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from support.phases import phased

PER_EXAMPLE = 18
NOW_US = int(time.time() * 1_000_000)


def _text(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def _f32(x: float) -> float:
    return struct.unpack(">f", struct.pack(">f", x))[0]


TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12).map(_text)
INT = st.integers(-(2**31), 2**31 - 1).map(str)
SCALARS: dict[str, st.SearchStrategy[str]] = {
    "ascii": st.text("abcXYZ 019_-", max_size=10).map(_text),
    "bigint": st.integers(-(2**63), 2**63 - 1).map(str),
    "blob": st.binary(max_size=16).map(lambda b: "0x" + b.hex()),
    "boolean": st.sampled_from(["true", "false"]),
    "date": st.dates(dt.date(1900, 1, 1), dt.date(2100, 12, 31)).map(lambda d: _text(str(d))),
    # up to 21 significant digits: beyond a double's 15-17, so a lossy path shows
    "decimal": st.tuples(st.integers(-(10**21), 10**21), st.integers(0, 9)).map(
        lambda t: f"{t[0] // 10**t[1]}.{abs(t[0]) % 10**t[1]:0{t[1]}d}" if t[1] else str(t[0])),
    "double": st.floats(allow_nan=False, allow_infinity=False).map(repr),
    "duration": st.tuples(st.integers(0, 100), st.integers(0, 100),
                          st.integers(0, 10**12)).map(lambda t: f"{t[0]}mo{t[1]}d{t[2]}ns"),
    "float": st.floats(width=32, allow_nan=False, allow_infinity=False).map(
        lambda x: repr(_f32(x))),
    "inet": st.ip_addresses().map(lambda a: _text(str(a))),
    "int": INT,
    "smallint": st.integers(-(2**15), 2**15 - 1).map(str),
    "text": TEXT,
    "time": st.integers(0, 86_400 * 10**9 - 1).map(
        lambda ns: _text(f"{ns // 3_600_000_000_000:02d}:{ns // 60_000_000_000 % 60:02d}:"
                         f"{ns // 10**9 % 60:02d}.{ns % 10**9:09d}")),
    "timestamp": st.integers(-(10**12), 4 * 10**12).map(str),
    "timeuuid": st.tuples(st.integers(0, 2**60 - 1), st.integers(0, 2**14 - 1),
                          st.integers(0, 2**48 - 1)).map(
        lambda t: str(uuid.UUID(fields=(t[0] & 0xFFFFFFFF, (t[0] >> 32) & 0xFFFF,
                                        ((t[0] >> 48) & 0x0FFF) | 0x1000,
                                        0x80 | (t[1] >> 8), t[1] & 0xFF, t[2])))),
    "tinyint": st.integers(-128, 127).map(str),
    "uuid": st.uuids().map(str),
    "varint": st.integers(-(10**30), 10**30).map(str),
    "vector": st.lists(st.floats(width=32, allow_nan=False, allow_infinity=False), min_size=3,
                       max_size=3).map(lambda xs: "[" + ", ".join(repr(_f32(x)) for x in xs)
                                       + "]"),
    "tuple": st.tuples(INT, TEXT).map(lambda t: f"({t[0]}, {t[1]})"),
    "fudt": st.tuples(INT, TEXT).map(lambda t: f"{{a: {t[0]}, b: {t[1]}}}"),
    "flist": st.lists(INT, max_size=4).map(lambda xs: "[" + ", ".join(xs) + "]"),
    "fset": st.lists(TEXT, max_size=4).map(lambda xs: "{" + ", ".join(xs) + "}"),
    "fmap": st.dictionaries(INT, TEXT, max_size=3).map(
        lambda d: "{" + ", ".join(f"{k}: {v}" for k, v in d.items()) + "}"),
}
COLUMN_TYPES = {
    "v_ascii": "ascii", "v_bigint": "bigint", "v_blob": "blob", "v_boolean": "boolean",
    "v_date": "date", "v_decimal": "decimal", "v_double": "double", "v_duration": "duration",
    "v_float": "float", "v_inet": "inet", "v_int": "int", "v_smallint": "smallint",
    "v_text": "text", "v_time": "time", "v_timestamp": "timestamp", "v_timeuuid": "timeuuid",
    "v_tinyint": "tinyint", "v_uuid": "uuid", "v_varint": "varint",
    "v_vector": "vector<float, 3>", "v_tuple": "tuple<int, text>", "v_fudt": "frozen<pt>",
    "v_flist": "frozen<list<int>>", "v_fset": "frozen<set<text>>",
    "v_fmap": "frozen<map<int, text>>",
}
ALL_COLUMNS = tuple(sorted(COLUMN_TYPES))
VALUE = {name: SCALARS[name[2:]] for name in COLUMN_TYPES}
ELEM_LIST, ELEM_SET = TEXT, st.integers(-50, 50).map(str)
MAP_KEY = st.sampled_from(["'k1'", "'k2'", "'k3'", "'k4'"])
BIGINT = SCALARS["bigint"]

P1 = st.integers(0, 3)
P2 = st.sampled_from(["'a'", "'b'"])
C1 = st.integers(0, 5)
C2 = st.sampled_from(["'x'", "'y'", "'z'"])


def _using(draw, ttl_ok: bool = True) -> str:
    parts = []
    if draw(st.integers(0, 3)) == 0:  # out-of-order explicit timestamps, older and newer
        parts.append(f"TIMESTAMP {NOW_US + draw(st.integers(-10**9, 10**9))}")
    if ttl_ok and draw(st.integers(0, 4)) == 0:
        parts.append(f"TTL {draw(st.integers(1000, 100_000))}")
    return (" USING " + " AND ".join(parts)) if parts else ""


def node_columns(cql) -> tuple[str, ...]:
    """The value columns of {ks}.r that the node's Cassandra line has (sorted): vector is a
    5.0 type, so the tables of a 4.x node go without it."""
    release = cql.execute("SELECT release_version FROM system.local").one().release_version
    return tuple(c for c in ALL_COLUMNS if c != "v_vector" or not release.startswith("4."))


@st.composite
def statement(draw, ks: str, partitions: int = 4, columns: tuple[str, ...] = ALL_COLUMNS
              ) -> str:
    """One random CQL statement against {ks}.r or {ks}.ctr; `partitions`: the values of p1
    (4: a few hot partitions; a soak spreads wider); `columns`: the value columns the
    table has (`node_columns`)."""
    p1 = P1 if partitions == 4 else st.integers(0, partitions - 1)
    key = [str(draw(p1)), draw(P2), str(draw(C1)), draw(C2)]
    where_pk = f"p1 = {key[0]} AND p2 = {key[1]}"
    where_row = f"{where_pk} AND c1 = {key[2]} AND c2 = {key[3]}"
    kind = draw(st.sampled_from(
        ["insert"] * 5 + ["update"] * 4 + ["collection"] * 4
        + ["static", "delete_cells", "delete_row", "delete_range", "delete_partition",
           "batch", "counter"]))
    if kind == "insert":
        cols = draw(st.lists(st.sampled_from(columns), min_size=1, max_size=6,
                             unique=True))
        extra = draw(st.sampled_from([[], ["l"], ["s"], ["m"], ["u"]]))
        names = ["p1", "p2", "c1", "c2", *cols, *extra]
        vals = key + [draw(VALUE[c]) if draw(st.integers(0, 9)) else "null" for c in cols]
        for e in extra:
            vals.append({"l": lambda: "[" + ", ".join(draw(st.lists(ELEM_LIST, max_size=3)))
                         + "]",
                         "s": lambda: "{" + ", ".join(draw(st.lists(ELEM_SET, max_size=3)))
                         + "}",
                         "m": lambda: "{" + ", ".join(f"{k}: {draw(BIGINT)}" for k in draw(
                             st.lists(MAP_KEY, max_size=3, unique=True))) + "}",
                         "u": lambda: f"{{a: {draw(INT)}, b: {draw(TEXT)}}}"}[e]())
        return (f"INSERT INTO {ks}.r ({', '.join(names)}) VALUES ({', '.join(vals)})"
                f"{_using(draw)}")
    if kind == "update":
        cols = draw(st.lists(st.sampled_from(columns), min_size=1, max_size=4,
                             unique=True))
        sets = ", ".join(f"{c} = {draw(VALUE[c])}" for c in cols)
        return f"UPDATE {ks}.r{_using(draw)} SET {sets} WHERE {where_row}"
    if kind == "collection":
        op = draw(st.sampled_from([
            f"l = l + [{draw(ELEM_LIST)}]", f"l = [{draw(ELEM_LIST)}] + l",
            f"l = [{draw(ELEM_LIST)}, {draw(ELEM_LIST)}]", f"s = s + {{{draw(ELEM_SET)}}}",
            f"s = s - {{{draw(ELEM_SET)}}}", f"s = {{{draw(ELEM_SET)}}}",
            f"m[{draw(MAP_KEY)}] = {draw(BIGINT)}", f"m = m - {{{draw(MAP_KEY)}}}",
            f"m = {{{draw(MAP_KEY)}: {draw(BIGINT)}}}", f"u.a = {draw(INT)}",
            f"u.b = {draw(TEXT)}", f"u = {{a: {draw(INT)}}}"]))
        return f"UPDATE {ks}.r{_using(draw)} SET {op} WHERE {where_row}"
    if kind == "static":
        op = draw(st.sampled_from([f"s_int = {draw(INT)}", f"s_set = s_set + {{{draw(INT)}}}",
                                   "s_int = null"]))
        return f"UPDATE {ks}.r{_using(draw)} SET {op} WHERE {where_pk}"
    if kind == "delete_cells":
        cols = draw(st.lists(st.sampled_from([*columns, "l", "s", "m", "u"]),
                             min_size=1, max_size=3, unique=True))
        elem = "" if "m" in cols else draw(st.sampled_from(["", f", m[{draw(MAP_KEY)}]"]))
        return (f"DELETE {', '.join(cols)}{elem} FROM {ks}.r{_using(draw, False)} "
                f"WHERE {where_row}")
    if kind == "delete_row":
        return f"DELETE FROM {ks}.r{_using(draw, False)} WHERE {where_row}"
    if kind == "delete_range":
        low, high = sorted((draw(C1), draw(C1)))
        cond = draw(st.sampled_from([f"c1 > {low} AND c1 <= {high}", f"c1 >= {low}",
                                     f"c1 < {high}", f"c1 = {low}",
                                     f"c1 = {low} AND c2 > {draw(C2)}"]))
        return f"DELETE FROM {ks}.r{_using(draw, False)} WHERE {where_pk} AND {cond}"
    if kind == "delete_partition":
        return f"DELETE FROM {ks}.r{_using(draw, False)} WHERE {where_pk}"
    if kind == "batch":
        inner = [f"UPDATE {ks}.r SET v_int = {draw(INT)} WHERE {where_pk} AND c1 = {c} "
                 f"AND c2 = 'x'" for c in draw(st.lists(C1, min_size=1, max_size=3))]
        logged = draw(st.sampled_from(["", "UNLOGGED "]))
        return f"BEGIN {logged}BATCH {'; '.join(inner)}; APPLY BATCH"
    return (f"UPDATE {ks}.ctr SET n = n + {draw(st.integers(-1000, 1000))} "
            f"WHERE k = {draw(st.integers(0, 5))}")


def create_workload_tables(cql, ks: str) -> None:
    """The UDT and the two CDC tables `statement` writes to: {ks}.r (every type) and {ks}.ctr."""
    cql.execute(f"CREATE TYPE {ks}.pt (a int, b text)")
    columns = ", ".join(f"{c} {COLUMN_TYPES[c]}" for c in node_columns(cql))
    cql.execute(f"CREATE TABLE {ks}.r (p1 int, p2 text, c1 int, c2 text, "
                f"s_int int static, s_set set<int> static, {columns}, l list<text>, "
                f"s set<int>, m map<text, bigint>, u pt, PRIMARY KEY ((p1, p2), c1, c2)) "
                f"WITH cdc = true")
    cql.execute(f"CREATE TABLE {ks}.ctr (k int PRIMARY KEY, n counter) WITH cdc = true")


def draw_statements(strategy: st.SearchStrategy[str], count: int,
                    cover: Sequence[str] = (), floor: int = 10) -> list[str]:
    """About `count` statements drawn by hypothesis, topped up until each marker of `cover`
    occurs in at least `floor` of them.

    Hypothesis draws are skewed run by run (a rare kind comes 7 times in one run of 2,000
    and 70 in the next), so coverage is made, not hoped for: extra statements are drawn
    and only those carrying a missing marker are kept.
    """
    drawn: list[str] = []

    @settings(max_examples=max(1, count // PER_EXAMPLE), deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(st.lists(strategy, min_size=PER_EXAMPLE, max_size=PER_EXAMPLE))
    def draw(statements: list[str]) -> None:
        drawn.extend(statements)

    draw()
    statements = list(drawn)
    for _ in range(40):
        short = [m for m in cover if sum(m in s for s in statements) < floor]
        if not short:
            return statements
        drawn.clear()
        draw()
        statements += [s for s in drawn if any(m in s for m in short)]
    raise AssertionError(f"hypothesis never drew enough of {short}")


@phased("workloads")
def run_workload(cql, ks: str, count: int, cover: Sequence[str] = (),
                 floor: int = 10, keep: Callable[[str], bool] = lambda _s: True) -> list[str]:
    """Execute about `count` hypothesis-drawn statements (each marker of `cover` in at least
    `floor` of them) that `keep` accepts; returns them in order."""
    executed: list[str] = []
    columns = node_columns(cql)
    for cql_text in filter(keep, draw_statements(statement(ks, columns=columns), count, cover,
                                                 floor)):
        cql.execute(cql_text, timeout=30)
        executed.append(cql_text)
    return executed
