"""`stack spark ...`: the local Spark standalone cluster (a master and one-core workers)."""

from __future__ import annotations

import sys

import click

from devstack import spark_cluster
from devstack.cli_common import run, settings
from devstack.process import tail


@click.group(name="spark")
def spark() -> None:
    """A Spark standalone cluster on loopback, run from the pip-installed pyspark (no Spark
    download): a master on spark://127.0.0.1:7077 (web UI and /json/ on 8080) and workers
    of one core and 1 GiB each (UI on 8081, 8082, ...). Executors' Python workers run this
    venv's python, so casscade's dependencies import.

    Submit to it with `deploy/spark/submit.sh --master spark://127.0.0.1:7077 -- ARGS`.

    State (pid files, logs/, conf/log4j2.properties, worker-n/work with the executors'
    logs) lives in .casscade/spark/ (or $CASSCADE_STATE_DIR/spark). Ports and sizes:
    CASSCADE_SPARK_MASTER_PORT, CASSCADE_SPARK_MASTER_UI_PORT, CASSCADE_SPARK_WORKER_UI_PORT
    (worker n: + n - 1), CASSCADE_SPARK_WORKER_MEMORY (1g), CASSCADE_SPARK_DAEMON_MEMORY
    (heap of the master and worker JVMs, 256m).
    """


@spark.command()
@click.option("--workers", type=click.IntRange(1, spark_cluster.MAX_WORKERS), default=2,
              show_default=True, help="Workers to run, one core each.")
def up(workers: int) -> None:
    """Start the master and the workers not running yet (what runs is reused) and wait
    until the master lists every worker ALIVE; prints how long it took."""
    run(spark_cluster.up, settings(), workers)


@spark.command()
def down() -> None:
    """Stop the workers (and their executors), then the master, by pid file."""
    stopped = run(spark_cluster.down, settings())
    click.echo(f"stopped: {', '.join(stopped)}" if stopped else "nothing was running")


@spark.command()
def status() -> None:
    """Say what runs, as the pid files and the master's /json/ see it. Exit code 0 when the
    master and every worker run (the master lists them ALIVE), 3 otherwise."""
    rows = spark_cluster.status(settings())
    for name, desc in rows:
        click.echo(f"{name:10} {desc}")
    sys.exit(0 if all(desc.startswith("running") for _, desc in rows) else 3)


@spark.command()
@click.argument("n", type=click.IntRange(1, spark_cluster.MAX_WORKERS))
@click.argument("action", type=click.Choice(["stop", "kill", "start"]))
def worker(n: int, action: str) -> None:
    """Stop (SIGTERM), kill (SIGKILL with its executors: a lost machine) or start worker N.
    `start` waits until the master lists it ALIVE."""
    s = settings()
    if action == "start":
        started = run(spark_cluster.start_worker, s, n)
        click.echo(f"worker {n}: {'started' if started else 'already running'}")
        return
    done = run(spark_cluster.kill_worker if action == "kill" else spark_cluster.stop_worker,
                s, n)
    click.echo(f"worker {n}: {'killed' if action == 'kill' else 'stopped'}" if done
               else f"worker {n}: not running")


@spark.command()
@click.argument("name", default="all")
@click.option("-n", "--lines", default=40, show_default=True, help="Lines per log file.")
def logs(name: str, lines: int) -> None:
    """Print the tail of the master's and workers' logs. NAME: master, worker-1, ... or all.
    Executors log to .casscade/spark/worker-n/work/APP/EXEC/stderr."""
    s = settings()
    for log in sorted((spark_cluster.spark_dir(s) / "logs").glob("*.log")):
        if name in (log.stem, "all"):
            click.echo(f"==> {log} <==")
            click.echo(tail(log, lines))


if __name__ == "__main__":
    spark()
