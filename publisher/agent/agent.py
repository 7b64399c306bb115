"""The node agent loop: follow cdc_raw, publish every CDC row update, retire finished segments.

Order and safety rules:
* Segments are read in id order; a segment that is not COMPLETED yet is read up to its
  `_cdc.idx` offset and nothing newer is touched until it completes (per-key order).
* Progress is the acknowledged watermark per segment (publisher/agent/delivery.py), saved in the
  offset store; a restart re-reads from it: at-least-once, never a gap.
* A segment is retired only when COMPLETED, read to its end, every record acknowledged and no
  mutation kept back (unknown table, damage).
* A system_schema mutation in the log makes the reader re-read the schema before the next
  mutation: a table created or altered to `cdc = true` is known before its first CDC write.
"""

from __future__ import annotations

import gc
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from publisher.agent.capture_projection import UpdateProjection
from publisher.agent.cdc_dir import (
    SegmentFile,
    directory_bytes,
    list_segments,
    remove_orphan_indexes,
)
from publisher.agent.cdc_dir import retire as retire_files
from publisher.agent.delivery import WatermarkTracker
from publisher.agent.heartbeats import Heartbeats
from publisher.agent.offset_store import OffsetStore, SegmentState
from publisher.agent.record_writer import RecordWriter, SourceInfo
from publisher.agent.table_drops import TableDrops
from publisher.agent.truncations import TruncationRecords, Truncations
from publisher.commitlog.errors import CommitLogError
from publisher.commitlog.reader import CommitLogReader
from publisher.commitlog.schema_source import SchemaSource
from publisher.commitlog.segment import SectionMark, SegmentReader
from publisher.kafka_sink import KafkaSink, SinkStopped
from publisher.settings import PublisherConfig
from shared import topic_names
from shared.metrics import Registry
from shared.schema import TableSchema

log = logging.getLogger(__name__)
BATCH = 2000  # mutations read per segment per pass, so polling and saving keep going


@dataclass
class _Segment:
    """In-memory progress of one segment."""

    tracker: WatermarkTracker
    read_pos: int
    kept_back: set[int] = field(default_factory=set)  # starts of unpublished mutations
    broken: CommitLogError | None = None
    end_position: int | None = None  # set once read to the end of a COMPLETED segment
    saved_watermark: int = -1
    kept_dirty: bool = False
    # where the next read of the file begins walking its sync markers (in memory only: a
    # restarted agent walks each file once from the header)
    section: SectionMark | None = None


def tune_gc() -> None:
    """Collect young objects less often. The agent allocates many short-lived objects per
    row and holds up to the producer queue's worth of in-flight callbacks; the default
    threshold (700) made collections a third of the CPU time in measurements."""
    gc.collect()
    gc.freeze()  # startup objects (schemas, modules) are never garbage
    gc.set_threshold(50_000, 20, 20)


