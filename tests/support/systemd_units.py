"""A systemd unit file read as systemd reads its lines, for tests of deploy/systemd: sections
of keys, each key's values in order (a key may repeat, as Environment= does)."""

from __future__ import annotations

import shlex
from pathlib import Path


def read_unit(path: Path) -> dict[str, dict[str, list[str]]]:
    """{section: {key: [values in order]}}; comments and blank lines skipped, a trailing
    backslash joins a line to the next."""
    sections: dict[str, dict[str, list[str]]] = {}
    current: dict[str, list[str]] | None = None
    pending = ""
    for raw in path.read_text().splitlines():
        line = pending + raw.strip()
        pending = ""
        if line.endswith("\\"):
            pending = line[:-1] + " "
            continue
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            current = sections.setdefault(line[1:-1], {})
            continue
        if current is None:
            raise ValueError(f"{path}: {line!r} before any [section]")
        key, _, value = line.partition("=")
        current.setdefault(key.strip(), []).append(value.strip())
    return sections


def exec_start(path: Path, paths: dict[str, str]) -> list[str]:
    """The unit's ExecStart as an argument list, each path prefix in `paths` (as the unit
    names it) replaced by where this machine has it."""
    (line,) = read_unit(path)["Service"]["ExecStart"]
    return [_mapped(arg, paths) for arg in shlex.split(line)]


def working_directory(path: Path, paths: dict[str, str]) -> str:
    """The unit's WorkingDirectory, mapped like exec_start's paths."""
    (line,) = read_unit(path)["Service"]["WorkingDirectory"]
    return _mapped(line, paths)


def _mapped(arg: str, paths: dict[str, str]) -> str:
    for unit_path, here in sorted(paths.items(), key=lambda kv: -len(kv[0])):
        if arg == unit_path or arg.startswith(unit_path + "/"):
            return here + arg[len(unit_path):]
    return arg
