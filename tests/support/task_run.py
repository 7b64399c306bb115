"""One task of the job's partition merge in process (no Spark): raw records in, the rows
mapInArrow would hand back out (materializer.task.merge_loop.merge, real RocksDB stores)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa

from materializer.kafka.changelog import ChangelogJob
from materializer.key_materializer import KeyMaterializer, Schemas
from materializer.output.event_settings import EventSettings
from materializer.settings import SparkSettings
from materializer.task.merge_loop import merge_whole
from materializer.task.task_stores import TaskStores


def run_task(root: Path, batch: int, now_ms: int, rows: list[tuple[bytes, bytes]],
             schemas: Schemas, topic: str = "p.raw", offset_step: int = 100,
             check_whole: Callable[[], None] = lambda: None,
             changelog: ChangelogJob | None = None,
             sweep_keys: int = SparkSettings.sweep_keys) -> list[dict[str, Any]]:
    """Micro-batch `batch`'s task over partition 0 of `topic`: `rows` are (raw key, value),
    at offsets from batch * `offset_step`; its stores under `root`; `check_whole`: what
    tells whether the task got its whole input (raises: it did not); `changelog`: the
    job's changelogs, and under exactly-once its transactions (real Kafka); `sweep_keys`:
    the most keys of table sweeps (the job's default unless given). The output
    rows: the events (exactly-once: none, they are in the transactions), then the task's
    row of counts."""
    handler = KeyMaterializer(schemas, EventSettings(), topic.split(".", 1)[0])
    start = batch * offset_step
    arrow = pa.RecordBatch.from_pydict(
        {"topic": [topic] * len(rows), "key": [k for k, _ in rows],
         "value": [v for _, v in rows], "partition": [0] * len(rows),
         "offset": list(range(start, start + len(rows)))})
    stores = TaskStores(root, batch, 60_000, now_ms,
                        changelog.changelogs() if changelog is not None else None,
                        changelog.made if changelog is not None else None, changelog)
    return pa.Table.from_batches(list(merge_whole(iter([arrow]), stores, handler, now_ms,
                                                  check_whole, sweep_keys))).to_pylist()
