"""The materializer on the real stack: Cassandra → publisher → Kafka → Spark → events.

One randomized workload (hypothesis-drawn CQL over every type: out-of-order USING TIMESTAMP,
TTLs, collection element operations, range and partition deletes, counters) is written to
the dev node and published once; the tests then run the real Spark job over it and compare
with Cassandra's own `SELECT *`, key by key.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import uuid
import zlib
from collections import defaultdict
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from casscade.verify.avro_json import avro_as_json
from devstack.settings import StackSettings, repo_root
from materializer.output.avro_envelope import decode, schemas_from_topic
from materializer.output.envelope import EnvelopeWriter
from materializer.store.layout import STATE_DIR
from shared.kafka_topics import read_to_end
from shared.schema import catalog_from_json
from shared.system_schema import read_system_schema
from shared.topic_names import changelog_topic, raw_topic

from support.materializer_harness import (
    assert_same_events,
    canonical,
    duplicates,
    events_by_key,
    final_rows,
    kill_group,
    materializer_command,
    oracle_rows,
    publish_new_cdc,
    read_events,
    run_materializer,
    start_materializer,
    writes_of,
)
from support.raw_copies import copy_raw
from support.reference import cdc_offsets
from support.services import http_get, wait_until
from support.workload import create_workload_tables, run_workload

pytestmark = pytest.mark.integration

STATEMENTS = 2_016


@pytest.fixture(scope="module")
def workload(stack: StackSettings, cql, tmp_path_factory):
    """The workload written to Cassandra and published once under its own prefix."""
    ks = f"mat_{uuid.uuid4().hex[:8]}"
    cql.execute(f"CREATE KEYSPACE {ks} WITH replication = "
                "{'class': 'SimpleStrategy', 'replication_factor': 1}")
    create_workload_tables(cql, ks)
    before = cdc_offsets(stack.cdc_raw_dir)
    cover = ("INSERT", "DELETE FROM", "c1 >", "USING TTL", "TIMESTAMP", "m[", "u.a", ".ctr",
             "BATCH")
    executed = run_workload(cql, ks, STATEMENTS, cover=cover)
    assert len(executed) >= 2000
    for marker in cover:
        assert sum(marker in c for c in executed) >= 10, marker
    work = tmp_path_factory.mktemp("materializer")
    (work / "statements.cql").write_text(";\n".join(executed) + ";\n")  # to replay a failure
    prefix = f"m{uuid.uuid4().hex[:8]}"
    acked = publish_new_cdc(stack, cql, before, prefix, work)
    assert acked >= 2000
    tables = {t.table: t for t in catalog_from_json(read_system_schema(cql)).values()
              if t.keyspace == ks}
    yield {"ks": ks, "prefix": prefix, "work": work, "tables": tables}
    cql.execute(f"DROP KEYSPACE {ks}")


def _compare(stack, cql, workload, prefix: str) -> None:
    problems = []
    for name in ("r", "ctr"):
        table = workload["tables"][name]
        events = read_events(stack.bootstrap_servers, f"{prefix}.{workload['ks']}.{name}")
        problems += [f"{name} {d}" for d in duplicates(events)]  # exactly-once, the default
        got, want = final_rows(events), oracle_rows(cql, table)
        assert len(want) >= 3  # the counter table draws from a handful of keys
        for key in sorted(got.keys() | want.keys()):
            if got.get(key) != want.get(key):
                problems.append(f"{name} {key}: events {canonical(got.get(key))} != "
                                f"select {canonical(want.get(key))}")
    assert not problems, f"{len(problems)} keys differ:\n" + "\n".join(problems[:8])


def _dropped(log: Path) -> int:
    """The copies the run's end line counts as dropped."""
    line = next(line for line in reversed(log.read_text().splitlines())
                if "materializer run ended" in line)
    return int(re.search(r"copies_dropped=(\d+)", line).group(1))


@pytest.fixture(scope="module")
def one_copy(stack, workload) -> str:
    """The job over the workload's records as published (one copy each); its prefix."""
    prefix, work = workload["prefix"], workload["work"]
    run_materializer(materializer_command(stack, prefix, work / "ckpt-main"),
                     work / "main.log")
    return prefix


