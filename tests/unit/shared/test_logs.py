"""The one logging setup: JSON lines and text lines both carry the `extra=` fields."""

from __future__ import annotations

import json
import logging

from shared.logs import JsonFormatter, TextFormatter


def _record(**extra: object) -> logging.LogRecord:
    record = logging.makeLogRecord({"name": "casscade.test", "levelname": "WARNING",
                                    "levelno": logging.WARNING, "msg": "query failed"})
    record.__dict__.update(extra)
    return record


def test_text_lines_keep_the_extra_fields() -> None:
    line = TextFormatter().format(_record(attempt=2, checkpoint="/ckpt"))
    assert line.endswith("WARNING casscade.test query failed attempt=2 checkpoint=/ckpt")
    assert TextFormatter().format(_record()).endswith("query failed")


def test_json_lines_keep_the_extra_fields() -> None:
    out = json.loads(JsonFormatter().format(_record(attempt=2)))
    assert (out["msg"], out["level"], out["attempt"]) == ("query failed", "WARNING", 2)
