"""Announcing truncated tables: when the node's `system.local.truncated_at` holds a
truncation of a CDC table not announced yet, a table-truncated record
(`shared.table_truncate`) to every partition of the raw topic, so the materializer removes
what the TRUNCATE removed.

Why a CQL read of the node's own `system.local`: a TRUNCATE writes nothing of the table to
the commit log; each replica records it there (table id → the commit log position its flush
ended at, and its clock's time), and only there. The write of that record is a commit log
mutation too, but of a table without CDC: it reaches cdc_raw only when its segment also
holds a CDC write, so the agent could miss it.

Why the announcement need not wait for anything: the materializer applies a truncation as
the removal of every cell written at or before its time (docs/architecture.md "TRUNCATE"),
which gives the same state whatever comes before or after it in the raw topic. Every
truncation found at start is announced again (the materializer ignores one it applied).
"""

from __future__ import annotations

import logging
import socket
import time
import uuid
from collections.abc import Callable
from typing import Any, Protocol

from publisher.commitlog.schema_source import SchemaSource
from publisher.kafka_sink import KafkaSink, to_every_raw_partition
from shared.metrics import Registry
from shared.table_truncate import TableTruncate, encode_table_truncate, parse_truncation_record

log = logging.getLogger(__name__)


class TruncationRecords(Protocol):
    """Reads a node's truncation records."""

    def read(self) -> dict[uuid.UUID, bytes] | None:
        """table id → its `system.local.truncated_at` value; None if the node did not
        answer."""
        ...


class NodeTruncationRecords:
    """`system.local.truncated_at` of one node, through a driver session: the node at
    `address` when the driver knows it (the agent's own node, its first contact point),
    else whichever node the session picks (with a warning: its truncation times are that
    node's)."""

    QUERY = "SELECT truncated_at FROM system.local WHERE key = 'local'"
    TIMEOUT_S = 5.0  # the agent's loop waits for it: not the session's 30 s

    def __init__(self, session: Any, address: str) -> None:
        self.session, self.address = session, address
        try:  # the driver knows its hosts by address
            self._ip = socket.gethostbyname(address)
        except OSError:
            self._ip = address
        self._warned = False
        self._failing = False

    def read(self) -> dict[uuid.UUID, bytes] | None:
        """The node's truncation records (None: it did not answer; logged)."""
        host = self._host()
        try:
            rows = list(self.session.execute(self.QUERY, timeout=self.TIMEOUT_S, host=host))
        except Exception as exc:  # noqa: BLE001 (any driver failure: the next check tries)
            if not self._failing:  # once per outage: the check runs every few seconds
                log.warning("truncation records not read: Cassandra did not answer; "
                            "trying again", extra={"node": self.address, "error": str(exc)})
            self._failing = True
            return None
        if self._failing:
            log.info("truncation records read again", extra={"node": self.address})
            self._failing = False
        found = rows[0].truncated_at if rows else None
        return {uuid.UUID(str(k)): bytes(v) for k, v in (found or {}).items()}

    def _host(self) -> Any:
        metadata = self.session.cluster.metadata
        for host in metadata.all_hosts():
            if str(host.address) in (self.address, self._ip):
                return host
        if not self._warned:
            self._warned = True
            log.warning("the agent's node is not among the driver's hosts: truncation "
                        "records are read from whichever node answers",
                        extra={"node": self.address})
        return None


class Truncations:
    """Finds truncations of CDC tables and announces each once (`maybe_announce` from the
    agent's main loop)."""

    def __init__(self, sink: KafkaSink, schema: SchemaSource, records: TruncationRecords,
                 host: str, datacenter: str, check_s: float, metrics: Registry,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.sink, self.schema, self.records = sink, schema, records
        self.host, self.datacenter = host, datacenter
        self.check_s, self.clock = check_s, clock
        self.checked: float | None = None  # never: the first pass reads them
        self.announced: dict[uuid.UUID, int] = {}  # table id → truncation time announced
        self.sent = metrics.counter("casscade_publisher_truncations_sent_total",
                                    "Table-truncated records handed to the Kafka producer")

    def maybe_announce(self) -> int:
        """Read the node's truncation records if a check is due; announce every truncation
        of a CDC table not announced yet; how many records that sent."""
        now = self.clock()
        if self.check_s <= 0 or (self.checked is not None and now - self.checked < self.check_s):
            return 0
        self.checked = now
        found = self.records.read()
        if not found:
            return 0
        new = []
        for table_id, blob in found.items():
            table = self.schema.table(table_id)
            if table is None or not table.cdc:
                continue
            try:
                segment_id, position, at_ms = parse_truncation_record(blob)
            except ValueError as exc:
                log.error("a truncation record cannot be read; not announced",
                          extra={"table_id": str(table_id), "error": str(exc)})
                continue
            if self.announced.get(table_id) != at_ms:
                new.append(TableTruncate(table_id, table.keyspace, table.table, self.host,
                                         at_ms, self.datacenter, segment_id, position))
        return self._announce(new) if new else 0

    def _announce(self, new: list[TableTruncate]) -> int:
        try:
            partitions = self.sink.raw_partitions()
        except Exception as exc:  # noqa: BLE001 (Kafka away: the next check tries again)
            log.warning("truncations not announced yet: the raw topic's partitions could "
                        "not be read", extra={"error": str(exc)})
            return 0
        if partitions == 0:
            return 0  # no raw topic yet: nothing of the table's is in Kafka to remove
        count = 0
        for truncate in sorted(new, key=lambda t: t.name):
            count += to_every_raw_partition(self.sink, truncate.table_id.bytes,
                                            encode_table_truncate(truncate), self._delivered,
                                            partitions)
            self.announced[truncate.table_id] = truncate.truncated_at_ms
            log.info(f"table {truncate.name} was truncated: the materializer removes what "
                     "it held", extra={"table_id": str(truncate.table_id),
                                            "truncated_at_ms": truncate.truncated_at_ms,
                                            "raw_partitions": partitions})
        self.sent.inc(count)
        return count

    def _delivered(self, err: Any, _msg: Any) -> None:
        if err is not None:  # retries are endless: only a fatal error gets here
            log.error("a table-truncated record was not delivered", extra={"error": str(err)})
