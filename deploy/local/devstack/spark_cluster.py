"""A Spark standalone cluster on loopback (one master, N one-core workers) from the pip pyspark."""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import time
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from devstack import artifacts, process
from devstack.process import StackError, read_pid, require_free_ports, tail
from devstack.settings import HOST, StackSettings, repo_root

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
MAX_WORKERS = 8
DAEMON_JVM_OPTS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
PORT_VARS = {"master_port": "CASSCADE_SPARK_MASTER_PORT",
             "master_ui_port": "CASSCADE_SPARK_MASTER_UI_PORT",
             "worker_ui_port": "CASSCADE_SPARK_WORKER_UI_PORT"}
SIZE_VARS = {"worker_memory": "CASSCADE_SPARK_WORKER_MEMORY",
             "daemon_memory": "CASSCADE_SPARK_DAEMON_MEMORY"}


@dataclass(frozen=True)
class ClusterConfig:
    """Ports and sizes of the cluster: CASSCADE_SPARK_* environment variables or defaults."""

    master_port: int = 7077
    master_ui_port: int = 8080  # the master's UI cannot be turned off; /json/ is its state
    worker_ui_port: int = 8081  # worker n: worker_ui_port + n - 1
    worker_memory: str = "1g"  # offered to executors (spark.executor.memory defaults to 1g)
    daemon_memory: str = "256m"  # heap of the master and worker JVMs themselves

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> ClusterConfig:
        """Defaults, overridden by the CASSCADE_SPARK_* variables of `env` (os.environ)."""
        env = os.environ if env is None else env
        bad = [v for v in PORT_VARS.values() if env.get(v) and not env[v].isdigit()]
        if bad:
            raise StackError(f"{bad[0]}={env[bad[0]]!r} is not a port number")
        values: dict[str, object] = {a: int(env[v]) for a, v in PORT_VARS.items() if env.get(v)}
        values.update({a: env[v] for a, v in SIZE_VARS.items() if env.get(v)})
        return cls(**values)  # type: ignore[arg-type]

    def worker_ui(self, n: int) -> int:
        """Worker n's web UI port (fixed, so status can match the master's view to n)."""
        return self.worker_ui_port + n - 1


@dataclass
class UpReport:
    """What `up` did: the processes it started and the seconds until all workers were ALIVE."""

    started: list[str]
    seconds: float


def spark_dir(s: StackSettings) -> Path:
    """The cluster's state: pid files, logs/, conf/, worker-n/ (work and local dirs)."""
    return s.state_dir / "spark"


def worker_dir(s: StackSettings, n: int) -> Path:
    """Worker n's folder: work/ (per app: executor logs, files) and local/ (shuffle)."""
    return spark_dir(s) / f"worker-{n}"


def pid_file(s: StackSettings, name: str) -> Path:
    """Pid file of `master` or `worker-n`."""
    return spark_dir(s) / f"{name}.pid"


def log_file(s: StackSettings, name: str) -> Path:
    """Log (stdout+stderr) of `master` or `worker-n`."""
    return spark_dir(s) / "logs" / f"{name}.log"


def master_url(s: StackSettings, cfg: ClusterConfig | None = None) -> str:
    """spark://127.0.0.1:PORT, what --master takes."""
    return f"spark://{HOST}:{(cfg or ClusterConfig.from_env()).master_port}"


def spark_home() -> Path:
    """The pip pyspark package: it holds bin/spark-class and jars/ like a Spark distribution."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def master_command(cfg: ClusterConfig, home: Path) -> list[str]:
    """The master's command line, bound to loopback."""
    return [str(home / "bin" / "spark-class"), MASTER_CLASS, "--host", HOST,
            "--port", str(cfg.master_port), "--webui-port", str(cfg.master_ui_port)]


def worker_command(s: StackSettings, cfg: ClusterConfig, home: Path, n: int) -> list[str]:
    """Worker n's command line: one core, its own work dir and UI port."""
    # No fixed RPC port: the master refuses a worker at an address it still holds ALIVE.
    return [str(home / "bin" / "spark-class"), WORKER_CLASS, "--host", HOST,
            "--cores", "1", "--memory", cfg.worker_memory,
            "--work-dir", str(worker_dir(s, n) / "work"),
            "--webui-port", str(cfg.worker_ui(n)), master_url(s, cfg)]


