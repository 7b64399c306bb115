"""Small helpers for tests (importable because pytest puts tests/ on sys.path)."""

from __future__ import annotations

import re
import shlex
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

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


def shown_commands(document: Path, starts: tuple[str, ...] = ("casscade ",)) -> list[list[str]]:
    """The command lines a markdown document shows in its fenced blocks (any language tag)
    that begin with one of `starts`, split as a shell would; a line ending in a backslash
    goes on."""
    blocks = re.findall(r"```[a-z]*\n(.*?)```", document.read_text(), re.S)
    text = "\n".join(blocks).replace("\\\n", " ")
    lines = [line.split("  #")[0].strip() for line in text.splitlines()]
    return [shlex.split(line) for line in lines if line.startswith(starts)]


def resolve_command(args: list[str], options: bool = True) -> list[str]:
    """Parse `casscade ARGS` with the real CLI (no invocation): the command path, e.g.
    [ops, flush]; an unknown command fails, and with `options` a bad option or a file
    that does not exist. /etc/casscade/ config paths are read as the example configs in
    deploy/."""
    import click

    from casscade.cli import cli

    rest = [a.replace("/etc/casscade/", "deploy/") for a in args]
    path: list[str] = []
    command: click.Command = cli
    parent = click.Context(cli, info_name="casscade")
    while isinstance(command, click.Group):  # our groups take no options of their own
        name, rest = rest[0], rest[1:]
        sub = command.get_command(parent, name)
        assert sub is not None, f"no command {name!r} in {' '.join(args)}"
        path.append(name)
        parent = click.Context(sub, info_name=name, parent=parent)
        command = sub
    if options and "--help" not in rest:
        command.make_context(path[-1], rest, parent=parent.parent)  # options and values
    return path
