"""Services for a test: started for a block, asked over HTTP, polled until ready or quiet."""

from __future__ import annotations

import re
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

from support.phases import phased

T = TypeVar("T")


@contextmanager
def started_here(up: Callable[[], bool], down: Callable[[], object]) -> Iterator[None]:
    """A service for the block: `up()` starts it unless it runs (True when it started it);
    `down()` after the block only then, so a developer's running service stays up."""
    started = up()
    try:
        yield
    finally:
        if started:
            down()


def http_get(port: int, path: str) -> tuple[int, str]:
    """GET http://127.0.0.1:port/path: (status, body), the error status too; (0, "") when
    nothing listens."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
    except OSError:
        return 0, ""


def metric(port: int, name: str) -> float | None:
    """One sample of a /metrics page on loopback `port` (`name` with its labels, as
    printed), None if it is not there or the page does not answer."""
    status, body = http_get(port, "/metrics")
    found = re.search(rf"^{re.escape(name)} (\S+)$", body, re.M) if status == 200 else None
    return float(found.group(1)) if found else None


@phased("polls")
def wait_until(probe: Callable[[], T | None], timeout_s: float, what: str,
               interval_s: float = 0.25) -> T:
    """Poll `probe` until it returns something truthy; AssertionError naming `what` if not."""
    deadline = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(interval_s)
    raise AssertionError(f"timed out after {timeout_s:.0f}s waiting for {what} (last: {last!r})")


def wait_for_quiet_node(stack, limit_s: float = 60) -> None:
    """Wait (bounded) until the local Cassandra uses < 10 % of a core: on 2 cores its
    flushing and compaction would otherwise be measured as the benchmark's own time."""
    import os
    from pathlib import Path

    from devstack import cassandra

    pid = cassandra.running_pid(stack)
    if pid is None:
        return
    tick = os.sysconf("SC_CLK_TCK")

    def cpu() -> float:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / tick

    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        before = cpu()
        time.sleep(1)
        if cpu() - before < 0.1:
            return


def free_port() -> int:
    """A loopback port nothing listens on now."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
