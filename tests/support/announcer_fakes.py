"""What the publisher's announcers (dropped and truncated tables) use of a schema source and
of the Kafka sink, recording what they are handed (the real ones: integration tests)."""

from __future__ import annotations

import uuid
from dataclasses import replace
from typing import Any

from shared.schema import TableSchema

from support.events import TABLE

ORDERS = replace(TABLE, cdc=True)
RETURNS = replace(TABLE, table="returns", id=uuid.UUID(int=43), cdc=True)
PLAIN = replace(TABLE, table="plain", id=uuid.UUID(int=44), cdc=False)


class Source:
    """A schema source whose tables the test drops."""

    def __init__(self, *tables: TableSchema) -> None:
        self.tables = {t.id: t for t in tables}
        self.gone: dict[uuid.UUID, TableSchema] = {}
        self.refreshes = 0

    def table(self, table_id: uuid.UUID) -> TableSchema | None:
        return self.tables.get(table_id)

    def refresh(self) -> bool:
        self.refreshes += 1
        return True

    def dropped(self) -> dict[uuid.UUID, TableSchema]:
        return dict(self.gone)


class Sink:
    """What TableDrops uses of KafkaSink."""

    prefix = "p"

    def __init__(self, partitions: int = 3) -> None:
        self.sent: list[tuple[str, int, bytes, bytes]] = []
        self.partitions = partitions
        self.backlog = 0

    def in_flight(self) -> int:
        return self.backlog

    def raw_partitions(self) -> int:
        return self.partitions

    def produce(self, topic: str, key: bytes, value: bytes, on_delivery: Any,
                counted: bool = False, partition: int = -1) -> None:
        assert counted and partition >= 0
        self.sent.append((topic, partition, key, value))
