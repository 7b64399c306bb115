"""`casscade publisher ...`: the node agent's commands."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from publisher.cli_support import kafka_client, load_publisher_config
from publisher.commitlog.errors import CommitLogError
from publisher.commitlog.schema_source import (
    CassandraSchemaSource,
    FileSchemaSource,
    SchemaSource,
    read_system_schema,
)
from shared.capture import CaptureError
from shared.cli_config import captured_rules, check_capture, config_option, set_option
from shared.reach import connect_cassandra, connect_cassandra_at


@click.group(name="publisher")
def publisher() -> None:
    """The node agent: reads CDC commit log segments, publishes row updates to Kafka.

    `run` is the agent; `status` asks a running one what it is doing; `dump` decodes one
    segment to JSON lines; `schema` exports the schema file `dump --schema` reads.
    """



_CONFIG = config_option("deploy/publisher.yaml")
_SET = set_option
# `dump` and `schema` reach a locked cluster through the agent's own `cassandra` section
_CASSANDRA_CONFIG = click.option(
    "--config", "config_file", type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Read the schema from the cluster the agent's config names (its `cassandra` "
         "section: contact points, port, username and password, TLS; example: "
         "deploy/publisher.yaml).")


def _schema_session(config_file: Path | None, overrides: tuple[str, ...], host: str | None,
                    port: int) -> tuple[Any, Any]:
    """A CQL cluster and session: through the config's `cassandra` section when a config
    (or --set) is given, else to `host`:`port` without authentication."""
    if config_file is not None or overrides:
        return connect_cassandra(load_publisher_config(config_file, overrides).cassandra)
    return connect_cassandra_at(host or "127.0.0.1", port)


@publisher.command()
@click.argument("segment", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--schema", "schema_file", type=click.Path(exists=True, dir_okay=False,
                                                         path_type=Path),
              help="JSON schema file (format: docs/commitlog-dump.md); see `publisher schema`.")
@click.option("--cassandra", "host", help="Read the schema from this node's system_schema "
                                           "(no authentication or TLS: see --config).")
@click.option("--port", default=9042, show_default=True, help="CQL port for --cassandra.")
@_CASSANDRA_CONFIG
@_SET
@click.option("--from-offset", type=int, default=0, show_default=True,
              help="Resume: print only mutations whose end position is after this offset.")
@click.option("--until-offset", type=int, default=None,
              help="Read no further than this logical offset (a live segment's _cdc.idx "
                   "offset). Default: to the end of valid data.")
@click.option("--skip-unknown", is_flag=True,
              help="Skip (and count) mutations of tables the schema does not know, instead of "
                   "stopping at the first one.")
def dump(segment: Path, schema_file: Path | None, host: str | None, port: int,
         config_file: Path | None, overrides: tuple[str, ...], from_offset: int,
         until_offset: int | None, skip_unknown: bool) -> None:
    """Decode a commit log SEGMENT and print every mutation as one JSON line.

    Each line holds the keyspace, the partition updates (table, partition key, static row,
    rows with clustering, liveness, deletions and cells with decoded values, timestamps and
    TTLs, range tombstones) and the mutation's position. A summary goes to stderr. Exit code
    1 when the segment is damaged or (without --skip-unknown) names an unknown table; the
    message gives the file and offset.
    """
    from publisher.commitlog.dump import mutation_to_json
    from publisher.commitlog.reader import CommitLogReader

    given = [schema_file is not None, host is not None,
             config_file is not None or bool(overrides)]
    if sum(given) != 1:
        raise click.UsageError("give exactly one of --schema FILE, --cassandra HOST or "
                               "--config FILE")
    cluster = None
    source: SchemaSource
    if schema_file is not None:
        try:
            source = FileSchemaSource(schema_file)
        except ValueError as exc:
            raise click.ClickException(str(exc)) from exc
    else:
        cluster, session = _schema_session(config_file, overrides, host, port)
        source = CassandraSchemaSource(session)
    reader = CommitLogReader(source, skip_unknown=skip_unknown)
    count = rows = 0
    error: CommitLogError | None = None
    out = sys.stdout
    try:
        for mutation in reader.read(segment, until=until_offset, resume_from=from_offset):
            out.write(json.dumps(mutation_to_json(mutation, str(segment))) + "\n")
            count += 1
            rows += sum(len(u.rows) + (u.static_row is not None) for u in mutation.updates)
    except CommitLogError as exc:
        error = exc
    finally:
        if cluster is not None:
            cluster.shutdown()
    skipped = sum(reader.skipped.values())
    summary = f"{count} mutations, {rows} rows"
    if skipped:
        summary += (f"; skipped {skipped} mutations of {len(reader.skipped)} unknown table(s): "
                    + ", ".join(f"{t} x{n}" for t, n in reader.skipped.most_common()))
    click.echo(summary, err=True)
    if error is not None:
        click.echo(f"error ({error.kind}): {error}", err=True)
        sys.exit(1)


@publisher.command()
@click.option("--cassandra", "host", default="127.0.0.1", show_default=True,
              help="The node to read (no authentication or TLS: see --config).")
@click.option("--port", default=9042, show_default=True, help="CQL port for --cassandra.")
@_CASSANDRA_CONFIG
@_SET
def schema(host: str, port: int, config_file: Path | None, overrides: tuple[str, ...]) -> None:
    """Print the node's schema (every table, dropped columns, UDTs) as a JSON schema file."""
    cluster, session = _schema_session(config_file, overrides, host, port)
    try:
        click.echo(json.dumps(read_system_schema(session), indent=1))
    finally:
        cluster.shutdown()


