"""The config flags every casscade command shares: --config FILE and --set, and loading."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

T = TypeVar("T")

set_option = click.option(
    "--set", "overrides", multiple=True, metavar="SECTION.KEY=VALUE",
    help="Override one setting (repeatable); after the file and the "
         "CASSCADE_<SECTION>__<KEY> environment variables.")


def config_option(example: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """--config FILE, naming the documented example config in its help."""
    return click.option("--config", "config_file",
                        type=click.Path(exists=True, dir_okay=False, path_type=Path),
                        help=f"YAML config (example: {example}).")


def load_config(model: type[T], config_file: Path | None, overrides: tuple[str, ...]) -> T:
    """shared.config.load, with a configuration error shown as a clean CLI error."""
    from shared.config import ConfigError, load

    try:
        return load(model, config_file, overrides)
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from exc
