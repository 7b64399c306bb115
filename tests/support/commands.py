"""The commands a document shows, and their parse with the real `casscade` CLI."""

from __future__ import annotations

import re
import shlex
from pathlib import Path


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
