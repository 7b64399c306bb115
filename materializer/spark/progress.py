"""Spark's per-micro-batch progress reports → the shared metrics registry (pure, no Spark).

The driver feeds every new `StreamingQueryProgress` (its JSON form) to `ProgressMetrics`;
`/metrics` then shows throughput, batch time, the partition stores, the Kafka lag of the
raw topic, each table's freshness, each publisher's last heartbeat and the state freed by
dropped and truncated tables. The tasks count the last three in a `TaskStats` each
(`materializer.task.task_stats`), which reach the driver in the observed metrics.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from typing import Any

from materializer.task.task_stats import FRESHNESS_BUCKETS_S
from shared.metrics import Registry

log = logging.getLogger(__name__)
_P = "casscade_materializer_"
# A publisher whose newest heartbeat is this old leaves the heartbeat gauge (a node
# decommissioned, or its agent moved): its stale-heartbeat alert fires for about an hour,
# then ends. A publisher that is only down stays visible to `up` (CasscadePublisherDown).
HEARTBEAT_FORGET_S = 3600.0
PARTITION_METRICS = "partition_state"  # materializer.spark.partition_job's observe() name


class ProgressMetrics:
    """Keeps the registry's materializer metrics up to date with the query's progress."""

    def __init__(self, registry: Registry) -> None:
        self.registry = r = registry
        self.batches = r.counter(_P + "batches_total", "Micro-batches completed")
        self.input_rows = r.counter(_P + "input_rows_total", "Raw records read")
        self.output_rows = r.counter(_P + "output_rows_total",
                                     "Records written (events, tombstones, dead letters)")
        self.batch_ms = r.gauge(_P + "batch_duration_ms",
                                "Wall time of the last micro-batch that read records")
        self.rate = r.gauge(_P + "processed_rows_per_second",
                            "Raw records per second in the last micro-batch that read records")
        self.copies_dropped = r.counter(
            _P + "copies_dropped_total",
            "Raw records dropped before the merge as a copy of one already seen (dedupe "
            "window)")
        self.store_keys = r.gauge(
            _P + "partition_store_keys",
            "Keys (entries, copy digests, expiry index) in the partition stores the last "
            "micro-batch opened, as RocksDB estimates them")
        self.stores_restored = r.counter(
            _P + "partition_stores_restored_total",
            "Partition stores a task found behind their changelog and caught up or rebuilt "
            "(steady state: none)")
        self.writes_restored = r.counter(
            _P + "partition_store_writes_restored_total",
            "Changelog writes read back into partition stores")
        self.lag = r.gauge(_P + "kafka_offsets_behind_latest",
                           "Raw records not read yet (summed over partitions, at batch end)")
        self.last_batch_id = r.gauge(_P + "last_batch_id", "Id of the last micro-batch")
        self.last_progress = r.gauge(_P + "last_progress_timestamp_seconds",
                                     "When the last progress report arrived (unix time)")
        self.freshness = r.histogram(
            _P + "freshness_seconds",
            "From a change's write time in Cassandra to its event written, per table (write "
            "times set with USING TIMESTAMP move it)", FRESHNESS_BUCKETS_S, ("table",))
        self.heartbeat_age = r.gauge(
            _P + "heartbeat_age_seconds",
            "Seconds since the newest heartbeat of each publisher (host) the job has read, by "
            "that publisher's clock", ("host",))
        self.dropped_entries = r.counter(
            _P + "dropped_table_entries_total",
            "Partition store entries (a key's state, a page of its rows) freed because their "
            "table was dropped, per table", ("table",))
        self.dropped_late = r.counter(
            _P + "dropped_table_records_total",
            "Raw records of a table dropped in an earlier micro-batch, left out of the merge")
        self.truncated_keys = r.counter(
            _P + "truncated_table_keys_total",
            "Keys whose rows a TRUNCATE of their table removed (their events), per table",
            ("table",))
        self.truncated_covered = r.counter(
            _P + "truncated_table_records_total",
            "Raw records written before a TRUNCATE of their table that arrived after it "
            "(a lagging publisher's copies), left out of the merge")
        self.truncate_events = r.counter(
            _P + "truncate_events_total",
            "Truncations of a table whose truncate events (op t, one per partition of its "
            "event topic) the driver wrote, per table", ("table",))
        self.dead_letters = r.counter(
            _P + "dead_letters_total",
            "Records sent to the dead-letter topic instead, by the topic they were meant for "
            "(an event topic: an event its format could not carry; the raw topic: a raw "
            "record that could not be read)", ("topic",))
        self._transaction_metrics(r)
        self.raw_retention = r.gauge(
            _P + "raw_retention_seconds",
            "The raw topic's retention.ms in seconds (+Inf: unlimited): a raw record the job "
            "has not read by then is deleted, and the job stops")
        self.raw_unread_age = r.gauge(
            _P + "raw_oldest_unread_age_seconds",
            "Seconds since the oldest raw record the job has not read was appended (0: it "
            "has read everything)")
        # raw topic → partition → the next offset the job reads (the last report's end)
        self.end_offsets: dict[str, dict[int, int]] = {}
        self.heartbeats: dict[str, int] = {}  # host → newest heartbeat's clock (ms)
        r.on_scrape(self._heartbeat_ages)
        self.seen: int = -1
        self.last: dict[str, Any] | None = None
        self.last_at = time.monotonic()

    def _transaction_metrics(self, r: Registry) -> None:
        """Exactly-once: the tasks' producers and transactions (TaskStats.txn)."""
        self.producers = r.counter(
            _P + "producers_initialised_total",
            "Transactional producers initialised (exactly-once): a raw partition's first "
            "task in a Python worker, or one fenced by another attempt")
        self.producer_init_s = r.counter(
            _P + "producer_init_seconds_total",
            "Seconds those initialisations took (a round trip to the transaction "
            "coordinator, the earlier holder's open transaction settled)")
        self.commits = r.counter(
            _P + "transaction_commits_total",
            "Raw partitions' transactions committed, each counted by the next task of its "
            "Python worker (a task's own commits come after its report)")
        self.commit_s = r.counter(
            _P + "transaction_commit_seconds_total",
            "Seconds those commits waited for the broker (its transaction markers)")
        self.commit_topics = r.counter(
            _P + "transaction_topics_total",
            "Topics those transactions wrote (event topics, the changelog, dead letters): "
            "each partition written costs the broker a request and a marker")

    def newest(self) -> str:
        """The timestamp of the newest report seen ("" before the first)."""
        return (self.last or {}).get("timestamp", "")

    def observe_new(self, reports: list[dict[str, Any]]) -> int:
        """Account the reports newer than the last one seen (Spark keeps a window of recent
        reports, so the same ones come again); returns how many were new."""
        since = self.newest()
        new = [r for r in reports if r.get("timestamp", "") > since]  # ISO-8601 UTC: sortable
        for report in new:
            self.observe(report)
        return len(new)

    def observe(self, progress: dict[str, Any]) -> None:
        """Account one progress report; an idle report (same batch, no rows) adds nothing."""
        self.last, self.last_at = progress, time.monotonic()
        self.last_progress.set(time.time())
        batch = int(progress.get("batchId", -1))
        rows = int(progress.get("numInputRows") or 0)
        if batch > self.seen and rows:
            # an idle report repeats the last batch id with no rows: nothing to add
            self.seen = batch
            self.batches.inc()
            self.input_rows.inc(rows)
            parts = _partition_metrics(progress)
            # exactly-once: the tasks write the records (Spark's sink writes none)
            self.output_rows.inc(max(0, int((progress.get("sink") or {})
                                            .get("numOutputRows", 0) or 0))
                                 + int(parts.get("records_written") or 0))
            self.batch_ms.set((progress.get("durationMs") or {}).get("triggerExecution", 0))
            self.rate.set(float(progress.get("processedRowsPerSecond") or 0.0))
            self.copies_dropped.inc(int(parts.get("copies_dropped") or 0))
            restored = int(parts.get("stores_restored") or 0)
            if restored:  # steady state has none: say when and how many
                log.info("partition stores restored from their changelogs",
                         extra={"batch": batch, "stores": restored,
                                "writes": int(parts.get("writes_restored") or 0)})
            self.stores_restored.inc(restored)
            self.writes_restored.inc(int(parts.get("writes_restored") or 0))
            for stats in parts.get("stats") or ():
                self._task_stats(json.loads(stats))
        self.last_batch_id.set(batch)
        if _partition_metrics(progress):
            self.store_keys.set(int(_partition_metrics(progress).get("store_keys") or 0))
        for source in progress.get("sources") or []:
            end = _offsets(source.get("endOffset"))
            if end is not None:
                for topic, parts in end.items():
                    self.end_offsets[topic] = {int(p): int(o) for p, o in parts.items()}
        behind = [_offsets_behind(s) for s in progress.get("sources") or []]
        known = [b for b in behind if b is not None]
        if known:
            self.lag.set(sum(known))

    def _task_stats(self, stats: dict[str, Any]) -> None:
        for table, counts in (stats.get("fresh") or {}).items():
            self.freshness.add([int(n) for n in counts[:-1]], float(counts[-1]), table)
        for host, at_ms in (stats.get("beats") or {}).items():
            self.heartbeats[host] = max(self.heartbeats.get(host, 0), int(at_ms))
        for table, entries in (stats.get("dropped") or {}).items():
            self.dropped_entries.inc(int(entries), table)
            if entries:
                log.info("a dropped table's state freed", extra={"table": table,
                                                                "entries": int(entries)})
        self.dropped_late.inc(int(stats.get("late") or 0))
        for table, keys in (stats.get("truncated") or {}).items():
            self.truncated_keys.inc(int(keys), table)
            log.info("a truncated table's state emptied", extra={"table": table,
                                                                 "keys": int(keys)})
        self.truncated_covered.inc(int(stats.get("covered") or 0))
        for topic, count in (stats.get("dead") or {}).items():
            self.dead_letters.inc(int(count), topic)
        made, init_s, commits, commit_s, topics = stats.get("txn") or (0, 0.0, 0, 0.0, 0)
        self.producers.inc(int(made))
        self.producer_init_s.inc(float(init_s))
        self.commits.inc(int(commits))
        self.commit_s.inc(float(commit_s))
        self.commit_topics.inc(int(topics))
        self._heartbeat_ages()

    def _heartbeat_ages(self) -> None:
        now_ms = time.time() * 1000
        for host, at_ms in list(self.heartbeats.items()):
            age_s = max(0.0, (now_ms - at_ms) / 1000)
            if age_s > HEARTBEAT_FORGET_S:
                self.heartbeats.pop(host, None)  # a scrape and a batch may both get here
                self.heartbeat_age.remove(host)
                log.info("a publisher's heartbeats stopped long ago; it leaves the "
                         "heartbeat gauge", extra={"host": host, "age_s": round(age_s)})
            else:
                self.heartbeat_age.set(age_s, host)

    def watch_raw_age(self, latest: Callable[[], tuple[float | None, float] | None]
                      ) -> None:
        """At each scrape, set the raw topic's retention and oldest-unread-age gauges from
        `latest()` (materializer.kafka.raw_age's last reading; None: none yet)."""
        def collect() -> None:
            reading = latest()
            if reading is not None:
                retention_s, age_s = reading
                if retention_s is not None:
                    self.raw_retention.set(retention_s)
                self.raw_unread_age.set(age_s)
        self.registry.on_scrape(collect)

    def age_s(self) -> float:
        """Seconds since the last progress report (for /health)."""
        return time.monotonic() - self.last_at

    def status(self) -> dict[str, Any]:
        """The last progress report as Spark gave it (for /status)."""
        return {"last_progress": self.last}


def _partition_metrics(progress: dict[str, Any]) -> dict[str, Any]:
    """The observed metrics of the partition stores' merge ({} in a report without them)."""
    metrics = (progress.get("observedMetrics") or {}).get(PARTITION_METRICS) or {}
    # a progress object's metrics are a pyspark Row, its JSON form's a dict
    return metrics.asDict() if hasattr(metrics, "asDict") else dict(metrics)


def _offsets_behind(source: dict[str, Any]) -> float | None:
    """Kafka lag of one source: latest minus end offsets over every topic partition."""
    latest, end = _offsets(source.get("latestOffset")), _offsets(source.get("endOffset"))
    if latest is None or end is None:
        return None  # not a Kafka source, or no offsets known yet
    return float(sum(max(0, int(off) - int(end.get(topic, {}).get(p, 0)))
                     for topic, parts in latest.items() for p, off in parts.items()))


def _offsets(value: Any) -> dict[str, Any] | None:
    """A Kafka source's offsets ({topic: {partition: offset}}): PySpark's progress objects
    give them as JSON text, a report read from JSON as an object; None for anything else
    (not a Kafka source, no offsets yet)."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return None
    return value if isinstance(value, dict) else None
