"""Start, find and stop the local stack's JVMs through pid files (never by process name)."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

from shared.pids import pid_alive


class StackError(RuntimeError):
    """A local-stack operation failed; the message says what and what to do."""


def read_pid(pid_file: Path) -> int | None:
    """Return the pid recorded in `pid_file` if that process is still alive, else None."""
    try:
        pid = int(pid_file.read_text().strip())
    except (FileNotFoundError, ValueError):
        return None
    return pid if pid_alive(pid) else None


def spawn(argv: Sequence[str], pid_file: Path, log_file: Path, cwd: Path,
          env: dict[str, str] | None = None) -> int:
    """Start `argv` in its own session with output to `log_file`; record its pid."""
    log_file.parent.mkdir(parents=True, exist_ok=True)
    pid_file.parent.mkdir(parents=True, exist_ok=True)
    with open(log_file, "ab") as out:
        proc = subprocess.Popen(
            list(argv), cwd=cwd, stdout=out, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True, env=env,
        )
    pid_file.write_text(f"{proc.pid}\n")
    return proc.pid


def stop(pid_file: Path, timeout_s: float = 30.0) -> bool:
    """SIGTERM the process group recorded in `pid_file`, SIGKILL after `timeout_s`.

    Returns True when a live process was stopped. The pid file is removed either way.
    """
    return _end(pid_file, signal.SIGTERM, timeout_s)


def kill(pid_file: Path) -> bool:
    """SIGKILL the process group recorded in `pid_file` at once (a crash, for tests and
    operators) and wait until it is gone; True when a live process was killed."""
    return _end(pid_file, signal.SIGKILL, 0.0)


def _end(pid_file: Path, first: signal.Signals, grace_s: float) -> bool:
    """Send `first` to the recorded group, wait `grace_s` for it to go, then SIGKILL it."""
    pid = read_pid(pid_file)
    if pid is None:
        pid_file.unlink(missing_ok=True)
        return False
    _signal_group(pid, first)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and pid_alive(pid):
        _reap(pid)
        time.sleep(0.2)
    if pid_alive(pid):
        _signal_group(pid, signal.SIGKILL)
        for _ in range(100):
            _reap(pid)
            if not pid_alive(pid):
                break
            time.sleep(0.1)
    pid_file.unlink(missing_ok=True)
    return True


def _signal_group(pid: int, sig: signal.Signals) -> None:
    # Each JVM runs in its own session, so its pgid equals its pid; signal the whole group
    # so helper children (if any) go too.
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:
        pass
    except PermissionError:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)


def _reap(pid: int) -> None:
    # Reap the child if this very process started it (tests do); harmless otherwise.
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


def port_in_use(port: int, host: str = "127.0.0.1") -> bool:
    """True when something already listens on host:port."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((host, port)) == 0


def require_free_ports(ports: dict[str, int], host: str = "127.0.0.1") -> None:
    """Raise StackError naming every port of `ports` that is already taken."""
    taken = [f"{name} {host}:{port}" for name, port in ports.items() if port_in_use(port, host)]
    if taken:
        raise StackError(
            "port already in use: " + ", ".join(taken)
            + " (another Kafka/Cassandra, or a stack started from another state directory?"
            " stop it, or choose other ports with the CASSCADE_*_PORT variables)"
        )


def tail(path: Path, lines: int = 40) -> str:
    """Last `lines` lines of a log file, or a note that it does not exist."""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - 64 * 1024))
            data = fh.read().decode("utf-8", "replace")
    except FileNotFoundError:
        return f"(no log at {path})"
    return "\n".join(data.splitlines()[-lines:])
