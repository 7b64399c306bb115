"""`casscade ops flush` and `casscade ops filler` against the real node."""

from __future__ import annotations

import shlex
import subprocess
import sys
import time

import pytest

from devstack.settings import repo_root

from support.reference import cdc_offsets, completed_segments, settled_offsets
from support.services import wait_until

pytestmark = pytest.mark.integration


def _casscade(stack, *args: str, timeout_s: float = 120) -> str:
    cmd = [sys.executable, "-m", "casscade.cli", *args]
    out = subprocess.run(cmd, cwd=repo_root(), capture_output=True, text=True,
                         timeout=timeout_s)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    return out.stdout


def test_flush_flushes_every_cdc_table_to_sstables(stack, cql, cdc_table) -> None:
    table = cdc_table("flushed", "(k int PRIMARY KEY, v text)")
    for k in range(50):
        cql.execute(f"INSERT INTO {table} (k, v) VALUES ({k}, 'x')")
    ks, name = table.split(".")
    data = stack.cassandra_dir / "data" / ks
    assert not list(data.glob(f"{name}-*/*Data.db"))  # still in the memtable
    nodetool = f"{shlex.quote(sys.executable)} -m casscade.cli dev nodetool"
    out = _casscade(stack, "ops", "flush", "--set", f"cassandra.port={stack.cql_port}",
                    "--nodetool", nodetool)
    assert table in out
    assert list(data.glob(f"{name}-*/*Data.db")), "no SSTable after the flush"


def test_filler_completes_a_segment_within_the_documented_time(stack, cql, cdc_table):
    table = cdc_table("quiet", "(k int PRIMARY KEY, v text)")
    settled_offsets(stack.cdc_raw_dir)
    before = cdc_offsets(stack.cdc_raw_dir)
    done_before = set(completed_segments(stack.cdc_raw_dir))
    cql.execute(f"INSERT INTO {table} (k, v) VALUES (1, 'lonely write')")
    live = wait_until(lambda: [n for n, off in cdc_offsets(stack.cdc_raw_dir).items()
                               if off > before.get(n, 0)], 10, "the write to be synced")
    segment = stack.cdc_raw_dir / sorted(live)[-1]
    assert segment not in done_before
    rate, blob_kb = 20, 100
    segment_bytes = 4 * 1024 * 1024  # the dev node's commitlog_segment_size
    documented = segment_bytes / (rate * blob_kb * 1024)  # longest fill time, README/ops.py
    start = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "casscade.cli", "ops", "filler",
                             "--set", f"cassandra.port={stack.cql_port}", "--rate", str(rate),
                             "--blob-kb", str(blob_kb), "--ttl", "30", "--duration", "20"],
                            cwd=repo_root(), stdout=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: segment in completed_segments(stack.cdc_raw_dir), 30,
                   f"{segment.name} to complete under the filler")
        took = time.monotonic() - start
    finally:
        proc.terminate()
        out, _ = proc.communicate(30)
    assert "filler:" in out
    print(f"\nfiller: {rate} x {blob_kb} KiB/s completed the live segment in {took:.1f}s "
          f"(documented bound {documented:.1f}s + start-up and a 1 s sync)")
    assert took <= documented + 8  # interpreter and CQL start-up, the sync period
