"""Operations tools: flush the CDC tables' memtables, and the filler-table writer.

Filler sizing: a commit log segment holding CDC data stays the live segment until it is
full. Writing F bytes/s into a non-CDC filler table bounds that time:
    longest fill time (s) = commitlog_segment_size (bytes) / F
e.g. 32 MiB segments and 100 KB blobs at 10 writes/s (~1 MB/s): about 33 s. The blobs are
random (incompressible) and expire quickly (TTL), so the filler leaves no data behind.
"""

from __future__ import annotations

import logging
import os
import shlex
import subprocess
import threading
import time
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)


def cdc_tables(session: Any) -> dict[str, list[str]]:
    """keyspace → its tables with `cdc = true`, from system_schema."""
    out: dict[str, list[str]] = {}
    for row in session.execute("SELECT keyspace_name, table_name, cdc FROM system_schema.tables"):
        if row.cdc:
            out.setdefault(row.keyspace_name, []).append(row.table_name)
    return {ks: sorted(tables) for ks, tables in sorted(out.items())}


def flush_cdc_tables(session: Any, nodetool: str, timeout_s: float = 600) -> list[str]:
    """`nodetool flush KS T...` for every keyspace with CDC tables; returns what was flushed.
    `nodetool` is a command line (e.g. "nodetool -h 127.0.0.1 -p 7199")."""
    flushed = []
    for ks, tables in cdc_tables(session).items():
        cmd = [*shlex.split(nodetool), "flush", ks, *tables]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed ({done.returncode}): "
                               f"{(done.stdout + done.stderr)[-1000:]}")
        flushed += [f"{ks}.{t}" for t in tables]
    return flushed


@dataclass
class FillerSettings:
    """What the filler writes and how fast."""

    keyspace: str = "casscade_ops"
    table: str = "filler"
    datacenter: str = "datacenter1"  # the CDC datacenter: the only one the table lives in
    replication_factor: int = 1
    rate: float = 10.0  # writes per second
    blob_kb: int = 100
    ttl_s: int = 60


def ensure_filler_table(session: Any, s: FillerSettings) -> None:
    """Create the filler keyspace (CDC datacenter only) and table if missing."""
    session.execute(
        f"CREATE KEYSPACE IF NOT EXISTS {s.keyspace} WITH replication = "
        f"{{'class': 'NetworkTopologyStrategy', '{s.datacenter}': {s.replication_factor}}}")
    session.execute(
        f"CREATE TABLE IF NOT EXISTS {s.keyspace}.{s.table} (k int PRIMARY KEY, b blob) "
        f"WITH cdc = false AND gc_grace_seconds = 0 AND default_time_to_live = {s.ttl_s}")


def run_filler(session: Any, s: FillerSettings, stop: threading.Event,
               duration_s: float = 0.0) -> int:
    """Write blobs to one key at `s.rate` until `stop` (or `duration_s`); returns writes."""
    insert = session.prepare(f"INSERT INTO {s.keyspace}.{s.table} (k, b) VALUES (0, ?)")
    start = time.monotonic()
    writes = 0
    while not stop.is_set() and (not duration_s or time.monotonic() - start < duration_s):
        session.execute(insert, (os.urandom(s.blob_kb * 1024),))
        writes += 1
        ahead = writes / s.rate - (time.monotonic() - start)
        if ahead > 0:
            stop.wait(ahead)
    return writes
