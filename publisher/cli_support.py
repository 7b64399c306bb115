"""What the publisher's command groups share: its config and a Cassandra session."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from shared.cli_config import load_config

if TYPE_CHECKING:
    from publisher.settings import CassandraSettings, KafkaSettings


def connect(host: str | list[str], port: int, username: str | None = None,
            password: str | None = None, ssl_context: Any = None) -> tuple[Any, Any]:
    """A cassandra-driver cluster and its session, or a ClickException naming the host."""
    from shared.cql import make_cluster

    cluster = make_cluster([host] if isinstance(host, str) else host, port, username, password,
                           ssl_context=ssl_context)
    try:
        return cluster, cluster.connect()
    except Exception as exc:
        cluster.shutdown()
        raise click.ClickException(f"cannot connect to Cassandra at {host}:{port}: {exc}") \
            from exc


def kafka_client(k: KafkaSettings) -> dict[str, str]:
    """librdkafka settings of the `kafka` section (brokers and security), or a
    ClickException naming the bad setting."""
    from shared.config import ConfigError

    try:
        return k.client()
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from exc


def load_publisher_config(config_file: Path | None, overrides: tuple[str, ...]) -> Any:
    """The publisher's config: YAML file, then CASSCADE_* environment, then --set."""
    from publisher.settings import PublisherConfig

    return load_config(PublisherConfig, config_file, overrides)


def connect_cassandra(c: CassandraSettings) -> tuple[Any, Any]:
    """connect() with the `cassandra` section of the publisher's config (its password from
    the config, the environment or password_file)."""
    from shared.config import ConfigError

    try:
        password = c.resolved_password()
        context = c.tls()
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from exc
    return connect(c.contact_points, c.port, c.username, password, context)