@publisher.command()
@_CONFIG
@_SET
@click.option("--print-config", is_flag=True, help="Print the effective config and exit.")
def run(config_file: Path | None, overrides: tuple[str, ...], print_config: bool) -> None:
    """Run the node agent: follow cdc_raw, publish every CDC row update to Kafka, delete
    (or archive) each segment once it is COMPLETED and fully acknowledged.

    Stops cleanly on SIGTERM/SIGINT: waits (up to 30 s) for in-flight records and saves
    its position; a restart resumes from the last acknowledged position (at-least-once).
    """
    import signal

    from publisher.agent.agent import Agent
    from publisher.agent.offset_store import OffsetStore, StateInUse
    from publisher.agent.truncations import NodeTruncationRecords
    from publisher.kafka_sink import KafkaSink
    from shared.config import to_dict
    from shared.http_server import serve
    from shared.logs import setup_logging
    from shared.metrics import Registry

    cfg = load_publisher_config(config_file, overrides)
    if print_config:
        click.echo(json.dumps(to_dict(cfg), indent=1))
        return
    setup_logging(cfg.log.level, cfg.log.format)
    if not cfg.cdc.cdc_raw.is_dir():
        raise click.ClickException(f"cdc.cdc_raw {cfg.cdc.cdc_raw} is not a directory")
    try:  # first: a second agent on the same state is refused before it connects anywhere
        store = OffsetStore(cfg.state.path / "offsets")
    except StateInUse as exc:
        raise click.ClickException(str(exc)) from None
    capture = captured_rules(cfg)
    cluster = None
    source: SchemaSource
    truncations = None
    if cfg.cassandra.schema_file is not None:
        source = FileSchemaSource(cfg.cassandra.schema_file)
    else:
        # its own node only: on a ring of N nodes N agents would otherwise each hold
        # connections to every node, and log each other node that is down
        cluster, session = connect_cassandra(cfg.cassandra, pinned=True)
        source = CassandraSchemaSource(session)
        truncations = NodeTruncationRecords(session, cfg.cassandra.contact_points[0])
    check_capture(capture, source.tables.values())
    metrics = Registry()
    sink = KafkaSink(kafka_client(cfg.kafka, reach=True), cfg.kafka.topic_prefix,
                     cfg.kafka.partitions, cfg.kafka.replication_factor, cfg.kafka.producer,
                     metrics)
    agent = Agent(cfg, source, sink, store, metrics, truncations)
    # /health fails only for an agent stuck: its loop, or a wait for Kafka, goes round
    http = serve(cfg.http.host, cfg.http.port, metrics, agent.status,
                 lambda: max(agent.last_loop, sink.alive_at)) if cfg.http.port else None
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: agent.stop.set())
    try:
        agent.run()
        if agent.failed is not None:
            raise click.ClickException(
                f"Kafka refused a record for good ({agent.failed}): stopped with progress "
                "saved up to the last acknowledged record; the next start makes the raw "
                "topic if it is gone and reads on from there")
    except CaptureError as exc:  # a table created since the start, with a rule that cannot
        # apply to it: its records stay in cdc_raw until the rule is mended
        raise click.ClickException(f"capture: {exc}") from None
    finally:
        if http is not None:
            http.shutdown()
        store.close()
        if cluster is not None:
            cluster.shutdown()


@publisher.command()
@_CONFIG
@_SET
def status(config_file: Path | None, overrides: tuple[str, ...]) -> None:
    """Print the agent's current segment, positions and lag (from its /status endpoint,
    or from its offset store when it is not running)."""
    import urllib.request

    from publisher.agent.offset_store import OffsetStore
    from shared.http_server import local_url

    cfg = load_publisher_config(config_file, overrides)
    url = local_url(cfg.http.host, cfg.http.port, "/status")
    try:
        with urllib.request.urlopen(url, timeout=3) as resp:
            doc = json.loads(resp.read())
    except OSError:
        click.echo(f"agent not answering on {url}; saved progress:")
        path = cfg.state.path / "offsets"
        if not path.exists():
            raise click.ClickException(f"no offset store at {path}") from None
        store = OffsetStore(path, read_only=True)
        try:
            for seg_id, state in sorted(store.segments().items()):
                click.echo(f"  segment {seg_id}: acknowledged up to {state.watermark}, "
                           f"kept back {len(state.kept_back)}")
        finally:
            store.close()
        return
    current = doc.get("current") or {}
    click.echo(f"current segment: {current.get('segment', '-')}  "
               f"read {current.get('read_position')}  acked {current.get('acked_position')}  "
               f"synced {current.get('synced_offset')}")
    click.echo(f"lag: {doc['lag_bytes']:.0f} bytes, {doc['lag_seconds']:.1f} s; "
               f"in flight: {doc['in_flight_records']} records")
    for seg_id, seg in doc["segments"].items():
        extra = f", DAMAGED: {seg['damaged']}" if seg["damaged"] else ""
        click.echo(f"  segment {seg_id}: acked {seg['acked_position']}, read "
                   f"{seg['read_position']}, kept back {seg['kept_back']}{extra}")
