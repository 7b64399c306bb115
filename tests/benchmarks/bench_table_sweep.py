"""How fast a task's table sweeps go, in process (no Spark, no Kafka): SWEEP_TABLE_KEYS keys
of one table in one partition store (real RocksDB, JSON events), then a TRUNCATE, a
truncate barrier over the rows written again, and a reset, each swept `spark.sweep_keys`
keys a micro-batch (the default), the micro-batches after the first holding one heartbeat.

Printed per sweep: keys/s on one core and the micro-batches it took, and the longest batch
(what a partition's transaction holds open for it, before the transactions' own writes).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from materializer.settings import SparkSettings
from shared.heartbeat import Heartbeat, encode_heartbeat
from shared.table_truncate import TableTruncate, encode_table_truncate
from shared.topic_names import raw_key
from shared.truncate_barrier import TruncateBarrier, encode_truncate_barrier

from support.events import NOW_MS, TABLE, Registry, i32, row_of
from support.task_run import run_task

KEYS = int(os.environ.get("SWEEP_TABLE_KEYS", "200000"))
T0 = NOW_MS // 1000 - 3600
BEAT = (b"", encode_heartbeat(Heartbeat("node-1", NOW_MS, {})))
STEP = 10 * KEYS  # offsets per batch


def _sweep(root: Path, batch: int, start: tuple[bytes, bytes]) -> tuple[int, float, float]:
    """Run micro-batches from `batch` on (the first with `start`) until one gives no
    events; (batches it took, seconds in all, the longest batch's seconds)."""
    took, longest, n = 0.0, 0.0, 0
    rows = [start]
    while True:
        began = time.perf_counter()
        out = run_task(root, batch + n, NOW_MS, rows, Registry(TABLE), offset_step=STEP)
        spent = time.perf_counter() - began
        n += 1
        if len(out) == 1 and n > 1:
            return n - 1, took, longest
        took += spent
        longest = max(longest, spent)
        rows = [BEAT]


def test_bench_table_sweep(tmp_path: Path) -> None:
    budget = SparkSettings().sweep_keys
    rows = [(raw_key(TABLE.id, i32(k)), row_of(TABLE, k, k, T0)) for k in range(KEYS)]
    run_task(tmp_path, 0, NOW_MS, rows, Registry(TABLE), offset_step=STEP)
    truncate = encode_table_truncate(TableTruncate(TABLE.id, "shop", "orders", "node-1",
                                                   (T0 + 10) * 1000))
    barrier = encode_truncate_barrier(TruncateBarrier(TABLE.id, "shop", "orders",
                                                      (T0 + 10) * 1_000_000))
    reset = encode_table_truncate(TableTruncate(TABLE.id, "shop", "orders", "snapshot",
                                                (T0 + 40) * 1000, reset=True,
                                                schema_hash=TABLE.schema_hash))
    print(f"\n{KEYS:,} keys of one table in one partition store, spark.sweep_keys {budget:,}")
    batch = 1
    for name, record, before in (("truncate", truncate, None), ("barrier", barrier, T0 + 20),
                                 ("reset", reset, None)):
        if before is not None:  # the rows written again after the truncation
            run_task(tmp_path, batch, NOW_MS,
                     [(k, row_of(TABLE, i, i, before)) for i, (k, _) in enumerate(rows)],
                     Registry(TABLE), offset_step=STEP)
            batch += 1
        n, took, longest = _sweep(tmp_path, batch, (TABLE.id.bytes, record))
        batch += n + 1
        print(f"  {name:9s} {KEYS / took:9,.0f} keys/s  {n} micro-batches, the longest "
              f"{longest:.2f} s")
