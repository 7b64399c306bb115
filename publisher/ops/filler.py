"""The filler-table writer (`casscade ops filler`).

Filler sizing: a commit log segment holding CDC data stays the live segment until it is
full. Writing F bytes/s into a non-CDC filler table bounds that time:
    longest fill time (s) = commitlog_segment_size (bytes) / F
e.g. 32 MiB segments and 100 KB blobs at 10 writes/s (~1 MB/s): about 33 s. The blobs are
random (incompressible) and expire quickly (TTL), so the filler leaves no data behind.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from typing import Any


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
