"""The partition stores' changelog: what it costs to write, and to rebuild a store from it.

One store (one partition of the raw topic) of RESTORE_KEYS keys, entries of RESTORE_ENTRY_BYTES
(a 5-column row's state is ~200 bytes), written in micro-batches of RESTORE_BATCH keys on
the stack's broker: once with local RocksDB only, once with the Kafka changelog. Then the
store's directory is removed and a new open rebuilds it from the changelog (what a task on
a new executor does), and one more open with nothing new (the steady state: no read).

Printed: keys/s written without and with the changelog (the ratio is the changelog's share
of a store's write cost, not of the job's), the rebuild's seconds and keys/s, and its cost
per million keys; the store's and the changelog partition's size on disk per million keys.
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
    """Write KEYS keys in `batches` micro-batches; seconds. Each key's entry is bytes of its
    own, random (nothing to compress: the disk figures are an upper bound for real rows)."""
    elapsed = 0.0
    for batch in range(batches):
        keys = range(batch * BATCH, min(KEYS, (batch + 1) * BATCH))
        values = [os.urandom(ENTRY) for _ in keys]  # made outside the clock
        started = time.perf_counter()
        store = PartitionStore(path, batch, 0, 0, changelog_part)
        for i, value in zip(keys, values, strict=True):
            store.put(b"s%012d" % i, value)
        store.close()
        elapsed += time.perf_counter() - started
    return elapsed


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
    # what a million keys take on disk: the store (RocksDB, after its writes and after a
    # rebuild) and the changelog topic's partition on the broker (not compacted yet)
    per_million = 1e6 / KEYS / 2**20
    changelog = sum(_bytes(d) for d in (stack.kafka_dir / "data").glob(f"{prefix}.changelog*"))
    print(f"on disk per million keys: the store {_bytes(tmp_path / 'local') * per_million:.0f} "
          f"MB written, {_bytes(tmp_path / 'logged') * per_million:.0f} MB rebuilt; the "
          f"changelog partition {changelog * per_million:.0f} MB")


def _bytes(path: Path) -> int:
    """Bytes of the files under `path`."""
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
