"""What is captured: which tables, which columns, and which column values are masked.

One `capture` section for both stages, named after Debezium's settings where the meaning is
the same (`table.include.list`, `table.exclude.list`, `column.exclude.list`,
`column.mask.hash.<algorithm>.with.salt.<salt>`, `column.mask.with.<n>.chars`). Lists hold
regular expressions that must match the whole name: `keyspace.table` for tables,
`keyspace.table.column` for columns.

The publisher applies it before anything reaches Kafka: an excluded table has no raw topic,
an excluded column is not in its records, and a masked column carries only its mask. The
schema it publishes is the captured one (masked columns are `text`), so the materializer's
schemas and events describe what was published, not the table.

A hash mask is the hex SHA-256 (or SHA-512) of the salt's UTF-8 bytes followed by the
value's CQL serialized bytes: the same value of a column always gives the same hash (change
detection and joins keep working), and without the salt a guess cannot be checked. A
character mask is `*` repeated. A null stays null.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from shared.config import ConfigError, read_secret
from shared.cqltype import parse_cql_type
from shared.schema import ColumnSchema, TableSchema

HASH_ALGORITHMS = ("SHA-256", "SHA-512")
KEEP, EXCLUDE, HASH, CHARS = "keep", "exclude", "hash", "chars"
_TEXT = parse_cql_type("text", "", {})


@dataclass
class CaptureSettings:
    """Which tables and columns are published, and which values masked (regexes over
    `keyspace.table` and `keyspace.table.column`, matching the whole name)."""

    table_include_list: list[str] = field(default_factory=list)  # empty: every CDC table
    table_exclude_list: list[str] = field(default_factory=list)
    column_exclude_list: list[str] = field(default_factory=list)  # not primary key columns
    column_mask_hash: list[str] = field(default_factory=list)  # value → hex hash with salt
    column_mask_hash_algorithm: str = "SHA-256"  # or SHA-512
    # the salt: a secret (never printed); better CASSCADE_CAPTURE__COLUMN_MASK_HASH_SALT, or
    # a file whose first line it is (read at start)
    column_mask_hash_salt: str | None = None
    column_mask_hash_salt_file: Path | None = None
    column_mask_chars: list[str] = field(default_factory=list)  # value → `*` x length
    column_mask_chars_length: int = 8

    def __post_init__(self) -> None:
        if self.column_mask_hash_algorithm not in HASH_ALGORITHMS:
            raise ValueError(f"capture.column_mask_hash_algorithm must be one of "
                             f"{', '.join(HASH_ALGORITHMS)}, not "
                             f"{self.column_mask_hash_algorithm!r}")
        if self.column_mask_chars_length < 1:
            raise ValueError("capture.column_mask_chars_length must be at least 1")
        for name in ("table_include_list", "table_exclude_list", "column_exclude_list",
                     "column_mask_hash", "column_mask_chars"):
            for pattern in getattr(self, name):
                try:
                    re.compile(pattern)
                except re.error as exc:
                    raise ValueError(f"capture.{name}: {pattern!r} is not a regular "
                                     f"expression: {exc}") from None

    def rules(self) -> Capture:
        """The compiled rules, the salt read now (ConfigError naming a missing salt)."""
        salt = read_secret(self.column_mask_hash_salt, self.column_mask_hash_salt_file,
                           "capture.column_mask_hash_salt")
        if self.column_mask_hash and not salt:
            raise ConfigError("capture.column_mask_hash needs a salt: set "
                              "capture.column_mask_hash_salt (better: "
                              "CASSCADE_CAPTURE__COLUMN_MASK_HASH_SALT) or "
                              "capture.column_mask_hash_salt_file")
        return Capture(self, (salt or "").encode())


def _any(patterns: list[str]) -> re.Pattern[str] | None:
    return re.compile("|".join(f"(?:{p})" for p in patterns)) if patterns else None


class CaptureError(ValueError):
    """A rule that cannot apply to a column (a primary key column, a multi-cell column)."""


class Capture:
    """The capture rules, compiled: a table's fate, a column's action, a value's mask."""

    def __init__(self, settings: CaptureSettings, salt: bytes) -> None:
        self.include = _any(settings.table_include_list)
        self.exclude = _any(settings.table_exclude_list)
        self.columns_out = _any(settings.column_exclude_list)
        self.hashed = _any(settings.column_mask_hash)
        self.starred = _any(settings.column_mask_chars)
        self.algorithm = settings.column_mask_hash_algorithm.replace("-", "").lower()
        self.salt = salt
        self.stars = b"*" * settings.column_mask_chars_length

    @property
    def active(self) -> bool:
        """Whether any rule is set (else every CDC table is published whole)."""
        return self.projects or self.include is not None or self.exclude is not None

    @property
    def projects(self) -> bool:
        """Whether any column rule is set (else a captured table is published whole)."""
        return any((self.columns_out, self.hashed, self.starred))

    def captures(self, keyspace: str, table: str) -> bool:
        """Whether the table `keyspace.table` is published."""
        name = f"{keyspace}.{table}"
        if self.include is not None and not self.include.fullmatch(name):
            return False
        return self.exclude is None or not self.exclude.fullmatch(name)

    def action(self, table: TableSchema, column: ColumnSchema) -> str:
        """KEEP, EXCLUDE, HASH or CHARS for `column` of `table`; CaptureError for a rule
        on a primary key column or a mask on a multi-cell (non-frozen collection) column."""
        name = f"{table.name}.{column.name}"
        for rule, pattern in ((EXCLUDE, self.columns_out), (HASH, self.hashed),
                              (CHARS, self.starred)):
            if pattern is None or not pattern.fullmatch(name):
                continue
            if column.kind in ("partition_key", "clustering"):
                raise CaptureError(f"{name} is a primary key column: it cannot be "
                                   f"{'excluded' if rule == EXCLUDE else 'masked'}")
            if rule != EXCLUDE and column.type.is_multicell:
                raise CaptureError(f"{name} is a non-frozen {column.type_text}: its elements "
                                   "are cells of their own, which a mask cannot cover; "
                                   "exclude it (capture.column_exclude_list) or freeze it")
            return rule
        return KEEP

    def actions(self, table: TableSchema) -> dict[str, str]:
        """The columns of `table` that are not kept as they are, and what happens to them."""
        out = {}
        for column in table.columns:
            rule = self.action(table, column)
            if rule != KEEP:
                out[column.name] = rule
        return out

    def mask(self, rule: str, value: bytes) -> bytes:
        """The serialized `text` that stands for the serialized `value` under `rule`."""
        if rule == CHARS:
            return self.stars
        return hashlib.new(self.algorithm, self.salt + value).hexdigest().encode()


