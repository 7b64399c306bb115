"""What the publisher's command groups share: its config and its Kafka client settings.

(Reaching Cassandra and Kafka, and checking the capture rules, are `shared.reach` and
`shared.cli_config`: `casscade verify` needs them too.)"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from shared.cli_config import load_config
from shared.reach import reach_or_exit

if TYPE_CHECKING:
    from publisher.settings import KafkaSettings


def kafka_client(k: KafkaSettings, reach: bool = False) -> dict[str, str]:
    """librdkafka settings of the `kafka` section (brokers and security), or a
    ClickException naming the bad setting; `reach`: also check a broker answers (a
    ClickException naming the brokers and the reason if none does)."""
    from shared.config import ConfigError

    try:
        conf = k.client()
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from None
    if reach:
        reach_or_exit(conf)
    return conf


def load_publisher_config(config_file: Path | None, overrides: tuple[str, ...]) -> Any:
    """The publisher's config: YAML file, then CASSCADE_* environment, then --set."""
    from publisher.settings import PublisherConfig

    return load_config(PublisherConfig, config_file, overrides)
