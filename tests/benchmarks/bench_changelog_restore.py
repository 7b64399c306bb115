"""The partition stores' changelog: what it costs to write, and to rebuild a store from it.

One store (one partition of the raw topic) of RESTORE_KEYS keys, entries of RESTORE_ENTRY_BYTES
(a 5-column row's state is ~200 bytes), written in micro-batches of RESTORE_BATCH keys on
the stack's broker: once with local RocksDB only, once with the Kafka changelog. Then the
store's directory is removed and a new open rebuilds it from the changelog (what a task on
a new executor does), and one more open with nothing new (the steady state: no read).

Printed: keys/s written without and with the changelog (the ratio is the changelog's share
of a store's write cost, not of the job's), the rebuild's seconds and keys/s, and its cost
per million keys; the changelog topic's size.
"""

from __future__ import annotations

import os
import shutil
import time
import uuid
from pathlib import Path

from materializer.kafka.changelog import ChangelogJob, ChangelogPartition
from materializer.store.partition_store import PartitionStore
from shared import topic_names

KEYS = int(os.environ.get("RESTORE_KEYS", "1000000"))
ENTRY = int(os.environ.get("RESTORE_ENTRY_BYTES", "200"))
BATCH = int(os.environ.get("RESTORE_BATCH", "50000"))


def _write(path: Path, changelog_part: ChangelogPartition | None, batches: int) -> float:
    """Write KEYS keys in `batches` micro-batches; seconds."""
    value = os.urandom(ENTRY)
    started = time.perf_counter()
    for batch in range(batches):
        store = PartitionStore(path, batch, 0, 0, changelog_part)
        for i in range(batch * BATCH, min(KEYS, (batch + 1) * BATCH)):
            store.put(b"s%012d" % i, value)
        store.close()
    return time.perf_counter() - started


def test_bench_changelog_restore(stack, tmp_path: Path) -> None:
    """Write cost with and without the changelog; rebuild time per million keys."""
    batches = -(-KEYS // BATCH)
    local_s = _write(tmp_path / "local", None, batches)
    prefix = f"restore{uuid.uuid4().hex[:6]}"
    job = ChangelogJob({"bootstrap.servers": stack.bootstrap_servers}, prefix, "bench", 1)
    logs = job.changelogs()
    raw = topic_names.raw_topic(prefix)
    logs.ensure(1)  # the changelog of a raw topic of one partition (the raw topic not made)
    logged_s = _write(tmp_path / "logged", logs.partition(raw, 0), batches)
    print(f"\nwrite {KEYS:,} keys of {ENTRY} B in {batches} batches: local only "
          f"{KEYS / local_s:,.0f} keys/s, with the changelog {KEYS / logged_s:,.0f} keys/s "
          f"({logged_s / local_s:.2f}x the time)")
    shutil.rmtree(tmp_path / "logged")
    started = time.perf_counter()
    store = PartitionStore(tmp_path / "logged", batches, 0, 0, logs.partition(raw, 0))
    rebuilt_s = time.perf_counter() - started
    restored = store.restored
    store.close()
    assert restored >= KEYS  # every key (and each batch's newest mark, until compacted)
    started = time.perf_counter()
    store = PartitionStore(tmp_path / "logged", batches + 1, 0, 0, logs.partition(raw, 0))
    steady_ms = (time.perf_counter() - started) * 1000
    assert store.restored == 0
    store.close()
    end = logs.partition(raw, 0).end()
    print(f"rebuild from the changelog ({end:,} records): {rebuilt_s:.2f} s, "
          f"{restored / rebuilt_s:,.0f} writes/s = {rebuilt_s * 1e6 / KEYS:.1f} s per million "
          f"keys; an open with nothing to read: {steady_ms:.1f} ms")
