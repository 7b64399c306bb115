"""RowUpdate records: the reference splitter's dicts, the Avro encoding (checked against
fastavro), and the publisher's direct writer, which must produce the very same bytes."""

from __future__ import annotations

import itertools
import json

import pytest

from publisher.agent.record_writer import RecordWriter, SourceInfo
from publisher.commitlog.reader import CommitLogReader
from publisher.commitlog.schema_source import FileSchemaSource
from shared import rowupdate

from support import rowupdate_reference
from support.paths import COMMITLOG_FIXTURES as FIXTURES
from support.splitter_reference import split


def _encoded(pairs) -> list[bytes]:
    """The reference values of split records: the fastavro codec's `encode_update` over each
    partition update's records (one mutation id for them)."""
    out: list[bytes] = []
    for _key, group in itertools.groupby(pairs, key=lambda pair: id(pair[0])):
        out += rowupdate_reference.encode_update([rec for _u, rec in group])
    return out


def _mutations(name: str):
    reader = CommitLogReader(FileSchemaSource(FIXTURES / name / "schema.json"))
    segment = next((FIXTURES / name).glob("CommitLog-*.log"))
    return segment, list(reader.read(segment))


@pytest.mark.parametrize("name", ["v7", "v8"])
def test_every_fixture_record_encodes_like_fastavro_and_round_trips(name: str) -> None:
    segment, mutations = _mutations(name)
    info = SourceInfo("host-1", "dc1", segment.name, mutations[0].segment_id, 7, 12)
    kinds = set()
    writer = RecordWriter(info, lambda t: t.schema_hash)
    for m in mutations:
        pairs = split(m, info, lambda t: t.schema_hash)
        direct = writer.records(m)
        assert [u for u, _ in pairs] == [u for u, _ in direct]
        for (_, record), (_, fast), encoded in zip(pairs, direct, _encoded(pairs),
                                                   strict=True):
            kinds.add(record["kind"])
            mutation = rowupdate.mutation_of_value(encoded)
            assert rowupdate.encode(record, mutation) == encoded  # the snapshot's writer
            assert fast == encoded
            back = rowupdate_reference.decode(encoded)
            assert back["kind"] == record["kind"]
            assert back["cells"] == record["cells"]
            assert back["source"]["position"] == m.position
    assert kinds == {"ROW", "STATIC_ROW", "PARTITION_DELETION", "RANGE_TOMBSTONE"}


def test_split_indexes_are_unique_per_mutation_and_ranges_pair_up() -> None:
    segment, mutations = _mutations("v7")
    info = SourceInfo("h", "dc", segment.name, 1, 7, 12)
    seen = set()
    ranges = []
    for m in mutations:
        for _u, rec in split(m, info, lambda t: "x"):
            ident = (rec["source"]["position"], rec["source"]["index"])
            assert ident not in seen
            seen.add(ident)
            if rec["kind"] == "RANGE_TOMBSTONE" and rec["table"] == "ranges":
                ranges.append(rec["range"])
    manifest = json.loads((FIXTURES / "v7" / "manifest.json").read_text())
    range_deletes = [s for s in manifest["statements"] if s["label"].startswith("range delete")]
    assert len(ranges) == len(range_deletes)
    open_end = next(r for r in ranges if not r["end"])  # c1 >= 8: open at the top
    assert open_end["start_inclusive"] and open_end["end_inclusive"]


def test_unknown_format_version_is_refused() -> None:
    with pytest.raises(rowupdate.RecordFormatError, match="format version 9"):
        rowupdate_reference.decode(b"\x09abc")
    with pytest.raises(rowupdate.RecordFormatError):
        rowupdate_reference.decode(b"\x01\x02")


def test_avro_long_matches_fastavro_across_the_table_and_cache_edges() -> None:
    import io

    import fastavro

    def reference(n: int) -> bytes:
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, "long", n)
        return buf.getvalue()

    edges = [0, 1, -1, 63, 64, -64, -65, 8191, 8192, -8192, -8193, 2**31 - 1, -2**31,
             2**63 - 1, -2**63, 1_763_800_000_000_000, -1_763_800_000_000_000, 4_194_304]
    values = edges + list(range(-9000, 9000, 7)) + [e + d for e in edges for d in (-1, 1)]
    values += [1_763_800_000_000_000 + i * 977 for i in range(2000)]  # one segment's stamps
    for n in values * 2:  # twice: the second pass reads the cached high parts
        if -2**63 <= n < 2**63:
            assert rowupdate.avro_long(n) == reference(n), n


