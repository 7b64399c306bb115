"""A key's place on the ring: its Murmur3 token, from driver values or from the events'
JSON form of its partition key (pure).

The token picks a sample (a subset of token ranges) on both sides alike, and lets a
recheck read back only the partitions it needs. The JSON form is turned back into driver
values for the scalar types partition keys are made of; for any other type (a frozen
collection, a tuple, a UDT) `json_token` answers None and the caller reads the table whole.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import ipaddress
import uuid
from typing import Any

from cassandra.metadata import Murmur3Token
from cassandra.util import Date, Time

from materializer.output.values import ValueModes
from shared import codec
from shared.schema import TableSchema

_EPOCH = dt.datetime(1970, 1, 1)


def token_of(table: TableSchema, values: list[Any]) -> int:
    """The Murmur3 token of a partition key given as driver values, in key order."""
    parts = [codec.encode_value(c.type, v) for c, v in zip(table.partition_key, values,
                                                             strict=True)]
    return Murmur3Token.hash_fn(codec.encode_partition_key(table, parts))


def json_token(table: TableSchema, key: dict[str, Any], modes: ValueModes) -> int | None:
    """The token of a key in the events' JSON form; None if a partition key column's type
    has no way back here."""
    values = []
    for c in table.partition_key:
        try:
            values.append(driver_value(c.type.name, key[c.name], modes))
        except (KeyError, TypeError, ValueError):
            return None
    return token_of(table, values)


def driver_value(type_name: str, v: Any, modes: ValueModes) -> Any:
    """A scalar value in its events' JSON form back as the driver's value (TypeError for a
    type that is not scalar)."""
    if type_name in ("text", "varchar", "ascii", "boolean", "tinyint", "smallint", "int",
                     "bigint", "counter", "float", "double"):
        return v
    if type_name in ("uuid", "timeuuid"):
        return uuid.UUID(v)
    if type_name == "inet":
        return str(ipaddress.ip_address(v))
    if type_name == "blob":
        return base64.b64decode(v)
    if type_name == "varint":
        return int(v)
    if type_name == "timestamp":
        return _EPOCH + dt.timedelta(milliseconds=v)
    if type_name == "date":
        return Date(v)
    if type_name == "time":
        return Time(v)
    if type_name == "decimal" and modes.decimal == "string":
        return decimal.Decimal(v)
    if type_name == "decimal" and modes.decimal == "precise":
        unscaled = int.from_bytes(base64.b64decode(v["value"]), "big", signed=True)
        return decimal.Decimal(unscaled).scaleb(-v["scale"])
    raise TypeError(f"no way back from the JSON form of {type_name}")
