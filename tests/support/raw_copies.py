"""Raw topics re-published as several replicas would have sent them (the RF=3 tests on one
node): every record copied, shuffled within its key, some copies late."""

from __future__ import annotations

import random
from collections import defaultdict

from confluent_kafka import Producer

from shared import rowupdate
from shared.kafka_topics import TopicCreator, read_to_end
from shared.topic_names import raw_topic

from support import rowupdate_reference


def copy_raw(stack, src_prefix: str, dst_prefix: str, copies: int, seed: int,
              replicas: bool = False, late: float = 0.0, stats: dict | None = None) -> int:
    """Re-publish every raw record `copies` times, shuffled within its key (the schema topic
    as is): what several replicas with different timing would produce. `replicas`: copy i
    comes from node-i (its own `source` block), as three publishers send it; `late`: that
    share of the records has its last copy moved to the end of the topic. The same
    arguments give the same topics, record for record: the shuffles are seeded per topic
    and keys taken in order (a consumer interleaves partitions at random).
    Returns the number of raw records written; `stats` gets the distinct copy digests
    written and the copies moved to the end."""
    creator = TopicCreator(stack.bootstrap_servers, 3, 1)
    # idempotent: a retried batch keeps its place, so the same arguments really give the
    # same topics (without it, a retry after a fresh topic's NOT_LEADER reordered whole
    # batches, and runs compared event by event saw different micro-batches)
    # a queue that holds a whole copy (the default's 100,000 messages did not)
    producer = Producer({"bootstrap.servers": stack.bootstrap_servers, "acks": "all",
                         "enable.idempotence": True,
                         "queue.buffering.max.messages": 2_000_000,
                         "queue.buffering.max.kbytes": 1_048_576})
    topics = sorted(t for t in creator.admin.list_topics(timeout=10).topics
                    if t in (raw_topic(src_prefix), f"{src_prefix}.schemas"))
    total = 0
    for topic in topics:
        rnd = random.Random(f"{seed}/{topic[len(src_prefix):]}")
        by_key: dict[bytes, list[bytes]] = defaultdict(list)
        raw = topic == raw_topic(src_prefix)
        for msg in read_to_end(stack.bootstrap_servers, topic):
            # the raw topic's copies carry row updates only; the schema topic goes as it is
            if not raw or rowupdate.is_row_update(msg.value()):
                by_key[msg.key()].append(msg.value())
        out_topic = dst_prefix + topic[len(src_prefix):]
        creator.ensure(out_topic, compacted=out_topic.endswith(".schemas"))
        tail: list[tuple[bytes, bytes]] = []
        for key, values in sorted(by_key.items()):
            if topic != raw_topic(src_prefix):
                many = values
            elif replicas:
                many = [as_replica(v, node) for v in values for node in range(1, copies + 1)]
            else:
                many = values * copies
            rnd.shuffle(many)
            if replicas and late and topic == raw_topic(src_prefix):
                seen: set[bytes] = set()
                moved: set[bytes] = set()
                for v in reversed(many):  # a record's last copy, maybe to the tail
                    digest = rowupdate_reference.copy_key_of(v)
                    if digest not in seen:
                        seen.add(digest)
                        if rnd.random() < late:
                            moved.add(v)
                tail += [(key, v) for v in many if v in moved]
                many = [v for v in many if v not in moved]
            for v in many:
                producer.produce(out_topic, key=key, value=v)
        for key, v in tail:
            producer.produce(out_topic, key=key, value=v)
        producer.poll(0)
        if stats is not None and topic == raw_topic(src_prefix):
            stats["late"] = stats.get("late", 0) + len(tail)
            stats.setdefault("digests", set()).update(
                rowupdate_reference.copy_key_of(v) for values in by_key.values() for v in values)
        if topic == raw_topic(src_prefix):
            total += sum(len(v) for v in by_key.values()) * copies
    assert producer.flush(60) == 0
    return total


def as_replica(value: bytes, node: int) -> bytes:
    """A raw record as node `node`'s publisher would have sent it (its own `source`)."""
    record = rowupdate_reference.decode(value)
    source = {**record["source"], "host": f"node-{node}", "file": f"CommitLog-7-{node}.log",
              "position": record["source"]["position"] + node}
    # the copy digest and the mutation id are the publisher's (replica-independent)
    return rowupdate.encode({**record, "source": source}, rowupdate.mutation_of_value(value))
