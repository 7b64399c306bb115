"""Every command docs/operations.md (the runbook) shows parses with the real CLI, and an
integration test runs that command (so the runbook cannot drift from the code)."""

from __future__ import annotations

import pytest

from support.commands import resolve_command, shown_commands
from support.paths import ROOT

RUNBOOK = ROOT / "docs" / "operations.md"


def _commands() -> list[list[str]]:
    return shown_commands(RUNBOOK, ("casscade ", "deploy/spark/submit.sh"))


def test_the_runbook_shows_commands() -> None:
    assert len(_commands()) >= 7


@pytest.mark.parametrize("args", _commands(), ids=lambda a: " ".join(a[:3]))
def test_runbook_command_parses_and_is_run_by_a_test(args: list[str]) -> None:
    tests = "\n".join(p.read_text() for p in (ROOT / "tests").rglob("*.py"))
    if args[0] == "deploy/spark/submit.sh":
        assert '"deploy/spark/submit.sh"' in tests
        return
    path = resolve_command(args[1:])
    assert path, args
    # the test suite invokes the same command path through the CLI
    needle = ", ".join(f'"{p}"' for p in path)
    assert needle in tests, f"no test runs `casscade {' '.join(path)}`"
