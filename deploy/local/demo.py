#!/usr/bin/env python3
"""`make demo`: the whole pipeline on the local stack.

Cassandra (CDC) → `casscade publisher run` (node agent) → Kafka raw topic →
`casscade materializer run` (Spark, local mode) → change events with full before/after rows.
The demo's Cassandra is a node of its own (.casscade/demo/node, CQL port 19242), so its
cdc_raw holds only the demo's writes; it is stopped at the end. State lives under
.casscade/demo; a second run continues from it (its writes then show as updates).

`--nodes 3` (`make demo NODES=3`) runs a ring of three nodes instead (127.0.0.1-3, port
19242, .casscade/demo/ring3) at RF=3 with a publisher per node: every change then reaches
the raw topic three times, once from each replica, and comes out as one event.

`--secure` (`make demo SECURE=1`) runs it on the locked stack (`stack up --secure`: Kafka
on SASL_SSL with ACLs, the demo's node with passwords, permissions and client TLS): the
agent logs in as `publisher`, the job as `materializer`, each with configuration alone
(passwords in files or the environment, never on a command line). One node only.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path

import yaml
from cassandra.util import SortedSet
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from devstack import cassandra, secure, stack, tls
from devstack.settings import StackSettings, repo_root
from shared.kafka_topics import read_to_end
from shared.rowupdate import is_row_update
from shared.rowupdate_reader import read_row_update
from shared.topic_names import event_topic, per_table_raw_topics, raw_topic

WORKLOAD = [
    "CREATE KEYSPACE IF NOT EXISTS demo WITH replication = "
    "{'class': 'SimpleStrategy', 'replication_factor': %(rf)d}",
    "CREATE TABLE IF NOT EXISTS demo.customers (id int PRIMARY KEY, name text, email text, "
    "tier text, tags set<text>) WITH cdc = true",
    "INSERT INTO demo.customers (id, name, email, tier, tags) "
    "VALUES (%(a)d, 'Ada', 'ada@example.com', 'gold', {'early'})",
    "INSERT INTO demo.customers (id, name, email, tier) "
    "VALUES (%(b)d, 'Grace', 'grace@example.com', 'silver')",
    "INSERT INTO demo.customers (id, name, email, tier) VALUES (%(c)d, 'Linus', "
    "'l@example.com', 'bronze')",
    "UPDATE demo.customers SET tier = 'platinum', tags = tags + {'vip'} WHERE id = %(a)d",
    "UPDATE demo.customers SET email = 'grace@navy.mil' WHERE id = %(b)d",
    "DELETE FROM demo.customers WHERE id = %(c)d",
]
CHANGES = 6  # row updates the workload's writes make
COLUMNS = ["id", "name", "email", "tier", "tags"]
NODE_PORTS = {"cql_port": 19242, "storage_port": 17200, "jmx_port": 17399}


# one prefix per ring size: a ring's table is another table (another id) than a node's
PREFIX = "demo"
RAW_TOPIC = EVENT_TOPIC = ""
KAFKA: dict[str, str] = {}  # the demo's own Kafka clients (the admin on the locked stack)
# the stack whose Kafka the demo uses (its passwords and CA); the demo's nodes are its own
BROKER: StackSettings  # set by main()


def main() -> None:
    """Run the pipeline end to end and print the change events."""
    global PREFIX, RAW_TOPIC, EVENT_TOPIC, KAFKA, BROKER
    nodes = int(sys.argv[sys.argv.index("--nodes") + 1]) if "--nodes" in sys.argv else 1
    locked = "--secure" in sys.argv
    if nodes not in (1, 3) or (locked and nodes != 1):
        sys.exit("demo: --nodes is 1 or 3 (1 with --secure)")
    PREFIX = "demo" if nodes == 1 else f"demo-ring{nodes}"
    RAW_TOPIC, EVENT_TOPIC = raw_topic(PREFIX), event_topic(PREFIX, "demo", "customers")
    base = StackSettings.from_env()
    if locked:
        base = base.secured()
    work = base.state_dir / "demo"
    work.mkdir(parents=True, exist_ok=True)
    print("== 1. local stack: Kafka, and Cassandra with CDC, from Maven Central jars"
          + (", locked (SASL_SSL + ACLs; passwords + TLS)" if locked else ""))
    stack.up(base, with_cassandra=False)  # the demo's Cassandra is its own (below)
    BROKER = base
    KAFKA = ({"bootstrap.servers": base.bootstrap_servers} if not locked
             else secure.client_config(base, secure.ADMIN))
    _drop_old_raw_topics()
    if locked:
        print(f"   ACLs for the components under {PREFIX}.: "
              f"{secure.grant_acls(base, PREFIX)} bindings")
    node_dir = work / ("node" if nodes == 1 else f"ring{nodes}")
    cluster = "casscade-demo" if nodes == 1 else f"casscade-demo{nodes}"
    s = replace(base, state_dir=node_dir, cluster_name=cluster, nodes=nodes, **NODE_PORTS)
    stack.up(s, with_kafka=False)  # the demo's own nodes: their cdc_raw is the demo's alone
    try:
        _pipeline(s, work / ("." if nodes == 1 else f"ring{nodes}"))
    finally:
        for node in reversed(s.all_nodes()):
            cassandra.shutdown(node, drain=False)
    flag = " --secure" if locked else ""
    print(f"\nKafka keeps running: `deploy/local/stack status{flag}`, "
          f"`deploy/local/stack down{flag}` to stop it.")


def _pipeline(s: StackSettings, work: Path) -> None:

    print(f"\n== 2. a CDC table (RF={s.nodes}) and a few writes")
    cluster = cassandra.cql_cluster(s)
    session = cluster.connect()
    try:
        session.execute(WORKLOAD[0] % {"rf": s.nodes}, timeout=60)
        session.execute(WORKLOAD[1], timeout=60)
        # A rerun writes new ids, so it tells the same story (c, u, d) as the first run
        # instead of updating the rows an earlier run left.
        last = max((r.id for r in session.execute("SELECT id FROM demo.customers")), default=0)
        ids = {"a": last + 1, "b": last + 2, "c": last + 3}
        raw_before = _end_offsets(s, RAW_TOPIC)
        for cql in WORKLOAD[2:]:
            print(f"   cql> {cql % ids}")
            session.execute(cql % ids, timeout=60)
        rows = list(session.execute(f"SELECT {', '.join(COLUMNS)} FROM demo.customers "
                                    f"WHERE id IN ({ids['a']}, {ids['b']}, {ids['c']})"))
    finally:
        cluster.shutdown()
    # shown as the events show the same values (a null set is null, not [])
    print("   SELECT * now:")
    print(f"   {'id':8}" + " | ".join(f"{c:17}" for c in COLUMNS[1:]))
    for r in sorted(rows):
        values = [sorted(v) if isinstance(v, set | frozenset | SortedSet) else v for v in r]
        print(f"   {values[0]!s:8}" + " | ".join(f"{_fmt(v):17}" for v in values[1:]))

    print("\n== 3. publisher: a node agent per node follows cdc_raw, publishes row updates")
    agents = [_start_agent(node, work) for node in s.all_nodes()]
    try:
        deadline = time.monotonic() + 90
        while _count_since(s, RAW_TOPIC, raw_before) < CHANGES * s.nodes:
            if time.monotonic() > deadline or any(a.poll() is not None for a in agents):
                sys.exit(f"the agents did not publish the writes; see {work}/publisher*.log")
            time.sleep(0.3)
    finally:
        for agent in agents:
            agent.send_signal(signal.SIGTERM)
        for agent in agents:
            agent.wait(60)
    print(f"   {_count_since(s, RAW_TOPIC, raw_before)} row updates on {RAW_TOPIC} "
          f"(logs: {work}/publisher*.log)")
    if s.nodes > 1:
        hosts = Counter(read_row_update(m.value())["source"]["host"] for m in read_to_end(
            KAFKA, RAW_TOPIC, start=raw_before))
        print("   one copy of each change from every replica: " + ", ".join(
            f"{host} {n}" for host, n in sorted(hosts.items())))

    print("\n== 4. materializer: Spark merges them into change events (first start ~30 s)")
    events_before = _end_offsets(s, EVENT_TOPIC)
    cmd = [sys.executable, "-m", "casscade.cli", "materializer", "run", "--available-now",
           "--set", f"kafka.bootstrap_servers={s.bootstrap_servers}",
           "--set", f"kafka.topic_prefix={PREFIX}",
           # the partition stores' checkpoint (an earlier demo's checkpoint-v1/-v2, of the
           # state mode casscade no longer has, is left alone)
           "--set", f"spark.checkpoint={work / 'checkpoint-stores'}",
           "--set", "log.format=text",
           "--set", "http.port=0",
           *(f for k, v in _kafka_door("materializer").items()
             for f in ("--set", f"kafka.security.{k}={v}"))]
    log_path = work / "materializer.log"
    start = log_path.stat().st_size if log_path.exists() else 0
    with log_path.open("ab") as log:
        job = subprocess.Popen(cmd, cwd=repo_root(), stdout=log, stderr=subprocess.STDOUT,
                               env=_env(s, "materializer"))
        code = _wait_showing_progress(job, log_path, start)
    if code != 0:
        sys.exit(f"the materializer failed; see {work / 'materializer.log'}")

    print(f"\n== 5. change events on {EVENT_TOPIC} (Debezium envelope, complete rows)")
    _show_events(s, events_before)
    if s.nodes > 1:
        print(f"   {CHANGES} changes, {CHANGES * s.nodes} copies in, one event per change out")


def _env(s: StackSettings, user: str) -> dict[str, str]:
    env = dict(os.environ, CASSCADE_LIB_DIR=str(s.lib_dir))  # the jars the stack uses
    if BROKER.secure:  # the Kafka password from the environment, never a flag
        env["CASSCADE_KAFKA__SECURITY__SASL_PASSWORD"] = secure.password(BROKER, user)
    return env


def _kafka_door(user: str) -> dict[str, str]:
    """kafka.security for the locked Kafka (empty on the open stack): user and CA."""
    if not BROKER.secure:
        return {}
    return {"protocol": "SASL_SSL", "sasl_username": user,
            "ssl_ca_file": str(tls.ensure(BROKER.state_dir).ca_pem)}


def _start_agent(s: StackSettings, work: Path) -> subprocess.Popen:
    n = "" if s.nodes == 1 else f"-{s.node_index}"
    work.mkdir(parents=True, exist_ok=True)
    config = work / f"publisher{n}.yaml"
    door: dict[str, dict] = {"kafka": {}, "cassandra": {}}
    if s.secure:  # passwords by file (Cassandra) and environment (Kafka), CA files
        door["kafka"] = {"security": _kafka_door("publisher")}
        door["cassandra"] = {
            "username": "publisher", "ssl": True,
            "ssl_ca_file": str(tls.ensure(s.state_dir).ca_pem),
            "password_file": str(secure.cassandra_password_file(s, "publisher"))}
    config.write_text(yaml.safe_dump({
        "kafka": {"bootstrap_servers": s.bootstrap_servers, "topic_prefix": PREFIX,
                  "partitions": 3, **door["kafka"]},
        "cassandra": {"contact_points": [s.host], "port": s.cql_port, **door["cassandra"]},
        "cdc": {"cdc_raw": str(s.cdc_raw_dir), "archive_dir": str(work / f"archive{n}")},
        "node": {"host": "local-node" if not n else f"node{n}", "datacenter": "datacenter1"},
        "state": {"path": str(work / f"publisher-state{n}")},
        "http": {"port": 0}, "log": {"format": "text", "level": "WARNING"},
    }))
    log = (work / f"publisher{n}.log").open("ab")
    return subprocess.Popen([sys.executable, "-m", "casscade.cli", "publisher", "run",
                             "--config", str(config)], cwd=repo_root(), stdout=log,
                            stderr=subprocess.STDOUT, env=_env(s, "publisher"))


def _consumer(s: StackSettings) -> Consumer:
    # read_committed, as every reader of the events (the job writes them in transactions)
    return Consumer(KAFKA | {"group.id": "casscade-demo", "enable.auto.commit": False,
                             "isolation.level": "read_committed"})


def _drop_old_raw_topics() -> None:
    """Delete the demo's raw topics of the per-table layout an earlier casscade made (the
    materializer refuses to start beside them): the demo's prefix is its own."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(KAFKA)
    old = per_table_raw_topics(PREFIX, set(admin.list_topics(timeout=30).topics))
    for future in (admin.delete_topics(old).values() if old else ()):
        future.result(timeout=60)
    if old:
        print(f"   deleted the demo's raw topics of an earlier casscade: {', '.join(old)}")


