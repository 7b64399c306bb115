"""The materializer at RF=3 on synthetic input: what one logical change costs when every
change arrives three times.

Each of RF3_CHANGES one-row changes (RF3_KEYS keys of the 5-column table of
bench_materializer, RF3_CHANGES / RF3_KEYS versions each) is published by three "nodes":
the same RowUpdate content with a different `source` block (host, file, position), so one
copy digest. The copies are shuffled within blocks of
RF3_SHUFFLE records, so the three copies of a change arrive near each other, in any order,
as they do from three publishers. The real job then runs availableNow on the local broker
(RF3_BATCH raw records per micro-batch), with the partition stores' copy dedupe on (the
default window) and off, on local[1] and local[2] (RF3_RUNS: window-s:cores pairs).
Printed: logical changes/s and copies/s, each also per core, over the steady micro-batches
(the first, with Python worker start-up, is reported apart), where the time went, and the
copies the stores dropped.
"""

from __future__ import annotations

import os
import random
import time
import uuid

from bench_materializer import TABLE, _bench_topic, _record, _run_job

from shared import rowupdate

CHANGES = int(os.environ.get("RF3_CHANGES", "60000"))
KEYS = int(os.environ.get("RF3_KEYS", "20000"))
PER_BATCH = int(os.environ.get("RF3_BATCH", "60000"))
SHUFFLE = int(os.environ.get("RF3_SHUFFLE", "3000"))
RUNS = [(int(window), int(cores)) for window, cores in (r.split(":") for r in os.environ.get(
    "RF3_RUNS", "120:2,0:2,120:1,0:1").split(","))]


def copies(key: int, version: int) -> list[tuple[bytes, bytes]]:
    """(Kafka key, value) of one change as nodes 1-3 publish it."""
    pk, value = _record(TABLE, key, version)
    record = rowupdate.decode(value)
    out = []
    for node in (1, 2, 3):
        source = {**record["source"], "host": f"node-{node}",
                  "file": f"CommitLog-7-{1000 + node}.log", "segment_id": 1000 + node,
                  "position": record["source"]["position"] * node + 31 * node}
        out.append((pk, rowupdate.encode({**record, "source": source})))
    return out


def publish_rf3(bootstrap: str, prefix: str, seed: int = 3) -> int:
    """CHANGES changes, three shuffled copies each, into a fresh raw topic."""
    rng = random.Random(seed)
    producer = _bench_topic(bootstrap, prefix)
    topic = f"{prefix}.raw.bench.t"
    versions = CHANGES // KEYS
    block: list[tuple[bytes, bytes]] = []
    sent = 0

    def flush_block() -> None:
        nonlocal sent
        rng.shuffle(block)
        for key, value in block:
            producer.produce(topic, key=key, value=value)
        sent += len(block)
        block.clear()
        producer.poll(0)

    for version in range(versions):
        for key in range(KEYS):
            block.extend(copies(key, version))
            if len(block) >= SHUFFLE:
                flush_block()
    flush_block()
    assert producer.flush(120) == 0
    return sent


def test_bench_rf3_synthetic(stack, tmp_path) -> None:
    """Logical changes/s per core at RF=3, the copy dedupe on and off."""
    changes = (CHANGES // KEYS) * KEYS
    for window, cores in RUNS:
        prefix = f"rf3{uuid.uuid4().hex[:6]}"
        started = time.monotonic()
        copies_sent = publish_rf3(stack.bootstrap_servers, prefix)
        assert copies_sent == 3 * changes
        publish_s = time.monotonic() - started
        ckpt = tmp_path / f"ckpt-{prefix}"
        details: list = []
        observed: list = []
        progress = _run_job(stack, "partition", cores, prefix, ckpt, PER_BATCH,
                            dedupe_s=window, details=details, observed=observed)
        assert sum(n for n, _ in progress) == copies_sent
        first, steady = progress[0], progress[1:]
        rows = sum(n for n, _ in steady)
        secs = sum(ms for _, ms in steady) / 1000
        logical = rows / 3  # every change sent three times, the batches hold whole blocks
        label = f"dedupe window {window} s" if window else "dedupe off"
        print(f"\nRF=3 synthetic, {label}, local[{cores}]: {changes:,} changes = "
              f"{copies_sent:,} copies over {KEYS:,} keys (published in {publish_s:.1f}s); "
              f"first batch {first[0]:,} copies in {first[1] / 1000:.1f}s; steady "
              f"{rows:,} copies in {secs:.1f}s = {logical / secs:,.0f} changes/s "
              f"({logical / secs / cores:,.0f} per core), {rows / secs:,.0f} copies/s "
              f"({rows / secs / cores:,.0f} per core)")
        print(breakdown(details[1:], cores, logical))
        dropped = sum(o["partition_state"]["copies_dropped"] for o in observed)
        print(f"  copies dropped in the partition stores: {dropped:,} of {copies_sent:,}")


def breakdown(batches: list[dict], cores: int, changes: float) -> str:
    """Where the steady batches' time went, from Spark's progress reports: wall time per
    phase and state operator, and core time per logical change (wall x cores / changes)."""
    def total(get) -> float:
        return sum(get(b) or 0 for b in batches)

    trigger = total(lambda b: b["durationMs"].get("triggerExecution"))
    add = total(lambda b: b["durationMs"].get("addBatch"))
    parts = [f"triggerExecution {trigger / 1000:.1f}s", f"addBatch {add / 1000:.1f}s",
             f"outside addBatch {(trigger - add) / 1000:.1f}s"]
    names = [o["operatorName"] for o in batches[0]["operators"]] if batches else []
    for i, name in enumerate(names):
        upd = total(lambda b, i=i: b["operators"][i]["allUpdatesTimeMs"])
        rem = total(lambda b, i=i: b["operators"][i]["allRemovalsTimeMs"])
        com = total(lambda b, i=i: b["operators"][i]["commitTimeMs"])
        rows = batches[-1]["operators"][i]["numRowsTotal"]
        parts.append(f"{name}: updates {upd / 1000:.1f}s, removals {rem / 1000:.1f}s, "
                     f"commit {com / 1000:.1f}s, {rows:,} state rows")
    per_change = trigger * 1000 * cores / changes if changes else 0.0
    return f"  breakdown: {'; '.join(parts)}; {per_change:,.0f} us of core time per change"
