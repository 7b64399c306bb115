"""The materializer at RF=3 on synthetic input: what one logical change costs when every
change arrives three times.

Each of RF3_CHANGES one-row changes (RF3_KEYS keys of raw_workload's 5-column table,
RF3_CHANGES / RF3_KEYS versions each) is published by three "nodes" (rf3_copies):
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
import time
import uuid

from rf3_copies import CHANGES, KEYS, PER_BATCH, publish_rf3
from spark_runs import breakdown, run_job

RUNS = [(int(window), int(cores)) for window, cores in (r.split(":") for r in os.environ.get(
    "RF3_RUNS", "120:2,0:2,120:1,0:1").split(","))]


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
        progress = run_job(stack, "partition", cores, prefix, ckpt, PER_BATCH,
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
