"""Snapshot rows → SNAPSHOT_ROW records, and the token ranges of a snapshot (no services)."""

from __future__ import annotations

import itertools
import uuid
from collections import namedtuple

from cassandra.util import OrderedMapSerializedKey, SortedSet

from materializer.output.values import RowRenderer
from materializer.rules.clustering import ClusteringOrder
from materializer.rules.image import partition_images
from materializer.rules.merge import Merger
from materializer.rules.model import PartitionState
from publisher.snapshot.rows import row_records
from shared import codec, rowupdate
from shared.schema import table_from_json
from shared.table_scan import MAX_TOKEN, MIN_TOKEN, select_statement, token_ranges

from support import rowupdate_reference

TABLE = table_from_json({
    "keyspace": "ks", "table": "t", "id": str(uuid.UUID(int=7)),
    "columns": [
        {"name": "p1", "kind": "partition_key", "position": 0, "type": "int"},
        {"name": "p2", "kind": "partition_key", "position": 1, "type": "text"},
        {"name": "c", "kind": "clustering", "position": 0, "type": "int",
         "clustering_order": "asc"},
        {"name": "v", "kind": "regular", "position": -1, "type": "text"},
        {"name": "st", "kind": "regular", "position": -1, "type": "set<int>"},
        {"name": "m", "kind": "regular", "position": -1, "type": "map<text, int>"},
        {"name": "l", "kind": "regular", "position": -1, "type": "list<text>"},
        {"name": "u", "kind": "regular", "position": -1, "type": "pt"},
    ]}, {"ks": {"pt": [["a", "int"], ["b", "text"]]}})
PT = namedtuple("pt", ["a", "b"])
SOURCE = {"host": "h", "datacenter": "dc", "file": "snapshot:ks.t", "segment_id": 0,
          "position": 3, "index": 0, "commitlog_version": 0, "messaging_version": 0}


def test_token_ranges_cover_the_ring_without_overlap() -> None:
    ranges = token_ranges(7)
    assert ranges[0][0] == MIN_TOKEN and ranges[-1][1] == MAX_TOKEN
    assert all(a[1] == b[0] for a, b in itertools.pairwise(ranges))
    assert all(lo < hi for lo, hi in ranges)


def test_select_names_every_column_with_writetime_and_ttl() -> None:
    sql = select_statement(TABLE)
    assert 'WRITETIME("st"), TTL("st")' in sql and 'token("p1", "p2") > ?' in sql


def test_row_becomes_a_record_the_materializer_shows_as_the_same_row() -> None:
    mk = OrderedMapSerializedKey(codec._driver_type(TABLE.column("m").type.params[0]), 5)
    mk._insert_unchecked("a", b"a", 1)
    mk._insert_unchecked("b", b"b", 2)
    row = (1, "x", 9, "hello", 1000, 100, SortedSet([3, 4]), [1001, 1002], [None, 50],
           mk, [1003, 1004], [None, None], ["e1", "e2"], [1005, 1006], [None, None],
           PT(7, None), [1007, None], [None, None])
    now_s, now_us = 1_800_000_000, 1_800_000_000_000_000
    (key, rec), = row_records(TABLE, row, now_s, now_us, SOURCE)  # no static columns
    assert key == codec.encode_partition_key(TABLE, [b"\x00\x00\x00\x01", b"x"])
    assert rowupdate_reference.decode(rowupdate.encode(rec)) == rec  # a valid RowUpdate
    assert rec["kind"] == "SNAPSHOT_ROW" and rec["liveness"]["timestamp"] == 1000
    by_col = {}
    for c in rec["cells"]:
        by_col.setdefault(c["column"], []).append(c)
    assert by_col["v"][0]["ttl"] == 100 and by_col["v"][0]["local_deletion_time"] == now_s + 100
    assert [c["timestamp"] for c in by_col["st"]] == [1001, 1002]
    assert by_col["st"][1]["local_deletion_time"] == now_s + 50
    assert len(by_col["u"]) == 1 and by_col["u"][0]["path"] == b"\x00\x00"  # field a only
    # a list is replaced whole: deletion at its newest element, elements 1 µs later, with
    # paths that are stable across reruns
    assert rec["complex_deletions"] == [{"column": "l", "marked_for_delete_at": 1006,
                                         "local_deletion_time": now_s}]
    assert [c["timestamp"] for c in by_col["l"]] == [1007, 1007]
    paths = [c["path"] for c in by_col["l"]]
    assert paths == [c["path"] for c in row_records(TABLE, row, now_s, now_us, SOURCE)[0][1]
                     ["cells"] if c["column"] == "l"]
    state = PartitionState()
    Merger(ClusteringOrder(TABLE)).apply(state, rec)
    (ck, image), = partition_images(state, now_s).items()
    r = RowRenderer(TABLE)
    shown = r.row(r.key(key, ck), image)
    assert shown == {"p1": 1, "p2": "x", "c": 9, "v": "hello", "st": [3, 4],
                     "m": {"a": 1, "b": 2}, "l": ["e1", "e2"], "u": {"a": 7, "b": None}}


def test_static_columns_become_a_static_row_record() -> None:
    table = table_from_json({
        "keyspace": "ks", "table": "s", "id": str(uuid.UUID(int=8)),
        "columns": [{"name": "p", "kind": "partition_key", "position": 0, "type": "int"},
                    {"name": "c", "kind": "clustering", "position": 0, "type": "int",
                     "clustering_order": "asc"},
                    {"name": "s", "kind": "static", "position": -1, "type": "int"},
                    {"name": "v", "kind": "regular", "position": -1, "type": "int"}]}, {})
    pairs = row_records(table, (1, 2, 30, 500, None, 4, 600, None), 10, 10**7, SOURCE)
    assert [r["kind"] for _, r in pairs] == ["STATIC_ROW", "SNAPSHOT_ROW"]
    assert [c["column"] for c in pairs[0][1]["cells"]] == ["s"]
    assert [c["column"] for c in pairs[1][1]["cells"]] == ["v"]
    # a partition with only static data: SELECT shows null clustering values
    only = row_records(table, (1, None, 30, 500, None, None, None, None), 10, 10**7, SOURCE)
    assert [r["kind"] for _, r in only] == ["STATIC_ROW"]
