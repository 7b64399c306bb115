"""`casscade dev ...` / `deploy/local/stack ...`: run the local Kafka + Cassandra stack."""

from __future__ import annotations

import sys

import click

from shared.devstack import cassandra, stack
from shared.devstack.process import StackError, tail
from shared.devstack.settings import StackSettings


def _settings() -> StackSettings:
    try:
        return StackSettings.from_env()
    except RuntimeError as exc:
        raise click.ClickException(str(exc)) from exc


def _run(fn, *args):
    try:
        return fn(*args)
    except StackError as exc:
        raise click.ClickException(str(exc)) from exc


@click.group(name="dev")
def dev() -> None:
    """Local stack on loopback: Kafka 4 (KRaft, 127.0.0.1:9092) and Cassandra 5.0 with CDC
    (CQL 127.0.0.1:9042, JMX 7199), both run from Maven Central jars with Java 17.

    State (jars, data, commit logs, cdc_raw, logs, pid files) lives in .casscade/ of the
    checkout, or CASSCADE_STATE_DIR. Ports: CASSCADE_KAFKA_PORT, CASSCADE_CQL_PORT, ...
    """


@dev.command()
def fetch() -> None:
    """Resolve Kafka, Cassandra and spark-sql-kafka jars from Maven Central (cached)."""
    sizes = _run(stack.fetch, _settings())
    for name, mb in sizes.items():
        click.echo(f"{name:12} {mb:7.1f} MB")


@dev.command()
def up() -> None:
    """Start Kafka and Cassandra (what is already running is reused) and wait until ready."""
    _run(stack.up, _settings())


@dev.command()
def down() -> None:
    """Stop the processes `up` started, by pid file (drains Cassandra first)."""
    _run(stack.down, _settings())


@dev.command()
def status() -> None:
    """Say what runs where. Exit code 0 when both services run, 3 otherwise."""
    rows = stack.status(_settings())
    for name, desc in rows:
        click.echo(f"{name:10} {desc}")
    running = sum(1 for name, desc in rows[:2] if desc.startswith("running"))
    sys.exit(0 if running == 2 else 3)


@dev.command()
@click.argument("service", type=click.Choice(["kafka", "cassandra", "all"]), default="all")
@click.option("-n", "--lines", default=40, show_default=True, help="Lines per log file.")
def logs(service: str, lines: int) -> None:
    """Print the tail of each service's log (and where the full logs are)."""
    for name, files in stack.log_files(_settings()).items():
        if service not in (name, "all"):
            continue
        for path in files:
            click.echo(f"==> {path} <==")
            click.echo(tail(path, lines))


@dev.command(context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def nodetool(args: tuple[str, ...]) -> None:
    """Run nodetool against the local node, e.g. `nodetool flush ks table`."""
    click.echo(_run(cassandra.nodetool, _settings(), *args), nl=False)


def main() -> None:
    """Entry point of deploy/local/stack."""
    dev(prog_name="stack")


if __name__ == "__main__":
    main()
