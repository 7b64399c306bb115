"""Every command deploy/RUNBOOK.md shows parses with the real CLI, and an integration test
runs that command (so the runbook cannot drift from the code)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import click
import pytest

from casscade.cli import cli

ROOT = Path(__file__).resolve().parents[2]
RUNBOOK = ROOT / "deploy" / "RUNBOOK.md"


def _commands() -> list[list[str]]:
    blocks = re.findall(r"```[a-z]*\n(.*?)```", RUNBOOK.read_text(), re.S)  # ```yaml too
    lines = [line.strip() for b in blocks for line in b.splitlines()]
    return [shlex.split(line) for line in lines
            if line.startswith(("casscade ", "deploy/spark/submit.sh"))]


def _resolve(args: list[str]) -> list[str]:
    """Parse with click (no invocation); returns the command path, e.g. [ops, flush]."""
    rest = [a.replace("/etc/casscade/", "deploy/") for a in args]  # the example configs
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
    command.make_context(path[-1], rest, parent=parent.parent)  # options and values check
    return path


def test_the_runbook_shows_commands() -> None:
    assert len(_commands()) >= 7


@pytest.mark.parametrize("args", _commands(), ids=lambda a: " ".join(a[:3]))
def test_runbook_command_parses_and_is_run_by_a_test(args: list[str]) -> None:
    tests = "\n".join(p.read_text() for p in (ROOT / "tests").rglob("*.py"))
    if args[0] == "deploy/spark/submit.sh":
        assert '"deploy/spark/submit.sh"' in tests
        return
    path = _resolve(args[1:])
    assert path, args
    # the test suite invokes the same command path through the CLI
    needle = ", ".join(f'"{p}"' for p in path)
    assert needle in tests, f"no test runs `casscade {' '.join(path)}`"
