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
