"""The `casscade` root finds every command group through entry points, and only those."""

from __future__ import annotations

import ast

from click.testing import CliRunner

from casscade import cli as root
from casscade.cli import cli

from support.paths import ROOT


def test_help_lists_the_installed_groups_in_order() -> None:
    out = CliRunner().invoke(cli, ["--help"])
    assert out.exit_code == 0, out.output
    listed = out.output.split("Commands:")[1].split()
    names = [w for w in listed if w in root.ORDER]
    assert names == ["publisher", "materializer", "snapshot", "ops", "verify",
                     "dev"]  # dev: make venv


def test_a_group_runs_through_its_entry_point() -> None:
    out = CliRunner().invoke(cli, ["publisher", "--help"])
    assert out.exit_code == 0 and "dump" in out.output, out.output
    missing = CliRunner().invoke(cli, ["no-such-group"])
    assert missing.exit_code == 2 and "No such command" in missing.output


def test_the_root_imports_no_stage() -> None:
    tree = ast.parse((ROOT / "casscade" / "cli.py").read_text())
    imported = {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    stages = {m for m in imported if m.split(".")[0] in ("publisher", "materializer", "shared",
                                                          "devstack")}
    assert not stages, stages
