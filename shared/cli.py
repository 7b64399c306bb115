"""The `casscade` command: one click group that gathers every stage's commands."""

from __future__ import annotations

import click

from shared.devstack.cli import dev


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="casscade")
def cli() -> None:
    """casscade streams Apache Cassandra CDC into Kafka as complete before/after row images.

    \b
    Stages (see README.md):
      publisher     node agent beside each Cassandra node: commit log -> raw Kafka topics
      materializer  Spark job: raw topics -> Debezium-style change events
    Tools:
      dev           the local Kafka + Cassandra stack used by `make demo` and `make test`
    """


cli.add_command(dev)


def main() -> None:
    """Console-script entry point."""
    cli()
