#!/usr/bin/env python3
"""`make demo`: the whole pipeline on the local stack.

Cassandra (CDC) → `casscade publisher run` (node agent) → Kafka raw topic →
`casscade materializer run` (Spark, local mode) → change events with full before/after rows.
The demo's Cassandra is a node of its own (.casscade/demo/node, CQL port 19242), so its
cdc_raw holds only the demo's writes; it is stopped at the end. State lives under
.casscade/demo; a second run continues from it (its writes then show as updates).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import yaml
from confluent_kafka import Consumer, TopicPartition

from materializer.processor import STATE_LAYOUT
from shared.devstack import cassandra, stack
from shared.devstack.settings import StackSettings, repo_root
from shared.kafka_topics import read_to_end

PREFIX = "demo"
RAW_TOPIC = f"{PREFIX}.raw.demo.customers"
EVENT_TOPIC = f"{PREFIX}.demo.customers"
WORKLOAD = [
    "CREATE KEYSPACE IF NOT EXISTS demo WITH replication = "
    "{'class': 'SimpleStrategy', 'replication_factor': 1}",
    "CREATE TABLE IF NOT EXISTS demo.customers (id int PRIMARY KEY, name text, email text, "
    "tier text, tags set<text>) WITH cdc = true",
    "INSERT INTO demo.customers (id, name, email, tier, tags) "
    "VALUES (1, 'Ada', 'ada@example.com', 'gold', {'early'})",
    "INSERT INTO demo.customers (id, name, email, tier) "
    "VALUES (2, 'Grace', 'grace@example.com', 'silver')",
    "INSERT INTO demo.customers (id, name, email, tier) VALUES (3, 'Linus', 'l@example.com', "
    "'bronze')",
    "UPDATE demo.customers SET tier = 'platinum', tags = tags + {'vip'} WHERE id = 1",
    "UPDATE demo.customers SET email = 'grace@navy.mil' WHERE id = 2",
    "DELETE FROM demo.customers WHERE id = 3",
]
CHANGES = 6  # row updates the workload's writes make
NODE_PORTS = {"cql_port": 19242, "storage_port": 17200, "jmx_port": 17399}


def main() -> None:
    """Run the pipeline end to end and print the change events."""
    base = StackSettings.from_env()
    work = base.state_dir / "demo"
    work.mkdir(parents=True, exist_ok=True)
    print("== 1. local stack (Kafka + Cassandra with CDC), started from Maven Central jars")
    stack.up(base)
    s = replace(base, state_dir=work / "node", cluster_name="casscade-demo", **NODE_PORTS)
    stack.up(s, with_kafka=False)  # the demo's own node: its cdc_raw is the demo's alone
    try:
        _pipeline(s, work)
    finally:
        cassandra.shutdown(s, drain=False)
    print("\nThe stack keeps running: `deploy/local/stack status`, `make down` to stop it.")


def _pipeline(s: StackSettings, work: Path) -> None:

    print("\n== 2. a CDC table and a few writes")
    cluster = cassandra.cql_cluster(s)
    session = cluster.connect()
    try:
        session.execute(WORKLOAD[0], timeout=60)
        session.execute(WORKLOAD[1], timeout=60)
        raw_before = _end_offsets(s, RAW_TOPIC)
        for cql in WORKLOAD[2:]:
            print(f"   cql> {cql}")
            session.execute(cql, timeout=60)
        rows = list(session.execute("SELECT id, name, email, tier, tags FROM demo.customers"))
    finally:
        cluster.shutdown()
    print("   SELECT * now:")
    for r in sorted(rows):
        print(f"     {r.id} | {r.name:6} | {r.email:18} | {r.tier:8} | {sorted(r.tags or [])}")

    print("\n== 3. publisher: the node agent follows cdc_raw and publishes row updates")
    agent = _start_agent(s, work)
    try:
        deadline = time.monotonic() + 60
        while _count_since(s, RAW_TOPIC, raw_before) < CHANGES:
            if time.monotonic() > deadline or agent.poll() is not None:
                sys.exit(f"the agent did not publish the writes; see {work / 'publisher.log'}")
            time.sleep(0.3)
    finally:
        agent.send_signal(signal.SIGTERM)
        agent.wait(60)
    print(f"   {_count_since(s, RAW_TOPIC, raw_before)} row updates on {RAW_TOPIC} "
          f"(log: {work / 'publisher.log'})")

    print("\n== 4. materializer: Spark merges them into change events (first start ~30 s)")
    events_before = _end_offsets(s, EVENT_TOPIC)
    cmd = [sys.executable, "-m", "shared.cli", "materializer", "run", "--available-now",
           "--set", f"kafka.bootstrap_servers={s.bootstrap_servers}",
           "--set", f"kafka.topic_prefix={PREFIX}",
           # a new state layout needs a new checkpoint (materializer.processor.STATE_LAYOUT)
           "--set", f"spark.checkpoint={work / f'checkpoint-v{STATE_LAYOUT}'}",
           "--set", "log.format=text",
           "--set", "http.port=0"]
    with (work / "materializer.log").open("ab") as log:
        code = subprocess.call(cmd, cwd=repo_root(), stdout=log, stderr=subprocess.STDOUT,
                               env=_env(s))
    if code != 0:
        sys.exit(f"the materializer failed; see {work / 'materializer.log'}")

    print(f"\n== 5. change events on {EVENT_TOPIC} (Debezium envelope, complete rows)")
    _show_events(s, events_before)


def _env(s: StackSettings) -> dict[str, str]:
    return dict(os.environ, CASSCADE_LIB_DIR=str(s.lib_dir))  # the jars the stack uses


def _start_agent(s: StackSettings, work: Path) -> subprocess.Popen:
    config = work / "publisher.yaml"
    config.write_text(yaml.safe_dump({
        "kafka": {"bootstrap_servers": s.bootstrap_servers, "topic_prefix": PREFIX,
                  "partitions": 3},
        "cassandra": {"contact_points": ["127.0.0.1"], "port": s.cql_port},
        "cdc": {"cdc_raw": str(s.cdc_raw_dir), "archive_dir": str(work / "archive")},
        "node": {"host": "local-node", "datacenter": "datacenter1"},
        "state": {"path": str(work / "publisher-state")},
        "http": {"port": 0}, "log": {"format": "text", "level": "WARNING"},
    }))
    log = (work / "publisher.log").open("ab")
    return subprocess.Popen([sys.executable, "-m", "shared.cli", "publisher", "run",
                             "--config", str(config)], cwd=repo_root(), stdout=log,
                            stderr=subprocess.STDOUT, env=_env(s))


def _consumer(s: StackSettings) -> Consumer:
    return Consumer({"bootstrap.servers": s.bootstrap_servers, "group.id": "casscade-demo",
                     "enable.auto.commit": False})


def _end_offsets(s: StackSettings, topic: str) -> dict[int, int]:
    c = _consumer(s)
    try:
        md = c.list_topics(topic, timeout=10).topics.get(topic)
        if md is None or md.error is not None:
            return {}
        return {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                for p in md.partitions}
    finally:
        c.close()


def _count_since(s: StackSettings, topic: str, before: dict[int, int]) -> int:
    return sum(end - before.get(p, 0) for p, end in _end_offsets(s, topic).items())


def _show_events(s: StackSettings, before: dict[int, int]) -> None:
    events = [json.loads(m.value()) for m in read_to_end(s.bootstrap_servers, EVENT_TOPIC,
                                                           start=before)
              if m.value() is not None]  # tombstones after deletes carry no event
    events.sort(key=lambda e: (e["source"]["ts_us"], e["source"]["kafka_offset"] or 0))
    cols = ["id", "name", "email", "tier", "tags"]
    print(f"   {'op':2}  {'row':6}  " + " | ".join(f"{c:17}" for c in cols[1:]))
    for e in events:
        key = (e["after"] or e["before"])["id"]
        for label, image in (("before", e["before"]), ("after", e["after"])):
            cells = " | ".join(f"{_fmt(image[c]) if image else '-':17}" for c in cols[1:])
            print(f"   {e['op'] if label == 'before' else '':2}  {label:6}  {cells}"
                  + (f"   id={key}" if label == "before" else ""))
    print(f"   {len(events)} events: " + ", ".join(
        f"{op}={sum(e['op'] == op for e in events)}" for op in "cud"))


def _fmt(v: object) -> str:
    text = "null" if v is None else (",".join(v) if isinstance(v, list) else str(v))
    return text[:17]


if __name__ == "__main__":
    main()
