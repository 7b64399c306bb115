"""Whether a process still runs, by pid (pid files of the local stack, lock files)."""

from __future__ import annotations

import os
from pathlib import Path


def pid_alive(pid: int) -> bool:
    """True when `pid` names a live, non-zombie process."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A dead child nobody reaped yet stays as a zombie: not running. But a JVM's leader
    # thread can show 'Z' while its other threads still run (shutdown), so a zombie only
    # counts as dead once it has no other threads.
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        threads = len(list(Path(f"/proc/{pid}/task").iterdir()))
    except OSError:
        return True
    return not (stat.rsplit(")", 1)[-1].split()[0] == "Z" and threads <= 1)
