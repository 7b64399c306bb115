"""One key's micro-batch, end to end and engine-free: raw records + state → events + state.

The seam between the engine and the rules. Below it, `materializer.rules` (what a change
is) and `materializer.output` (how an event is written) know nothing of Spark; above it,
a task's merge (`materializer.task.merge_loop`, which Spark runs) only moves bytes: it
reads a key's state blob and pages from its partition store, hands them here with the
key's raw records, and writes back what comes out. The seam sits at bytes in, bytes out because
that is what a store holds and what Kafka takes, so another engine (or a test, or a
benchmark) can drive the same code without a JVM.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from materializer.output.avro_envelope import AvroEnvelopeWriter
from materializer.output.avro_wire import SchemaPublisher
from materializer.output.envelope import EnvelopeWriter, dumps
from materializer.output.event_settings import EventSettings
from materializer.rules.clustering import ClusteringOrder
from materializer.rules.events import Change, ChangeDetector, from_snapshot
from materializer.rules.image import STATIC_ONLY, VisibleForm, partition_images
from materializer.rules.merge import Merger
from materializer.rules.model import PartitionState
from materializer.rules.pages import DEFAULT_PAGE_ROWS, PageWrites, attach, pages_to_load, store
from materializer.rules.truncation import covered, floor_deletion, truncation_record
from shared import rowupdate
from shared.rowupdate_reader import read_row_update
from shared.schema import TableSchema
from shared.table_truncate import TableTruncate
from shared.topic_names import event_topic

log = logging.getLogger(__name__)


# Reads pages of the key being handled: page ids → their bytes (None: not in the store)
PageSource = Callable[[list[int]], list[bytes | None]]


class Schemas(Protocol):
    """Resolves a RowUpdate's schema hash (materializer.kafka.schema_cache.SchemaCache)."""

    def get(self, schema_hash: str) -> TableSchema: ...


@dataclass(slots=True)
class RawRecord:
    """One raw-topic message as Spark hands it over."""

    value: bytes
    partition: int
    offset: int


@dataclass
class Result:
    """What one call produced: records to write, the new state, the schema it was read with,
    and when the key next needs a look (TTL expiry), in ms. `state` is the partition's own
    entry; `pages` the page entries of a wide partition to write (None: remove)."""

    outputs: list[tuple[str, bytes | None, bytes | None]] = field(default_factory=list)
    state: bytes | None = None
    schema_hash: str | None = None
    next_timer_ms: int | None = None
    pages: PageWrites = field(default_factory=dict)
    # the write time (µs) of each change a live record made an event of (the freshness
    # metric; not TTL expiries, not snapshot rows)
    write_times_us: list[int] = field(default_factory=list)
    table: str | None = None  # keyspace.table of the key, once its schema is known
    covered: int = 0  # records a truncation of the table left nothing to change, not merged


class _TableVersion:
    """Everything derived from one schema version."""

    def __init__(self, table: TableSchema, settings: EventSettings, prefix: str,
                 publisher: SchemaPublisher | None, dropped: dict[str, int]) -> None:
        self.table = table
        order = ClusteringOrder(table)
        counters = frozenset(c.name for c in table.columns if c.type.name == "counter")
        lists = frozenset(c.name for c in table.columns
                          if c.type.name == "list" and c.type.is_multicell)
        self.detector = ChangeDetector(Merger(order, counters),
                                      any(c.kind == "static" for c in table.columns),
                                      table.gc_grace_seconds, dropped,
                                      VisibleForm(lists, counters))
        self.topic = event_topic(prefix, table.keyspace, table.table)
        self.table_id = table.id.bytes
        modes = settings.modes
        if settings.format == "avro":
            if publisher is None:
                raise ValueError("events.format avro needs a schema publisher")
            self.writer = AvroEnvelopeWriter(table, settings.cluster, self.topic, publisher,
                                             modes)
        else:
            self.writer = EnvelopeWriter(table, settings.cluster, settings.schemas, modes)
        # skip static-only rows: only a table with clustering columns has them
        self.skip_static_only = (settings.static_only_rows == "skip"
                                 and bool(table.clustering))