def test_writer_fast_and_general_cell_paths_agree_with_the_reference() -> None:
    """Fixture rows altered so one row mixes plain live cells (the writer's fast path) with
    TTL'd, tombstoned and collection cells, timestamps that change and change back, empty
    and long values, shadowable and expiring rows: every record still equals fastavro's."""
    segment, mutations = _mutations("v7")
    info = SourceInfo("h", "dc", segment.name, 1, 7, 12)
    changed = 0
    for m in mutations:
        for update in m.updates:
            for i, row in enumerate(update.rows):
                if not row.cells:
                    continue
                for j, cell in enumerate(row.cells):
                    if cell.path is None and not cell.tombstone and cell.ttl == 0:
                        cell.timestamp += (i + j) % 3 - 1  # differs, then returns
                        cell.value = [b"", b"v" * 9000, cell.value][(i + j) % 3]
                if i % 4 == 1:
                    row.shadowable = True
                if i % 4 == 2 and row.liveness is not None:
                    row.liveness.ttl, row.liveness.local_expiration_time = 3600, 1_800_000_000
                changed += 1
        writer = RecordWriter(info, lambda t: t.schema_hash)
        pairs = split(m, info, lambda t: t.schema_hash)
        assert [fast for _, fast in writer.records(m)] == _encoded(pairs)
    assert changed > 100


def test_replica_copies_share_a_digest_and_nothing_else_does() -> None:
    """The copy digest (bytes 2-17 of a raw value) leaves out `source` only: the same
    mutation read from two replicas' logs has one digest per record; any other difference
    (a value, a TTL, a local deletion time, the record's key) changes it. A value of an
    older format (1-3, never released) is refused, naming its version byte."""
    segment, mutations = _mutations("v7")
    one = RecordWriter(SourceInfo("node-1", "dc1", segment.name, 7, 7, 12), lambda t: "h")
    two = RecordWriter(SourceInfo("node-two", "dc2", "CommitLog-7-99.log", 99, 7, 12),
                       lambda t: "h")
    digests = []
    for m in mutations:
        a, b = one.records(m), two.records(m)
        assert [v for _, v in a] != [v for _, v in b]
        assert [rowupdate_reference.digest_of(v) for _, v in a] \
            == [rowupdate_reference.digest_of(v) for _, v in b]
        digests += [rowupdate_reference.digest_of(v) for _, v in a]
    assert len(digests) > 100 and all(len(d) == 16 for d in digests)
    # distinct records (every record of a fixture differs in key, clustering or content)
    assert len(set(digests)) == len(digests)
    record = rowupdate_reference.decode(one.records(mutations[0])[0][1])
    base = rowupdate_reference.digest_of(rowupdate.encode(record))
    for change in ({"partition_key": record["partition_key"] + b"x"},
                   {"liveness": {"timestamp": 1, "ttl": 60, "local_expiration_time": 9}},
                   {"deletion": {"marked_for_delete_at": 5, "local_deletion_time": 6}}):
        assert rowupdate_reference.digest_of(rowupdate.encode({**record, **change})) != base
    moved = {**record, "source": {**record["source"], "position": 1, "index": 3}}
    assert rowupdate_reference.digest_of(rowupdate.encode(moved)) == base
    v4 = rowupdate.encode(record)
    assert rowupdate.mutation_time_of_value(v4) == rowupdate.record_timestamp(record)
    for older in (1, 2, 3, 5):
        with pytest.raises(rowupdate.RecordFormatError, match=f"format version {older} "):
            rowupdate_reference.decode(bytes([older]) + v4[1:])


def test_replica_copies_share_a_mutation_id_and_mutations_differ() -> None:
    """The mutation id (bytes 18-33 of a format-3 value): the same on every replica's copy of
    a mutation, shared by all the records of one partition update, different for any two
    updates that differ."""
    segment, mutations = _mutations("v7")
    one = RecordWriter(SourceInfo("node-1", "dc1", segment.name, 7, 7, 12), lambda t: "h")
    two = RecordWriter(SourceInfo("node-3", "dc1", "CommitLog-7-5.log", 5, 7, 12),
                       lambda t: "h")
    ids: dict[bytes, set[bytes]] = {}
    multi = 0
    for m in mutations:
        a, b = one.records(m), two.records(m)
        got = [rowupdate.mutation_of_value(v) for _, v in a]
        assert got == [rowupdate.mutation_of_value(v) for _, v in b]
        for _update, group in itertools.groupby(zip(a, got, strict=True),
                                                key=lambda x: id(x[0][0])):
            values = [(v, mid) for (_u, v), mid in group]
            assert len({mid for _v, mid in values}) == 1
            multi += len(values) > 1
            mid = values[0][1]
            content = {rowupdate_reference.digest_of(v) for v, _mid in values}
            assert ids.setdefault(mid, set(content)) == content  # one id, one content
    assert multi >= 5 and len(ids) > 20
