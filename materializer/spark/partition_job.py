"""The query, without shuffles: the raw topic → mapInArrow over
KeyMaterializer, state in a RocksDB per raw partition → event topics.

Why it can do without Spark's state: the raw topic is keyed by table id and partition key,
so every copy of a key, from every replica's publisher, is in one Kafka partition, which one
task of the Kafka source reads in each micro-batch. That task can hold the key's state itself
(`materializer.store.partition_store`) and drop the copies it has seen, so no record is
shuffled twice and no state call crosses to the JVM.

Where the stores live: on a local master beside the checkpoint; on a cluster in each
executor's work directory. Every store write but the copy digests also goes to a compacted
changelog topic (`materializer.kafka.changelog`), so the task of partition p
that runs on an executor without p's store, or with an old one, rebuilds or catches it up
before it reads a record. Spark's Kafka source asks for the same executor for a topic
partition every batch, so in steady state nothing is read back
(`partition_stores_restored_total` on /metrics).

TTL expiry: a task fires the due expiries of every store it opens, and the publishers'
heartbeats (`shared.heartbeat`, skipped here before any merge) give every partition a
record every few seconds, so an idle partition's expiries wait about that long.

Dropped tables: a publisher that finds a captured table gone writes a table-dropped record
(`shared.table_drop`) to every raw partition; the task that meets it frees the table's
entries in its store once the batch's records are merged (`materializer.store.
dropped_tables`), and leaves out the table's records of later batches.

A raw topic that gains partitions: the job refuses to start until `casscade materializer
reshard` has moved the stores with their keys (`materializer.spark.partition_reshard`).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from materializer.kafka.changelog import ChangelogJob
from materializer.key_materializer import KeyMaterializer, RawRecord, Result
from materializer.output.event_settings import EventSettings
from materializer.rules.pages import DEFAULT_PAGE_ROWS
from materializer.spark.progress import PARTITION_METRICS, TaskStats
from materializer.spark.task_stores import TaskStores, Where
from materializer.store.layout import EXECUTOR_DIR, entry_key, pack_entry, page_key, unpack_entry
from materializer.store.partition_store import PartitionStore
from shared.heartbeat import HEARTBEAT_BYTE, decode_heartbeat
from shared.rowupdate import COPY_KEY_SIZE, VERSION_BYTE
from shared.table_drop import TABLE_DROP_BYTE, TableDrop, decode_table_drop
from shared.topic_names import TABLE_ID_SIZE

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

log = logging.getLogger(__name__)
BATCH_ID_PROPERTY = "streaming.sql.batchId"  # the local property Spark sets for a micro-batch
METRICS = PARTITION_METRICS  # the name of the query's observed metrics
# mapInArrow's output: events, plus one row per task (topic null) with its copy counts
# (records_written: the events and dead letters the task wrote in its transactions; under
# at-least-once Spark's sink writes and counts them)
TASK_SCHEMA = ("topic STRING, key BINARY, value BINARY, copies_in LONG, copies_dropped LONG,"
               " store_keys LONG, stores LONG, stores_restored LONG, writes_restored LONG,"
               " records_written LONG, stats STRING")
_COUNTS = (None,) * 8  # an event row's count columns
_COPY_KEY_END = 1 + COPY_KEY_SIZE  # a raw value's copy key ends here (after its version byte)
_CHUNK = 5_000  # output rows per Arrow batch


def executor_root(job: str) -> Path:
    """Where an executor of a cluster keeps the stores of job `job`: its own work directory
    (Spark's root for files it fetches), which dies with the executor; the changelog
    rebuilds what a new one needs."""
    from pyspark import SparkFiles

    return Path(SparkFiles.getRootDirectory()).resolve() / EXECUTOR_DIR / job


def _apply(store: PartitionStore, key: bytes, old_timer: int | None, result: Result) -> None:
    """Write one key's result to its store (`key`: the raw key): pages, entry, expiry
    index."""
    if result.schema_hash is None:
        return  # nothing usable and no state: nothing to write
    for page, blob in result.pages.items():
        store.put(page_key(page, key), blob)
    if result.state is None:
        store.put(entry_key(key), None)
        return
    store.put(entry_key(key), pack_entry(result.state, result.schema_hash,
                                         result.next_timer_ms))
    if result.next_timer_ms is not None and result.next_timer_ms != old_timer:
        store.schedule(result.next_timer_ms, key)


def _pages(store: PartitionStore, key: bytes) -> Callable[[list[int]], list[bytes | None]]:
    return lambda ids: [store.get(page_key(i, key)) for i in ids]


def _batch(rows: list[tuple[Any, ...]]) -> Any:
    """Rows of TASK_SCHEMA as one Arrow batch (typed even if empty)."""
    import pyarrow as pa

    names = ("topic", "key", "value", "copies_in", "copies_dropped", "store_keys", "stores",
             "stores_restored", "writes_restored", "records_written", "stats")
    types = ((pa.string(), pa.binary(), pa.binary()) + (pa.int64(),) * (len(_COUNTS) - 1)
             + (pa.string(),))
    return pa.RecordBatch.from_arrays(
        [pa.array([r[i] for r in rows], t) for i, t in enumerate(types)],
        schema=pa.schema(list(zip(names, types, strict=True))))


def _by_partition(cols: dict[str, list[Any]]
                  ) -> list[tuple[str, int, list[bytes], list[bytes], list[int]]]:
    """An input batch's (topic, partition, keys, values, offsets), per Kafka partition in
    arrival order. A task reads one Kafka partition, so the usual batch is one of them,
    passed on as it is; the per-row split is for anything else."""
    topics, parts = cols["topic"], cols["partition"]
    if not topics:
        return []
    if len(set(topics)) == 1 and len(set(parts)) == 1:
        return [(topics[0], parts[0], cols["key"], cols["value"], cols["offset"])]
    split: dict[tuple[str, int], tuple[list[bytes], list[bytes], list[int]]] = {}
    for topic, part, pk, value, offset in zip(topics, parts, cols["key"], cols["value"],
                                              cols["offset"], strict=True):
        keys, values, offsets = split.setdefault((topic, part), ([], [], []))
        keys.append(pk)
        values.append(value)
        offsets.append(offset)
    return [(topic, part, *rows) for (topic, part), rows in split.items()]


def merge_task(root: Path | None, handler_for: Callable[[], KeyMaterializer], window_s: int,
               changelog: ChangelogJob | None = None
               ) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """The mapInArrow function: one task's records (one Kafka partition's offset range of
    the micro-batch) merged key by key into events, copies dropped, state in its store under
    `root` (None: the executor's own directory) and in its `changelog`."""
    def run(batches: Iterator[Any]) -> Iterator[Any]:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        batch_id = ctx.getLocalProperty(BATCH_ID_PROPERTY) if ctx else None
        if batch_id is None:
            raise RuntimeError("the partition-state merge runs only in a streaming micro-batch")
        now = int(time.time() * 1000)
        where = root if root is not None else executor_root(
            changelog.job_id if changelog is not None else "local")
        stores = TaskStores(where, int(batch_id), window_s * 1000, now,
                            changelog.changelogs() if changelog is not None else None,
                            changelog.made if changelog is not None else None, changelog)
        handler = handler_for()
        try:
            yield from merge(batches, stores, handler, now)
        except BaseException:  # (GeneratorExit too: Spark stopped reading, the task ends)
            stores.close(failed=True)
            raise
        stores.close()
    return run


def merge(batches: Iterator[Any], stores: TaskStores, handler: KeyMaterializer, now: int
          ) -> Iterator[Any]:
    """Arrow batches of raw records (topic, key, value, partition, offset) → Arrow batches of
    TASK_SCHEMA: the events (exactly-once: none, they go into each raw partition's
    transaction), then one row of counts; the keys' state in `stores`."""
    by_key: dict[tuple[str, int, bytes], list[RawRecord]] = {}
    drops: dict[Where, list[TableDrop]] = {}
    copies_in = dropped = 0
    stats = TaskStats()
    out: list[tuple[Any, ...]] = []

    def emit(where: Where, outputs: Iterable[tuple[str, bytes | None, bytes | None]]) -> None:
        if stores.transactional:
            stores.produce(where, outputs)
        else:
            out.extend((t, k, v, *_COUNTS) for t, k, v in outputs)

    # a micro-batch's records of one key are merged in one call: how records fall into
    # batches decides which intermediate images are events
    for batch in batches:
        for topic, part, keys, values, offsets in _by_partition(batch.to_pydict()):
            first_copy = stores.get(topic, part).first_copy
            if not stores.read((topic, part), offsets[0], offsets[-1]):
                continue  # its batch committed already (exactly-once): nothing to write
            copies_in += len(keys)
            for pk, value, offset in zip(keys, values, offsets, strict=True):
                if value and value[0] == HEARTBEAT_BYTE:  # its partition's store is open:
                    copies_in -= 1  # that was its work (the expiries below)
                    with contextlib.suppress(ValueError, KeyError):  # a damaged one: no age
                        beat = decode_heartbeat(value)
                        stats.heartbeat(beat.host, beat.at_ms)
                    continue
                if value and value[0] == TABLE_DROP_BYTE:  # freed after the merge, below
                    copies_in -= 1
                    _table_drop(drops, topic, part, offset, value)
                    continue
                # (a value of another format goes on, to the dead-letter topic)
                if value[:1] == VERSION_BYTE and not first_copy(value[1:_COPY_KEY_END]):
                    dropped += 1
                    continue
                by_key.setdefault((topic, part, pk), []).append(RawRecord(value, part, offset))
    for (topic, part, key), records in by_key.items():
        if key is None or len(key) <= TABLE_ID_SIZE:  # not a raw key (topic_names.raw_key)
            emit((topic, part), handler.reject(topic, key, records).outputs)
            continue
        store = stores.get(topic, part)
        if stores.dropped[(topic, part)].dropped_before(key[:TABLE_ID_SIZE]):
            stats.late += len(records)  # a lagging publisher's copies of a dropped table
            continue
        blob, schema_hash, timer = unpack_entry(store.get(entry_key(key)))
        result = handler.handle(topic, key[TABLE_ID_SIZE:], records, blob, schema_hash, now,
                                _pages(store, key), key[:TABLE_ID_SIZE])
        _apply(store, key, timer, result)
        if result.write_times_us and result.table is not None:
            written_s = time.time()
            for ts_us in result.write_times_us:
                stats.event(result.table, max(0.0, written_s - ts_us / 1e6))
        emit((topic, part), result.outputs)
        if len(out) >= _CHUNK:
            yield _batch(out)
            out.clear()  # (_batch copied it)
    for (topic, part), store in stores.open.items():
        if (topic, part) in stores.skipped:
            continue
        for at_ms, key in list(store.due(now)):
            store.fired(at_ms, key)  # first: the key's next timer may index this time again
            blob, schema_hash, timer = unpack_entry(store.get(entry_key(key)))
            if timer == at_ms:  # else the key moved on (or rolled back) since it was indexed
                result = handler.expire(key[TABLE_ID_SIZE:], blob, schema_hash, now,
                                        _pages(store, key), topic)
                # old timer None: the next one is indexed even if it is the same time (this
                # index entry is spent)
                _apply(store, key, None, result)
                emit((topic, part), result.outputs)
    for where, table_drops in drops.items():
        for drop in table_drops:
            stats.drop(drop.name, stores.dropped[where].drop(drop.table_id.bytes))
    keys = sum(s.estimated_keys() for s in stores.open.values())
    out.append((None, None, None, copies_in, dropped, keys, len(stores.open),
                stores.stores_restored, stores.writes_restored, stores.produced,
                stats.to_json()))
    yield _batch(out)


def _table_drop(drops: dict[Where, list[TableDrop]], topic: str, part: int,
                offset: int, value: bytes) -> None:
    """Note a table-dropped record for its partition's store (a damaged one: logged)."""
    try:
        drops.setdefault((topic, part), []).append(decode_table_drop(value))
    except (ValueError, KeyError, TypeError) as exc:
        log.error("a table-dropped record cannot be read; left out",
                  extra={"topic": topic, "partition": part, "offset": offset,
                         "error": str(exc)})


def events(raw: DataFrame, root: Path | None, kafka: dict[str, str], prefix: str,
           settings: EventSettings, page_rows: int = DEFAULT_PAGE_ROWS, window_s: int = 0,
           tasks: int = 0, changelog: ChangelogJob | None = None,
           made_topics: frozenset[str] = frozenset()) -> DataFrame:
    """The events (topic, key, value) of `raw` (the Kafka source's rows) under topic prefix
    `prefix`, with the copy counts as the query's observed metrics METRICS; the stores
    under `root` (None: in each executor's work directory); `tasks` > 0: the source's
    partitions (one per raw topic partition with records) coalesced into at most that many
    tasks; `changelog`: the stores' changelogs (None: local stores only); `made_topics`:
    the event topics the driver made at start (`worker_clients.key_handler`).

    Why coalesce: every task costs the same start (its Python function, Arrow streams, a
    handler) whatever it reads, so 20 tables of 4 partitions each paid it 80 times a
    micro-batch. Coalescing needs no shuffle: a task reads its topic partitions one after
    the other, each whole, and a topic partition is still in one task only, which is all
    the stores need (`TaskStores` opens one per topic partition it meets)."""
    from pyspark.sql import functions as F

    from materializer.spark.worker_clients import key_handler

    def handler_for() -> KeyMaterializer:
        return key_handler(kafka, prefix, settings, page_rows, made_topics)

    if root is not None:
        root.mkdir(parents=True, exist_ok=True)
    if tasks > 0:
        raw = raw.coalesce(tasks)
    merged = raw.mapInArrow(merge_task(root, handler_for, window_s, changelog), TASK_SCHEMA)
    return (merged.observe(METRICS, F.sum("copies_in").alias("copies_in"),
                           F.sum("copies_dropped").alias("copies_dropped"),
                           F.sum("store_keys").alias("store_keys"),
                           F.count("copies_in").alias("tasks"),
                           F.sum("stores").alias("stores_opened"),
                           F.sum("stores_restored").alias("stores_restored"),
                           F.sum("writes_restored").alias("writes_restored"),
                           F.sum("records_written").alias("records_written"),
                           F.collect_list("stats").alias("stats"))
            .where(F.col("topic").isNotNull()).select("topic", "key", "value"))