class KeyMaterializer:
    """Applies one partition key's records and renders its change events."""

    def __init__(self, schemas: Schemas, settings: EventSettings, topic_prefix: str,
                 ensure_topic: Callable[[str], None] = lambda _topic: None,
                 schema_publisher: SchemaPublisher | None = None,
                 page_rows: int = DEFAULT_PAGE_ROWS) -> None:
        if page_rows < 1:
            raise ValueError(f"page_rows must be at least 1, not {page_rows}")
        self.schemas = schemas
        self.settings = settings
        self.topic_prefix = topic_prefix  # events go to <prefix>.<keyspace>.<table>
        self.dead_letters = settings.dead_letters(topic_prefix)
        # records sent there, by the topic they were meant for (the event topic of an event
        # its format could not carry, else the raw topic): ever growing, read as differences
        self.dead_lettered: dict[str, int] = {}
        self.page_rows = page_rows  # rows per page of a wide partition (materializer.rules.pages)
        self.ensure_topic = ensure_topic  # creates an output topic before its first event
        self.schema_publisher = schema_publisher  # Avro schemas (events.format avro)
        self._versions: dict[str, _TableVersion] = {}
        # table id → column → latest drop time over every version seen: shared by all
        # versions of a table, so a late record of an older version cannot bring back a
        # column a newer version dropped
        self._dropped: dict[Any, dict[str, int]] = {}

    def _version(self, schema_hash: str) -> _TableVersion:
        v = self._versions.get(schema_hash)
        if v is None:
            table = self.schemas.get(schema_hash)
            dropped = self._dropped.setdefault(table.id, {})
            for c in table.dropped:
                if c.dropped_time_us is not None:
                    dropped[c.name] = max(dropped.get(c.name, c.dropped_time_us),
                                          c.dropped_time_us)
            v = _TableVersion(table, self.settings, self.topic_prefix, self.schema_publisher,
                              dropped)
            self.ensure_topic(v.topic)
            self._versions[schema_hash] = v
        return v

    def handle(self, topic: str, partition_key: bytes, records: Iterable[RawRecord],
               state_blob: bytes | None, schema_hash: str | None, now_ms: int,
               read_pages: PageSource | None = None, table_id: bytes | None = None,
               floor_us: int | None = None, reset_us: int | None = None) -> Result:
        """Apply a micro-batch of one key's raw records (`read_pages`: a wide partition's
        pages, for a state that has them; `table_id`: the table id of the records' Kafka
        key, which each record must name too; `floor_us`: the table's truncation floor,
        under which the records' writes are merged; `reset_us`: the time of the table's
        last reset, at or before which only its snapshot's records are merged)."""
        result = Result()
        decoded: list[tuple[dict[str, Any], bytes]] = []
        # The version to render with: the newest schema (altered_at) among the state's and
        # the records'; among equals (or schemas without altered_at) the latest offset.
        best = None
        if schema_hash is not None:
            try:
                best = (self._version(schema_hash).table.altered_at_us, (-1, -1))
            except LookupError as exc:  # the records' versions decide; without any, fail
                log.error("the state's schema version is unknown",
                          extra={"topic": topic, "schema_hash": schema_hash, "error": str(exc)})
        for raw in records:
            try:
                rec = read_row_update(raw.value)
                version = self._version(rec["schema_hash"])
                if table_id is not None and version.table_id != table_id:
                    raise LookupError(f"the record is of table {version.table.name} "
                                      f"({version.table.id}), its Kafka key names table id "
                                      f"{table_id.hex()}")
            except (rowupdate.RecordFormatError, LookupError) as exc:
                result.outputs.append(self._dead_letter(topic, (table_id or b"") + partition_key,
                                                        raw, exc))
                continue
            if floor_us is not None and covered(rec, floor_us):
                result.covered += 1  # written before a truncation: it removed them
                continue
            if reset_us is not None and covered(rec, reset_us) and not from_snapshot(rec):
                result.covered += 1  # a late copy from before a reset: its snapshot decides
                continue
            rec["_kafka"] = (topic, raw.partition, raw.offset)
            decoded.append((rec, raw.value))
            rank = (version.table.altered_at_us, (raw.partition, raw.offset))
            if best is None or rank >= best:
                best, schema_hash = rank, rec["schema_hash"]
        if schema_hash is None:  # nothing usable and no state
            return result
        version = self._version(schema_hash)
        state = PartitionState.loads(state_blob) if state_blob else PartitionState()
        recs = [r for r, _ in decoded]
        floor = None
        if floor_us is not None and (state.deletion is None or state.deletion[0] < floor_us):
            # a key the truncation found no state of (or whose tombstone was purged since):
            # the floor under its records, quietly (there is nothing of before it to remove)
            floor = floor_deletion(floor_us)
            recs.append(floor)
        self._load_pages(version, topic, partition_key, state, recs, now_ms, read_pages)
        if floor is not None:
            version.detector.merger.apply(state, floor)
        changes = version.detector.process(state, decoded, now_ms // 1000)
        self._render(version, partition_key, changes, now_ms, result)
        return self._finish(version, state, schema_hash, now_ms, result)

    def truncate(self, where: tuple[str, int, int], partition_key: bytes,
                 state_blob: bytes | None, schema_hash: str | None, now_ms: int,
                 truncate: TableTruncate, read_pages: PageSource | None = None) -> Result:
        """A truncation of the key's table: remove what it removed from the key's state and
        report the rows gone (`where`: the table-truncated record's topic, partition and
        offset)."""
        result = Result()
        if not state_blob or schema_hash is None:
            return result
        version = self._version(schema_hash)
        state = PartitionState.loads(state_blob)
        rec = truncation_record(truncate, schema_hash, partition_key)
        raw = rowupdate.encode(rec)
        rec["_kafka"] = where
        self._load_pages(version, where[0], partition_key, state, [rec], now_ms, read_pages)
        changes = version.detector.process(state, [(rec, raw)], now_ms // 1000)
        self._render(version, partition_key, changes, now_ms, result)
        return self._finish(version, state, schema_hash, now_ms, result)

    def live_rows(self, partition_key: bytes, state_blob: bytes | None,
                  schema_hash: str | None, now_ms: int, read_pages: PageSource | None = None,
                  topic: str = "") -> Result:
        """The key's live rows as `r` events (source file "truncate"), as it last reported
        them: written again after its table's truncate events (`shared.truncate_barrier`).
        The state is not changed (the result carries no state to write)."""
        result = Result()
        if not state_blob or schema_hash is None:
            return result
        version = self._version(schema_hash)
        state = PartitionState.loads(state_blob)
        if state.pages:
            ids = [p[0] for p in state.pages]
            if read_pages is None:
                raise ValueError(f"{topic} key {partition_key.hex()}: the state has pages but "
                                 "no page source was given")
            attach(state, ids, read_pages(ids), f"{topic} key {partition_key.hex()}")
        at_us = state.evaluated_at * 1_000_000
        rows = partition_images(state, state.evaluated_at)
        changes = [Change("r", ck, None, rows[ck], None, at_us)
                   for ck in sorted(rows, key=version.detector.merger.order.key)]
        self._render(version, partition_key, changes, now_ms, result,
                     version.writer.source(at_us, snapshot=True, file="truncate"))
        return result

    def truncate_event(self, schema_hash: str, floor_us: int, now_ms: int
                       ) -> tuple[str, bytes | None, bytes]:
        """A truncate event (`op: t`, no key, no images) of the table of `schema_hash`, for
        its truncations up to `floor_us` (source file "truncate")."""
        version = self._version(schema_hash)
        w = version.writer
        return version.topic, None, w.value("t", None, None,
                                            w.source(floor_us, file="truncate"), now_ms)

    def reject(self, topic: str, key: bytes | None, records: Iterable[RawRecord]) -> Result:
        """Dead letters for records whose Kafka key is not a raw key (a table id, then a
        partition key): written by something other than a casscade publisher."""
        exc = ValueError(f"a raw record's key is a table id and a partition key, not "
                         f"{len(key or b'')} bytes")
        return Result(outputs=[self._dead_letter(topic, key, raw, exc) for raw in records])

    def expire(self, partition_key: bytes, state_blob: bytes | None, schema_hash: str | None,
               now_ms: int, read_pages: PageSource | None = None, topic: str = "") -> Result:
        """A timer fired: report TTL expiry of an untouched key."""
        result = Result()
        if not state_blob or schema_hash is None:
            return result
        version = self._version(schema_hash)
        state = PartitionState.loads(state_blob)
        self._load_pages(version, topic, partition_key, state, [], now_ms, read_pages)
        changes = version.detector.expire(state, now_ms // 1000)
        self._render(version, partition_key, changes, now_ms, result)
        return self._finish(version, state, schema_hash, now_ms, result)

    @staticmethod
    def _load_pages(version: _TableVersion, topic: str, partition_key: bytes,
                    state: PartitionState, records: list[dict[str, Any]], now_ms: int,
                    read_pages: PageSource | None) -> None:
        if not state.pages:
            return
        where = f"{topic} key {partition_key.hex()}"
        if read_pages is None:
            raise ValueError(f"{where}: the state has pages but no page source was given")
        need = pages_to_load(state, records, now_ms // 1000, version.detector.merger.order)
        attach(state, need, read_pages(need) if need else [], where)

    def _finish(self, version: _TableVersion, state: PartitionState, schema_hash: str,
                now_ms: int, result: Result) -> Result:
        result.schema_hash = schema_hash
        result.table = version.table.name
        result.state, result.pages = store(state, version.detector.merger.order,
                                           now_ms // 1000, self.page_rows)
        result.next_timer_ms = None if state.next_expiry is None else state.next_expiry * 1000
        return result

    def _render(self, version: _TableVersion, partition_key: bytes, changes: list[Change],
                now_ms: int, result: Result, source: dict[str, Any] | None = None) -> None:
        """Events of `changes` into `result` (`source`: every event's, instead of each
        change's own)."""
        w = version.writer
        for ch in changes:
            if version.skip_static_only and ch.clustering == STATIC_ONLY:
                continue
            key = w.rows.key(partition_key, ch.clustering)
            where = self._source(w, ch) if source is None else source
            op = ch.op
            if op == "c" and ch.cause is not None and from_snapshot(ch.cause):
                op = "r"  # a row first seen through the bootstrap snapshot
            before, after = w.rows.row(key, ch.before), w.rows.row(key, ch.after)
            try:
                event_key = w.key(key)
                event = w.value(op, before, after, where, now_ms)
            except (ValueError, TypeError, OverflowError) as exc:
                # a value the event format cannot carry (an int64, JSON or Avro, holding a varint
                # beyond 64 bits): this event to the dead-letter topic, the rest flows on
                result.outputs.append(self._unencodable(version, key, op, before, after,
                                                        where, exc))
                continue
            result.outputs.append((version.topic, event_key, event))
            if ch.cause is not None and op != "r":
                result.write_times_us.append(ch.ts_us)
            if ch.op == "d" and self.settings.tombstones:
                result.outputs.append((version.topic, event_key, None))

    @staticmethod
    def _source(w: EnvelopeWriter, ch: Change) -> dict[str, Any]:
        rec = ch.cause
        if rec is None:  # TTL expiry: no record caused it
            return w.source(ch.ts_us)
        src = rec["source"]
        topic, partition, offset = rec["_kafka"]
        return w.source(ch.ts_us, snapshot=from_snapshot(rec), host=src["host"],
                        datacenter=src["datacenter"], file=src["file"], pos=src["position"],
                        index=src["index"], kafka_topic=topic, kafka_partition=partition,
                        kafka_offset=offset)

    def _unencodable(self, version: _TableVersion, key: dict[str, Any], op: str,
                     before: dict | None, after: dict | None, source: dict[str, Any],
                     exc: Exception) -> tuple[str, bytes | None, bytes | None]:
        where = {"topic": source.get("kafka_topic"), "partition": source.get("kafka_partition"),
                 "offset": source.get("kafka_offset"), "event_topic": version.topic}
        return self._to_dlq("change event cannot be encoded", dumps(key), where, exc, event={
            "key": key, "op": op, "before": before, "after": after, "source": source})

    def _dead_letter(self, topic: str, key: bytes | None, raw: RawRecord,
                     exc: Exception) -> tuple[str, bytes | None, bytes | None]:
        where = {"topic": topic, "partition": raw.partition, "offset": raw.offset}
        return self._to_dlq("raw record cannot be materialized", key, where, exc,
                            value=raw.value)

    def _to_dlq(self, what: str, key: bytes | None, where: dict[str, Any], exc: Exception,
                **payload: Any) -> tuple[str, bytes | None, bytes | None]:
        """A dead-letter record: where it came from, the error, and what could not go on."""
        self.ensure_topic(self.dead_letters)
        meant_for = str(where.get("event_topic") or where.get("topic"))
        self.dead_lettered[meant_for] = self.dead_lettered.get(meant_for, 0) + 1
        log.error(f"{what}; sent to the dead-letter topic",
                  extra=where | {"error": str(exc), "dead_letter_topic": self.dead_letters})
        body = where | {"error": f"{type(exc).__name__}: {exc}"} | payload
        return self.dead_letters, key, dumps(body)
