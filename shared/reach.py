"""Is a service there? One check at a command's start, so Kafka, Cassandra or a schema
registry that does not answer (or refuses us) is one line naming its endpoint and the
reason, not a traceback or a stream of client retries. Every command that dials them
(the stages' and `casscade verify`) uses these."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol

import click

CONNECT_WAIT_S = 15.0  # a node that is starting gets this long to answer


class Unreachable(Exception):
    """A service did not answer in time, or refused us: the message names it and why."""


class CassandraAccess(Protocol):
    """What a command's `cassandra` config section says about reaching the cluster."""

    contact_points: list[str]
    port: int
    username: str | None

    def resolved_password(self) -> str | None:
        """The password: from the config, the environment or a file."""

    def tls(self) -> Any:
        """An SSL context for the connection, or None."""


def reach_or_exit(kafka: Mapping[str, Any], *others: Callable[[], object]) -> None:
    """A ClickException naming the endpoint and the reason when Kafka (librdkafka settings
    `kafka`) or another service (each of `others` a check raising Unreachable, such as a
    schema registry's) does not answer."""
    from shared.kafka_reach import cluster_id

    try:
        cluster_id(kafka)
        for check in others:
            check()
    except Unreachable as exc:
        raise click.ClickException(str(exc)) from None


def connect_cassandra(c: CassandraAccess, pinned: bool = False) -> tuple[Any, Any]:
    """connect_cassandra_at() with a `cassandra` config section (its password from the
    config, the environment or password_file); `pinned`: to its contact points only."""
    from shared.config import ConfigError

    try:
        password = c.resolved_password()
        context = c.tls()
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from exc
    return connect_cassandra_at(c.contact_points, c.port, c.username, password, context,
                                pinned=pinned)


def connect_cassandra_at(host: str | list[str], port: int, username: str | None = None,
                         password: str | None = None, ssl_context: Any = None,
                         wait_s: float = CONNECT_WAIT_S, pinned: bool = False
                         ) -> tuple[Any, Any]:
    """A cassandra-driver cluster and its session; tried again every few seconds for
    `wait_s`, then a ClickException naming each contact point and why it failed.
    `pinned`: requests go to the given hosts only, and the driver opens no connection to
    the cluster's other nodes (a node's agent talks to its own node alone)."""
    from cassandra import DriverException
    from cassandra.cluster import NoHostAvailable

    from shared.cql import connect_quietly, make_cluster

    hosts = [host] if isinstance(host, str) else host
    deadline = time.monotonic() + wait_s
    while True:
        cluster = make_cluster(hosts, port, username, password, ssl_context=ssl_context,
                               pinned=pinned)
        try:
            return cluster, connect_quietly(cluster)
        except (NoHostAvailable, DriverException, OSError) as exc:
            cluster.shutdown()
            why = getattr(exc, "errors", None) or {f"{','.join(hosts)}:{port}": exc}
            reasons = "; ".join(f"{where}: {_short(err)}" for where, err in why.items())
            if _refused_for_good(why):  # it answered, and said no: waiting will not help
                raise click.ClickException(f"cannot connect to Cassandra ({reasons})") from None
            if time.monotonic() + 3 > deadline:
                raise click.ClickException(f"Cassandra did not answer within {wait_s:.0f} s "
                                           f"({reasons})") from None
            time.sleep(3)


def _short(error: Any) -> str:
    """A driver error in a few words: the OS's reason for a socket error."""
    text = str(error)
    return text.rsplit("Last error: ", 1)[-1] if "Last error: " in text else text


def _refused_for_good(errors: dict[str, Any]) -> bool:
    """Whether every contact point refused us (credentials, TLS): waiting will not help."""
    from cassandra import AuthenticationFailed

    return all(isinstance(e, AuthenticationFailed) or "SSL" in type(e).__name__
               or "certificate" in str(e) for e in errors.values())