class Agent:
    """One publisher: `run()` until `stop` is set; `step()` does one pass (for tests)."""

    def __init__(self, config: PublisherConfig, schema: SchemaSource, sink: KafkaSink,
                 store: OffsetStore, metrics: Registry,
                 truncations: TruncationRecords | None = None) -> None:
        self.config = config
        self.sink = sink
        self.store = store
        self.reader = CommitLogReader(schema, skip_unknown=True)
        rules = config.capture.rules()
        # None: every CDC table whole (no rule set), without a step per update
        self.projection = UpdateProjection(rules) if rules.active else None
        self.segments: dict[int, _Segment] = {}
        # id(table) → (table, its schema hash, its raw keys' table id bytes)
        self.tables: dict[int, tuple[TableSchema, str, bytes]] = {}
        self.raw_topic = ""  # made sure of before the first record
        # the sink's event: stopping also ends its waits for Kafka
        self.stop: threading.Event = sink.stopping
        # a record Kafka refused for good (a topic gone, a new cluster): the agent stops,
        # and its command exits non-zero so a supervisor starts it again
        self.failed: str | None = None
        self.last_loop = time.monotonic()
        self.last_save = 0.0
        self.last_retry = time.monotonic()
        self.current: dict[str, Any] = {}
        m = metrics
        self.m_seen = m.counter("casscade_publisher_segments_seen_total", "Segments found")
        self.m_done = m.counter("casscade_publisher_segments_done_total",
                                "Segments fully published and retired")
        # Counted by the watermark trackers (no per-record metric call); set when scraped.
        self.m_acked = m.counter("casscade_publisher_records_acked_total",
                                 "RowUpdate records acknowledged by Kafka")
        self.m_mutations = m.counter("casscade_publisher_mutations_read_total",
                                     "Mutations decoded from the commit log")
        self.m_errors = m.counter("casscade_publisher_errors_total", "Errors by kind",
                                  ("kind",))
        self.m_lag_bytes = m.gauge("casscade_publisher_lag_bytes",
                                   "Synced CDC bytes not yet acknowledged by Kafka")
        self.m_lag_seconds = m.gauge("casscade_publisher_lag_seconds",
                                     "Age of the oldest synced data not yet acknowledged")
        self.m_cdc_bytes = m.gauge("casscade_publisher_cdc_raw_bytes", "Bytes in cdc_raw")
        self.m_cdc_limit = m.gauge("casscade_publisher_cdc_raw_limit_bytes",
                                   "The node's cdc_total_space")
        self.m_kept = m.gauge("casscade_publisher_kept_back_mutations",
                              "Mutations kept back (unknown table or damage); segment kept")
        self.heartbeats = Heartbeats(sink, config.node.host, config.kafka.heartbeat_interval_s,
                                     metrics)
        self.drops = TableDrops(sink, schema, config.node.host, config.cdc.schema_refresh_s,
                                metrics)
        # None: a schema file instead of a node (offline), no truncations to read
        self.truncations = None if truncations is None else Truncations(
            sink, schema, truncations, config.node.host, config.node.datacenter,
            config.cdc.truncation_check_s, metrics)
        self.seen: set[int] = set()
        self.acked_retired = 0  # acks counted by trackers of segments already retired
        metrics.on_scrape(self._count_acks)

    # ---- main loop --------------------------------------------------------------------------
    def run(self) -> None:
        """Loop until `stop` is set, then drain in-flight records and save progress."""
        tune_gc()
        poll = self.config.cdc.poll_interval_ms / 1000
        try:
            while not self.stop.is_set():
                busy = self.step()
                self.sink.poll(0 if busy else poll)
        except SinkStopped:
            # only acknowledged records move a watermark: saving now skips nothing
            log.warning("stopped while waiting for Kafka; progress is saved up to the last "
                        "acknowledged record")
        finally:
            self.shutdown()

    def shutdown(self, timeout_s: float = 30.0) -> None:
        """Wait for acknowledgements (bounded) and persist every watermark."""
        left = self.sink.flush(timeout_s)
        if left:
            log.warning("stopping with unacknowledged records; they will be re-read",
                        extra={"in_flight": left})
        self.save()

    def step(self) -> bool:
        """One pass over cdc_raw; True when something was read."""
        self.last_loop = time.monotonic()
        busy = False
        files = list_segments(self.config.cdc.cdc_raw)
        newest_indexed = max((f.segment_id for f in files if f.index is not None), default=-1)
        for f in files:
            if f.segment_id not in self.seen:
                self.seen.add(f.segment_id)
                self.m_seen.inc()
            complete = f.index is not None and f.index.completed
            if f.index is None:
                if not self._unindexed_complete(f, newest_indexed):
                    if f.segment_id > newest_indexed:
                        break  # the live segment, or a spare: nothing newer has data
                    continue  # never held CDC data; Cassandra removes it itself
                complete = True
            seg = self._segment(f)
            if seg.broken is None and seg.end_position is None:
                busy |= self._read(f, seg, until=None if complete else f.index.offset)
            if complete and seg.end_position is not None:
                self._maybe_retire(f, seg)
            elif seg.broken is None:
                # Keep per-key order: nothing past a segment still being written, or one
                # whose reading stopped at the batch limit (it goes on next pass).
                break
        self.heartbeats.maybe_send(self.current)
        self.drops.maybe_announce(idle=not busy)
        if self.truncations is not None:
            self.truncations.maybe_announce()
        self.sink.poll(0)
        if time.monotonic() - self.last_save > self.config.state.flush_interval_ms / 1000:
            self.save()
            self._gauges(files)  # directory scans: at the save pace, not every pass
        if time.monotonic() - self.last_retry > self.config.cdc.unknown_retry_s:
            self._retry_kept_back()
        return busy

    # ---- reading ----------------------------------------------------------------------------
    def _segment(self, f: SegmentFile) -> _Segment:
        seg = self.segments.get(f.segment_id)
        if seg is None:
            state = self.store.get(f.segment_id)
            seg = _Segment(WatermarkTracker(state.watermark, self._delivery_failed),
                           state.watermark,
                           state.kept_back, saved_watermark=state.watermark)
            self.segments[f.segment_id] = seg
        return seg

    def _unindexed_complete(self, f: SegmentFile, newest_indexed: int) -> bool:
        if f.segment_id > newest_indexed:
            return False
        try:
            age = time.time() - f.path.stat().st_mtime
        except FileNotFoundError:
            return False
        return age > self.config.cdc.unindexed_grace_s

    def _read(self, f: SegmentFile, seg: _Segment, until: int | None) -> bool:
        writer: RecordWriter | None = None
        count = produced = 0
        skipped_before = len(self.reader.skipped_at)
        mutations = self.reader.read(f.path, until=until, resume_from=seg.read_pos,
                                     start=seg.section)
        publish, stopping = self._publish, self.stop.is_set
        try:
            for mutation in mutations:
                if writer is None:
                    writer = self._writer(f)
                produced += publish(mutation, seg, writer)
                seg.read_pos = mutation.position
                count += 1
                if mutation.keyspace == "system_schema":
                    self.reader.schema_changed()
                if count >= BATCH or stopping():
                    break
            else:
                if until is None:
                    seg.end_position = self._reading().last_position
        except CommitLogError as exc:
            seg.broken = exc
            self.m_errors.inc(1, exc.kind)
            log.error("segment damaged; kept in cdc_raw, later segments go on",
                      extra={"file": exc.path, "offset": exc.offset, "reason": exc.reason})
        finally:
            mutations.close()
            if self.reader.segment is not None:
                seg.section = self.reader.segment.section
            self.m_mutations.inc(count)
            self.sink.produced.inc(produced)  # per pass, not per mutation
        self._note_kept_back(f, seg, self.reader.skipped_at[skipped_before:])
        self.current = {"segment": f.path.name, "read_position": seg.read_pos,
                        "acked_position": seg.tracker.watermark,
                        "synced_offset": f.index.offset if f.index else None}
        return count > 0

    def _note_kept_back(self, f: SegmentFile, seg: _Segment,
                        skipped: list[tuple[str, int, str]]) -> None:
        by_table: dict[str, list[int]] = {}
        for _path, start, table_id in skipped:
            by_table.setdefault(table_id, []).append(start)
        del self.reader.skipped_at[:]
        for table_id, starts in by_table.items():
            seg.kept_back.update(starts)
            seg.kept_dirty = True
            self.m_errors.inc(len(starts), "unknown_table")
            log.error("mutations of an unknown table kept back; segment kept in cdc_raw",
                      extra={"file": str(f.path), "table_id": table_id, "count": len(starts),
                             "first_offset": starts[0]})

    def _reading(self) -> SegmentReader:
        segment = self.reader.segment
        assert segment is not None, "a mutation was read, so its segment's header was"
        return segment

    def _writer(self, f: SegmentFile) -> RecordWriter:
        d = self._reading().descriptor
        return RecordWriter(SourceInfo(self.config.node.host, self.config.node.datacenter,
                                       f.path.name, f.segment_id, d.version,
                                       d.messaging_version), self._hash)

    def _publish(self, mutation: Any, seg: _Segment, writer: RecordWriter) -> int:
        """Produce the records of `mutation`'s CDC tables; returns how many (the caller
        counts them in the produced metric)."""
        updates = mutation.updates
        for update in updates:
            if not update.table.cdc:  # rare: keep only the CDC tables' updates
                updates = mutation.updates = [u for u in updates if u.table.cdc]
                break
        if self.projection is not None and updates:
            project = self.projection.project
            updates = mutation.updates = [p for p in map(project, updates) if p is not None]
        records = writer.records(mutation) if updates else []
        token = seg.tracker.add(mutation.position, len(records))
        if not records:
            return 0
        produce = self.sink.producer.produce
        tables = self.tables
        topic = self.raw_topic
        for update, value in records:
            key = tables[id(update.table)][2] + update.partition_key  # topic_names.raw_key
            # The token itself is the delivery callback: no closure per mutation. Positional
            # (value, key, partition -1 = the partitioner's choice, callback): keyword
            # parsing doubled the cost of the call.
            try:
                produce(topic, value, key, -1, token)
            except BufferError:
                self.sink.produce(topic, key, value, token, counted=True)
        return len(records)

    def _delivery_failed(self, err: object) -> None:
        # Only fatal errors reach here: retries are endless.
        self.m_errors.inc(1, "kafka_delivery")
        log.error("delivery failed; stopping so the segment is re-read",
                  extra={"error": str(err)})
        self.failed = self.failed or str(err)
        self.stop.set()

    def _hash(self, table: TableSchema) -> str:
        entry = self.tables.get(id(table))
        if entry is None or entry[0] is not table:
            if not self.raw_topic:
                self.raw_topic = self.sink.ensure_raw_topic()
            self.sink.ensure_schema(table)  # before any record that names this hash
            entry = self.tables[id(table)] = (table, table.schema_hash,
                                              topic_names.raw_key(table.id, b""))
        return entry[1]

    # ---- finishing ----------------------------------------------------------------------
    def _maybe_retire(self, f: SegmentFile, seg: _Segment) -> None:
        if seg.tracker.in_flight or seg.kept_back or seg.broken is not None:
            return
        retire_files(f, self.config.cdc.archive_dir)
        self.acked_retired += seg.tracker.acked
        self.store.forget(f.segment_id)
        del self.segments[f.segment_id]
        self.m_done.inc()
        log.info("segment published and retired", extra={"file": f.path.name})

    def _retry_kept_back(self) -> None:
        """Try kept-back mutations again with a fresh schema (one pass per segment from the
        first one); publish what now decodes, late and out of order, and log that."""
        self.last_retry = time.monotonic()
        self.reader.allow_refresh()
        for seg in self.segments.values():
            if seg.broken is not None and seg.end_position is None:
                seg.broken = None  # read a damaged live segment again: the damage may be gone
        files = {f.segment_id: f for f in list_segments(self.config.cdc.cdc_raw)}
        for segment_id, seg in list(self.segments.items()):
            f = files.get(segment_id)
            if not seg.kept_back or f is None:
                continue
            published = 0
            # late acks do not move the watermark
            late = _Segment(WatermarkTracker(0, self._delivery_failed), 0)
            retry = self.reader.read(f.path, resume_from=min(seg.kept_back) - 1)
            try:
                for mutation in retry:
                    if mutation.start in seg.kept_back and not self.stop.is_set():
                        self.sink.produced.inc(self._publish(mutation, late, self._writer(f)))
                        seg.kept_back.discard(mutation.start)
                        seg.kept_dirty = True
                        published += 1
            except CommitLogError:
                pass  # the segment's own damage is reported by the normal read
            finally:
                retry.close()
            del self.reader.skipped_at[:]
            if published:
                log.warning("kept-back mutations published late (out of order)",
                            extra={"file": f.path.name, "count": published,
                                   "still_kept": len(seg.kept_back)})

    def acked_total(self) -> int:
        """Records acknowledged by Kafka since the agent started."""
        return self.acked_retired + sum(s.tracker.acked for s in self.segments.values())

    def _count_acks(self) -> None:
        self.m_acked.set(self.acked_total())

    def status(self) -> dict[str, Any]:
        """What the agent is doing, for /status and `casscade publisher status`."""
        return {
            "current": self.current, "in_flight_records": self.sink.in_flight(),
            "segments": {str(i): {"acked_position": s.tracker.watermark,
                                  "read_position": s.read_pos, "end_position": s.end_position,
                                  "kept_back": len(s.kept_back),
                                  "damaged": str(s.broken) if s.broken else None}
                         for i, s in sorted(self.segments.items())},
            "lag_bytes": self.m_lag_bytes.get(), "lag_seconds": self.m_lag_seconds.get(),
        }

    def save(self) -> None:
        """Persist every segment's acknowledged watermark and kept-back list."""
        for segment_id, seg in self.segments.items():
            if seg.tracker.watermark != seg.saved_watermark or seg.kept_dirty:
                self.store.put(segment_id, SegmentState(seg.tracker.watermark, seg.kept_back),
                               kept_changed=seg.kept_dirty)
                seg.saved_watermark, seg.kept_dirty = seg.tracker.watermark, False
        self.store.flush()
        self.last_save = time.monotonic()

    def _gauges(self, files: list[SegmentFile]) -> None:
        lag = 0
        oldest: float | None = None
        for f in files:
            seg = self.segments.get(f.segment_id)
            if f.index is None or seg is None:
                continue
            behind = f.index.offset - seg.tracker.watermark
            if behind > 0 and seg.end_position != seg.tracker.watermark:
                lag += behind
                try:
                    mtime = f.path.with_name(f.path.stem + "_cdc.idx").stat().st_mtime
                    oldest = mtime if oldest is None else min(oldest, mtime)
                except FileNotFoundError:
                    pass
        self.m_lag_bytes.set(lag)
        self.m_lag_seconds.set(max(0.0, time.time() - oldest) if oldest else 0.0)
        self.m_cdc_bytes.set(directory_bytes(self.config.cdc.cdc_raw))
        self.m_cdc_limit.set(self.config.cdc.total_space_mb * 1024 * 1024)
        self.m_kept.set(sum(len(s.kept_back) + (s.broken is not None)
                            for s in self.segments.values()))
        remove_orphan_indexes(self.config.cdc.cdc_raw)