def test_a_clean_run_leaves_the_class_archive_the_later_drivers_map(workload, one_copy
                                                                    ) -> None:
    """The module's first job ended cleanly: the drivers' class archive is there (written by
    that job or an earlier one of the session; tests/integration/conftest.py) and no
    creator's lock or partial archive is left. The later drivers of the suite run with
    -Xshare:on, so one that could not map it would fail to start."""
    directory = Path(os.environ["CASSCADE_SPARK__CLASS_ARCHIVE_DIR"])
    archives = list(directory.glob("driver-*.jsa"))
    assert archives and all(a.stat().st_size > 10_000_000 for a in archives), archives
    assert not [*directory.glob("*.partial"), *directory.glob("*.lock")]
    log = (workload["work"] / "main.log").read_text()
    assert "class archive not written" not in log


def test_events_end_at_what_cassandra_returns(stack, cql, workload, one_copy) -> None:
    """The job with its defaults (its partition stores' job id beside Spark's checkpoint):
    the events end at Cassandra's rows, with before images."""
    assert (workload["work"] / "ckpt-main" / STATE_DIR / "changelog.json").is_file()
    _compare(stack, cql, workload, one_copy)
    events = read_events(stack.bootstrap_servers, f"{one_copy}.{workload['ks']}.r")
    ops = defaultdict(int)
    for *_, value in events:
        ops[value["op"] if value else "tombstone"] += 1
        if value and value["op"] in ("u", "d"):
            assert value["before"] is not None  # a complete before image
    assert ops["c"] and ops["u"] and ops["d"] and ops["tombstone"] == ops["d"], dict(ops)


@pytest.fixture(scope="module")
def replicas(stack, workload) -> dict:
    """Three replicas' copies of every record (own `source` blocks, one digest), shuffled
    within their key, a fifth of the records with their last copy at the end of the topic;
    then the job over them three times: the dedupe off and rows in pages of 2, in one
    micro-batch like the one-copy run ("pages"); and in micro-batches of 1,500 records, so
    the copies at the end come after a 1 s window, with the dedupe off and on. Events
    depend on how records fall into micro-batches (across batches arrival order stands),
    so only runs with the same batches are compared event by event."""
    work = workload["work"]
    prefix = f"d{uuid.uuid4().hex[:8]}"
    stats: dict = {}
    sent = copy_raw(stack, workload["prefix"], prefix, 3, seed=5, replicas=True, late=0.2,
                     stats=stats)
    runs = {"pages": ("spark.dedupe_window_s=0", "spark.state_page_rows=2"),
            "off": ("spark.dedupe_window_s=0", "kafka.max_offsets_per_trigger=1500"),
            "on": ("spark.dedupe_window_s=1", "kafka.max_offsets_per_trigger=1500")}
    for name, sets in runs.items():
        out = f"{prefix}{name}"
        copy_raw(stack, prefix, out, 1, seed=6)  # the same records, in the same order
        run_materializer(materializer_command(stack, out, work / f"ckpt-{name}", *sets),
                         work / f"{name}.log")
    return {"prefix": prefix, "sent": sent, "late": stats["late"],
            "distinct": len(stats["digests"])}


def _page_entries(checkpoint: Path) -> int:
    """How many row-page entries a stopped job's partition stores hold."""
    from materializer.store.layout import PAGE
    from materializer.store.partition_store import open_store, owner_of

    count = 0
    for path in (checkpoint / STATE_DIR).glob("*/[0-9]*"):
        db = open_store(path)
        try:
            keys = db.keys()
            count += sum(1 for k in keys if (owner_of(k) or ("", b""))[1][:1] == PAGE)
        finally:
            db.close()
    return count


def test_partitions_kept_in_pages_end_at_what_cassandra_returns(stack, cql, workload,
                                                                replicas) -> None:
    """Pages of 2 rows: the workload's partitions (up to 18 rows, static columns, range and
    partition deletes, TTLs) page, split and fold back, through the real partition stores,
    with three shuffled copies of every record, all merged (the dedupe off)."""
    prefix, work = f"{replicas['prefix']}pages", workload["work"]
    _compare(stack, cql, workload, prefix)
    # the state really is in pages; with the default page size nothing here pages
    assert _page_entries(work / "ckpt-pages") >= 3
    assert _page_entries(work / "ckpt-off") == 0


def test_three_replicas_copies_give_the_events_of_one(stack, workload, one_copy,
                                                      replicas) -> None:
    """Every copy merged (the dedupe off): the events are those of one copy, except for
    which replica's copy made each (any may)."""
    ks = workload["ks"]
    one = events_by_key(stack.bootstrap_servers, one_copy, ks)
    assert len(one) >= 20
    pages = events_by_key(stack.bootstrap_servers, f"{replicas['prefix']}pages", ks)
    assert_same_events(pages, one, workload["work"] / "differ-pages")


