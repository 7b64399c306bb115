"""The reach checks every command runs at its start: one line naming what did not answer."""

from __future__ import annotations

import click
import pytest

from materializer.kafka.avro_registry import RegistryError, RegistryUnreachable, registry_checks
from materializer.output.event_settings import EventSettings
from shared import kafka_reach
from shared.kafka_reach import KafkaUnreachable
from shared.reach import Unreachable, reach_or_exit


def test_kafka_or_a_service_that_does_not_answer_is_one_line(monkeypatch) -> None:
    def no_kafka(_conf: dict) -> None:
        raise KafkaUnreachable("Kafka at k:9092 did not answer within 15 s: refused")

    monkeypatch.setattr(kafka_reach, "cluster_id", no_kafka)
    with pytest.raises(click.ClickException) as err:
        reach_or_exit({"bootstrap.servers": "k:9092"})
    assert err.value.message == "Kafka at k:9092 did not answer within 15 s: refused"

    def no_registry() -> None:
        raise RegistryUnreachable("schema registry http://r did not answer within 15 s: x")

    monkeypatch.setattr(kafka_reach, "cluster_id", lambda _conf: "cluster")
    with pytest.raises(click.ClickException) as err:
        reach_or_exit({}, no_registry)
    assert err.value.message == "schema registry http://r did not answer within 15 s: x"
    assert issubclass(RegistryUnreachable, RegistryError)  # caught where it was before
    assert issubclass(RegistryUnreachable, Unreachable)

    def broken() -> None:
        raise RegistryError("not a reach failure")

    with pytest.raises(RegistryError):  # only Unreachable is turned into a line
        reach_or_exit({}, broken)


def test_a_registry_is_checked_only_when_avro_events_register_there() -> None:
    assert registry_checks(None) == []
    assert registry_checks(EventSettings()) == []
    assert registry_checks(EventSettings(format="avro")) == []  # the schema topic: Kafka's
    assert len(registry_checks(EventSettings(format="avro",
                                             schema_registry_url="http://r:8081"))) == 1
