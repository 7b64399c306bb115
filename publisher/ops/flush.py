"""Flush the CDC tables' memtables on the local node (`casscade ops flush`, from cron).

A flushed memtable lets Cassandra finish the live commit log segment sooner; with the filler
(`publisher.ops.filler`) it bounds how long a change waits in a segment.
"""

from __future__ import annotations

import shlex
import subprocess
from typing import Any


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
