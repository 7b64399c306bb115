"""One logging setup for every casscade process: JSON lines (structured) or plain text."""

from __future__ import annotations

import json
import logging
import sys
import time
from dataclasses import dataclass
from typing import Any

FORMATS = ("json", "text")
LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


@dataclass
class LogSettings:
    """Log level and format (json or text): the `log` section of every stage's config."""

    level: str = "INFO"  # DEBUG, INFO, WARNING, ERROR
    format: str = "json"  # json (one object per line) or text

    def __post_init__(self) -> None:
        if self.format not in FORMATS:
            raise ValueError(f"log.format must be one of {', '.join(FORMATS)}, "
                             f"not {self.format!r}")
        if self.level.upper() not in LEVELS:
            raise ValueError(f"log.level must be one of {', '.join(LEVELS)}, "
                             f"not {self.level!r}")


_RESERVED = set(vars(logging.makeLogRecord({}))) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ts, level, logger, msg, and any `extra=` fields."""

    def format(self, record: logging.LogRecord) -> str:
        """Render the record as JSON."""
        out: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname, "logger": record.name, "msg": record.getMessage(),
        }
        out.update({k: v for k, v in vars(record).items() if k not in _RESERVED})
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str)


class TextFormatter(logging.Formatter):
    """Time, level, logger, message, then the `extra=` fields as key=value."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        """Render the record as one text line (plus a traceback, if any)."""
        line = super().format(record)
        extras = " ".join(f"{k}={v}" for k, v in vars(record).items() if k not in _RESERVED)
        if not extras:
            return line
        head, sep, rest = line.partition("\n")
        return f"{head} {extras}{sep}{rest}"


def setup_logging(level: str = "INFO", fmt: str = "json") -> None:
    """Configure the root logger once: `fmt` is "json" or "text"; output goes to stderr."""
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # The driver and librdkafka wrappers are chatty at INFO.
    logging.getLogger("cassandra").setLevel(max(logging.WARNING, root.level))
    logging.getLogger("py4j").setLevel(max(logging.WARNING, root.level))
