"""`make soak` (python -m soak, with tests/ on the path): the pipeline at RF=3 under a
random workload and random faults, then `casscade verify` and the stream checks; one report.

    make soak SOAK_ARGS="--statements 200000 --fault-every 40 --master cluster --seed 7"

The seed is printed first: the same seed draws the same fault times, kinds and targets and
the same node and consistency level for each statement; the statements themselves are
hypothesis's draws, and what a fault meets depends on timing, so a replay is close, not
exact.
"""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import click

from devstack.process import StackError
from devstack.settings import StackSettings, repo_root
from soak.faults import KINDS, Injector
from soak.load import run_load
from soak.rig import WORKERS, Rig
from soak.stream_checks import stream_counts

from support.workload import create_workload_tables

RF3 = "{'class': 'SimpleStrategy', 'replication_factor': 3}"
TABLES = ("r", "ctr")


@click.command()
@click.option("--statements", default=200_000, show_default=True,
              help="Random statements to write (fewer if --duration ends first).")
@click.option("--duration", "duration_s", default=0.0, show_default=True,
              help="Stop writing after this many seconds (0: when --statements are done).")
@click.option("--faults", "fault_target", default=0, show_default=True,
              help="Stop writing once this many faults are done (0: no such limit); "
                   "whichever of --statements, --duration and --faults comes first ends "
                   "the writes.")
@click.option("--fault-every", "every_s", default=40.0, show_default=True,
              help="Mean seconds between faults (a fifth of them are flushes and schema "
                   "changes instead).")
@click.option("--seed", type=int, default=None, help="Seed of statements and faults.")
@click.option("--master", type=click.Choice(["local", "cluster"]), default="local",
              show_default=True, help="The job on local[2], or on the stack's Spark "
                                       "standalone cluster (worker faults need it).")
@click.option("--delivery", type=click.Choice(["exactly-once", "at-least-once"]),
              default="exactly-once", show_default=True,
              help="The job's events.delivery; exactly-once fails the soak on any duplicate "
                   "event.")
@click.option("--workers", default=4, show_default=True, help="Statements in flight.")
@click.option("--partitions", default=500, show_default=True,
              help="Values of the partition key's first column (keys: 36 rows each).")
@click.option("--work", type=click.Path(path_type=Path), default=None,
              help="Where the ring, the agents and the job keep their state (default: "
                   ".casscade/soak/<seed>).")
@click.option("--keep", is_flag=True, help="Leave everything running at the end.")
def main(statements: int, duration_s: float, fault_target: int, every_s: float,
         seed: int | None, master: str, delivery: str, workers: int, partitions: int,
         work: Path | None, keep: bool) -> None:
    """Soak the pipeline under faults and print one report (exit 1 on any mismatch)."""
    # a SIGTERM ends the run as Ctrl-C does: through the finally below, which stops the
    # ring, the agents and the job it started (Python's default would leave them running)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    seed = seed if seed is not None else random.SystemRandom().randrange(10**6)
    kinds = KINDS if master == "cluster" else tuple(k for k in KINDS if k != "worker")
    print(f"[soak] seed {seed}: replay with --seed {seed} --master {master} --statements "
          f"{statements} --fault-every {every_s:g} --duration {duration_s:g} "
          f"--delivery {delivery}"
          + (f" --faults {fault_target}" if fault_target else ""), flush=True)
    stack = StackSettings.from_env()
    work = work or stack.state_dir / "soak" / str(seed)
    work.mkdir(parents=True, exist_ok=True)
    rig = Rig(stack, work, f"soak{uuid.uuid4().hex[:6]}", master, delivery)
    started = time.monotonic()
    injector: Injector | None = None
    ok = False
    try:
        try:
            rig.up()
        except StackError as exc:
            raise click.ClickException(str(exc)) from None
        ks = f"soak_{uuid.uuid4().hex[:8]}"
        rig.truth.execute(f"CREATE KEYSPACE {ks} WITH replication = {RF3}")
        create_workload_tables(rig.truth, ks)
        stop = threading.Event()
        injector = Injector(rig, ks, seed, every_s, kinds, fault_target, stop)
        if duration_s:
            timer = threading.Timer(duration_s, stop.set)
            timer.daemon = True  # an interrupted run must not wait for it
            timer.start()
        injector.start()
        last = [time.monotonic()]

        def progress(n: int) -> None:
            if time.monotonic() - last[0] > 60:
                last[0] = time.monotonic()
                print(f"[soak] {n:,} statements, {time.monotonic() - started:.0f}s, faults "
                      f"{dict(injector.log.faults)}", flush=True)

        load = run_load(rig.sessions, ks, statements, seed, lambda: rig.down, partitions,
                        workers, stop, progress)
        injector.stop.set()
        injector.join()
        _everything_up(rig)
        settle_s = rig.settle(ks)
        verified = _verify(rig, ks)
        counts = {t: stream_counts(rig.ring.bootstrap_servers, f"{rig.prefix}.{ks}.{t}")
                  for t in TABLES}
        report = _report(seed, master, load, injector, verified, counts, settle_s,
                         time.monotonic() - started) | {"delivery": delivery}
        (work / "report.json").write_text(json.dumps(report, indent=1))
        _print(report)
        ok = (verified["exit_code"] == 0 and not injector.log.failed
              and not any(c.no_ops or c.broken_chains for c in counts.values())
              and (delivery != "exactly-once"
                   or not any(c.duplicates for c in counts.values())))
    finally:
        if injector is not None:  # a fault half done must not start a part after the end
            injector.stop.set()
            injector.join(300)
        if not keep:
            rig.down_all()
    sys.exit(0 if ok else 1)


