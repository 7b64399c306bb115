"""docs/configuration.md lists exactly the settings of both stages' models, with their
types and defaults (so the reference cannot drift from the code)."""

from __future__ import annotations

import dataclasses
import re
import types
import typing
from pathlib import Path
from typing import Any

import pytest
import yaml

from materializer.settings import MaterializerConfig, SparkSettings
from publisher.settings import PublisherConfig
from shared.config import to_dict

from support.config_model import leaves, sections
from support.paths import ROOT

DOC = ROOT / "docs" / "configuration.md"
STAGES: dict[str, type] = {"Publisher settings": PublisherConfig,
                           "Materializer settings": MaterializerConfig}
# a settings row: | `dotted.path` | type | default | what it does |
_ROW = re.compile(r"^\| `([a-z][a-z0-9_.]*)` \| ([^|]+?) \| ([^|]+?) \| [^|]+ \|$")
_SECTION = re.compile(r"^### `([a-z][a-z0-9_.]*)`$")
_TYPES = {str: "string", int: "integer", float: "number", bool: "boolean", Path: "path"}


def _type_name(hint: Any) -> str:
    """The type as the doc's Type column spells it."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        return f"{_type_name(args[0])} or null"
    if origin is dict:
        return "mapping"
    if origin is list:
        return f"list of {_type_name(typing.get_args(hint)[0])}s"
    return _TYPES[hint]


def _parts() -> dict[str, str]:
    """Each stage's part of the doc: from its `## ` heading to the next."""
    text = DOC.read_text()
    chunks = re.split(r"^## ", text, flags=re.M)
    parts = {c.split("\n", 1)[0].strip(): c for c in chunks[1:]}
    missing = set(STAGES) - set(parts)
    assert not missing, f"{DOC.name} has no `## {sorted(missing)[0]}` heading"
    return {name: parts[name] for name in STAGES}


def _rows(part: str) -> dict[str, tuple[str, str, str]]:
    """path -> (section heading above it, type cell, default cell) of a stage's rows."""
    rows: dict[str, tuple[str, str, str]] = {}
    section = ""
    for line in part.splitlines():
        if heading := _SECTION.match(line):
            section = heading.group(1)
        elif row := _ROW.match(line):
            path, type_cell, default = row.groups()
            assert path not in rows, f"{path} has two rows"
            rows[path] = (section, type_cell, default)
    return rows


def _value(config: Any, path: str) -> Any:
    """A setting's default as plain data (paths as text), from a freshly built config."""
    value: Any = to_dict(config, redact=False)
    for part in path.split("."):
        value = value[part]
    return value


@pytest.mark.parametrize("stage", STAGES)
def test_every_setting_has_a_row(stage: str) -> None:
    """Every leaf setting of the stage's model is a row in the stage's part of the doc."""
    rows = _rows(_parts()[stage])
    missing = [leaf.path for leaf in leaves(STAGES[stage]) if leaf.path not in rows]
    assert not missing, f"{stage}: not in {DOC.name}: {', '.join(missing)}"


@pytest.mark.parametrize("stage", STAGES)
def test_every_row_is_a_setting(stage: str) -> None:
    """Every row of the stage's part names a setting its model has, under its section."""
    rows = _rows(_parts()[stage])
    assert rows, f"{stage}: no setting rows found"
    known = {leaf.path for leaf in leaves(STAGES[stage])}
    extra = sorted(set(rows) - known)
    assert not extra, f"{stage}: {DOC.name} lists settings the model lacks: {extra}"
    for path, (section, _type, _default) in rows.items():
        assert path.rsplit(".", 1)[0] == section, f"{path} is under ### `{section}`"


@pytest.mark.parametrize("stage", STAGES)
def test_types_are_the_models(stage: str) -> None:
    """Each row's Type column is the model's type hint."""
    rows = _rows(_parts()[stage])
    for leaf in leaves(STAGES[stage]):
        if leaf.path in rows:  # a missing row: test_every_setting_has_a_row
            assert rows[leaf.path][1] == _type_name(leaf.hint), leaf.path


@pytest.mark.parametrize("stage", STAGES)
def test_defaults_are_the_models(stage: str) -> None:
    """Each default, a YAML value in backticks (prose only for a factory's), is the model's."""
    rows = _rows(_parts()[stage])
    config = STAGES[stage]()
    for leaf in leaves(STAGES[stage]):
        if leaf.path not in rows:  # test_every_setting_has_a_row
            continue
        cell = rows[leaf.path][2]
        literal = re.fullmatch(r"`([^`]*)`", cell)
        if literal is None:
            assert leaf.field.default_factory is not dataclasses.MISSING, (
                f"{leaf.path}: default {cell!r} is not a `value`")
            continue
        documented = yaml.safe_load(literal.group(1))
        expected = _value(config, leaf.path)
        assert documented == expected, f"{leaf.path}: doc {documented!r}, model {expected!r}"
        assert type(documented) is type(expected) or {type(documented), type(expected)} == {
            int, float}, f"{leaf.path}: doc {documented!r}, model {expected!r}"


def test_prose_names_only_settings_there_are() -> None:
    """A `section.key` or CASSCADE_SECTION__KEY anywhere in the doc names a real setting."""
    text = DOC.read_text()
    parts: dict[str, type] = {}
    known: set[str] = set()
    for model in STAGES.values():
        parts |= sections(model)
        known |= {leaf.path for leaf in leaves(model)}
    for token in set(re.findall(r"`([a-z][a-z0-9_]*(?:\.[a-z0-9_]+)+)`", text)):
        parent = max((s for s in parts if token.startswith(s + ".")), key=len, default="")
        if parent and token.count(".") == parent.count(".") + 1:  # section.key
            assert token in known or token in parts, f"{token}: no such setting"
    for env in set(re.findall(r"\bCASSCADE_([A-Z0-9_]+__[A-Z0-9_]+)\b", text)):
        dotted = env.lower().replace("__", ".")
        assert dotted in known, f"CASSCADE_{env}: no such setting"


def test_removed_settings_are_named_only_as_removed() -> None:
    """The spark section's removed settings are named as refused, never as settings."""
    text = DOC.read_text()
    for name in SparkSettings.REMOVED:
        assert f"`{name}`" in text, f"the removed setting {name} is not named as refused"
        assert f"spark.{name}" not in text, f"spark.{name} is documented as a setting"
