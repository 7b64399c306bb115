"""The config flags every casscade command shares: --config FILE and --set, loading, and
the capture rules checked against the tables there are."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

if TYPE_CHECKING:
    from shared.capture import Capture
    from shared.schema import TableSchema

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


def captured_rules(cfg: Any) -> Capture:
    """The config's capture rules (its salt read now), or a ClickException naming what is
    wrong with them."""
    from shared.config import ConfigError

    try:
        return cfg.capture.rules()
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from None


def check_capture(capture: Capture, tables: Iterable[TableSchema]) -> None:
    """A ClickException for every capture rule that cannot apply to a CDC table there is
    (a primary key column, a mask on a non-frozen collection)."""
    from shared.capture import CaptureError

    problems = []
    for table in tables:
        if table.cdc and capture.captures(table.keyspace, table.table):
            try:
                capture.actions(table)
            except CaptureError as exc:
                problems.append(str(exc))
    if problems:
        raise click.ClickException("capture: " + "; ".join(sorted(problems)))
