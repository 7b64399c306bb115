"""`stack connect ...`: Kafka Connect with Debezium's JDBC sink, and PostgreSQL to sink into."""

from __future__ import annotations

import sys

import click

from devstack import connect as worker
from devstack import postgres
from devstack.cli_common import run, settings
from devstack.process import tail


@click.group(name="connect")
def connect() -> None:
    """Kafka Connect (standalone worker, REST on 127.0.0.1:8083) with Debezium's JDBC sink
    and Apicurio's Avro converter on its plugin path, and a PostgreSQL server
    (127.0.0.1:5433, database and superuser `casscade`, trusted on loopback, with hstore) to
    sink into.

    The jars come from Maven Central like the rest of the stack (<lib>/connect and
    <lib>/connect-plugins/{debezium-jdbc,apicurio-converter}); PostgreSQL is the system's (Debian:
    postgresql + postgresql-contrib). State: .casscade/connect/ (worker.properties, offsets,
    logs) and .casscade/postgres/ (data, logs). Ports: CASSCADE_CONNECT_PORT,
    CASSCADE_POSTGRES_PORT. Kafka must be up (`stack up`).
    """


@connect.command()
def up() -> None:
    """Start PostgreSQL and the Connect worker (what runs is reused); returns when the
    worker lists the JDBC sink."""
    s = settings()
    pg = run(postgres.up, s)
    click.echo(f"postgresql: {'started' if pg else 'already running'} on "
               f"{postgres.url(s)}")
    started = run(worker.up, s, click.echo)
    click.echo(f"connect: {'started' if started else 'already running'} on "
               f"{worker.rest_url(s)}")


@connect.command()
def down() -> None:
    """Stop the Connect worker, then PostgreSQL."""
    s = settings()
    stopped = [name for name, done in (("connect", run(worker.down, s)),
                                       ("postgresql", run(postgres.down, s))) if done]
    click.echo(f"stopped: {', '.join(stopped)}" if stopped else "nothing was running")


@connect.command()
def status() -> None:
    """Say what runs and each connector's state. Exit code 0 when the worker and
    PostgreSQL run, 3 otherwise."""
    s = settings()
    pid, pg = worker.running_pid(s), postgres.running(s)
    where = f"running (pid {pid}) on {worker.rest_url(s)}" if pid else "stopped"
    click.echo(f"connect    {where}")
    click.echo(f"postgresql {'running on ' + postgres.url(s) if pg else 'stopped'}")
    if pid:
        for name in run(worker.request, s, "GET", "/connectors"):
            st = run(worker.connector_status, s, name)
            tasks = ", ".join(t["state"] for t in st["tasks"]) or "no tasks"
            click.echo(f"  {name}: {st['connector']['state']} (tasks: {tasks})")
    sys.exit(0 if pid and pg else 3)


@connect.command()
@click.option("--prefix", default="casscade", show_default=True,
              help="The materializer's kafka.topic_prefix.")
@click.option("--keyspace", required=True, help="Sink every event topic of this keyspace.")
@click.option("--name", default=None, help="Connector name (default pg-<prefix>-<keyspace>).")
@click.option("--avro", is_flag=True,
              help="The events are Avro through the stack's registry (the materializer's "
                   "events.format=avro, events.schema_registry_url=<stack registry url>): "
                   "read them with Apicurio's AvroConverter "
                   "(deploy/connect/avro-apicurio-converters.json).")
def sink(prefix: str, keyspace: str, name: str | None, avro: bool) -> None:
    """Register Debezium's JDBC sink (deploy/connect/jdbc-sink-postgres.json) for the event
    topics <prefix>.<keyspace>.* into the stack's PostgreSQL; one table per topic, named
    after it (dots as underscores). Run the materializer with the settings of
    deploy/connect/materializer-relational.yaml for these topics."""
    s = settings()
    config = worker.sink_config(s, prefix, keyspace, avro=avro)
    name = name or f"pg-{prefix}-{keyspace}"
    run(worker.put_connector, s, name, config)
    click.echo(f"{name}: {config['topics.regex']} -> {postgres.url(s)}")


@connect.command()
@click.option("-n", "--lines", default=40, show_default=True, help="Lines per log file.")
def logs(lines: int) -> None:
    """Print the tail of the worker's and PostgreSQL's logs."""
    s = settings()
    for log in (worker.log_file(s), postgres.log_file(s)):
        click.echo(f"==> {log} <==")
        click.echo(tail(log, lines))