def _everything_up(rig: Rig) -> None:
    """Whatever a fault left down (none should be): started again before the end."""
    from devstack import kafka
    from devstack import spark_cluster as cluster
    from devstack.process import read_pid

    for n in sorted(rig.down):
        rig.start_node(n)
    if kafka.running_pid(rig.stack) is None:
        rig.start_broker()
    for n, agent in rig.publishers.agents.items():
        if agent.proc is None or agent.proc.poll() is not None:
            rig.start_publisher(n)
    if rig.master == "cluster":
        for n in WORKERS:
            if read_pid(cluster.pid_file(rig.stack, f"worker-{n}")) is None:
                rig.start_worker(n)
    if rig.job is None or rig.job.poll() is not None:
        rig.start_job()


def _verify(rig: Rig, ks: str) -> dict:
    """`casscade verify` of the soak's tables, as an operator runs it (JSON report)."""
    out = subprocess.run(
        [sys.executable, "-m", "casscade.cli", "verify", "--json", "--grace", "15",
         "--rechecks", "4", *(a for t in TABLES for a in ("--table", f"{ks}.{t}")),
         *(a for kv in [f"cassandra.port={rig.ring.cql_port}",
                        f"kafka.bootstrap_servers={rig.ring.bootstrap_servers}",
                        f"kafka.topic_prefix={rig.prefix}", "log.format=text"]
           for a in ("--set", kv))],
        cwd=repo_root(), capture_output=True, text=True, timeout=3600)
    (rig.work / "verify.json").write_text(out.stdout)
    (rig.work / "verify.err").write_text(out.stderr)
    if not out.stdout.strip():
        raise RuntimeError(f"verify failed ({out.returncode}): {out.stderr[-3000:]}")
    return json.loads(out.stdout)


def _report(seed: int, master: str, load, injector: Injector, verified: dict, counts: dict,
            settle_s: float, seconds: float) -> dict:
    tables = {t["table"].split(".")[1]: t for t in verified["tables"]}
    keys = sum(sum(t["counts"].values()) for t in verified["tables"])
    equal = sum(t["counts"]["equal"] for t in verified["tables"])
    return {
        "seed": seed, "master": master, "seconds": round(seconds),
        "settle_seconds": round(settle_s),
        "statements": load.executed, "statements_per_s": round(load.executed / load.seconds, 1),
        "outcome_unknown": dict(load.unknown + injector.log.unknown),
        "faults": dict(injector.log.faults), "extras": dict(injector.log.extras),
        "fault_failures": injector.log.failed, "fault_log": injector.log.lines,
        "tables": {name: {"changes": c.changes, "events": c.events,
                          "duplicates": c.duplicates, "no_ops": len(c.no_ops),
                          "broken_chains": len(c.broken_chains),
                          "verify": tables[name]["counts"],
                          "differences": tables[name]["differences"][:3]}
                   for name, c in counts.items()},
        "keys": keys, "keys_equal": equal,
        "keys_equal_pct": round(100 * equal / keys, 3) if keys else 0.0,
        "verify_exit_code": verified["exit_code"],
    }


def _print(r: dict) -> None:
    print("\n=== soak report ===")
    print(f"seed {r['seed']}, master {r['master']}, {r['delivery']}, {r['seconds']:,} s "
          f"(settling at the end {r['settle_seconds']} s)")
    print(f"statements {r['statements']:,} ({r['statements_per_s']}/s); outcome unknown "
          f"{sum(r['outcome_unknown'].values()):,} {r['outcome_unknown']}")
    print(f"faults {sum(r['faults'].values())} {r['faults']}; extras {r['extras']}; "
          f"failed fault steps {len(r['fault_failures'])}")
    for name, t in r["tables"].items():
        print(f"{name}: changes {t['changes']:,}, events {t['events']:,}, duplicates "
              f"{t['duplicates']:,}, no-op events {t['no_ops']}, broken before-chains "
              f"{t['broken_chains']}, verify {t['verify']}")
    print(f"keys equal {r['keys_equal']:,} of {r['keys']:,} ({r['keys_equal_pct']} %), "
          f"verify exit {r['verify_exit_code']}")


if __name__ == "__main__":
    main()