def _end_offsets(s: StackSettings, topic: str) -> dict[int, int]:
    c = _consumer(s)
    try:
        md = c.list_topics(topic, timeout=10).topics.get(topic)
        if md is None or md.error is not None:
            return {}
        return {p: _end(c, TopicPartition(topic, p)) for p in md.partitions}
    finally:
        c.close()


_NOT_SERVING = (KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE,
                KafkaError._TIMED_OUT)


def _end(c: Consumer, tp: TopicPartition) -> int:
    """A partition's end, asked again while its leader is not serving yet (a broker that
    just started or a topic just made answer NOT_LEADER_FOR_PARTITION for a moment)."""
    deadline = time.monotonic() + 30
    while True:
        try:
            return c.get_watermark_offsets(tp, timeout=10)[1]
        except KafkaException as exc:
            if exc.args[0].code() not in _NOT_SERVING or time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def _count_since(s: StackSettings, topic: str, before: dict[int, int]) -> int:
    """Row updates (not heartbeats nor table records) in `topic` after the offsets
    `before`."""
    if not any(end > before.get(p, 0) for p, end in _end_offsets(s, topic).items()):
        return 0
    return sum(is_row_update(m.value()) for m in read_to_end(KAFKA, topic, start=before))


def _show_events(s: StackSettings, before: dict[int, int]) -> None:
    events = [json.loads(m.value()) for m in read_to_end(KAFKA, EVENT_TOPIC, start=before)
              if m.value() is not None]  # tombstones after deletes carry no event
    events.sort(key=lambda e: (e["source"]["ts_us"], e["source"]["kafka_offset"] or 0))
    print(f"   {'op':2}  {'row':6}  " + " | ".join(f"{c:17}" for c in COLUMNS[1:]))
    for e in events:
        key = (e["after"] or e["before"])["id"]
        for label, image in (("before", e["before"]), ("after", e["after"])):
            cells = " | ".join(f"{_fmt(image[c]) if image else '-':17}" for c in COLUMNS[1:])
            print(f"   {e['op'] if label == 'before' else '':2}  {label:6}  {cells}"
                  + (f"   id={key}" if label == "before" else ""))
    print(f"   {len(events)} events: " + ", ".join(
        f"{op}={sum(e['op'] == op for e in events)}" for op in "cud"))


def _wait_showing_progress(job: subprocess.Popen, log_path: Path, start: int) -> int:
    """Wait for the job, printing every 5 s how long it has run and its last log line
    (a fresh start spends 20-50 s in the JVM and the first micro-batch)."""
    began, shown = time.monotonic(), ""
    while True:
        try:
            return job.wait(5)
        except subprocess.TimeoutExpired:
            lines = log_path.read_bytes()[start:].decode(errors="replace").splitlines()
            # the runner's own lines: "<date> <time> LEVEL casscade.materializer message k=v"
            steps = [line for line in lines
                     if re.match(r"\S+ \S+ (INFO|WARNING|ERROR) casscade\.", line)]
            last = steps[-1].split(" ", 4)[-1][:90] if steps else "starting"
            if last != shown or int(time.monotonic() - began) % 15 < 5:
                print(f"   {time.monotonic() - began:4.0f}s  {last}", flush=True)
                shown = last


def _fmt(v: object) -> str:
    text = "null" if v is None else (",".join(v) if isinstance(v, list) else str(v))
    return text[:17]


if __name__ == "__main__":
    main()