def daemon_env(s: StackSettings, cfg: ClusterConfig, java_home: Path, home: Path,
               n: int | None = None, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """Environment of the master (n None) or worker n; executors inherit the worker's."""
    env = dict(os.environ if base is None else base)
    env.pop("SPARK_ENV_LOADED", None)  # so spark-class reads our SPARK_CONF_DIR afresh
    # light, long-lived daemons: C1 JIT + serial GC halve their start-up CPU (10 s -> 4.5 s)
    for var in ("SPARK_DAEMON_JAVA_OPTS", "SPARK_LAUNCHER_OPTS"):
        env.setdefault(var, DAEMON_JVM_OPTS)
    env.update({
        "SPARK_HOME": str(home), "JAVA_HOME": str(java_home),
        # every listener (RPC, web UI, block manager) on loopback, not the first interface
        "SPARK_LOCAL_IP": HOST, "SPARK_CONF_DIR": str(spark_dir(s) / "conf"),
        "SPARK_DAEMON_MEMORY": cfg.daemon_memory,
        # Python workers of executors run the venv's interpreter, so casscade's dependencies
        # import (a driver's spark.pyspark.python still wins)
        "PYSPARK_PYTHON": sys.executable,
    })
    if n is not None:
        env["SPARK_WORKER_DIR"] = str(worker_dir(s, n) / "work")
        env["SPARK_LOCAL_DIRS"] = str(worker_dir(s, n) / "local")  # shuffle files: not /tmp
    return env


def master_json(cfg: ClusterConfig, timeout_s: float = 2.0) -> dict | None:
    """The master's /json/ state (workers, apps), or None when it does not answer."""
    try:
        with urllib.request.urlopen(f"http://{HOST}:{cfg.master_ui_port}/json/",
                                    timeout=timeout_s) as resp:
            return json.loads(resp.read().decode())
    except (OSError, ValueError):  # URLError is an OSError
        return None


def worker_states(state: dict | None, cfg: ClusterConfig, workers: int,
                  ignore: frozenset[str] = frozenset()) -> dict[int, tuple[str, str]]:
    """Worker n → (its state in the master: ALIVE, DEAD, ..., worker id), matched by UI
    port; an ALIVE registration wins over older dead ones; ids in `ignore` are skipped."""
    out: dict[int, tuple[str, str]] = {}
    by_port = {str(cfg.worker_ui(n)): n for n in range(1, workers + 1)}
    for w in (state or {}).get("workers", []):
        n = by_port.get(str(w.get("webuiaddress", "")).rsplit(":", 1)[-1])
        if n and w.get("id") not in ignore and out.get(n, ("",))[0] != "ALIVE":
            out[n] = (str(w.get("state")), str(w.get("id")))
    return out


def configured_workers(s: StackSettings) -> int:
    """How many workers the last `up` asked for (status reports each, running or not)."""
    f = spark_dir(s) / "workers"
    return int(f.read_text()) if f.is_file() and f.read_text().strip().isdigit() else 0


def _prepare(s: StackSettings) -> tuple[ClusterConfig, Path, Path]:
    cfg = ClusterConfig.from_env()
    java_home = artifacts.find_java().resolve().parent.parent
    shutil.copytree(repo_root() / "deploy" / "local" / "conf" / "spark", spark_dir(s) / "conf",
                    dirs_exist_ok=True)
    return cfg, java_home, spark_home()


def _worker_ui_name(n: int) -> str:
    return f"spark worker {n} UI (CASSCADE_SPARK_WORKER_UI_PORT + {n - 1})"


def _spawn_worker(s: StackSettings, cfg: ClusterConfig, java_home: Path, home: Path,
                  n: int) -> int:
    worker_dir(s, n).mkdir(parents=True, exist_ok=True)  # Spark makes work/ and local/
    return process.spawn(worker_command(s, cfg, home, n), pid_file(s, f"worker-{n}"),
                         log_file(s, f"worker-{n}"), cwd=worker_dir(s, n),
                         env=daemon_env(s, cfg, java_home, home, n))


def up(s: StackSettings, workers: int = 2, log: Callable[[str], None] = print,
       timeout_s: float = 120.0) -> UpReport:
    """Start the master and workers 1..`workers` not running yet; wait until all are ALIVE."""
    if not 1 <= workers <= MAX_WORKERS:
        raise StackError(f"--workers {workers}: between 1 and {MAX_WORKERS}")
    cfg, java_home, home = _prepare(s)
    master_running = read_pid(pid_file(s, "master")) is not None
    missing = [n for n in range(1, workers + 1) if read_pid(pid_file(s, f"worker-{n}")) is None]
    # Check every port before starting anything: a conflict leaves nothing half-started.
    ports = {} if master_running else {"spark master (CASSCADE_SPARK_MASTER_PORT)":
                                       cfg.master_port, "spark master UI "
                                       "(CASSCADE_SPARK_MASTER_UI_PORT)": cfg.master_ui_port}
    require_free_ports(ports | {_worker_ui_name(n): cfg.worker_ui(n) for n in missing})
    (spark_dir(s) / "workers").write_text(f"{max(workers, configured_workers(s))}\n")
    t0, started = time.monotonic(), []
    if not master_running:
        process.spawn(master_command(cfg, home), pid_file(s, "master"), log_file(s, "master"),
                      cwd=spark_dir(s), env=daemon_env(s, cfg, java_home, home))
        started.append("master")
    # Workers only once the master is ALIVE: it ignores registrations before it is elected
    # leader, and a worker retries only after 5-15 s.
    wait_ready(s, cfg, [], timeout_s)
    for n in missing:
        _spawn_worker(s, cfg, java_home, home, n)
        started.append(f"worker-{n}")
    wait_ready(s, cfg, range(1, workers + 1), timeout_s)
    seconds = time.monotonic() - t0
    log(f"spark master {master_url(s, cfg)} (UI http://{HOST}:{cfg.master_ui_port}), "
        f"{workers} workers ALIVE; started {', '.join(started) or 'nothing'} in {seconds:.1f}s")
    return UpReport(started, seconds)


def wait_ready(s: StackSettings, cfg: ClusterConfig, workers: range | list[int],
               timeout_s: float = 120.0, ignore: frozenset[str] = frozenset()) -> None:
    """Block until the master is ALIVE and lists each of `workers` ALIVE (registrations in
    `ignore` do not count); StackError with the log tail of what exited otherwise."""
    deadline, waiting = time.monotonic() + timeout_s, list(workers)
    while True:
        for name in ["master", *(f"worker-{n}" for n in waiting)]:
            if read_pid(pid_file(s, name)) is None:
                raise StackError(f"spark {name} exited during start-up; last lines of "
                                 f"{log_file(s, name)}:\n{tail(log_file(s, name))}")
        state = master_json(cfg)
        states = worker_states(state, cfg, max(waiting, default=0), ignore)
        waiting = [n for n in waiting if states.get(n, ("",))[0] != "ALIVE"]
        if not waiting and (state or {}).get("status") == "ALIVE":
            return
        if time.monotonic() > deadline:
            log = log_file(s, f"worker-{waiting[0]}" if waiting else "master")
            raise StackError(f"spark master or workers {waiting} not ALIVE (http://{HOST}:"
                             f"{cfg.master_ui_port}/json/) after {timeout_s:.0f}s; last lines "
                             f"of {log}:\n{tail(log)}\n--- master:\n"
                             f"{tail(log_file(s, 'master'), 15)}")
        time.sleep(0.3)


def start_worker(s: StackSettings, n: int, timeout_s: float = 120.0) -> bool:
    """Start worker n unless it runs (needs the master); wait until ALIVE; True if started."""
    cfg, java_home, home = _prepare(s)
    if read_pid(pid_file(s, "master")) is None:
        raise StackError("the spark master is not running: `spark up` first")
    if read_pid(pid_file(s, f"worker-{n}")) is not None:
        return False
    require_free_ports({_worker_ui_name(n): cfg.worker_ui(n)})
    (spark_dir(s) / "workers").write_text(f"{max(n, configured_workers(s))}\n")
    # The master may list a killed worker ALIVE until it notices: only a new id counts.
    old = frozenset(w.get("id") for w in (master_json(cfg) or {}).get("workers", []))
    _spawn_worker(s, cfg, java_home, home, n)
    wait_ready(s, cfg, [n], timeout_s, old)
    return True


def stop_worker(s: StackSettings, n: int) -> bool:
    """SIGTERM worker n's process group (its executors too); True when it ran."""
    return process.stop(pid_file(s, f"worker-{n}"), timeout_s=20)


def kill_worker(s: StackSettings, n: int) -> bool:
    """SIGKILL worker n with its executors (a lost machine, for tests); True when it ran."""
    return process.kill(pid_file(s, f"worker-{n}"))


def down(s: StackSettings) -> list[str]:
    """Stop every worker, then the master, by pid file; names what was running."""
    numbers = sorted(int(p.stem[7:]) for p in spark_dir(s).glob("worker-*.pid")
                     if p.stem[7:].isdigit())
    stopped = [f"worker-{n}" for n in numbers if stop_worker(s, n)]
    return stopped + (["master"] if process.stop(pid_file(s, "master"), timeout_s=20) else [])


def rss_mb(pid: int) -> float | None:
    """Resident memory of `pid` in MB (VmRSS), None if it cannot be read."""
    try:
        found = re.search(r"VmRSS:\s+(\d+)", Path(f"/proc/{pid}/status").read_text())
    except OSError:
        return None
    return int(found.group(1)) / 1024 if found else None


def status(s: StackSettings) -> list[tuple[str, str]]:
    """(name, description) of the master and each worker; "running" only when the process
    lives and (a worker) the master lists it ALIVE."""
    cfg = ClusterConfig.from_env()
    workers = max(configured_workers(s), len(list(spark_dir(s).glob("worker-*.pid"))))
    states = worker_states(state := master_json(cfg), cfg, workers)
    pid = read_pid(pid_file(s, "master"))
    rows = [("master", "stopped" if pid is None else
             f"running, pid {pid}, {master_url(s, cfg)}, UI http://{HOST}:{cfg.master_ui_port}"
             f"{'' if state else ' (not answering)'}, RSS {rss_mb(pid) or 0:.0f} MB")]
    for n in range(1, workers + 1):
        pid, seen = read_pid(pid_file(s, f"worker-{n}")), states.get(n, ("not registered",))[0]
        rows.append((f"worker {n}", f"stopped (master: {seen})" if pid is None else
                     f"starting, pid {pid} (master: {seen})" if seen != "ALIVE" else
                     f"running, pid {pid}, UI http://{HOST}:{cfg.worker_ui(n)}, "
                     f"RSS {rss_mb(pid) or 0:.0f} MB"))
    return rows
