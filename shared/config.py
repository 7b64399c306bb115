"""One configuration model for both stages: YAML file, then environment, then CLI flags.

Each stage declares its settings as nested dataclasses. `load(Model, path, overrides)`
reads the YAML file (optional), applies `CASSCADE_<SECTION>__<KEY>` environment variables
(double underscore between levels, e.g. `CASSCADE_KAFKA__BOOTSTRAP_SERVERS`), then the
`section.key=value` overrides given on the command line (`--set`), converting each value to
the field's type. Unknown keys are errors, so a typo never silently falls back to a default;
an environment variable that names no setting in one of the command's sections is logged
and ignored; one of a section the command does not have is another stage's (both stages
may share an environment) and is ignored quietly. Below a mapping setting (Kafka client
options) the rest of the dotted name is one key: `--set kafka.producer.linger.ms=5`.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import re
import types
import typing
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import yaml

log = logging.getLogger(__name__)
T = TypeVar("T")
ENV_PREFIX = "CASSCADE_"


class ConfigError(ValueError):
    """A configuration value that is unknown, malformed or of the wrong type."""


def load(model: type[T], path: Path | str | None = None,
         overrides: Iterable[str] = (), env: Mapping[str, str] | None = None) -> T:
    """Build `model` from defaults, the YAML file, CASSCADE_* variables and overrides."""
    data: dict[str, Any] = {}
    if path is not None:
        try:
            loaded = yaml.safe_load(Path(path).read_text()) or {}
        except (OSError, yaml.YAMLError) as exc:
            raise ConfigError(f"cannot read config file {path}: {exc}") from exc
        if not isinstance(loaded, dict):
            raise ConfigError(f"config file {path} must hold a mapping")
        data = loaded
    env = os.environ if env is None else env
    for key, value in sorted(env.items()):
        if key.startswith(ENV_PREFIX) and "__" in key:
            names = key[len(ENV_PREFIX):].lower().split("__")
            parts = _split(model, names)
            if parts is not None:
                _set_path(data, parts, value)
            elif names[0] in typing.get_type_hints(model):  # a typo in one of our sections
                log.warning(f"{key} names no setting of this command; ignored")
            # else another stage's section in a shared environment: not ours to judge
    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"override {item!r} is not section.key=value")
        dotted, value = item.split("=", 1)
        parts = dotted.strip().split(".")
        _set_path(data, _split(model, parts) or parts, value)  # unknown: _build names it
    return _build(model, data, "")


def _split(model: type, parts: list[str]) -> list[str] | None:
    """`parts` as a path through `model`'s sections; below a mapping setting (Kafka client
    options: `kafka.producer.linger.ms`) the rest is one key. None: no such setting."""
    hints = typing.get_type_hints(model)
    if parts[0] not in hints:
        return None
    if len(parts) == 1:
        return parts
    inner = hints[parts[0]]
    if dataclasses.is_dataclass(inner):
        rest = _split(inner, parts[1:])  # type: ignore[arg-type]
        return None if rest is None else [parts[0], *rest]
    if typing.get_origin(inner) in (dict, Mapping):
        return [parts[0], ".".join(parts[1:])]
    return None


def _set_path(data: dict[str, Any], parts: list[str], value: Any) -> None:
    for part in parts[:-1]:
        data = data.setdefault(part, {})
        if not isinstance(data, dict):
            raise ConfigError(f"{'.'.join(parts)}: {part} is not a section")
    data[parts[-1]] = value


def _build(model: type[T], data: Mapping[str, Any], where: str) -> T:
    if not isinstance(data, Mapping):
        raise ConfigError(f"{where or 'config'} must be a mapping")
    hints = typing.get_type_hints(model)
    fields = {f.name: f for f in dataclasses.fields(model)}  # type: ignore[arg-type]
    unknown = set(data) - set(fields)
    removed = sorted(k for k in unknown if k in getattr(model, "REMOVED", {}))
    if removed:  # a model names settings it had, and why they went
        raise ConfigError(f"{where}{removed[0]}: {model.REMOVED[removed[0]]}")  # type: ignore[attr-defined]
    if unknown:
        raise ConfigError(f"unknown setting(s) {', '.join(sorted(where + k for k in unknown))}"
                          f"; known: {', '.join(sorted(fields))}")
    kwargs = {}
    for name, value in data.items():
        kwargs[name] = _convert(hints[name], value, f"{where}{name}")
    try:
        return model(**kwargs)
    except ConfigError:
        raise
    except ValueError as exc:  # a model's own check (__post_init__): a config error too
        raise ConfigError(str(exc)) from exc


def _convert(hint: Any, value: Any, where: str) -> Any:
    origin = typing.get_origin(hint)
    if dataclasses.is_dataclass(hint):
        return _build(hint, value, where + ".")
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if value is None or (isinstance(value, str) and value.lower() in ("", "none", "null")):
            return None
        return _convert(args[0], value, where)
    if origin in (dict, Mapping):
        if isinstance(value, str):  # from --set or the environment: inline YAML/JSON
            try:
                value = yaml.safe_load(value) or {}
            except yaml.YAMLError as exc:
                raise ConfigError(f"{where}: {value!r} is not a YAML mapping") from exc
        if not isinstance(value, Mapping):
            raise ConfigError(f"{where}: expected a mapping, got {value!r}")
        kinds = typing.get_args(hint)  # (key type, value type): each value as its type
        of = kinds[1] if len(kinds) == 2 else str
        return {str(k): _convert(of, v, f"{where}.{k}") for k, v in value.items()}
    if origin in (list, tuple):
        if isinstance(value, str) and value.strip().startswith("["):  # [a, b]: YAML
            try:
                value = yaml.safe_load(value)
            except yaml.YAMLError as exc:
                raise ConfigError(f"{where}: {value!r} is not a YAML list") from exc
        items = value.split(",") if isinstance(value, str) else value
        if not isinstance(items, list | tuple):
            raise ConfigError(f"{where}: expected a list, got {value!r}")
        return [_convert(typing.get_args(hint)[0], v, where) for v in items]
    if isinstance(value, Mapping):
        raise ConfigError(f"{where}: expected a {getattr(hint, '__name__', hint)}, "
                          f"got a section")
    try:
        if hint is bool:
            if isinstance(value, bool):
                return value
            text = str(value).strip().lower()
            if text not in ("true", "false", "1", "0", "yes", "no"):
                raise ValueError(value)
            return text in ("true", "1", "yes")
        if hint is Path:
            return Path(str(value)).expanduser()
        if hint in (int, float, str):
            return hint(value)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{where}: {value!r} is not a valid {hint.__name__}") from exc
    return value


# Setting names whose values are secrets: never printed (`--print-config`) or logged. Kafka
# client options are passed through by name (sasl.password, ssl.key.password,
# sasl.jaas.config, ...), so names are matched, not a list of fields.
_SECRET_NAME = re.compile(
    r"password|secret|salt|jaas|token|credential|api[._-]?key|private[._-]?key", re.I)
_URL_USERINFO = re.compile(r"(?P<scheme>[a-z][a-z0-9+.-]*://)(?P<user>[^:/@]*):[^@/]*@", re.I)
REDACTED = "***"


def to_dict(config: Any, redact: bool = True) -> dict[str, Any]:
    """The effective configuration as plain data (for `--print-config` and logs); with
    `redact`, every secret is shown as *** (a setting whose name says secret, and the
    password of a URL's user:password@)."""
    def plain(v: Any, name: str = "") -> Any:
        if (redact and v not in (None, "") and _SECRET_NAME.search(name)
                and not name.endswith("_file")):  # password_file: a path, not the secret
            return REDACTED
        if dataclasses.is_dataclass(v):
            return {f.name: plain(getattr(v, f.name), f.name) for f in dataclasses.fields(v)}
        if isinstance(v, Mapping):
            return {k: plain(x, str(k)) for k, x in v.items()}
        if isinstance(v, Path):
            return str(v)
        if isinstance(v, list | tuple):
            return [plain(x, name) for x in v]
        if redact and isinstance(v, str):
            return _URL_USERINFO.sub(rf"\g<scheme>\g<user>:{REDACTED}@", v)
        return v
    return plain(config)


def read_secret(value: str | None, file: Path | None, setting: str) -> str | None:
    """A secret given as `setting` (`value`) or as the first line of `<setting>_file`; a
    ConfigError naming the setting if both are set or the file is unreadable or empty."""
    if file is None:
        return value
    if value is not None:
        raise ConfigError(f"{setting} and {setting}_file are both set: keep one")
    try:
        lines = Path(file).read_text().splitlines()
    except OSError as exc:
        raise ConfigError(f"{setting}_file {file}: {exc.strerror or exc}") from exc
    if not lines or not lines[0]:
        raise ConfigError(f"{setting}_file {file} is empty")
    return lines[0]
