"""The pure parts of `casscade verify`: keys' tokens from either side, events decoded from
JSON or Avro to one form, the exit codes, the report and the metrics file."""

from __future__ import annotations

import datetime as dt
import decimal
import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from cassandra.metadata import Murmur3Token

from casscade.verify.cli import _ranges, _routed
from casscade.verify.compare import Report
from casscade.verify.event_decoder import EventDecoder, WriterSchemas
from casscade.verify.keys import json_token, token_of
from casscade.verify.output import (
    MISMATCH_EXIT,
    PENDING_EXIT,
    exit_code,
    text_report,
    write_metrics,
)
from casscade.verify.verifier import TableResult
from materializer.output.avro_envelope import AvroEnvelopeWriter
from materializer.output.avro_wire import SINGLE_OBJECT_MAGIC, schema_fingerprint
from materializer.output.envelope import EnvelopeWriter, dumps
from materializer.output.event_settings import EventSettings
from materializer.output.values import MODES, to_connect
from shared import codec
from shared.schema import TableSchema, table_from_json
from shared.table_scan import token_ranges


def _table(pk: list[tuple[str, str]], regular: list[tuple[str, str]] = ()) -> TableSchema:
    cols = [{"name": n, "kind": "partition_key", "position": i, "type": t}
            for i, (n, t) in enumerate(pk)]
    cols += [{"name": n, "kind": "regular", "position": -1, "type": t} for n, t in regular]
    return table_from_json({"keyspace": "ks", "table": "t", "id": str(uuid.UUID(int=3)),
                            "columns": cols}, {})


@pytest.mark.parametrize("types, values", [
    (["int"], [42]), (["text"], ["héllo"]), (["uuid"], [uuid.UUID(int=77)]),
    (["timestamp"], [dt.datetime(2025, 3, 4, 5, 6, 7, 8000)]), (["blob"], [b"\x00\xfe"]),
    (["bigint", "text", "date"], [-5, "a", dt.date(2024, 2, 29)]),
    (["inet", "boolean", "varint"], ["10.0.0.1", True, 10**30]),
    (["decimal"], [decimal.Decimal("-12.5000")]),
])
def test_a_keys_token_is_the_same_from_the_table_and_from_its_json_form(
        types: list[str], values: list[Any]) -> None:
    table = _table([(f"k{i}", t) for i, t in enumerate(types)])
    key = {f"k{i}": v for i, v in enumerate(values)}
    as_json = json.loads(dumps({n: to_connect(c.type, key[n]) for n, c in
                                zip(key, table.partition_key, strict=True)}))
    assert json_token(table, as_json, MODES) == token_of(table, values)


def test_the_token_is_murmur3_of_the_partition_key_bytes() -> None:
    table = _table([("k", "int")])
    assert token_of(table, [1]) == Murmur3Token.hash_fn(codec.encode_value(table.columns[0].type,
                                                                          1))


def test_a_key_type_with_no_way_back_has_no_token() -> None:
    table = _table([("k", "frozen<list<int>>")])
    assert json_token(table, {"k": [1, 2]}, MODES) is None


TYPES = [("b", "blob"), ("d", "date"), ("ts", "timestamp"), ("m", "map<int, text>"),
         ("dec", "decimal"), ("s", "set<text>")]
ROW = {"k": 1, "b": b"\x01\x02", "d": dt.date(2020, 1, 2), "ts": dt.datetime(2021, 5, 6, 7),
       "m": {3: "three", 1: "one"}, "dec": decimal.Decimal("1.25"), "s": ["a", "b"]}


def _envelopes(table: TableSchema) -> tuple[bytes, bytes, dict[str, Any]]:
    """The same event as JSON and as Avro (single-object), and the Avro schemas by
    header."""
    row = {c.name: to_connect(c.type, ROW[c.name]) for c in table.columns}
    source = EnvelopeWriter(table, "casscade", False).source(1_000_000, host="h")
    plain = EnvelopeWriter(table, "casscade", False).value("u", None, row, source, 5)
    known: dict[bytes, Any] = {}

    class Recording:
        def header(self, _subject: str, schema: Any) -> bytes:
            known[SINGLE_OBJECT_MAGIC + schema_fingerprint(schema)] = schema
            return SINGLE_OBJECT_MAGIC + schema_fingerprint(schema)

    avro = AvroEnvelopeWriter(table, "casscade", "p.ks.t", Recording()).value(
        "u", None, row, source, 5)
    return plain, avro, known


