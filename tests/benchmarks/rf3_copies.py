"""Synthetic RF=3 input: each one-row change of raw_workload's table as three nodes publish
it, the same RowUpdate content with a different `source` block (host, file, position), so
one copy digest; the copies shuffled within blocks, as they arrive from three publishers.

RF3_CHANGES one-row changes over RF3_KEYS keys (RF3_CHANGES / RF3_KEYS versions each),
shuffled within blocks of RF3_SHUFFLE copies; RF3_BATCH: raw records per micro-batch of the
benchmarks that run a query over them.
"""

from __future__ import annotations

import os
import random

from raw_workload import TABLE, raw_change, raw_producer

from shared import rowupdate, topic_names

from support import rowupdate_reference

CHANGES = int(os.environ.get("RF3_CHANGES", "60000"))
KEYS = int(os.environ.get("RF3_KEYS", "20000"))
PER_BATCH = int(os.environ.get("RF3_BATCH", "60000"))
SHUFFLE = int(os.environ.get("RF3_SHUFFLE", "3000"))


def copies(key: int, version: int) -> list[tuple[bytes, bytes]]:
    """(Kafka key, value) of one change as nodes 1-3 publish it (the key: a raw key)."""
    pk, value = raw_change(TABLE, key, version)
    record = rowupdate_reference.decode(value)
    out = []
    for node in (1, 2, 3):
        source = {**record["source"], "host": f"node-{node}",
                  "file": f"CommitLog-7-{1000 + node}.log", "segment_id": 1000 + node,
                  "position": record["source"]["position"] * node + 31 * node}
        out.append((pk, rowupdate.encode({**record, "source": source})))
    return out


def publish_rf3(bootstrap: str, prefix: str, seed: int = 3) -> int:
    """CHANGES changes, three shuffled copies each, into a fresh raw topic."""
    rng = random.Random(seed)
    producer = raw_producer(bootstrap, prefix)
    topic = topic_names.raw_topic(prefix)
    versions = CHANGES // KEYS
    block: list[tuple[bytes, bytes]] = []
    sent = 0

    def flush_block() -> None:
        nonlocal sent
        rng.shuffle(block)
        for key, value in block:
            producer.produce(topic, key=key, value=value)
        sent += len(block)
        block.clear()
        producer.poll(0)

    for version in range(versions):
        for key in range(KEYS):
            block.extend(copies(key, version))
            if len(block) >= SHUFFLE:
                flush_block()
    flush_block()
    assert producer.flush(120) == 0
    return sent
