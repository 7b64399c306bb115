"""The `casscade` command: one click group over every command group that is installed.

Each stage declares its groups as entry points (group "casscade.commands" in its
pyproject.toml) and the root finds them there, so the root imports no stage and a runtime
installed without the dev tooling simply has no `dev` group.
"""

from __future__ import annotations

import functools
from importlib.metadata import entry_points

import click

ENTRY_POINTS = "casscade.commands"
# the order `casscade --help` lists them in; a group not named here comes after them
ORDER = ("publisher", "materializer", "snapshot", "ops", "verify", "dev")


class _Root(click.Group):
    """Loads each installed command group when it is first asked for."""

    @staticmethod
    @functools.cache
    def _points() -> dict:
        # read once per process: --help asks for every group, each lookup would scan metadata
        return {ep.name: ep for ep in entry_points(group=ENTRY_POINTS)}

    def list_commands(self, ctx: click.Context) -> list[str]:
        """The installed groups, in ORDER."""
        names = self._points()
        return sorted(names, key=lambda n: (ORDER.index(n) if n in ORDER else len(ORDER), n))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        """The group registered under `cmd_name`, imported now; None if none is."""
        point = self._points().get(cmd_name)
        return point.load() if point is not None else None


@click.group(cls=_Root, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="casscade")
def cli() -> None:
    """casscade streams Apache Cassandra CDC into Kafka as complete before/after row images.

    \b
    Stages (see README.md):
      publisher     node agent beside each Cassandra node: commit log -> the raw topic
      materializer  Spark job: the raw topic -> change events with full before/after rows
      snapshot      bootstrap: a table's existing rows into its raw topic
      ops           flush the CDC tables (cron), the filler-table writer
      verify        the stream's latest image of every key against the table's row
    Tools (a checkout's `make venv` installs them):
      dev           the local Kafka + Cassandra stack used by `make demo` and `make test`
    """


def main() -> None:
    """Console-script entry point."""
    cli()


if __name__ == "__main__":
    main()
