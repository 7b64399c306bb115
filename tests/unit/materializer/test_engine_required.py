"""The materializer's commands on a base install (the publisher's, without the
`materializer` extra): one line naming the install, not an ImportError's traceback."""

from __future__ import annotations

import importlib.util

import click
import pytest
from click.testing import CliRunner

from materializer import cli


def test_a_missing_engine_is_named_with_its_install_line(monkeypatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name in ("pyspark", "py4j") else real(name, *a))
    with pytest.raises(click.ClickException, match=r"needs pyspark, py4j.*"
                       r"pip install 'casscade\[materializer\]'"):
        cli.require_engine()
    result = CliRunner().invoke(cli.materializer, ["run"])
    assert result.exit_code == 1 and "casscade[materializer]" in result.output, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_the_engine_of_this_install_is_there() -> None:
    cli.require_engine()  # the dev venv installs the extra: nothing raised