def test_avro_events_decode_to_the_json_events_form() -> None:
    table = _table([("k", "int")], TYPES)
    plain, avro, known = _envelopes(table)
    settings = EventSettings(format="avro")
    schemas = WriterSchemas(settings, {"bootstrap.servers": "unused:1"}, "p")
    schemas.known.update(known)
    got = EventDecoder(settings, table, schemas).value(avro)
    assert got == json.loads(plain)
    assert got["after"]["b"] == "AQI=" and got["after"]["m"] == [[3, "three"], [1, "one"]]


def test_json_events_with_schemas_are_read_from_their_payload() -> None:
    table = _table([("k", "int")], TYPES)
    plain, _avro, _known = _envelopes(table)
    wrapped = json.dumps({"schema": {}, "payload": json.loads(plain)}).encode()
    decoder = EventDecoder(EventSettings(schemas=True), table)
    assert decoder.value(wrapped) == json.loads(plain)
    assert decoder.key(b'{"schema": {}, "payload": {"k": 1}}') == {"k": 1}
    assert decoder.value(None) is None


def test_an_avro_event_without_a_header_is_refused_by_name() -> None:
    settings = EventSettings(format="avro")
    decoder = EventDecoder(settings, _table([("k", "int")]),
                           WriterSchemas(settings, {"bootstrap.servers": "unused:1"}, "p"))
    with pytest.raises(ValueError, match="not an Avro event"):
        decoder.value(b'{"op": "c"}')


def _result(**counts: int) -> TableResult:
    report = Report(keep=1)
    for verdict, n in counts.items():
        for i in range(n):
            report.add(json.dumps({"id": i}), verdict, {"id": i, "v": "t"},
                       None if verdict == "missing" else {"id": i, "v": "s"})
    return TableResult("ks.t", "p.ks.t", report, rows=sum(counts.values()))


def test_the_exit_code_says_mismatch_before_pending() -> None:
    assert exit_code([_result(equal=3)]) == 0
    assert exit_code([_result(equal=3, pending=1)]) == PENDING_EXIT
    assert exit_code([_result(equal=3), _result(pending=1, different=1)]) == MISMATCH_EXIT
    assert MISMATCH_EXIT != PENDING_EXIT and 0 not in (MISMATCH_EXIT, PENDING_EXIT)


def test_the_report_shows_the_first_differences_with_both_sides() -> None:
    text = text_report([_result(equal=2, missing=2)], "header")
    assert "ks.t: equal 2  pending 0  missing 2  extra 0  different 0" in text
    assert 'missing {"id": 0}' in text and '    table:  {"id": 0, "v": "t"}' in text
    assert "    stream: null" in text and "... and 1 more" in text
    assert text.endswith("MISMATCH: 2 of 4 keys differ")


def test_the_metrics_file_holds_every_verdict(tmp_path: Path) -> None:
    path = tmp_path / "verify.prom"
    write_metrics(path, [_result(equal=5, extra=1)])
    text = path.read_text()
    assert 'casscade_verify_keys{table="ks.t",verdict="equal"} 5' in text
    assert 'casscade_verify_keys{table="ks.t",verdict="pending"} 0' in text
    assert 'casscade_verify_mismatched_keys{table="ks.t"} 1' in text
    assert "casscade_verify_last_run_timestamp_seconds" in text
    assert list(tmp_path.iterdir()) == [path]  # no temporary file left


def test_a_sample_is_the_same_for_the_same_seed_and_covers_its_share() -> None:
    first, said = _ranges((), 64, 0.25, 9, token_ranges)
    again, _ = _ranges((), 64, 0.25, 9, token_ranges)
    assert first == again and len(first) == 16 and set(first) <= set(token_ranges(64))
    assert "--seed 9" in said
    assert _ranges((), 8, 1.0, None, token_ranges)[0] == token_ranges(8)
    assert _ranges(("-5:10",), 64, 1.0, None, token_ranges)[0] == [(-5, 10)]


def test_set_items_go_to_the_stage_whose_section_they_name() -> None:
    items = ("cassandra.port=1", "kafka.topic_prefix=p", "events.format=avro", "log.level=DEBUG")
    assert _routed(items, ("kafka", "events")) == ("cassandra.port=1", "log.level=DEBUG")
    assert _routed(items, ("cassandra", "capture")) == ("kafka.topic_prefix=p",
                                                        "events.format=avro", "log.level=DEBUG")