def test_copy_dedupe_changes_no_event(stack, cql, workload, replicas) -> None:
    """The partition stores drop the copies that come within the dedupe window, merge the
    late ones harmlessly, and the events are those without it, event for event; they end
    at Cassandra's rows."""
    work = workload["work"]
    assert replicas["sent"] > 6000 and replicas["late"] > 50
    assert _dropped(work / "off.log") == 0 and _dropped(work / "pages.log") == 0
    _same_events_as_dedupe_off(stack, workload, replicas, "on")
    stores = list((work / "ckpt-on" / STATE_DIR).glob("*/[0-9]*"))
    assert len(stores) >= 2 and not (work / "ckpt-on" / "state").exists()  # no Spark state
    _compare(stack, cql, workload, f"{replicas['prefix']}on")


def _same_events_as_dedupe_off(stack, workload, replicas, run: str) -> None:
    """Run `run` of the replicas fixture gave the dedupe-off run's events, event for event,
    and dropped most of the copies that could go."""
    ks, work = workload["ks"], workload["work"]
    got = events_by_key(stack.bootstrap_servers, f"{replicas['prefix']}{run}", ks)
    assert len(got) >= 20
    off = events_by_key(stack.bootstrap_servers, f"{replicas['prefix']}off", ks)
    assert_same_events(got, off, work / f"differ-{run}")
    # every record's copies but one can go; a workload can also write one record twice
    # (the same statement, explicit timestamp, same second): those are copies too
    droppable = replicas["sent"] - replicas["distinct"]
    # most copies stopped before the merge (a key's copies sit side by side in its
    # partition, so a record's copies meet within a micro-batch or two); some late ones
    # came after the window and were merged
    dropped = _dropped(work / f"{run}.log")
    assert droppable / 2 < dropped < droppable, (dropped, droppable, replicas["late"])


def test_partition_stores_roll_back_a_batch_killed_mid_way(stack, cql, workload) -> None:
    """The job killed with SIGKILL while a micro-batch's tasks
    had written to their stores, then run again from its checkpoint: Spark replays that
    batch, the stores take back what its first attempt wrote (copy digests and entries),
    and the events end at Cassandra's rows (a copy taken for seen, or a change applied
    twice, would lose a change or leave a wrong before image)."""
    prefix, work = workload["prefix"], workload["work"]
    out = f"q{uuid.uuid4().hex[:8]}"
    copy_raw(stack, prefix, out, 3, seed=8, replicas=True)
    checkpoint = work / "ckpt-partition-killed"
    stores = checkpoint / STATE_DIR
    log = work / "partition-killed.log"
    slow = materializer_command(stack, out, checkpoint,
                                "kafka.max_offsets_per_trigger=600", available_now=False)
    mid_batch = []
    for attempt in range(4):  # a kill between two batches proves nothing: try again
        done = len(_batches(checkpoint, "commits"))
        proc = start_materializer(slow, log)
        try:  # once a batch is done (the workers are up), kill as the next one's first
            # task flushes its store (a new table file), before Spark commits the batch
            wait_until(lambda done=done: len(_batches(checkpoint, "commits")) > done, 300,
                       "a committed micro-batch")
            base = _table_files(stores)
            wait_until(lambda base=base: _table_files(stores) - base, 120,
                       "the next micro-batch flushing a store", interval_s=0.002)
            time.sleep(0.01 * attempt)
        finally:
            kill_group(proc)
        committed = max(_batches(checkpoint, "commits"))
        written = sum(writes_of(p, committed + 1) for p in stores.glob("*/[0-9]*"))
        if written:
            mid_batch.append((attempt, committed, written))
            break
    assert mid_batch, "no kill landed after a micro-batch's tasks wrote to their stores"
    run_materializer(materializer_command(stack, out, checkpoint),
                     log)
    assert f"micro-batch {committed + 1} runs again" in log.read_text()
    assert max(_batches(checkpoint, "commits")) > committed
    _compare(stack, cql, workload, out)


