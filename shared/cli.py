"""The `casscade` command: one click group that gathers every stage's commands."""

from __future__ import annotations

import click

from materializer.cli import materializer
from publisher.cli import publisher
from publisher.ops_cli import ops
from publisher.snapshot_cli import snapshot
from shared.devstack.cli import dev


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="casscade")
def cli() -> None:
    """casscade streams Apache Cassandra CDC into Kafka as complete before/after row images.

    \b
    Stages (see README.md):
      publisher     node agent beside each Cassandra node: commit log -> raw Kafka topics
      materializer  Spark job: raw topics -> change events with full before/after rows
      snapshot      bootstrap: a table's existing rows into its raw topic
      ops           flush the CDC tables (cron), the filler-table writer
    Tools:
      dev           the local Kafka + Cassandra stack used by `make demo` and `make test`
    """


cli.add_command(publisher)
cli.add_command(materializer)
cli.add_command(snapshot)
cli.add_command(ops)
cli.add_command(dev)


def main() -> None:
    """Console-script entry point."""
    cli()


if __name__ == "__main__":
    main()
