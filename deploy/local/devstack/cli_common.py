"""What the stack's click commands share: settings from the environment, StackErrors as
one clean error line."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import click

from devstack.process import StackError
from devstack.settings import StackSettings

T = TypeVar("T")


def settings() -> StackSettings:
    """The stack's settings (CASSCADE_* variables), a click error if there is no checkout."""
    try:
        return StackSettings.from_env()
    except RuntimeError as exc:
        raise click.ClickException(str(exc)) from exc


def run(fn: Callable[..., T], *args: object) -> T:
    """Call `fn`; a StackError becomes a click error (its message, exit code 1)."""
    try:
        return fn(*args)
    except StackError as exc:
        raise click.ClickException(str(exc)) from exc
