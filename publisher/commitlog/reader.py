"""Segment file → decoded mutations with their positions, schema refresh on unknown tables."""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from publisher.commitlog.decoder import MutationDecoder
from publisher.commitlog.errors import DecodeError, UnknownColumnError, UnknownTableError
from publisher.commitlog.model import Mutation
from publisher.commitlog.schema_source import SchemaSource
from publisher.commitlog.segment import SectionMark, SegmentReader

# Cassandra's node-local keyspaces: no table with CDC lives there, so their mutations need
# no fresh schema (a schema refresh waits for the next mutation of another keyspace)
LOCAL_SYSTEM_KEYSPACES = frozenset({"system", "system_schema"})


class CommitLogReader:
    """Reads segments with one schema source; counts what it skipped.

    An unknown table id first triggers one schema refresh (a table created after the last
    read); if the id is still unknown the reader raises UnknownTableError, or, with
    `skip_unknown`, counts the mutation in `skipped` and goes on with the next entry.
    """

    def __init__(self, schema: SchemaSource, skip_unknown: bool = False) -> None:
        self.schema = schema
        self.skip_unknown = skip_unknown
        self.decoder = MutationDecoder(schema.table)
        self.skipped: Counter[str] = Counter()
        # (segment path, entry start, table id) of every skipped mutation, for a later retry
        self.skipped_at: list[tuple[str, int, str]] = []
        self._refreshed_for: set[str] = set()
        self._schema_dirty = False
        self.segment: SegmentReader | None = None

    def allow_refresh(self) -> None:
        """Let unknown table ids and columns trigger a schema refresh again (e.g. on a retry
        timer)."""
        self._refreshed_for.clear()

    def schema_changed(self) -> None:
        """A system_schema mutation was read: re-read the schema before the next mutation of
        a keyspace other than system_schema and system (one refresh for a run of schema
        changes, not one each: every change also writes system.local's schema version,
        which would otherwise end the run, and a refresh reads the whole schema)."""
        self._schema_dirty = True

    def _is_local_system_mutation(self, payload: bytes) -> bool:
        # The first partition update's table id follows the update count, one byte whenever
        # it is below 128 (schema changes write several system_schema tables at once). The
        # schema source knows the table when the decoder has forgotten it (at a refresh).
        if not payload or payload[0] >= 0x80 or len(payload) < 17:
            return False
        raw = payload[1:17]
        table = self.decoder.cached_table(raw) or self.schema.table(uuid.UUID(bytes=raw))
        return table is not None and table.keyspace in LOCAL_SYSTEM_KEYSPACES

    def read(self, path: Path | str, until: int | None = None, resume_from: int = 0,
             start: SectionMark | None = None) -> Iterator[Mutation]:
        """Decoded mutations of one segment in order; typed CommitLogError where it breaks.
        `start`: the `section` of the last read of this file (`SegmentReader`); the reader
        being read is `segment` (None until the file's header is read)."""
        self.segment = None
        segment = SegmentReader(path, until=until, resume_from=resume_from, start=start)
        self.segment = segment
        version = segment.descriptor.messaging_version
        seg_id = segment.descriptor.segment_id
        decode = self.decoder.decode
        for start, position, payload in segment.entries():
            if self._schema_dirty and not self._is_local_system_mutation(payload):
                self._schema_dirty = False
                if self.schema.refresh():
                    self.decoder.forget()
            try:
                mutation = decode(payload, version)
            except DecodeError:
                mutation = self._decode(segment, payload, version, start)
                if mutation is None:
                    continue
            mutation.segment_id = seg_id
            mutation.start = start
            mutation.position = position
            yield mutation

    def _decode(self, segment: SegmentReader, payload: bytes, version: int,
                start: int) -> Mutation | None:
        """The slow path after a DecodeError: refresh once for a new unknown table id or
        column (the schema read may predate the data: a table read while its columns were
        still arriving on this node), then skip (counted) or raise the typed error."""
        try:
            return self.decoder.decode(payload, version)
        except DecodeError as exc:
            stale = (exc.table_id if exc.error_class is UnknownTableError
                     else exc.reason if exc.error_class is UnknownColumnError else None)
            if stale is not None and stale not in self._refreshed_for:
                self._refreshed_for.add(stale)
                if self.schema.refresh():
                    self.decoder.forget()
                    return self._decode(segment, payload, version, start)
            if exc.error_class is not UnknownTableError or exc.table_id is None:
                raise exc.error_class(str(segment.path), start,
                                      f"mutation at {start}: {exc.reason}") from exc
            if self.skip_unknown:
                self.skipped[exc.table_id] += 1
                self.skipped_at.append((str(segment.path), start, exc.table_id))
                return None
            raise UnknownTableError(str(segment.path), start, exc.table_id) from exc
