"""`stack registry ...`: a Confluent-compatible schema registry (Apicurio) on loopback."""

from __future__ import annotations

import sys

import click

from devstack import registry as reg
from devstack.cli_common import SECURE, run, settings
from devstack.process import tail


@click.group(name="registry")
def registry() -> None:
    """Apicurio Registry 2.4.2.Final on 127.0.0.1:8085 with in-memory storage (schemas go
    when it stops), built from Maven Central jars on first `up` (measured: ~60 s and
    ~210 MB into a cold local Maven repo, ~9 s offline after; skipped until
    deploy/local/maven/apicurio changes). Starts in ~3 s, RSS ~260 MB.

    Confluent-compatible API, for casscade's events.schema_registry_url and Confluent clients:
    http://127.0.0.1:8085/apis/ccompat/v7 (ids there are Apicurio content ids). Apicurio's
    own API, for its Kafka Connect converter: http://127.0.0.1:8085/apis/registry/v2.
    New versions of a subject must be BACKWARD compatible, as in Confluent's registry.

    State (pid file, logs/) lives in .casscade/registry/ (or $CASSCADE_STATE_DIR/registry);
    the build in .casscade/lib/apicurio. Port: CASSCADE_REGISTRY_PORT. With --secure: the
    locked stack's registry, https only on port +100 (8185) with the stack's server
    certificate (its CA: .casscade/secure/tls/ca.pem); it asks for no credentials.
    """


@registry.command()
@SECURE
def up(locked: bool) -> None:
    """Build the registry if needed, start it unless it runs, and wait until its
    /apis/ccompat/v7/subjects answers; prints the URLs and how long it took."""
    run(reg.up, settings(locked), click.echo)


@registry.command()
@SECURE
def down(locked: bool) -> None:
    """Stop the registry by pid file (its in-memory schemas go with it)."""
    stopped = run(reg.down, settings(locked))
    click.echo("stopped: registry" if stopped else "nothing was running")


@registry.command()
@SECURE
def status(locked: bool) -> None:
    """Say whether the registry runs and answers. Exit code 0 when it does, 3 otherwise."""
    ok, desc = reg.status(settings(locked))
    click.echo(f"{'registry':10} {desc}")
    sys.exit(0 if ok else 3)


@registry.command()
@click.option("-n", "--lines", default=40, show_default=True, help="Lines of the log.")
@SECURE
def logs(lines: int, locked: bool) -> None:
    """Print the tail of the registry's log (and where the full log is)."""
    path = reg.log_file(settings(locked))
    click.echo(f"==> {path} <==")
    click.echo(tail(path, lines))


if __name__ == "__main__":
    registry()
