"""Topic creation shared by both stages (the local broker, like many, does not auto-create)."""

from __future__ import annotations

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic


class TopicCreator:
    """Creates topics once each, if missing; remembers what exists."""

    def __init__(self, bootstrap: str, partitions: int, replication: int,
                 timeout_s: float = 30.0) -> None:
        self.admin = AdminClient({"bootstrap.servers": bootstrap})
        self.partitions = partitions
        self.replication = replication
        self.timeout_s = timeout_s
        self.known: set[str] = set()

    def ensure(self, topic: str) -> None:
        """Create `topic` unless it exists (raises KafkaException if Kafka refuses)."""
        if topic in self.known:
            return
        if topic not in self.admin.list_topics(timeout=self.timeout_s).topics:
            future = self.admin.create_topics([NewTopic(
                topic, num_partitions=self.partitions,
                replication_factor=self.replication)])[topic]
            try:
                future.result(timeout=self.timeout_s)
            except KafkaException as exc:
                if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                    raise
        self.known.add(topic)
