"""CPU seconds from /proc, for the benchmarks' "where the cores went" lines."""

from __future__ import annotations

import os
from pathlib import Path

TICK = os.sysconf("SC_CLK_TCK")


def machine_busy_s() -> float:
    """CPU seconds all cores have spent busy since boot (/proc/stat)."""
    user, nice, system, _idle, _iowait, irq, softirq, steal = map(
        int, Path("/proc/stat").read_text().split()[1:9])
    return (user + nice + system + irq + softirq + steal) / TICK


def _stat(pid: int) -> list[str]:
    # the command name may hold spaces and parentheses: the fields start after the last ")"
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def process_cpu_s(pid: int) -> float:
    """CPU seconds (user + system) one process has used (/proc/PID/stat)."""
    return sum(process_user_system_s(pid))


def process_user_system_s(pid: int) -> tuple[float, float]:
    """CPU seconds one process has used in user mode and in the kernel (/proc/PID/stat)."""
    fields = _stat(pid)
    return int(fields[11]) / TICK, int(fields[12]) / TICK


def tree_cpu_s(pid: int) -> float:
    """CPU seconds of a process and all its living descendants (a job's JVM and Python
    workers, an agent's children); 0.0 if it is gone."""
    children: dict[int, list[int]] = {}
    used: dict[int, float] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = _stat(int(entry.name))
        except (FileNotFoundError, ProcessLookupError):
            continue  # exited while we looked
        children.setdefault(int(fields[1]), []).append(int(entry.name))
        used[int(entry.name)] = (int(fields[11]) + int(fields[12])) / TICK
    total, todo = 0.0, [pid]
    while todo:
        p = todo.pop()
        total += used.get(p, 0.0)
        todo.extend(children.get(p, []))
    return total


def python_workers_cpu_s() -> float:
    """CPU seconds (user + system) of every PySpark Python worker on this machine so far:
    the daemon processes (PySpark's `pyspark.daemon`, or the job's own
    `materializer.spark.pyspark_daemon`), their living workers, and the workers they have
    reaped (a parent's cutime/cstime). Sample it before the application stops: its workers
    go with its executors."""
    total = 0.0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            if b"pyspark.daemon" not in cmdline and b"pyspark_daemon" not in cmdline:
                continue
            fields = _stat(int(entry.name))
        except (FileNotFoundError, ProcessLookupError):
            continue  # exited while we looked
        total += sum(int(f) for f in fields[11:15]) / TICK  # utime stime cutime cstime
    return total


# The driver JVM's threads by what they do (their names, as /proc/PID/task/*/comm cuts them
# to 15 characters); a thread that ended within a window counts in "the JVM's other"
JVM_THREADS = (("the micro-batch loop", ("stream executio",)),
               ("task threads", ("Executor task l", "Executor task i")),
               ("JIT compilers", ("C1 CompilerThre", "C2 CompilerThre")),
               ("GC", ("GC Thread", "G1 ", "VM Thread")))


def job_split_s(pid: int) -> dict[str, float]:
    """CPU seconds so far of a materializer job's parts, `pid` its Python driver: its
    driver JVM (SparkSubmit: an executor too on a local master) in total and its threads
    of JVM_THREADS ("<group>/<thread id>"), the processes the JVM forked and reaped
    (Hadoop's `chmod`), the PySpark daemons with their workers (living, and reaped: a
    daemon's cutime/cstime), and the Python driver itself. {} if the job is gone."""
    parent: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent[int(entry.name)] = int(_stat(int(entry.name))[1])
            except (FileNotFoundError, ProcessLookupError):
                continue
    tree, todo = [], [pid]
    while todo:
        p = todo.pop()
        tree.append(p)
        todo.extend(c for c, pp in parent.items() if pp == p)
    split = {"the driver JVM": 0.0, "the JVM's forks": 0.0, "the Python workers": 0.0}
    try:
        split["the Python driver"] = process_cpu_s(pid)
        cmdlines = {p: Path(f"/proc/{p}/cmdline").read_bytes() for p in tree}
        daemons = {p for p, cmd in cmdlines.items()
                   if b"pyspark_daemon" in cmd or b"pyspark.daemon" in cmd}
        for p in tree:
            if b"SparkSubmit" in cmdlines[p]:
                split["the driver JVM"] += process_cpu_s(p)
                fields = _stat(p)  # the processes it forked and reaped (Hadoop's chmod)
                split["the JVM's forks"] = (int(fields[13]) + int(fields[14])) / TICK
                split.update(_thread_groups_s(p))
            elif p in daemons:
                fields = _stat(p)
                ticks = int(fields[11]) + int(fields[12])
                if parent.get(p) not in daemons:  # the daemon: with the workers it reaped
                    ticks += int(fields[13]) + int(fields[14])
                split["the Python workers"] += ticks / TICK
    except (FileNotFoundError, ProcessLookupError):
        return {}
    return split


def _thread_groups_s(pid: int) -> dict[str, float]:
    """CPU seconds of each living thread of JVM `pid` in JVM_THREADS, keyed
    "<group>/<thread id>" (a window's figure is then the difference thread by thread: a
    thread that ended within it is left out, one that began is counted whole)."""
    used = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            comm = (task / "comm").read_text().strip()
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError):
            continue  # ended while we looked
        for name, prefixes in JVM_THREADS:
            if comm.startswith(prefixes):
                used[f"{name}/{task.name}"] = (int(fields[11]) + int(fields[12])) / TICK
                break
    return used
