"""Every setting the docs and the shipped deploy files name is a setting of a stage's model,
and every `casscade` command the deploy files run parses with the real CLI (the docs'
own commands: test_docs.py). A renamed or removed setting cannot linger in them."""

from __future__ import annotations

import re
import shlex
import typing
from pathlib import Path

import pytest

from materializer.settings import MaterializerConfig
from publisher.settings import PublisherConfig

from support.commands import resolve_command
from support.config_model import leaves, sections
from support.paths import ROOT

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
DEPLOY = sorted(p for p in (ROOT / "deploy").rglob("*") if p.is_file()
                and "local" not in p.relative_to(ROOT / "deploy").parts)
# a setting as the docs write it: `section.key` (deeper too), or --set section.key=...
_QUOTED = re.compile(r"`([a-z][a-z0-9_]*(?:\.[a-z0-9_]+)+)(?:[=:][^`]*)?`")
_SET = re.compile(r"--set[ =]([a-z][a-z0-9_]*(?:\.[a-z0-9_]+)+)=")
_FILE = re.compile(r"\.(ya?ml|md|py|json|sh|txt|log|pem|jar|tar\.gz|conf|service|timer|toml"
                   r"|properties|xml|db|idx|crc|tmp)$")
# a command a deploy file runs or shows: `casscade ...` quoted, .../bin/casscade ... (a unit's
# ExecStart, a cron line), or a container's args list [casscade, group, command, ...]
_COMMAND = re.compile(r"`(casscade [^`]+)`|/bin/(casscade [^\n>]+)"
                      r"|\[(casscade(?:, [^,\]]+)+)\]")


def _paths(model: type) -> tuple[set[str], set[str]]:
    """(every setting's and section's dotted path, the free-form mappings' paths)."""
    settings = leaves(model)
    return ({leaf.path for leaf in settings} | set(sections(model)),
            {leaf.path for leaf in settings if typing.get_origin(leaf.hint) is dict})


_PUB, _PUB_MAPS = _paths(PublisherConfig)
_MAT, _MAT_MAPS = _paths(MaterializerConfig)
SETTINGS, MAPPINGS = _PUB | _MAT, _PUB_MAPS | _MAT_MAPS
SECTIONS = {p.split(".")[0] for p in SETTINGS}
# Spark's own properties (spark.speculation, spark.task.maxFailures) and the options of
# its Kafka source and sink (kafka.sasl.jaas.config) share the first word of our `spark`
# and `kafka` sections: a name under them that is none of ours is theirs
_FOREIGN = {"spark", "kafka"}
_OURS_UNDER = {first: {p.split(".")[1] for p in SETTINGS if p.startswith(first + ".")}
               for first in _FOREIGN}


def _named(text: str) -> set[str]:
    """The settings a text names."""
    names = set(_QUOTED.findall(text)) | set(_SET.findall(text))
    return {n for n in names if n.split(".")[0] in SECTIONS and not _FILE.search(n)}


def _unknown(name: str) -> bool:
    if name in SETTINGS or any(name.startswith(m + ".") for m in MAPPINGS):
        return False
    first, second = name.split(".")[:2]
    return not (first in _FOREIGN and second not in _OURS_UNDER[first])


@pytest.mark.parametrize("document", DOCS + DEPLOY, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_setting_named_exists(document: Path) -> None:
    text = document.read_text(errors="replace")
    unknown = sorted(n for n in _named(text) if _unknown(n))
    assert not unknown, f"{document.relative_to(ROOT)} names settings no stage has: {unknown}"


def test_the_check_sees_settings() -> None:
    """The scan finds the settings the docs name (a broken pattern would pass everything)."""
    found = set().union(*(_named(d.read_text()) for d in DOCS))
    assert {"events.delivery", "kafka.topic_prefix", "cdc.cdc_raw",
            "capture.column_mask_hash_salt"} <= found, sorted(found)[:40]
    assert _unknown("events.deliveries") and _unknown("spark.checkpoint.dir")
    assert _unknown("kafka.security.no_such_key") and _unknown("cdc.no_such_key")
    assert not _unknown("spark.speculation") and not _unknown("kafka.producer.linger.ms")


def _deploy_commands() -> list[tuple[str, list[str], bool]]:
    """(file, argv, whether it is run as written: its options and files are checked too)."""
    out = []
    for path in DEPLOY:
        text = path.read_text(errors="replace").replace("\\\n", " ")
        for quoted, run, listed in _COMMAND.findall(text):
            line = quoted or run or listed.replace(",", " ")
            out.append((str(path.relative_to(ROOT)), shlex.split(line), not quoted))
    return out


def test_the_deploy_files_run_commands() -> None:
    assert len(_deploy_commands()) >= 3, _deploy_commands()


@pytest.mark.parametrize(("where", "args", "run"), _deploy_commands(),
                         ids=lambda v: " ".join(v[:3]) if isinstance(v, list) else str(v))
def test_a_command_a_deploy_file_runs_exists(where: str, args: list[str], run: bool) -> None:
    """A command a unit, cron line or container runs parses whole (its options, and its
    /etc/casscade/ config as the example in deploy/); one a comment shows: its command."""
    assert resolve_command(args[1:], options=run), (where, args)
