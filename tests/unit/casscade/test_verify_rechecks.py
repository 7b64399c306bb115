"""`verify_table`'s judging and rechecks, on a stream and a table held in memory: a key in
flight turns equal when its change arrives, a key that stays wrong is named, and a recheck
reads only the partitions it needs."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

from casscade.verify.compare import TableRow
from casscade.verify.event_decoder import EventDecoder
from casscade.verify.keys import token_of
from casscade.verify.stream_images import StreamImages, key_text
from casscade.verify.verifier import VerifyOptions, verify_table
from materializer.output.event_settings import EventSettings
from materializer.output.values import MODES
from shared.schema import TableSchema, table_from_json
from shared.table_scan import ScanProgress, token_ranges

TABLE = table_from_json({"keyspace": "ks", "table": "t", "id": str(uuid.UUID(int=4)),
                         "columns": [
                             {"name": "id", "kind": "partition_key", "position": 0,
                              "type": "int"},
                             {"name": "v", "kind": "regular", "position": -1,
                              "type": "text"}]}, {})


class Stream(StreamImages):
    """Events handed in per catch-up: (key id, after or None, write time µs), of `table`
    (its partition key one column, its value column `v`)."""

    def __init__(self, *arrivals: list[tuple[Any, str | None, int]],
                 table: TableSchema = TABLE) -> None:
        super().__init__({}, "p.ks.t", EventDecoder(EventSettings(), table))
        self.arrivals = list(arrivals)
        self.pk = table.partition_key[0].name

    def catch_up(self, progress: Any = None) -> int:
        batch = self.arrivals.pop(0) if self.arrivals else []
        for key_id, value, ts_us in batch:
            key = {self.pk: key_id}
            self.images[key_text(key)] = None if value is None else {**key, "v": value}
            self.position_us = max(self.position_us, ts_us)
            self.events += 1
        return len(batch)


class Rows:
    """`table` per scan: (key id, v, newest write µs); records which ranges were read."""

    def __init__(self, *scans: list[tuple[Any, str, int]], table: TableSchema = TABLE) -> None:
        self.scans = list(scans)
        self.table = table
        self.asked: list[list[tuple[int, int]]] = []

    def scan(self, ranges: list[tuple[int, int]], progress: ScanProgress | None = None,
             report: Any = None) -> Iterator[tuple[str, dict, TableRow, int]]:
        self.asked.append(ranges)
        rows = self.scans.pop(0) if len(self.scans) > 1 else self.scans[0]
        if progress is not None:
            progress.rows = len(rows)
        for key_id, v, ts in rows:
            token = token_of(self.table, [key_id])
            if any(s < token <= e for s, e in ranges):
                key = {self.table.partition_key[0].name: key_id}
                yield key_text(key), key, TableRow({**key, "v": v}, ts), token


def _options(**kw: Any) -> VerifyOptions:
    return VerifyOptions(ranges=token_ranges(8), grace_s=0, **kw)


def test_a_change_in_flight_is_pending_and_then_equal_once_it_arrives() -> None:
    stream = Stream([(1, "a", 100), (2, "b", 100)], [(2, "c", 300)])
    rows = Rows([(1, "a", 100), (2, "c", 300)])
    result = verify_table(stream, rows, TABLE, MODES, _options())
    assert dict(result.report.counts) == {"equal": 2}
    assert result.rechecks == 1 and not result.report.differences
    # the recheck read back only key 2's partition
    token = token_of(TABLE, [2])
    assert rows.asked[1] == [(token - 1, token)]


def test_keys_that_stay_wrong_are_named_with_both_sides() -> None:
    stream = Stream([(1, "a", 100), (2, "old", 100), (3, "gone", 100), (4, None, 100)])
    rows = Rows([(1, "a", 100), (2, "new", 90), (5, "never streamed", 80)])
    result = verify_table(stream, rows, TABLE, MODES, _options(rechecks=2))
    counts = dict(result.report.counts)
    assert counts == {"equal": 2, "different": 1, "extra": 1, "missing": 1}  # 4: deleted both
    found = {json.loads(d.key)["id"]: (d.verdict, d.table, d.stream)
             for d in result.report.differences}
    assert found == {2: ("different", {"id": 2, "v": "new"}, {"id": 2, "v": "old"}),
                     3: ("extra", None, {"id": 3, "v": "gone"}),
                     5: ("missing", {"id": 5, "v": "never streamed"}, None)}
    assert result.rechecks == 2


def test_a_write_newer_than_the_stream_stays_pending_not_wrong() -> None:
    stream = Stream([(1, "a", 100)])
    rows = Rows([(1, "b", 500)])  # written after anything the stream has shown
    result = verify_table(stream, rows, TABLE, MODES, _options(rechecks=1))
    assert dict(result.report.counts) == {"pending": 1}
    assert result.report.pending == [key_text({"id": 1})] and not result.report.differences


def test_a_missing_topic_is_a_note_and_every_row_missing() -> None:
    class NoTopic(Stream):
        def catch_up(self, progress: Any = None) -> int:
            from confluent_kafka import KafkaException

            raise KafkaException("topic p.ks.t not found")

    result = verify_table(NoTopic(), Rows([(1, "a", 100)]), TABLE, MODES, _options(rechecks=0))
    assert dict(result.report.counts) == {"missing": 1}
    assert "does not exist" in result.notes[0]


LIST_KEYED = table_from_json({"keyspace": "ks", "table": "t", "id": str(uuid.UUID(int=5)),
                              "columns": [
                                  {"name": "k", "kind": "partition_key", "position": 0,
                                   "type": "frozen<list<int>>"},
                                  {"name": "v", "kind": "regular", "position": -1,
                                   "type": "text"}]}, {})


def test_a_sample_of_a_table_whose_key_gives_no_token_reports_no_false_extras() -> None:
    keys = [[i, i + 1] for i in range(40)]
    sample = token_ranges(8)[:3]
    inside = sum(any(s < token_of(LIST_KEYED, [k]) <= e for s, e in sample) for k in keys)
    assert 0 < inside < len(keys)
    result = verify_table(Stream([(k, "x", 100) for k in keys], table=LIST_KEYED),
                          Rows([(k, "x", 50) for k in keys], table=LIST_KEYED), LIST_KEYED,
                          MODES, VerifyOptions(ranges=sample, grace_s=0, sampled=True))
    assert dict(result.report.counts) == {"equal": inside}
    assert f"{len(keys) - inside:,} keys of the stream" in result.notes[0]


class _Msg:
    """A Kafka message of an event topic, as read_to_end yields it."""

    def __init__(self, partition: int, offset: int, key: bytes | None, value: bytes) -> None:
        self._p, self._o, self._k, self._v = partition, offset, key, value

    def partition(self) -> int:
        return self._p

    def offset(self) -> int:
        return self._o

    def key(self) -> bytes | None:
        return self._k

    def value(self) -> bytes:
        return self._v


def test_a_truncate_event_empties_its_partition_only(monkeypatch) -> None:
    """A truncate event (no key) removes the keys verify read from its partition; keys of
    another partition, and a key written again after it, stay."""
    from casscade.verify import stream_images
    from materializer.output.envelope import EnvelopeWriter

    w = EnvelopeWriter(TABLE, "c", EventSettings().schemas)

    def event(part: int, offset: int, pk: int, v: str) -> _Msg:
        row = {"id": pk, "v": v}
        return _Msg(part, offset, w.key({"id": pk}),
                    w.value("c", None, row, w.source(10), 1))

    truncate = w.value("t", None, None, w.source(20, file="truncate"), 2)
    messages = [event(0, 0, 1, "a"), event(0, 1, 2, "b"), _Msg(0, 2, None, truncate),
                event(0, 3, 2, "again"), event(1, 0, 3, "c")]
    monkeypatch.setattr(stream_images, "read_to_end", lambda *_a, **_k: iter(messages))
    images = StreamImages({}, "p.ks.t", EventDecoder(EventSettings(), TABLE))
    assert images.catch_up() == 5
    assert images.images == {key_text({"id": 1}): None,
                             key_text({"id": 2}): {"id": 2, "v": "again"},
                             key_text({"id": 3}): {"id": 3, "v": "c"}}
