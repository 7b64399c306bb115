"""`casscade ops ...`: flush the CDC tables; write the filler table."""

from __future__ import annotations

import signal
import threading
from pathlib import Path

import click

from shared.cli_config import config_option, set_option

_CONFIG = config_option("deploy/publisher.yaml; its cassandra section is used")
_SET = set_option


@click.group(name="ops")
def ops() -> None:
    """Operations helpers for the CDC datacenter (see docs/operations.md)."""


@ops.command()
@_CONFIG
@_SET
@click.option("--nodetool", default="nodetool -h 127.0.0.1 -p 7199", show_default=True,
              help="The nodetool command line for the local node.")
def flush(config_file: Path | None, overrides: tuple[str, ...], nodetool: str) -> None:
    """Flush the memtables of every CDC table on the local node (run from cron or the
    systemd timer in deploy/cron/, CDC datacenter only)."""
    from publisher.cli_support import load_publisher_config
    from publisher.ops.flush import flush_cdc_tables
    from shared.reach import connect_cassandra

    cfg = load_publisher_config(config_file, overrides)
    cluster, session = connect_cassandra(cfg.cassandra)
    try:
        flushed = flush_cdc_tables(session, nodetool)
    except RuntimeError as exc:
        raise click.ClickException(str(exc)) from exc
    finally:
        cluster.shutdown()
    click.echo(f"flushed {len(flushed)} CDC tables: {', '.join(flushed) or '-'}")


@ops.command()
@_CONFIG
@_SET
@click.option("--rate", default=10.0, show_default=True, help="Writes per second.")
@click.option("--blob-kb", default=100, show_default=True, help="Blob size per write (KiB).")
@click.option("--ttl", "ttl_s", default=60, show_default=True, help="TTL of each blob (s).")
@click.option("--datacenter", help="The CDC datacenter (default: node.datacenter).")
@click.option("--replication-factor", default=1, show_default=True)
@click.option("--duration", "duration_s", default=0.0, show_default=True,
              help="Stop after this many seconds (0: until SIGTERM/SIGINT).")
def filler(config_file: Path | None, overrides: tuple[str, ...], rate: float, blob_kb: int,
           ttl_s: int, datacenter: str | None, replication_factor: int,
           duration_s: float) -> None:
    """Write random blobs to one key of a filler table (CDC datacenter only, cdc = false,
    short TTL) so commit log segments fill at a bounded rate on quiet clusters.

    Longest segment fill time = commitlog_segment_size / (rate x blob size); e.g. 32 MiB
    segments at 10 writes/s of 100 KiB: about 33 s.
    """
    from publisher.cli_support import load_publisher_config
    from publisher.ops.filler import FillerSettings, ensure_filler_table, run_filler
    from shared.reach import connect_cassandra

    cfg = load_publisher_config(config_file, overrides)
    s = FillerSettings(datacenter=datacenter or cfg.node.datacenter,
                       replication_factor=replication_factor, rate=rate, blob_kb=blob_kb,
                       ttl_s=ttl_s)
    cluster, session = connect_cassandra(cfg.cassandra)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    try:
        ensure_filler_table(session, s)
        mib_s = rate * blob_kb / 1024
        click.echo(f"filler: {rate:g} writes/s x {blob_kb} KiB = {mib_s:.2f} MiB/s into "
                   f"{s.keyspace}.{s.table} (dc {s.datacenter})")
        writes = run_filler(session, s, stop, duration_s)
    finally:
        cluster.shutdown()
    click.echo(f"filler: {writes} writes")
