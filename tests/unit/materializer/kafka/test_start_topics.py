"""What a start reads from Kafka before Spark runs (materializer.kafka.start_topics)."""

from __future__ import annotations

import json

from confluent_kafka import KafkaException

from materializer.kafka import start_topics


def test_the_tables_known_at_start_are_read_again_while_the_broker_is_not_serving(
        monkeypatch) -> None:
    """A query restarted after a broker restart reads the schema topic while the broker may
    not serve it yet: asked again, not a failed start; a missing topic is no table."""
    class Msg:
        def __init__(self, body: dict) -> None:
            self._value = json.dumps(body).encode()

        def value(self) -> bytes:
            return self._value

    answers: list = [KafkaException("Broker: Not leader for partition"),
                     [Msg({"keyspace": "ks", "table": "b"}), Msg({"keyspace": "ks", "table": "a"}),
                      Msg({"keyspace": "ks", "table": "a"})]]

    def read_to_end(_kafka: dict, topic: str) -> list:
        assert topic == "p.schemas"
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    monkeypatch.setattr(start_topics, "read_to_end", read_to_end)
    monkeypatch.setattr("time.sleep", lambda _s: None)
    assert start_topics.known_tables({}, "p") == [("ks", "a"), ("ks", "b")] and not answers
    answers.append(KafkaException("topic p.schemas not found"))
    assert start_topics.known_tables({}, "p") == []
