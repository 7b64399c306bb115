"""`casscade publisher ...`: the node agent's commands."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from publisher.commitlog.errors import CommitLogError
from publisher.schema_source import (
    CassandraSchemaSource,
    FileSchemaSource,
    SchemaSource,
    read_system_schema,
)


@click.group(name="publisher")
def publisher() -> None:
    """The node agent: reads CDC commit log segments, publishes row updates to Kafka.

    So far: `dump` (decode a segment to JSON lines) and `schema` (export the schema file
    `dump --schema` reads). The agent itself (`run`) comes with issue 4.
    """


def _connect(host: str, port: int):
    from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
    from cassandra.policies import RoundRobinPolicy

    profile = ExecutionProfile(load_balancing_policy=RoundRobinPolicy(), request_timeout=30)
    cluster = Cluster([host], port=port, execution_profiles={EXEC_PROFILE_DEFAULT: profile})
    try:
        return cluster, cluster.connect()
    except Exception as exc:
        cluster.shutdown()
        raise click.ClickException(f"cannot connect to Cassandra at {host}:{port}: {exc}") \
            from exc


@publisher.command()
@click.argument("segment", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--schema", "schema_file", type=click.Path(exists=True, dir_okay=False,
                                                         path_type=Path),
              help="JSON schema file (format: README, 'Schema file'); see `publisher schema`.")
@click.option("--cassandra", "host", help="Read the schema from this node's system_schema.")
@click.option("--port", default=9042, show_default=True, help="CQL port for --cassandra.")
@click.option("--from-offset", type=int, default=0, show_default=True,
              help="Resume: print only mutations whose end position is after this offset.")
@click.option("--until-offset", type=int, default=None,
              help="Read no further than this logical offset (a live segment's _cdc.idx "
                   "offset). Default: to the end of valid data.")
@click.option("--skip-unknown", is_flag=True,
              help="Skip (and count) mutations of tables the schema does not know, instead of "
                   "stopping at the first one.")
def dump(segment: Path, schema_file: Path | None, host: str | None, port: int,
         from_offset: int, until_offset: int | None, skip_unknown: bool) -> None:
    """Decode a commit log SEGMENT and print every mutation as one JSON line.

    Each line holds the keyspace, the partition updates (table, partition key, static row,
    rows with clustering, liveness, deletions and cells with decoded values, timestamps and
    TTLs, range tombstones) and the mutation's position. A summary goes to stderr. Exit code
    1 when the segment is damaged or (without --skip-unknown) names an unknown table; the
    message gives the file and offset.
    """
    from publisher.commitlog.reader import CommitLogReader
    from publisher.dump import mutation_to_json

    if (schema_file is None) == (host is None):
        raise click.UsageError("give exactly one of --schema FILE or --cassandra HOST")
    cluster = None
    source: SchemaSource
    if schema_file is not None:
        try:
            source = FileSchemaSource(schema_file)
        except ValueError as exc:
            raise click.ClickException(str(exc)) from exc
    else:
        cluster, session = _connect(host or "", port)
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
@click.option("--cassandra", "host", default="127.0.0.1", show_default=True)
@click.option("--port", default=9042, show_default=True)
def schema(host: str, port: int) -> None:
    """Print the node's schema (every table, dropped columns, UDTs) as a JSON schema file."""
    cluster, session = _connect(host, port)
    try:
        click.echo(json.dumps(read_system_schema(session), indent=1))
    finally:
        cluster.shutdown()
