"""What the publisher's command groups share: its config and a Cassandra session."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from shared.cli_config import load_config

if TYPE_CHECKING:
    from collections.abc import Iterable

    from publisher.settings import CassandraSettings, KafkaSettings
    from shared.capture import Capture
    from shared.schema import TableSchema


CONNECT_WAIT_S = 15.0  # a node that is starting gets this long to answer


def connect(host: str | list[str], port: int, username: str | None = None,
            password: str | None = None, ssl_context: Any = None,
            wait_s: float = CONNECT_WAIT_S) -> tuple[Any, Any]:
    """A cassandra-driver cluster and its session; tried again every few seconds for
    `wait_s`, then a ClickException naming each contact point and why it failed."""
    from cassandra import DriverException
    from cassandra.cluster import NoHostAvailable

    from shared.cql import connect_quietly, make_cluster

    hosts = [host] if isinstance(host, str) else host
    deadline = time.monotonic() + wait_s
    while True:
        cluster = make_cluster(hosts, port, username, password, ssl_context=ssl_context)
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


def kafka_client(k: KafkaSettings, reach: bool = False) -> dict[str, str]:
    """librdkafka settings of the `kafka` section (brokers and security), or a
    ClickException naming the bad setting; `reach`: also check a broker answers (a
    ClickException naming the brokers and the reason if none does)."""
    from shared.config import ConfigError
    from shared.kafka_reach import KafkaUnreachable, cluster_id

    try:
        conf = k.client()
        if reach:
            cluster_id(conf)
        return conf
    except (ConfigError, KafkaUnreachable) as exc:
        raise click.ClickException(str(exc)) from None


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
