"""The README and docs/ stay true: every command they show parses with the real CLI and its
--help runs, every link between them resolves (file and heading), they carry no history
(issue numbers, dates, commit hashes: those go to CHANGELOG.md), and every reference the
code makes to docs/architecture.md names one of its headings."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from casscade.cli import cli

from support.commands import resolve_command, shown_commands
from support.paths import ROOT

DOCS = [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").glob("*.md"))]
CURRENT = [d for d in DOCS if d.name != "CHANGELOG.md"]  # what is true now, no history
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
HISTORY = re.compile(r"\b[Ii]ssues? \d+\b|\b20\d\d-\d\d-\d\d\b|\bcommit [0-9a-f]{7,40}\b"
                     r"|\bat [0-9a-f]{7,40}\b")
CITE = re.compile(r'docs/architecture\.md "([^"]+)"')


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces as dashes."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _headings(document: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", document.read_text(), flags=re.S)
    return [h.strip() for h in re.findall(r"^#{1,6} (.+)$", text, re.M)]


def _commands() -> list[tuple[str, list[str]]]:
    return [(d.name, args) for d in CURRENT for args in shown_commands(d)]


def test_the_docs_exist_and_show_commands() -> None:
    names = {d.name for d in DOCS}
    assert {"README.md", "CHANGELOG.md", "architecture.md", "configuration.md",
            "operations.md", "security.md", "connect.md", "benchmarks.md", "development.md",
            "commitlog-dump.md"} <= names, names
    assert len(_commands()) >= 10


@pytest.mark.parametrize(("doc", "args"), _commands(),
                         ids=lambda v: " ".join(v[:3]) if isinstance(v, list) else v)
def test_a_shown_command_parses_and_its_help_runs(doc: str, args: list[str]) -> None:
    path = resolve_command(args[1:], options=False)  # SEGMENT, FILE: placeholders
    out = CliRunner().invoke(cli, [*path, "--help"])
    assert out.exit_code == 0 and "Usage:" in out.output, (doc, args, out.output)


@pytest.mark.parametrize("document", DOCS, ids=lambda d: d.name)
def test_every_link_resolves(document: Path) -> None:
    for target in LINK.findall(re.sub(r"```.*?```", "", document.read_text(), flags=re.S)):
        if target.startswith(("http://", "https://", "mailto:")):
            continue
        file, _, anchor = target.partition("#")
        linked = (document.parent / file).resolve() if file else document
        assert linked.exists(), f"{document.name}: dead link {target}"
        if anchor and linked.suffix == ".md":
            slugs = {_slug(h) for h in _headings(linked)}
            assert anchor in slugs, f"{document.name}: no heading #{anchor} in {linked.name}"


@pytest.mark.parametrize("document", CURRENT, ids=lambda d: d.name)
def test_the_docs_say_what_is_true_now_not_when(document: Path) -> None:
    found = [m.group(0) for m in HISTORY.finditer(document.read_text())]
    assert not found, f"{document.name}: history belongs in CHANGELOG.md: {found[:5]}"


def test_the_codes_references_to_the_architecture_name_its_headings() -> None:
    headings = set(_headings(ROOT / "docs" / "architecture.md"))
    cited = {(p.relative_to(ROOT).as_posix(), m) for package in ("publisher", "materializer",
                                                                 "shared")
             for p in (ROOT / package).rglob("*.py") for m in CITE.findall(p.read_text())}
    assert cited, "no module cites docs/architecture.md"
    assert not {(f, h) for f, h in cited if h not in headings}, sorted(cited)
    stale = [p.relative_to(ROOT).as_posix() for package in ("publisher", "materializer",
                                                             "shared")
             for p in (ROOT / package).rglob("*.py")
             if re.search(r"design §|spark-notes|\.\./shared/docs", p.read_text())]
    assert not stale, f"references to documents outside the repository: {stale}"


def test_the_package_map_names_every_package_and_only_packages_that_exist() -> None:
    """docs/development.md's map of the packages: a row for every runtime package (a
    directory with an __init__.py), and no row for one that is gone."""
    text = (ROOT / "docs" / "development.md").read_text()
    mapped = set(re.findall(r"^\| `([\w.]+)` \|", text, re.M))
    runtime = {".".join(init.parent.relative_to(ROOT).parts)
               for top in ("casscade", "publisher", "materializer", "shared")
               for init in (ROOT / top).rglob("__init__.py")}
    assert runtime - mapped == set(), "packages the map leaves out"
    assert (ROOT / "deploy" / "local" / "devstack" / "__init__.py").is_file()
    assert mapped - runtime == {"devstack"}, "rows for packages that do not exist"
