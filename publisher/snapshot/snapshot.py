"""Bootstrap snapshot: stream a table's current rows into the raw topic as SNAPSHOT_ROWs.

A token-range scan (Murmur3 ring cut into `splits` ranges) through cassandra-driver, paged,
at a chosen consistency and rate. Each finished range is recorded in a small JSON state file
after its records are acknowledged, so a restarted snapshot skips it (at-least-once: an
unfinished range is read again, and the materializer's merge makes the repeat harmless).
Run it while the publisher already streams the table: snapshot and CDC then merge
last-write-wins, with no gap between them.
"""

from __future__ import annotations

import itertools
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from publisher.kafka_sink import KafkaSink
from publisher.snapshot.rows import row_records, select_statement
from shared import rowupdate, topic_names
from shared.capture import Capture, captured_record, captured_table
from shared.cql import python_row_decoder
from shared.schema import TableSchema

log = logging.getLogger(__name__)
MIN_TOKEN, MAX_TOKEN = -(2**63), 2**63 - 1


def token_ranges(splits: int) -> list[tuple[int, int]]:
    """`splits` contiguous (start, end] ranges covering the whole Murmur3 ring."""
    if splits < 1:
        raise ValueError("splits must be at least 1")
    width = (MAX_TOKEN - MIN_TOKEN) // splits
    bounds = [MIN_TOKEN + i * width for i in range(splits)] + [MAX_TOKEN]
    return list(itertools.pairwise(bounds))


@dataclass
class Progress:
    """What a snapshot has done so far (for the progress line)."""

    ranges_total: int
    ranges_done: int = 0
    rows: int = 0
    started: float = 0.0
    resumed_with: int = 0  # ranges already done by an earlier run

    def line(self) -> str:
        """rows, ranges, rate and ETA in one line."""
        elapsed = max(time.monotonic() - self.started, 1e-6)
        rate = self.rows / elapsed
        left = self.ranges_total - self.ranges_done
        this_run = self.ranges_done - self.resumed_with
        eta = (elapsed / this_run * left) if this_run else float("nan")
        return (f"rows {self.rows:,}  ranges {self.ranges_done}/{self.ranges_total}  "
                f"{rate:,.0f} rows/s  ETA {eta:,.0f} s")


class Snapshot:
    """One table's snapshot into the raw topic `<prefix>.raw`."""

    def __init__(self, session: Any, table: TableSchema, sink: KafkaSink, prefix: str,
                 state_file: Path, consistency: str = "ALL", splits: int = 64,
                 rate: float = 0.0, host: str = "snapshot", datacenter: str = "",
                 capture: Capture | None = None) -> None:
        from cassandra import ConsistencyLevel

        self.session = session
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
        self.statement = session.prepare(select_statement(table))
        self.statement.consistency_level = ConsistencyLevel.name_to_value[consistency.upper()]
        self.statement.fetch_size = 2000

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

    def run(self, report: Callable[[Progress], None] = lambda _p: None) -> Progress:
        """Scan every range not done yet; returns the final progress."""
        with python_row_decoder(self.session):
            return self._run(report)

    def _run(self, report: Callable[[Progress], None]) -> Progress:
        done = self._done()
        progress = Progress(len(self.ranges), len(done), 0, time.monotonic(), len(done))
        self.sink.ensure_raw_topic()
        self.sink.ensure_schema(self.published)
        failed: list[Any] = []

        def delivered(err: Any, _msg: Any) -> None:
            if err is not None:
                failed.append(err)

        last_report = 0.0
        for index, (start, end) in enumerate(self.ranges):
            if index in done:
                continue
            now_us = int(time.time() * 1_000_000)
            source = {"host": self.host, "datacenter": self.datacenter,
                      "file": f"snapshot:{self.table.name}", "segment_id": 0,
                      "position": index, "index": 0, "commitlog_version": 0,
                      "messaging_version": 0}
            last_key = None
            for n, row in enumerate(self.session.execute(self.statement, (start, end))):
                records = row_records(self.table, tuple(row), now_us // 1_000_000, now_us,
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
                progress.rows += 1
                self._pace(progress)
                if time.monotonic() - last_report > 1:
                    self.sink.poll(0)
                    report(progress)
                    last_report = time.monotonic()
            if self.sink.flush(300) or failed:  # the range counts only once acknowledged
                raise RuntimeError(f"range {index} not acknowledged by Kafka: {failed[:1]}")
            done.add(index)
            self._save(done)
            progress.ranges_done = len(done)
        report(progress)
        return progress

    def _pace(self, progress: Progress) -> None:
        if self.rate > 0:
            ahead = progress.rows / self.rate - (time.monotonic() - progress.started)
            if ahead > 0:
                time.sleep(ahead)
