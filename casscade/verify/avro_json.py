"""Avro-decoded event data in the form the same events take as Kafka Connect JSON (pure).

The stream is judged in one form whatever `events.format` wrote it in: the JsonConverter's.
Bytes become base64, Avro's `date` and `timestamp-millis` become numbers again, and a map
with keys that are not strings (an Avro array of key/value records) becomes [key, value]
pairs, as in `materializer.output.envelope`.
"""

from __future__ import annotations

import base64
import datetime as dt
from typing import Any

from materializer.output.avro_schema import avro_field_name

_EPOCH_DAY = dt.date(1970, 1, 1)
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def avro_as_json(value: Any, schema: dict[str, Any]) -> Any:
    """`value`, decoded from Avro, in the JsonConverter form of the Connect `schema` it was
    written under (the envelope's own, `EnvelopeWriter.value_schema` or `.key_schema`)."""
    if value is None:
        return None
    t, name = schema["type"], schema.get("name")
    if t == "bytes":
        return base64.b64encode(value).decode()
    if name == "org.apache.kafka.connect.data.Date":
        return (value - _EPOCH_DAY).days if isinstance(value, dt.date) else value
    if name == "org.apache.kafka.connect.data.Timestamp":
        if isinstance(value, dt.datetime):
            return (value - _EPOCH) // dt.timedelta(milliseconds=1)
        return value
    if t == "struct":
        return {f["field"]: avro_as_json(value.get(avro_field_name(f["field"])), f)
                for f in schema["fields"]}
    if t == "array":
        return [avro_as_json(x, schema["items"]) for x in value]
    if t == "map":
        if schema["keys"]["type"] == "string":
            return {k: avro_as_json(v, schema["values"]) for k, v in value.items()}
        return [[avro_as_json(e["key"], schema["keys"]),
                 avro_as_json(e["value"], schema["values"])] for e in value]
    return value
