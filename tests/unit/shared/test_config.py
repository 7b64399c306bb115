"""The one configuration loader: dotted names, lists, the environment, the log section."""

from __future__ import annotations

import logging

import pytest

from materializer.settings import MaterializerConfig
from publisher.settings import PublisherConfig
from shared.config import ConfigError, load


def test_a_kafka_client_option_keeps_its_dots() -> None:
    cfg = load(MaterializerConfig, None, ["kafka.producer.linger.ms=5",
                                          "kafka.consumer.fetch.min.bytes=1024"], env={})
    assert cfg.kafka.producer == {"linger.ms": "5"}
    assert cfg.kafka.consumer == {"fetch.min.bytes": "1024"}
    from_env = load(PublisherConfig, None, [],
                    env={"CASSCADE_KAFKA__PRODUCER__LINGER.MS": "20"})
    assert from_env.kafka.producer == {"linger.ms": "20"}


def test_a_list_is_comma_separated_or_yaml() -> None:
    for text in ("10.0.0.1,10.0.0.2", "[10.0.0.1, 10.0.0.2]", "['10.0.0.1', '10.0.0.2']"):
        cfg = load(PublisherConfig, None, [f"cassandra.contact_points={text}"], env={})
        assert cfg.cassandra.contact_points == ["10.0.0.1", "10.0.0.2"], text
    with pytest.raises(ConfigError, match=r"cassandra\.contact_points: .* is not a YAML list"):
        load(PublisherConfig, None, ["cassandra.contact_points=[10.0.0.1"], env={})


def test_an_environment_variable_of_no_setting_is_named_and_ignored(caplog) -> None:
    """A typo in one of the command's sections is named; another stage's section is not."""
    with caplog.at_level(logging.WARNING, logger="shared.config"):
        cfg = load(MaterializerConfig, None, [], env={
            "CASSCADE_CDC__CDC_RAW": "/var/lib/cassandra/cdc_raw",  # the publisher's
            "CASSCADE_KAFKA__BOOTSTRAP_SERVER": "typo:9092",
            "CASSCADE_KAFKA__BOOTSTRAP_SERVERS": "kafka:9092"})
    assert cfg.kafka.bootstrap_servers == "kafka:9092"
    warned = [r.getMessage() for r in caplog.records]
    # the publisher's cdc section is not the materializer's to judge: no word of it
    assert warned == ["CASSCADE_KAFKA__BOOTSTRAP_SERVER names no setting of this command; "
                      "ignored"]


def test_an_unknown_flag_is_an_error() -> None:
    with pytest.raises(ConfigError, match=r"unknown setting\(s\) kafka.bootstrap_server;"):
        load(MaterializerConfig, None, ["kafka.bootstrap_server=x:9092"], env={})


@pytest.mark.parametrize(("override", "message"), [
    ("log.format=yaml", "log.format must be one of json, text, not 'yaml'"),
    ("log.level=LOUD", "log.level must be one of DEBUG, INFO, WARNING, ERROR, CRITICAL"),
])
def test_the_log_section_is_checked(override: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load(PublisherConfig, None, [override], env={})
    assert load(PublisherConfig, None, ["log.format=text", "log.level=debug"],
                env={}).log.format == "text"


def test_the_raw_topics_isolation_level_is_not_a_setting() -> None:
    """The job reads the raw topic read_committed always (issue 71, case 2)."""
    with pytest.raises(ConfigError, match=r"kafka\.consumer\.isolation\.level: the job reads "
                                          r"the raw topic read_committed always"):
        load(MaterializerConfig, None, ["kafka.consumer.isolation.level=read_uncommitted"],
             env={})
