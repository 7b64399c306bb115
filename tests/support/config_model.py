"""A stage's config model read as a tree of settings (its dataclasses): the leaves and the
sections by dotted path, for the tests that hold the docs and deploy files to the models."""

from __future__ import annotations

import dataclasses
import typing
from typing import Any


@dataclasses.dataclass(frozen=True)
class Leaf:
    """One setting of a model: its dotted path, type hint and declared field."""

    path: str
    hint: Any
    field: dataclasses.Field[Any]


def leaves(model: type, prefix: str = "") -> list[Leaf]:
    """Every setting of `model`, nested sections walked, in declaration order."""
    hints = typing.get_type_hints(model)
    out: list[Leaf] = []
    for f in dataclasses.fields(model):
        hint = hints[f.name]
        if dataclasses.is_dataclass(hint):  # a nested section
            out += leaves(typing.cast(type, hint), f"{prefix}{f.name}.")
        else:
            out.append(Leaf(prefix + f.name, hint, f))
    return out


def sections(model: type, prefix: str = "") -> dict[str, type]:
    """Every section of `model` (a nested dataclass) by dotted path."""
    hints = typing.get_type_hints(model)
    out: dict[str, type] = {}
    for f in dataclasses.fields(model):
        if dataclasses.is_dataclass(hints[f.name]):
            inner = typing.cast(type, hints[f.name])
            out[prefix + f.name] = inner
            out |= sections(inner, f"{prefix}{f.name}.")
    return out
