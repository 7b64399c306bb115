"""Where the decoder gets table schemas: a JSON schema file, or system_schema over CQL."""

from __future__ import annotations

import json
import logging
import uuid
from pathlib import Path
from typing import Any, Protocol

from shared.schema import TableSchema, catalog_from_json
from shared.system_schema import read_system_schema

log = logging.getLogger(__name__)


class SchemaSource(Protocol):
    """Resolves table ids to schemas; `refresh` re-reads the source (after an unknown id)."""

    def table(self, table_id: uuid.UUID) -> TableSchema | None:
        """The table with this id, or None if the source does not know it."""
        ...

    def refresh(self) -> bool:
        """Re-read the source; True when that worked (the cache is then current)."""
        ...

    def dropped(self) -> dict[uuid.UUID, TableSchema]:
        """Tables a refresh found gone from the source (dropped) since it first saw them."""
        ...


class FileSchemaSource:
    """Schemas from a JSON schema file (format in shared/schema.py and docs/commitlog-dump.md)."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self.tables: dict[uuid.UUID, TableSchema] = {}
        self._text: str | None = None  # the file's content when `tables` was built
        self.refresh()

    def table(self, table_id: uuid.UUID) -> TableSchema | None:
        """The table with this id, or None."""
        return self.tables.get(table_id)

    def refresh(self) -> bool:
        """Re-read the file (parsed again only when its content changed: a run of schema
        mutations in the commit log asks for a refresh each time)."""
        try:
            text = self.path.read_text()
            if text == self._text:
                return True
            doc = json.loads(text)
        except (OSError, ValueError) as exc:
            raise ValueError(f"cannot read schema file {self.path}: {exc}") from exc
        self.tables = catalog_from_json(doc)
        self._text = text
        return True

    def dropped(self) -> dict[uuid.UUID, TableSchema]:
        """None: a schema file says what exists, not what was dropped."""
        return {}


class CassandraSchemaSource:
    """Schemas read from a node's system_schema tables through cassandra-driver.

    Keeps the last good copy: when Cassandra is unreachable, `refresh` returns False and the
    cached schemas stay in use.
    """

    def __init__(self, session: Any) -> None:
        self.session = session
        self.tables: dict[uuid.UUID, TableSchema] = {}
        self.live: set[uuid.UUID] = set()  # the tables the last refresh read
        self._dropped: dict[uuid.UUID, TableSchema] = {}
        if not self.refresh():
            raise ConnectionError("could not read system_schema from Cassandra")

    def table(self, table_id: uuid.UUID) -> TableSchema | None:
        """The table with this id, or None."""
        return self.tables.get(table_id)

    def refresh(self) -> bool:
        """Re-read system_schema; False (and keep the cache) if Cassandra does not answer."""
        try:
            doc = read_system_schema(self.session)
        except Exception as exc:  # noqa: BLE001 — any driver failure: keep the cached schemas
            log.warning("schema refresh from Cassandra failed, keeping %d cached tables: %s",
                        len(self.tables), exc)
            return False
        fresh = catalog_from_json(doc)
        for table_id in self.live - set(fresh):
            self._dropped[table_id] = self.tables[table_id]
        self.live = set(fresh)
        # Keep tables that disappeared (dropped): mutations written before the drop are still
        # in the commit log and decode with the last schema seen.
        for table_id, table in self.tables.items():
            fresh.setdefault(table_id, table)
        self.tables = fresh
        return True

    def dropped(self) -> dict[uuid.UUID, TableSchema]:
        """Tables a refresh found gone that an earlier one read (not those dropped before this
        source first read the schema: their drop was announced then, or nothing of theirs is
        left to free)."""
        return dict(self._dropped)
