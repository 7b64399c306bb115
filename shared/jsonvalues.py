"""One JSON form for CQL values as cassandra-driver returns them (dumps, manifests, tests).

Deterministic and lossless for comparison: blobs as "0x…" hex, decimals and varints beyond
float range as strings, sets sorted, maps as [key, value] pairs (CQL map keys need not be
strings), UDTs as objects, timestamps as ISO-8601 UTC with microseconds.
"""

from __future__ import annotations

import datetime as dt
import decimal
import ipaddress
import math
import uuid
from collections.abc import Mapping, Set
from typing import Any

JsonValue = None | bool | int | float | str | list["JsonValue"] | dict[str, "JsonValue"]


def to_json_value(value: Any) -> JsonValue:
    """Convert one driver-decoded CQL value (any nesting) to its JSON form."""
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        return value
    if isinstance(value, bytes | bytearray | memoryview):
        return "0x" + bytes(value).hex()
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, uuid.UUID | ipaddress.IPv4Address | ipaddress.IPv6Address):
        return str(value)
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(dt.UTC).replace(tzinfo=None)
        return value.isoformat(timespec="microseconds") + "Z"
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, dt.time):
        return value.isoformat(timespec="microseconds")
    converted = _driver_type(value)
    if converted is not _NOT_DRIVER:
        return converted
    if isinstance(value, Mapping):
        return [[to_json_value(k), to_json_value(v)] for k, v in value.items()]
    if isinstance(value, Set):
        items = [to_json_value(v) for v in value]
        return sorted(items, key=_sort_key)
    if hasattr(value, "_fields"):  # a UDT the driver built as a namedtuple
        return {f: to_json_value(getattr(value, f)) for f in value._fields}
    if isinstance(value, list | tuple):
        return [to_json_value(v) for v in value]
    raise TypeError(f"no JSON form for {type(value).__name__}: {value!r}")


_NOT_DRIVER = object()


def _driver_type(value: Any) -> Any:
    # cassandra.util types, imported lazily so pure callers need not load the driver.
    from cassandra import util

    if isinstance(value, util.Date):
        try:
            return value.date().isoformat()
        except ValueError:  # outside Python's date range: days since epoch
            return value.days_from_epoch
    if isinstance(value, util.Time):
        return (f"{value.hour:02d}:{value.minute:02d}:{value.second:02d}."
                f"{value.nanosecond:09d}")
    if isinstance(value, util.Duration):
        return {"months": value.months, "days": value.days, "nanoseconds": value.nanoseconds}
    if isinstance(value, util.OrderedMap):
        return [[to_json_value(k), to_json_value(v)] for k, v in value.items()]
    if isinstance(value, util.SortedSet):
        return [to_json_value(v) for v in value]
    return _NOT_DRIVER


def _sort_key(v: JsonValue) -> tuple[str, str]:
    return (type(v).__name__, repr(v))
