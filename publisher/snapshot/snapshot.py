"""Bootstrap snapshot: stream a table's current rows into the raw topic as SNAPSHOT_ROWs.

A token-range scan (Murmur3 ring cut into `splits` ranges) through cassandra-driver, paged,
at a chosen consistency and rate. Each finished range is recorded in a small JSON state file
after its records are acknowledged, so a restarted snapshot skips it (at-least-once: an
unfinished range is read again, and the materializer's merge makes the repeat harmless).
Run it while the publisher already streams the table: snapshot and CDC then merge
last-write-wins, with no gap between them.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from publisher.kafka_sink import KafkaSink
from publisher.snapshot.rows import row_records
from shared import rowupdate, topic_names
from shared.capture import Capture, captured_record, captured_table
from shared.schema import TableSchema
from shared.table_scan import Pacer, ScanProgress, TableScan, token_ranges

SNAPSHOT_FETCH_SIZE = 2000  # rows per page of the scan


class Snapshot:
    """One table's snapshot into the raw topic `<prefix>.raw`."""

    def __init__(self, session: Any, table: TableSchema, sink: KafkaSink, prefix: str,
                 state_file: Path, consistency: str = "ALL", splits: int = 64,
                 rate: float = 0.0, host: str = "snapshot", datacenter: str = "",
                 capture: Capture | None = None) -> None:
        self.table = table
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
        return set(doc["done"])

    def _save(self, done: set[int]) -> None:
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps({"table": self.table.name, "table_id": str(self.table.id),
                                   "splits": len(self.ranges), "done": sorted(done)}))
        tmp.replace(self.state_file)

    def run(self, report: Callable[[ScanProgress], None] = lambda _p: None) -> ScanProgress:
        """Scan every range not done yet; returns the final progress."""
        done = self._done()
        progress = ScanProgress(len(self.ranges), len(done), 0, time.monotonic(), len(done))
        self.sink.ensure_raw_topic()
        self.sink.ensure_schema(self.published)
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
