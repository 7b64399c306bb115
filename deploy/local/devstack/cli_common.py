"""What the stack's click commands share: settings from the environment, StackErrors as
one clean error line."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import click

from devstack.process import StackError
from devstack.settings import StackSettings

T = TypeVar("T")


def settings(locked: bool = False) -> StackSettings:
    """The stack's settings (CASSCADE_* variables), a click error if there is no checkout or
    a variable is wrong; `locked`: the locked stack's (StackSettings.secured)."""
    try:
        s = StackSettings.from_env()
    except (RuntimeError, ValueError) as exc:
        raise click.ClickException(str(exc)) from exc
    return s.secured() if locked else s


SECURE = click.option(
    "--secure", "locked", is_flag=True,
    help="The locked stack beside the open one (state in secure/, Kafka on SASL_SSL "
         "127.0.0.1:9192 with SCRAM users and ACLs, Cassandra with passwords, permissions "
         "and client TLS on 127.0.0.1:9242, the registry on https://127.0.0.1:8185); see "
         "docs/security.md.")


def run(fn: Callable[..., T], *args: object) -> T:
    """Call `fn`; a StackError becomes a click error (its message, exit code 1)."""
    try:
        return fn(*args)
    except StackError as exc:
        raise click.ClickException(str(exc)) from exc