def test_partition_stores_lost_with_their_machine_are_rebuilt_from_their_changelog(
        stack, cql, workload) -> None:
    """The partition stores' directories removed between two runs (a task that runs on a
    new executor finds none): the next run rebuilds each from its changelog topic, and every
    change published again (copies of what was merged) adds no event: the rebuilt state is
    all there. The first run, in several micro-batches on one machine, restores nothing."""
    prefix, work = workload["prefix"], workload["work"]
    out = f"h{uuid.uuid4().hex[:8]}"
    copy_raw(stack, prefix, out, 1, seed=12)
    checkpoint = work / "ckpt-partition-changelog"
    log = work / "partition-changelog.log"
    run_materializer(materializer_command(stack, out, checkpoint,
                                          "kafka.max_offsets_per_trigger=500"), log)
    first = log.read_text()
    assert re.search(r"materializer run ended.*batches=([3-9]|\d\d)", first), first[-2000:]
    assert re.search(r"materializer run ended.*stores_restored=0\b", first), first[-2000:]
    topics = {f"{out}.{workload['ks']}.{name}": None for name in ("r", "ctr")}
    before = {t: len(read_events(stack.bootstrap_servers, t)) for t in topics}
    job_id = json.loads((checkpoint / STATE_DIR / "changelog.json").read_text())["job_id"]
    names = AdminClient({"bootstrap.servers": stack.bootstrap_servers}
                        ).list_topics(timeout=10).topics
    # one changelog, of the raw topic's partition count (3, copy_raw's)
    assert len(names[changelog_topic(out, job_id)].partitions) == len(
        names[raw_topic(out)].partitions) == 3
    assert not [t for t in names if t.startswith(f"{out}.raw.")]
    stores = [p for p in (checkpoint / STATE_DIR).glob("*/[0-9]*") if p.is_dir()]
    assert stores
    for path in stores:
        shutil.rmtree(path)
    copy_raw(stack, prefix, out, 1, seed=12)  # every change again
    run_materializer(materializer_command(stack, out, checkpoint),
                     log)
    second = log.read_text()[len(first):]
    assert "rebuilt from its changelog" in second, second[-2000:]
    assert re.search(r"materializer run ended.*stores_restored=[1-9]", second), second[-2000:]
    assert {t: len(read_events(stack.bootstrap_servers, t)) for t in topics} == before
    _compare(stack, cql, workload, out)


def _reshard(stack, prefix: str, checkpoint: Path, partitions: int
             ) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "casscade.cli", "materializer", "reshard", "--partitions",
         str(partitions), "--set", f"kafka.bootstrap_servers={stack.bootstrap_servers}",
         "--set", f"kafka.topic_prefix={prefix}", "--set", f"spark.checkpoint={checkpoint}",
         "--set", "log.format=text"], capture_output=True, text=True, timeout=300)


def test_reshard_moves_partition_stores_with_their_keys(stack, cql, workload) -> None:
    """A raw topic of 3 partitions, drained by the job, resharded to 5: every
    change published again (copies, which librdkafka's partitioner now puts at crc32(key)
    % 5) adds no event and the events still equal SELECT, so each key's state moved to the
    store its records reach now. A reshard with records not yet processed is refused."""
    prefix, work, ks = workload["prefix"], workload["work"], workload["ks"]
    out = f"s{uuid.uuid4().hex[:8]}"
    copy_raw(stack, prefix, out, 1, seed=14)
    checkpoint = work / "ckpt-reshard"
    log = work / "reshard.log"
    job = materializer_command(stack, out, checkpoint)
    run_materializer(job, log)
    topics = [f"{out}.{ks}.{name}" for name in ("r", "ctr")]
    events = {t: len(read_events(stack.bootstrap_servers, t)) for t in topics}
    copy_raw(stack, prefix, out, 1, seed=14)  # not processed yet
    refused = _reshard(stack, out, checkpoint, 5)
    assert refused.returncode == 1 and "raw records not processed yet" in refused.stderr, \
        refused.stderr[-2000:]
    run_materializer(job, log)
    done = _reshard(stack, out, checkpoint, 5)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    raw = {raw_topic(out)}
    assert report["raw_topics"] == {raw_topic(out): [3, 5]}, report
    admin = AdminClient({"bootstrap.servers": stack.bootstrap_servers})
    meta = admin.list_topics(timeout=10).topics
    assert len(meta[raw_topic(out)].partitions) == 5
    assert len(meta[changelog_topic(out, report["job_id"])].partitions) == 5
    ends: dict[str, dict[int, int]] = {t: {} for t in raw}
    for t in raw:
        for m in read_to_end(stack.bootstrap_servers, t):
            ends[t][m.partition()] = m.offset() + 1
    copy_raw(stack, prefix, out, 1, seed=15)  # every change again, to the new partitions
    placed = set()
    for t in raw:  # librdkafka placed them as the reshard placed their keys' state
        new = [m for m in read_to_end(stack.bootstrap_servers, t)
               if m.offset() >= ends[t].get(m.partition(), 0)]
        assert new and all(m.partition() == zlib.crc32(m.key()) % 5 for m in new), t
        placed |= {m.partition() for m in new}
    assert placed & {3, 4}, placed  # some keys moved to the new partitions
    run_materializer(job, log)
    assert "rebuilt from its changelog" in log.read_text()
    assert {t: len(read_events(stack.bootstrap_servers, t)) for t in topics} == events
    _compare(stack, cql, workload, out)
    # a record its file system refuses to read back (changed behind Hadoop's checksum): the
    # run ends with one line naming the file and the reason, not a py4j trace
    counts = checkpoint / STATE_DIR / "partitions.json"
    counts.write_text(counts.read_text() + " ")
    bad_log = work / "reshard-unreadable.log"
    proc = start_materializer(job, bad_log)
    try:
        code = proc.wait(300)
    finally:
        kill_group(proc)
    text = bad_log.read_text()
    assert code == 1 and f"checkpoint file {checkpoint}/{STATE_DIR}/partitions.json: reading " \
        "failed: org.apache.hadoop.fs.ChecksumException" in text, text[-3000:]
    assert "Traceback" not in text, text[-3000:]


