"""Bootstrap snapshot: stream a table's current rows into the raw topic as SNAPSHOT_ROWs.

A token-range scan (Murmur3 ring cut into `splits` ranges) through cassandra-driver, paged,
at a chosen consistency and rate. Each finished range is recorded in a small JSON state file
after its records are acknowledged, so a restarted snapshot skips it (at-least-once: an
unfinished range is read again, and the materializer's merge makes the repeat harmless).
Run it while the publisher already streams the table: snapshot and CDC then merge
last-write-wins, with no gap between them.

With `reset`, a table-truncated record marked as a reset goes to every raw partition first
(`shared.table_truncate`): the materializer empties its state of the table, so rows and
cells the stream kept wrongly (a gap: segments removed by hand, raw records expired) go,
and the rows that follow rebuild it. The progress file records the reset, so a resumed
snapshot does not reset again (it would remove the rows already published).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from publisher.kafka_sink import KafkaSink, to_every_raw_partition
from publisher.snapshot.rows import row_records
from shared import rowupdate, topic_names
from shared.capture import Capture, captured_record, captured_table
from shared.schema import TableSchema
from shared.table_scan import Pacer, ScanProgress, TableScan, token_ranges
from shared.table_truncate import TableTruncate, encode_table_truncate

SNAPSHOT_FETCH_SIZE = 2000  # rows per page of the scan


class Snapshot:
    """One table's snapshot into the raw topic `<prefix>.raw`."""

    def __init__(self, session: Any, table: TableSchema, sink: KafkaSink, prefix: str,
                 state_file: Path, consistency: str = "ALL", splits: int = 64,
                 rate: float = 0.0, host: str = "snapshot", datacenter: str = "",
                 capture: Capture | None = None, reset: bool = False) -> None:
        self.table = table
        self.reset = reset
        self.reset_at_ms: int | None = None  # when this snapshot's reset was published
        self.reset_now = False  # whether this run published it (not an earlier one)
        # what of it is published (shared.capture): the agent's rules, the same schema
        self.capture = capture
        self.actions = capture.actions(table) if capture is not None else {}
        self.published = captured_table(table, self.actions)
        self.sink = sink
        self.topic = topic_names.raw_topic(prefix)
        self.key_head = topic_names.raw_key(table.id, b"")  # of every record's Kafka key
        self.state_file = state_file
        self.ranges = token_ranges(splits)
        self.rate = rate
        self.host, self.datacenter = host, datacenter
        # the wait follows a row's produce, so producing is inside the row's share of time
        self.scan = TableScan(session, table, consistency, SNAPSHOT_FETCH_SIZE,
                              wait_after_row=True)

    def _done(self) -> set[int]:
        if not self.state_file.exists():
            return set()
        doc = json.loads(self.state_file.read_text())
        if doc.get("table_id") != str(self.table.id) or doc.get("splits") != len(self.ranges):
            raise ValueError(f"{self.state_file} belongs to another snapshot (table or splits "
                             f"differ); remove it to start over")
        self.reset_at_ms = doc.get("reset_at_ms")
        return set(doc["done"])

    def _save(self, done: set[int]) -> None:
        tmp = self.state_file.with_suffix(".tmp")
        doc = {"table": self.table.name, "table_id": str(self.table.id),
               "splits": len(self.ranges), "done": sorted(done)}
        if self.reset_at_ms is not None:
            doc["reset_at_ms"] = self.reset_at_ms
        tmp.write_text(json.dumps(doc))
        tmp.replace(self.state_file)

    def _publish_reset(self) -> int:
        """Hand a reset of the table to every raw partition and wait for Kafka's
        acknowledgement; the reset's time (ms)."""
        failed: list[Any] = []
        at_ms = int(time.time() * 1000)
        record = TableTruncate(self.table.id, self.table.keyspace, self.table.table,
                               self.host, at_ms, self.datacenter, reset=True,
                               schema_hash=self.published.schema_hash)
        to_every_raw_partition(self.sink, self.table.id.bytes, encode_table_truncate(record),
                               lambda err, _msg: failed.append(err) if err else None,
                               self.sink.raw_partitions())
        if self.sink.flush(300) or failed:
            raise RuntimeError(f"the reset of {self.table.name} was not acknowledged by "
                               f"Kafka: {failed[:1]}")
        return at_ms

    def run(self, report: Callable[[ScanProgress], None] = lambda _p: None) -> ScanProgress:
        """Scan every range not done yet; returns the final progress."""
        done = self._done()
        self.sink.ensure_raw_topic()
        self.sink.ensure_schema(self.published)
        if self.reset and self.reset_at_ms is None:  # (a resumed reset has its reset done)
            done = set()  # every row again: the reset removes what was published before
            self.reset_at_ms = self._publish_reset()
            self.reset_now = True
            self._save(done)
        progress = ScanProgress(len(self.ranges), len(done), 0, time.monotonic(), len(done))
        failed: list[Any] = []

        def delivered(err: Any, _msg: Any) -> None:
            if err is not None:
                failed.append(err)

        def reported(p: ScanProgress) -> None:
            self.sink.poll(0)  # serve the delivery callbacks while the range is read
            report(p)

        pacer = Pacer(self.rate, progress.started)
        for index, rows in self.scan.ranges(self.ranges, progress, pacer, reported,
                                            skip=set(done)):
            now_us = int(time.time() * 1_000_000)
            source = {"host": self.host, "datacenter": self.datacenter,
                      "file": f"snapshot:{self.table.name}", "segment_id": 0,
                      "position": index, "index": 0, "commitlog_version": 0,
                      "messaging_version": 0}
            last_key = None
            for n, row in enumerate(rows):
                records = row_records(self.table, row, now_us // 1_000_000, now_us,
                                      source | {"index": n}, with_static=True)
                for key, record in records:
                    if record["kind"] == "STATIC_ROW" and key == last_key:
                        continue  # a partition's static columns: once, with its first row
                    if self.actions:
                        record = captured_record(record, self.capture, self.actions,
                                                 self.published)
                    self.sink.produce(self.topic, self.key_head + key, rowupdate.encode(record),
                                      delivered)
                    last_key = key
            if self.sink.flush(300) or failed:  # the range counts only once acknowledged
                raise RuntimeError(f"range {index} not acknowledged by Kafka: {failed[:1]}")
            done.add(index)
            self._save(done)
        report(progress)
        return progress
