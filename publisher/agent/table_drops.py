"""Announcing dropped tables: when a captured table is gone from the schema, a table-dropped
record (`shared.table_drop`) to every partition of the raw topic, so the materializer frees
its keys' state in every partition store.

Why only while the agent has nothing to read: the table's own records come from the commit
log before its drop, and a record produced after the announcement would find its state gone
(the materializer drops late records of a dropped table). An agent that is caught up has
produced them all, and Kafka keeps a partition's records in the order they were produced.

Why a schema read on a timer: a `DROP TABLE` whose commit log segment held no CDC write
never reaches cdc_raw, so the agent may never read the schema mutation that would make it
look (`CommitLogReader.schema_changed`).
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from typing import Any

from publisher.commitlog.schema_source import SchemaSource
from publisher.kafka_sink import KafkaSink, to_every_raw_partition
from shared.metrics import Registry
from shared.table_drop import TableDrop, encode_table_drop

log = logging.getLogger(__name__)


class TableDrops:
    """Finds dropped CDC tables and announces each once (`maybe_announce` from the agent's
    main loop)."""

    def __init__(self, sink: KafkaSink, source: SchemaSource, host: str, refresh_s: float,
                 metrics: Registry, clock: Callable[[], float] = time.monotonic) -> None:
        self.sink, self.source, self.host = sink, source, host
        self.refresh_s, self.clock = refresh_s, clock
        self.refreshed = clock()
        self.announced: set[uuid.UUID] = set()
        self.sent = metrics.counter("casscade_publisher_table_drops_sent_total",
                                    "Table-dropped records handed to the Kafka producer")

    def maybe_announce(self, idle: bool) -> int:
        """While the agent is `idle` (it read nothing this pass and Kafka has acknowledged
        everything): read the schema again if it is due, and announce every CDC table found
        dropped since; how many records that sent."""
        if not idle or self.sink.in_flight():
            return 0
        now = self.clock()
        if self.refresh_s > 0 and now - self.refreshed >= self.refresh_s:
            self.refreshed = now
            self.source.refresh()
        new = {i: t for i, t in self.source.dropped().items()
               if i not in self.announced and t.cdc}
        if not new:
            return 0
        try:
            partitions = self.sink.raw_partitions()
        except Exception as exc:  # noqa: BLE001 (Kafka away: the next idle pass tries again)
            log.warning("dropped tables not announced yet: the raw topic's partitions could "
                        "not be read", extra={"error": str(exc)})
            return 0
        count = 0
        for table_id, table in sorted(new.items(), key=lambda item: item[1].name):
            value = encode_table_drop(TableDrop(table_id, table.keyspace, table.table,
                                                self.host, int(time.time() * 1000)))
            # none while the raw topic does not exist
            count += to_every_raw_partition(self.sink, table_id.bytes, value, self._delivered,
                                            partitions)
            self.announced.add(table_id)
            log.warning(f"table {table.name} was dropped: its keys' state is freed by the "
                        "materializer", extra={"table_id": str(table_id),
                                               "raw_partitions": partitions})
        self.sent.inc(count)
        return count

    def _delivered(self, err: Any, _msg: Any) -> None:
        if err is not None:  # retries are endless: only a fatal error gets here
            log.error("a table-dropped record was not delivered", extra={"error": str(err)})
