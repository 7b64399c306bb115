"""Test harness for the materializer: publish a node's CDC into raw topics, run the Spark job
as a real process, read the event topics, ask Cassandra for the truth, and count what a
stopped partition store holds of a micro-batch (test code only)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaException

from casscade.verify.avro_json import avro_as_json
from devstack.settings import StackSettings, repo_root
from materializer.output.envelope import EnvelopeWriter, dumps
from materializer.output.values import MODES, ValueModes, to_connect
from materializer.store.partition_store import _BATCH, _COPY, _ENTRY, open_store
from publisher.agent.agent import Agent
from publisher.agent.offset_store import OffsetStore, SegmentState
from publisher.agent.truncations import NodeTruncationRecords
from publisher.commitlog.schema_source import CassandraSchemaSource
from publisher.kafka_sink import KafkaSink
from publisher.settings import PublisherConfig
from shared.capture import CaptureSettings
from shared.kafka_topics import read_to_end
from shared.metrics import Registry
from shared.schema import TableSchema

from support.phases import phased
from support.reference import copy_synced_segments, settled_offsets

# the `source` fields that name the copy that made an event (any replica's copy may)
COPY_FIELDS = frozenset({"host", "datacenter", "file", "pos", "index", "kafka_topic",
                         "kafka_partition", "kafka_offset"})

def publish_new_cdc(stack: StackSettings, cql: Any, before: dict[str, int], prefix: str,
                    workdir: Path, host: str = "node-1", from_before: bool = False,
                    kafka: Mapping[str, str] | None = None,
                    capture: CaptureSettings | None = None, truncations: bool = False) -> int:
    """Copy what the node synced since `before` into a private cdc_raw (marked COMPLETED)
    and publish it with an in-process agent; returns the records acknowledged. `kafka`:
    the agent's librdkafka settings (default: the stack's broker, no security).
    `from_before`: the agent starts at the `before` offsets (as if it had published
    everything up to there), not at the start of those segments. `capture`: the agent's
    capture rules (default: every table whole). `truncations`: the agent reads the node's
    truncation records too (as `publisher run` does), and announces every one it finds."""
    offsets = settled_offsets(stack.cdc_raw_dir)
    cdc_raw = workdir / f"cdc_raw-{host}"
    cdc_raw.mkdir(parents=True)
    copy_synced_segments(stack.cdc_raw_dir, before, offsets, cdc_raw)
    config = PublisherConfig()
    config.cdc.cdc_raw = cdc_raw
    config.kafka.topic_prefix = prefix
    config.node.host = host
    if capture is not None:
        config.capture = capture
    metrics = Registry()
    sink = KafkaSink(kafka or stack.bootstrap_servers, prefix, 3, 1, {}, metrics)
    store = OffsetStore(workdir / f"state-{host}")
    if from_before:
        for name, offset in before.items():
            if (cdc_raw / name).exists():
                store.put(int(name.split("-")[2].split(".")[0]), SegmentState(offset, set()))
        store.flush()
    records = NodeTruncationRecords(cql, stack.host) if truncations else None
    agent = Agent(config, CassandraSchemaSource(cql), sink, store, metrics, records)
    def finished() -> bool:
        # Retired, or read to the end with every record acknowledged: a segment can stay
        # because it also holds mutations of tables dropped since (kept back, by design).
        for f in cdc_raw.glob("*.log"):
            seg = agent.segments.get(int(f.stem.split("-")[2]))
            if seg is None or seg.end_position is None or seg.tracker.in_flight:
                return False
        return True

    deadline = time.monotonic() + 300
    try:
        while not finished() and time.monotonic() < deadline:
            busy = agent.step()
            sink.poll(0 if busy else 0.02)
        assert finished(), "the agent did not finish the segments"
        return agent.acked_total()
    finally:
        agent.shutdown()
        store.close()


def materializer_command(stack: StackSettings, prefix: str, checkpoint: Path,
                         *sets: str, available_now: bool = True) -> list[str]:
    """`casscade materializer run` for the local stack."""
    cmd = [sys.executable, "-m", "casscade.cli", "materializer", "run",
           "--set", f"kafka.bootstrap_servers={stack.bootstrap_servers}",
           "--set", f"kafka.topic_prefix={prefix}",
           "--set", f"spark.checkpoint={checkpoint}", "--set", "log.format=text",
           "--set", "http.port=0"]  # tests that scrape it pass their own port
    for s in sets:
        cmd += ["--set", s]
    return cmd + (["--available-now"] if available_now else [])


def start_materializer(cmd: list[str], log: Path,
                       env: Mapping[str, str] | None = None) -> subprocess.Popen:
    """Start the job in its own process group (driver JVM included); `env` adds to the
    environment (a password, say)."""
    env = dict(os.environ, CASSCADE_STATE_DIR=str(StackSettings.from_env().state_dir),
               **(env or {}))
    return subprocess.Popen(cmd, cwd=repo_root(), env=env, stdout=log.open("ab"),
                            stderr=subprocess.STDOUT, start_new_session=True)


def kill_group(proc: subprocess.Popen, sig: int = signal.SIGKILL) -> None:
    """Signal the job's process group and every process under it, and reap it: the driver
    JVM runs in a session of its own (materializer.spark.pyspark_internals), so a group
    signal alone would leave it and its Python workers to exit when its stdin closes."""
    under = descendants(proc.pid)  # before the kill: orphans move to another parent
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, sig)
    for pid in under:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)
    proc.wait(60)


def descendants(pid: int) -> list[int]:
    """Every living process under `pid` (from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                children.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


@phased("jobs")
def run_materializer(cmd: list[str], log: Path, timeout_s: float = 600,
                     env: Mapping[str, str] | None = None) -> None:
    """Run an --available-now job to its end; fails with the log's tail otherwise."""
    proc = start_materializer(cmd, log, env)
    try:
        code = proc.wait(timeout_s)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        raise AssertionError(f"materializer did not finish in {timeout_s}s:\n"
                             + log.read_text()[-4000:]) from None
    finally:
        kill_group(proc)
    assert code == 0, f"materializer exited {code}:\n{log.read_text()[-4000:]}"


def read_events(bootstrap: str | Mapping[str, str], topic: str, timeout_s: float = 30
                ) -> list[tuple[int, int, dict, dict | None]]:
    """Every record of an event topic as (partition, offset, key, value or None); a
    truncate event's key is None."""
    try:
        return [(m.partition(), m.offset(), None if m.key() is None else json.loads(m.key()),
                 json.loads(m.value()) if m.value() is not None else None)
                for m in read_to_end(bootstrap, topic, timeout_s)]
    except KafkaException as exc:
        raise AssertionError(f"cannot read {topic} to its end: {exc}") from exc


def final_rows(events: list[tuple[int, int, dict, dict | None]]) -> dict[str, dict]:
    """Key (canonical JSON) → the last event's `after`, for keys whose last event is no
    delete; a truncate event empties its partition (as a consumer that truncates on it)."""
    last: dict[str, dict | None] = {}
    partition_of: dict[str, int] = {}
    for part, _o, key, value in sorted(events, key=lambda e: (e[0], e[1])):
        if value is None:
            continue
        if key is None and value["op"] == "t":
            for k, p in partition_of.items():
                if p == part:
                    last[k] = None
            continue
        last[canonical(key)] = value["after"]
        partition_of[canonical(key)] = part
    return {k: v for k, v in last.items() if v is not None}


def canonical(obj: Any) -> str:
    """Stable JSON text (object keys sorted) for comparisons."""
    return json.dumps(obj, sort_keys=True)


def registry_events(kafka: str | Mapping[str, str], topic: str, table: TableSchema,
                    registry: Mapping[str, str], modes: ValueModes = MODES
                    ) -> list[tuple[int, int, dict, dict | None, int]]:
    """Every record of an Avro event topic, decoded through a real registry by Confluent's
    own client and deserializer (`registry`: its config, e.g. url, ssl.ca.location), in
    the events' JSON form: (partition, offset, key, value or None, the value's schema id
    or 0 for a tombstone)."""
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroDeserializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    deserializer = AvroDeserializer(SchemaRegistryClient(dict(registry)))
    writer = EnvelopeWriter(table, "casscade", False, modes)
    out = []
    for msg in read_to_end(kafka, topic):
        assert msg.key()[:1] == b"\x00", f"{topic}@{msg.offset()}: no Confluent wire format"
        key = avro_as_json(deserializer(msg.key(), SerializationContext(
            topic, MessageField.KEY)), writer.key_schema)
        if msg.value() is None:  # the tombstone after a delete
            out.append((msg.partition(), msg.offset(), key, None, 0))
            continue
        value = deserializer(msg.value(), SerializationContext(topic, MessageField.VALUE))
        out.append((msg.partition(), msg.offset(), key,
                    avro_as_json(value, writer.value_schema),
                    int.from_bytes(msg.value()[1:5], "big")))
    return out


def oracle_rows(cql: Any, table: TableSchema, modes: ValueModes = MODES) -> dict[str, dict]:
    """`SELECT *` of the table, each row in the events' typed JSON form, by key."""
    types = {c.name: c.type for c in table.columns}
    keys = [c.name for c in (*table.partition_key, *table.clustering)]
    out = {}
    for row in cql.execute(f"SELECT * FROM {table.keyspace}.{table.table}"):
        d = row._asdict()
        typed = {name: to_connect(types[name], d[name], modes) for name in types}
        # through the same JSON as events (bytes → base64, tuples → lists)
        typed = json.loads(dumps(typed))
        out[canonical({k: typed[k] for k in keys})] = typed
    return out


def events_by_key(bootstrap: str, prefix: str, ks: str) -> dict[str, list]:
    """Per key: its events, without processing time and without which copy made them."""
    out: dict[str, list] = defaultdict(list)
    for name in ("r", "ctr"):
        for _p, _o, key, value in read_events(bootstrap, f"{prefix}.{ks}.{name}"):
            if value is not None:
                source = {k: v for k, v in value["source"].items() if k not in COPY_FIELDS}
                value = {**value, "source": source, "ts_ms": None}
            out[f"{name} {canonical(key)}"].append(value)
    return out


def assert_same_events(got: dict[str, list], want: dict[str, list], where: Path) -> None:
    """`got` equals `want`, key by key; else both are saved under `where` and the first
    differing keys are shown event by event (pytest's whole-dict diff is too long to read)."""
    differ = sorted(k for k in got.keys() | want.keys() if got.get(k) != want.get(k))
    if not differ:
        return
    where.mkdir(parents=True, exist_ok=True)
    (where / "got.json").write_text(json.dumps(got, indent=1, sort_keys=True))
    (where / "want.json").write_text(json.dumps(want, indent=1, sort_keys=True))
    lines = [f"{len(differ)} of {len(want)} keys differ (both saved in {where}):"]
    for key in differ[:3]:
        lines.append(f"{key}:")
        lines += [f"  got  {canonical(e)}" for e in got.get(key, [])]
        lines += [f"  want {canonical(e)}" for e in want.get(key, [])]
    raise AssertionError("\n".join(lines))


def change_of(key: dict, value: dict) -> str:
    """What makes an event one change: its key, op, images and source, but not which copy
    of the record made it (a re-run task may keep another replica's copy) or when."""
    source = {k: v for k, v in value["source"].items() if k not in COPY_FIELDS}
    return canonical([key, {k: v for k, v in value.items() if k != "ts_ms"}
                      | {"source": source}])


def duplicates(events: list[tuple[int, int, dict, dict | None]]) -> list[str]:
    """The events (tombstones aside) that repeat an earlier event of the same change, each
    named by key and position, with the position of the first (a truncate event: one per
    partition)."""
    first: dict[str, tuple[int, int]] = {}
    found = []
    for p, o, key, value in sorted(events, key=lambda e: (e[0], e[1])):
        if value is None:
            continue
        ident = change_of(key, value) + (f" in {p}" if key is None else "")
        if ident in first:
            found.append(f"{canonical(key)} @{p}/{o}: a duplicate of the event at "
                         f"{first[ident][0]}/{first[ident][1]}")
        else:
            first[ident] = (p, o)
    return found


def writes_of(path: Path, batch: int) -> int:
    """How many entries and copy digests of a stopped partition store micro-batch `batch`
    wrote (waits for the store's lock while a job holds it)."""
    # the store's key layout (_COPY, _ENTRY, the batch id leading each value) is private to
    # it: only this reader of a stopped store, test code, shares it
    db = open_store(path)
    try:
        it = db.iter()
        it.seek(_COPY)  # the copy digests, then the entries ("c" < "e")
        count = 0
        while it.valid() and it.key()[:1] in (_COPY, _ENTRY):
            count += _BATCH.unpack_from(it.value())[0] == batch
            it.next()
        del it
        return count
    finally:
        db.close()


@phased("jobs")
def wait_for_log(log: Path, text: str, job: subprocess.Popen, timeout_s: float = 240) -> None:
    """Wait until the job's log holds `text`; fails with the log's tail if the job ends or
    the time runs out first."""
    deadline = time.monotonic() + timeout_s
    while text not in log.read_text():
        assert job.poll() is None, log.read_text()[-4000:]
        assert time.monotonic() < deadline, f"no {text!r} in:\n{log.read_text()[-4000:]}"
        time.sleep(0.3)


@phased("workloads")
def publish_inserts(bootstrap: str, prefix: str, rows: Mapping[int, Iterable[int]],
                    one_per_batch: bool = False, version: int = 0) -> None:
    """Inserts of rows of support.mutations' ks.t, row n with partition key n, written
    straight to the raw topic (made with 2 partitions if missing) partition by partition
    (`rows`: raw partition → its row numbers), and the table's schema record;
    `one_per_batch`: a producer batch per record (a reader with a small
    max.partition.fetch.bytes then reads them a few at a time); `version` > 0: a later
    write of each row, with another value."""
    from confluent_kafka import Producer

    from publisher.kafka_sink import schema_record
    from shared.kafka_topics import TopicCreator
    from shared.topic_names import raw_key, raw_topic, schema_topic

    from support.mutations import TABLE, body, i32, mutation

    topic = raw_topic(prefix)
    TopicCreator(bootstrap, 2, 1).ensure(topic)
    TopicCreator(bootstrap, 1, 1).ensure(schema_topic(prefix))
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0 if one_per_batch else 5}
                        | ({"batch.num.messages": 1} if one_per_batch else {}))
    producer.produce(schema_topic(prefix), key=TABLE.schema_hash.encode(),
                     value=schema_record(TABLE))
    for part, numbers in rows.items():
        for n in numbers:
            v = f"v{n}" if not version else f"v{n}-{version}"
            (value,) = mutation(n, body("ROW", 0, ts=1000 + n + 1_000_000 * version, v=v,
                                        insert=True), p=n)
            producer.produce(topic, key=raw_key(TABLE.id, i32(n)), value=value, partition=part)
            producer.poll(0)
    assert producer.flush(60) == 0


def paced_read(fetch_wait_ms: int) -> tuple[str, ...]:
    """Job settings that read publish_inserts(one_per_batch=True)'s records one producer
    batch a fetch, each fetch held by the broker for `fetch_wait_ms` (its fetch.min.bytes is
    never reached), into Arrow batches of 100: a task reads N of them for N x fetch_wait_ms
    at least, however fast the machine, so a test can act while it is still reading."""
    return ("kafka.consumer.max.partition.fetch.bytes=256",
            "kafka.consumer.fetch.min.bytes=1000000",
            f"kafka.consumer.fetch.max.wait.ms={fetch_wait_ms}",
            "spark.conf.spark.sql.execution.arrow.maxRecordsPerBatch=100")


def inserted_rows(bootstrap: str, prefix: str) -> list[tuple[int, int, dict, dict | None]]:
    """The events of publish_inserts' table (tombstones left out; none while the job has
    not made its topic yet)."""
    try:
        return [e for e in read_events(bootstrap, f"{prefix}.ks.t") if e[3] is not None]
    except AssertionError as exc:
        if f"topic {prefix}.ks.t not found" in str(exc):
            return []
        raise