def captured_record(record: dict[str, Any], capture: Capture, actions: dict[str, str],
                    published: TableSchema) -> dict[str, Any]:
    """A RowUpdate dict (the snapshot's) as captured: under the published schema's hash,
    without excluded columns' cells and deletions, masked values replaced."""
    cells = []
    for cell in record["cells"]:
        rule = actions.get(cell["column"], KEEP)
        if rule == KEEP:
            cells.append(cell)
        elif rule != EXCLUDE:
            masked = cell["value"] is None or cell["tombstone"]
            cells.append(cell if masked else cell | {"value": capture.mask(rule, cell["value"])})
    deletions = [d for d in record.get("complex_deletions", ())
                 if actions.get(d["column"]) != EXCLUDE]
    return record | {"schema_hash": published.schema_hash, "cells": cells,
                     "complex_deletions": deletions}


def captured_table(table: TableSchema, actions: dict[str, str]) -> TableSchema:
    """The schema as published: excluded columns gone, masked ones of type `text`."""
    if not actions:
        return table
    columns = tuple(replace(c, type_text="text", type=_TEXT)
                    if actions.get(c.name) in (HASH, CHARS) else c
                    for c in table.columns if actions.get(c.name) != EXCLUDE)
    dropped = tuple(c for c in table.dropped if c.name not in actions)
    return replace(table, columns=columns, dropped=dropped)
