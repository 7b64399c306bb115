"""The JSON form of driver-decoded CQL values is lossless and deterministic."""

from __future__ import annotations

import datetime as dt
import decimal
import ipaddress
import uuid
from collections import namedtuple

import pytest
from cassandra import util

from shared.jsonvalues import to_json_value


@pytest.mark.parametrize(("value", "expected"), [
    (None, None), (True, True), (-(2**63), -(2**63)), (10**30, 10**30), ("ü€", "ü€"),
    (1.5, 1.5), (float("nan"), "NaN"), (float("-inf"), "-Infinity"),
    (b"", "0x"), (b"\xca\xfe", "0xcafe"),
    (decimal.Decimal("-0.000001"), "-0.000001"),
    (uuid.UUID(int=1), "00000000-0000-0000-0000-000000000001"),
    (ipaddress.ip_address("::1"), "::1"),
    (dt.datetime(2024, 1, 2, 3, 4, 5, 678000), "2024-01-02T03:04:05.678000Z"),
    (dt.datetime(2024, 1, 2, 4, 4, 5, tzinfo=dt.timezone(dt.timedelta(hours=1))),
     "2024-01-02T03:04:05.000000Z"),
    (util.Date("2024-02-29"), "2024-02-29"),
    (util.Time("12:34:56.789012345"), "12:34:56.789012345"),
    (util.Duration(1, 2, 3), {"months": 1, "days": 2, "nanoseconds": 3}),
    ([1, None, 3], [1, None, 3]),
    ((7, "seven"), [7, "seven"]),
])
def test_scalars_and_sequences(value, expected) -> None:
    assert to_json_value(value) == expected


def test_sets_sorted_and_maps_as_pairs() -> None:
    assert to_json_value({3, 1, 2}) == [1, 2, 3]
    assert to_json_value(util.SortedSet(["b", "a"])) == ["a", "b"]
    ordered = util.OrderedMap([(2, "two"), (1, "one")])  # the driver's map, any key type
    assert to_json_value(ordered) == [[2, "two"], [1, "one"]]
    assert to_json_value({"a": [1]}) == [["a", [1]]]


def test_udt_namedtuple_becomes_object() -> None:
    address = namedtuple("address", ["street", "number"])
    assert to_json_value(address("Main", 10)) == {"street": "Main", "number": 10}


def test_unknown_type_is_an_error() -> None:
    with pytest.raises(TypeError, match="no JSON form"):
        to_json_value(object())
