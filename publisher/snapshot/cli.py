"""`casscade snapshot`: stream a table's existing rows into the raw topic (bootstrap)."""

from __future__ import annotations

import sys
from pathlib import Path

import click


@click.command(name="snapshot")
@click.option("--table", "table_name", required=True, metavar="KEYSPACE.TABLE",
              help="The table to snapshot.")
@click.option("--config", "config_file",
              type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="The publisher's YAML config (kafka and cassandra sections are used).")
@click.option("--set", "overrides", multiple=True, metavar="SECTION.KEY=VALUE",
              help="Override one publisher setting (repeatable).")
@click.option("--consistency", default="ALL", show_default=True,
              help="Read consistency (ALL sees every replica's latest write).")
@click.option("--splits", default=64, show_default=True,
              help="Token ranges the ring is cut into (the unit of resume).")
@click.option("--rate", default=0.0, show_default=True,
              help="Rows per second at most (0: as fast as it goes). The rows share the raw "
                   "topic with every live table's writes, which wait behind them: keep it "
                   "below what the materializer merges beside the live writes "
                   "(docs/operations.md, section 4).")
@click.option("--reset", is_flag=True,
              help="First empty the materializer's state of the table (its consumers get a "
                   "`d` event for every row it held, then a truncate event, `op: t`), then "
                   "publish every row: for a table whose events went wrong (a gap in the "
                   "stream). A resumed run does not reset again; remove the progress file to "
                   "reset anew (docs/operations.md, section 6).")
@click.option("--state", "state_file", type=click.Path(dir_okay=False, path_type=Path),
              help="Progress file for resuming (default: <state.path>/snapshot-KS.TABLE.json).")
def snapshot(table_name: str, config_file: Path | None, overrides: tuple[str, ...],
             consistency: str, splits: int, rate: float, reset: bool,
             state_file: Path | None) -> None:
    """Read every row of a table with WRITETIME and TTL of each column and publish it as a
    SNAPSHOT_ROW to the raw topic <prefix>.raw; the materializer merges it with live CDC
    last-write-wins (op `r` for rows it had not seen).

    Start the publisher for the table first, then the snapshot: writes during the snapshot
    arrive through CDC, so there is no gap. Resumable: finished token ranges are recorded in
    the progress file and skipped by a rerun.
    """
    from publisher.cli_support import kafka_client, load_publisher_config
    from publisher.kafka_sink import KafkaSink
    from publisher.snapshot.snapshot import Snapshot
    from shared.cli_config import captured_rules, check_capture
    from shared.metrics import Registry
    from shared.reach import connect_cassandra
    from shared.schema import catalog_from_json
    from shared.system_schema import read_system_schema

    cfg = load_publisher_config(config_file, overrides)
    if "." not in table_name:
        raise click.BadParameter("expected KEYSPACE.TABLE", param_hint="--table")
    keyspace, table = table_name.split(".", 1)
    cluster, session = connect_cassandra(cfg.cassandra)
    try:
        tables = [t for t in catalog_from_json(read_system_schema(session)).values()
                  if (t.keyspace, t.table) == (keyspace, table)]
        if not tables:
            raise click.ClickException(f"table {table_name} not found")
        capture = captured_rules(cfg)
        if not capture.captures(keyspace, table):
            raise click.ClickException(f"table {table_name} is not captured "
                                       "(capture.table_include_list/table_exclude_list)")
        check_capture(capture, tables)
        state = state_file or cfg.state.path / f"snapshot-{table_name}.json"
        state.parent.mkdir(parents=True, exist_ok=True)
        sink = KafkaSink(kafka_client(cfg.kafka, reach=True), cfg.kafka.topic_prefix,
                         cfg.kafka.partitions, cfg.kafka.replication_factor,
                         cfg.kafka.producer, Registry())
        job = Snapshot(session, tables[0], sink, cfg.kafka.topic_prefix, state, consistency,
                       splits, rate, host=cfg.node.host, datacenter=cfg.node.datacenter,
                       capture=capture, reset=reset)

        def report(p) -> None:
            sys.stderr.write("\r" + p.line())
            sys.stderr.flush()

        try:
            progress = job.run(report)
        except ValueError as exc:
            raise click.ClickException(str(exc)) from exc
        sys.stderr.write("\n")
        if job.reset_now:
            click.echo(f"reset of {table_name} published at {job.reset_at_ms} ms")
        click.echo(f"snapshot of {table_name}: {progress.rows:,} rows published, "
                   f"{progress.ranges_done}/{progress.ranges_total} ranges done ({state})")
    finally:
        cluster.shutdown()