def _table_files(stores: Path) -> set[str]:
    """The partition stores' table files: a task's store gains one when it closes."""
    return {str(p) for p in stores.glob("*/[0-9]*/*.sst")}


def _batches(checkpoint: Path, log: str) -> list[int]:
    """The batch ids in a checkpoint's offsets or commits log."""
    folder = checkpoint / log
    return [int(p.name) for p in folder.glob("[0-9]*")] if folder.is_dir() else []


def test_killed_job_resumes_from_its_checkpoint(stack, cql, workload) -> None:
    prefix, work, ks = workload["prefix"], workload["work"], workload["ks"]
    out = f"k{uuid.uuid4().hex[:8]}"
    copy_raw(stack, prefix, out, 1, seed=3)
    checkpoint = work / "ckpt-killed"
    log = work / "killed.log"
    # small micro-batches, so the kill lands mid-stream
    slow = materializer_command(stack, out, checkpoint, "kafka.max_offsets_per_trigger=400",
                                available_now=False)
    proc = start_materializer(slow, log)
    try:
        commits = checkpoint / "commits"
        wait_until(lambda: commits.is_dir() and len(list(commits.glob("[0-9]*"))) >= 2, 300,
                   "two committed micro-batches")
        time.sleep(0.5)
    finally:
        kill_group(proc)  # kill -9 of the driver and its JVM
    done_before = len(list((checkpoint / "commits").glob("[0-9]*")))
    run_materializer(materializer_command(stack, out, checkpoint), log)
    assert len(list((checkpoint / "commits").glob("[0-9]*"))) > done_before
    _compare(stack, cql, workload, out)
    assert ks


@pytest.fixture(scope="module")
def submitted(stack, workload) -> str:
    """The job through deploy/spark/submit.sh (zipped code + connector jars through
    spark-submit) writing Avro events without a registry, varints as strings; its prefix."""
    import os

    from devstack.spark import kafka_connector_jars

    prefix, work = f"s{uuid.uuid4().hex[:8]}", workload["work"]
    copy_raw(stack, workload["prefix"], prefix, 1, seed=4)
    jars = ",".join(str(j) for j in kafka_connector_jars(stack))
    env = dict(os.environ, PYTHON=sys.executable, PYSPARK_PYTHON=sys.executable,
               SPARK_LOCAL_IP="127.0.0.1")
    cmd = ["deploy/spark/submit.sh", "--master", "local[2]", "--jars", jars, "--",
           "--set", f"kafka.bootstrap_servers={stack.bootstrap_servers}",
           "--set", f"kafka.topic_prefix={prefix}",
           "--set", f"spark.checkpoint={work / 'ckpt-submit'}", "--set", "log.format=text",
           "--set", "spark.conf={\"spark.ui.enabled\": \"false\"}", "--set", "http.port=0",
           "--set", "events.format=avro", "--set", "events.varint_mode=string",
           "--available-now"]
    out = subprocess.run(cmd, cwd=repo_root(), env=env, capture_output=True, text=True,
                         timeout=600, start_new_session=True)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-4000:]
    return prefix


