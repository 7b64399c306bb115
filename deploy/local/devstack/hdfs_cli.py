"""`stack hdfs ...`: a real HDFS on loopback (a NameNode and a DataNode)."""

from __future__ import annotations

import sys

import click

from devstack import hdfs as hdfs_daemons
from devstack.cli_common import run, settings
from devstack.process import tail


@click.group(name="hdfs")
def hdfs() -> None:
    """A real HDFS on loopback for a checkpoint on hdfs:// as a cluster has: a NameNode
    (hdfs://127.0.0.1:9820, web UI 9870) and a DataNode, run from Apache Hadoop's jars on
    Maven Central (the version of the pyspark wheel's Hadoop client) with Java 17.

    Point the job at it with spark.checkpoint=hdfs://127.0.0.1:9820/PATH; Spark's own Hadoop
    client (in the pyspark wheel) reaches it, no other jar needed. A client that wants the
    site files reads HADOOP_CONF_DIR=.casscade/hdfs/conf.

    State (name/, data/, conf/, logs/, pid files) lives in .casscade/hdfs/ (or
    $CASSCADE_STATE_DIR/hdfs). Ports: CASSCADE_HDFS_PORT moves all five together.
    """


@hdfs.command()
def up() -> None:
    """Start the NameNode and the DataNode not running yet and wait until the file system
    serves (a live DataNode, out of safe mode)."""
    run(hdfs_daemons.up, settings())


@hdfs.command()
def down() -> None:
    """Stop the DataNode, then the NameNode, by pid file."""
    stopped = run(hdfs_daemons.down, settings())
    click.echo(f"stopped: {', '.join(stopped)}" if stopped else "nothing was running")


@hdfs.command()
def status() -> None:
    """Say what runs. Exit code 0 when both daemons run and the file system serves, 3
    otherwise."""
    rows = hdfs_daemons.status(settings())
    for name, desc in rows:
        click.echo(f"{name:10} {desc}")
    serving = any(name == "fs" and "Operational" in desc for name, desc in rows)
    sys.exit(0 if serving and all(d.startswith("running") for _, d in rows[:2]) else 3)


@hdfs.command()
@click.argument("daemon", type=click.Choice(sorted(hdfs_daemons.DAEMONS)))
@click.argument("action", type=click.Choice(["stop", "kill", "start"]))
def daemon(daemon: str, action: str) -> None:
    """Stop (SIGTERM), kill (SIGKILL) or start the namenode or the datanode; `start` waits
    until the file system serves."""
    s = settings()
    if action == "start":
        started = run(hdfs_daemons.start_daemon, s, daemon)
        click.echo(f"{daemon}: {'started' if started else 'already running'}")
        return
    done = run(hdfs_daemons.kill_daemon if action == "kill" else hdfs_daemons.stop_daemon,
               s, daemon)
    click.echo(f"{daemon}: {action + 'ed' if action == 'kill' else 'stopped'}" if done
               else f"{daemon}: not running")


@hdfs.command(context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
@click.option("--user", default=None, help="Act as this HDFS user (default: yours, the "
                                           "superuser when you started the NameNode).")
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def fs(user: str | None, args: tuple[str, ...]) -> None:
    """Run `hadoop fs ARGS` against it, e.g. `fs -ls -R /` or `fs -mkdir -p /casscade`."""
    s = settings()
    click.echo(run(lambda: hdfs_daemons.fs(s, *args, user=user)), nl=False)


@hdfs.command()
@click.argument("name", default="all")
@click.option("-n", "--lines", default=40, show_default=True, help="Lines per log file.")
def logs(name: str, lines: int) -> None:
    """Print the tail of the daemons' logs. NAME: namenode, datanode or all."""
    s = settings()
    for d in hdfs_daemons.DAEMONS:
        if name in (d, "all"):
            click.echo(f"==> {hdfs_daemons.log_file(s, d)} <==")
            click.echo(tail(hdfs_daemons.log_file(s, d), lines))
