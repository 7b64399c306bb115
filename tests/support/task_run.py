"""One task of the job's partition merge in process (no Spark): raw records in, the rows
mapInArrow would hand back out (materializer.task.merge_loop.merge, real RocksDB stores)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa

from materializer.key_materializer import KeyMaterializer, Schemas
from materializer.output.event_settings import EventSettings
from materializer.task.merge_loop import merge
from materializer.task.task_stores import TaskStores


def run_task(root: Path, batch: int, now_ms: int, rows: list[tuple[bytes, bytes]],
             schemas: Schemas, topic: str = "p.raw", offset_step: int = 100
             ) -> list[dict[str, Any]]:
    """Micro-batch `batch`'s task over partition 0 of `topic`: `rows` are (raw key, value),
    at offsets from batch * `offset_step`; its stores under `root`. The output rows: the
    events, then the task's row of counts."""
    handler = KeyMaterializer(schemas, EventSettings(), topic.split(".", 1)[0])
    start = batch * offset_step
    arrow = pa.RecordBatch.from_pydict(
        {"topic": [topic] * len(rows), "key": [k for k, _ in rows],
         "value": [v for _, v in rows], "partition": [0] * len(rows),
         "offset": list(range(start, start + len(rows)))})
    stores = TaskStores(root, batch, 60_000, now_ms)
    try:
        return pa.Table.from_batches(list(merge(iter([arrow]), stores, handler,
                                                now_ms))).to_pylist()
    finally:
        stores.close()