def test_spark_submit_script_runs_the_job(workload, submitted) -> None:
    """deploy/spark/submit.sh packs the code and the job runs through spark-submit to its
    end (its events are checked by the Avro test)."""
    assert (repo_root() / "build" / "casscade.zip").is_file()
    commits = workload["work"] / "ckpt-submit" / "commits"
    assert any(commits.glob("[0-9]*")), "no micro-batch committed"


def test_avro_events_decode_to_what_cassandra_returns(stack, cql, workload, submitted) -> None:
    """events.format=avro without a registry: single-object encoding, schemas on their topic;
    varints as strings (the workload has varints beyond 64 bits)."""
    prefix, ks = submitted, workload["ks"]
    schemas = schemas_from_topic([(m.key(), m.value()) for m in read_to_end(
        stack.bootstrap_servers, f"{prefix}.avro-schemas")])
    assert len(schemas) >= 4  # key and value of both tables
    for name in ("r", "ctr"):
        writer = EnvelopeWriter(workload["tables"][name], "casscade", False)
        events = []
        for m in read_to_end(stack.bootstrap_servers, f"{prefix}.{ks}.{name}"):
            assert m.key()[:2] == b"\xc3\x01"  # Avro single-object encoding
            value = None if m.value() is None else avro_as_json(
                decode(m.value(), schemas), writer.value_schema)
            events.append((m.partition(), m.offset(),
                           avro_as_json(decode(m.key(), schemas), writer.key_schema), value))
        got, want = final_rows(events), oracle_rows(cql, workload["tables"][name])
        assert len(want) >= 3  # the counter table draws from a handful of keys
        differ = [k for k in got.keys() | want.keys() if got.get(k) != want.get(k)]
        assert not differ, f"{name}: {len(differ)} keys differ, e.g. {differ[0]}: " \
                           f"{got.get(differ[0])} != {want.get(differ[0])}"
    # `casscade verify` reads the same topics (schemas from the schema topic) and agrees
    out = subprocess.run(
        [sys.executable, "-m", "casscade.cli", "verify", "--table", f"{ks}.r", "--table",
         f"{ks}.ctr", "--grace", "1", *(f for kv in [
             f"cassandra.port={stack.cql_port}", "events.format=avro",
             "events.varint_mode=string", f"kafka.bootstrap_servers={stack.bootstrap_servers}",
             f"kafka.topic_prefix={prefix}"] for f in ("--set", kv))],
        cwd=repo_root(), capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert out.returncode == 0 and "verified: all" in out.stdout, out.stdout + out.stderr


def _metric(text: str, name: str) -> float | None:
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None


def test_driver_serves_metrics_health_and_status(stack, cql, workload, tmp_path) -> None:
    """/metrics, /health and /status of a running job with its defaults."""
    import socket

    prefix = f"h{uuid.uuid4().hex[:8]}"
    raw = copy_raw(stack, workload["prefix"], prefix, 1, seed=6)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = materializer_command(stack, prefix, tmp_path / "ckpt", f"http.port={port}",
                               "kafka.max_offsets_per_trigger=1000",
                               available_now=False)
    proc = start_materializer(cmd, tmp_path / "job.log")
    try:
        def caught_up() -> str | None:
            text = http_get(port, "/metrics")[1]
            done = _metric(text, "casscade_materializer_input_rows_total")
            return text if done is not None and done >= raw else None

        text = wait_until(caught_up, 300, f"{raw} raw records counted on /metrics")
        assert _metric(text, "casscade_materializer_input_rows_total") == raw
        assert _metric(text, "casscade_materializer_batches_total") >= raw / 1000
        assert _metric(text, "casscade_materializer_partition_store_keys") >= 5
        assert _metric(text, "casscade_materializer_output_rows_total") > 0
        # the workload writes some records twice (same statement, timestamp and second)
        assert _metric(text, "casscade_materializer_copies_dropped_total") > 0
        assert _metric(text, "casscade_materializer_partition_stores_restored_total") == 0
        wait_until(lambda: _metric(http_get(port, "/metrics")[1],
                                   "casscade_materializer_kafka_offsets_behind_latest") == 0,
                   60, "lag 0 once every raw record is read")
        code, body = http_get(port, "/health")
        assert code == 200 and json.loads(body)["status"] == "ok"
        status = json.loads(http_get(port, "/status")[1])
        assert status["last_progress"]["name"] == "casscade_materializer"
    finally:
        kill_group(proc)
    assert http_get(port, "/health")[0] == 0  # the server went with the job
