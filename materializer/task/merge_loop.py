"""One task's merge, whatever runs it: its raw records (one Kafka partition's offset range
of a micro-batch, or several whole ones) merged key by key into events over the partition
stores it opens, the copies already seen dropped, truncations applied (and reported to the
truncate barrier), due expiries fired, truncated tables' live rows written again after
their truncate events, dropped tables freed.

It takes and gives Arrow batches, as Spark's mapInArrow hands them over
(`materializer.spark.partition_job` runs it in each task); the benchmarks and tests run it
without Spark.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from materializer.key_materializer import KeyMaterializer, RawRecord
from materializer.store.layout import entry_key, unpack_entry
from materializer.store.table_sweeps import RESET, REWRITE, TRUNCATE
from materializer.task.key_writes import apply_result, page_source
from materializer.task.table_sweep import TableSweeper
from materializer.task.task_stats import TaskStats
from materializer.task.task_stores import TaskStores, Where
from shared.heartbeat import HEARTBEAT_BYTE, decode_heartbeat
from shared.rowupdate import COPY_KEY_SIZE, VERSION_BYTE
from shared.table_drop import TABLE_DROP_BYTE, TableDrop, decode_table_drop
from shared.table_truncate import TABLE_TRUNCATE_BYTE, TableTruncate, decode_table_truncate
from shared.topic_names import TABLE_ID_SIZE
from shared.truncate_barrier import (
    TRUNCATE_BARRIER_BYTE,
    TruncateBarrier,
    decode_truncate_barrier,
)

log = logging.getLogger(__name__)
# The merge's output (in mapInArrow's schema form): events, plus one row per task (topic
# null) with its copy counts (records_written: the events and dead letters the task wrote
# in its transactions; under at-least-once Spark's sink writes and counts them)
TASK_SCHEMA = ("topic STRING, key BINARY, value BINARY, copies_in LONG, copies_dropped LONG,"
               " store_keys LONG, stores LONG, stores_restored LONG, writes_restored LONG,"
               " records_written LONG, stats STRING")
_COUNTS = (None,) * 8  # an event row's count columns
_COPY_KEY_END = 1 + COPY_KEY_SIZE  # a raw value's copy key ends here (after its version byte)
_CHUNK = 5_000  # output rows per Arrow batch


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


def _let_go(held: list[Any]) -> Iterator[Any]:
    """The batches of `held` in order, each dropped from it as it is handed on (its memory
    freed once read)."""
    held.reverse()
    while held:
        yield held.pop()


def _partitions(batches: list[Any]) -> list[Where]:
    """The raw (topic, partition)s of a task's input batches, in arrival order."""
    seen: dict[Where, None] = {}
    for batch in batches:
        topics = batch.column("topic").unique().to_pylist()
        parts = batch.column("partition").unique().to_pylist()
        if len(topics) == 1 and len(parts) == 1:  # the usual batch: one Kafka partition's
            seen.setdefault((topics[0], parts[0]))
        else:
            seen.update(dict.fromkeys(zip(batch.column("topic").to_pylist(),
                                          batch.column("partition").to_pylist(),
                                          strict=True)))
    return list(seen)


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


def merge(batches: Iterator[Any], stores: TaskStores, handler: KeyMaterializer, now: int,
          sweep_keys: int = 0) -> Iterator[Any]:
    """Arrow batches of raw records (topic, key, value, partition, offset) → Arrow batches of
    TASK_SCHEMA: the events (exactly-once: none, they go into each raw partition's
    transaction), then one row of counts; the keys' state in `stores`; `sweep_keys`: the
    most keys the task's table sweeps go through (0: every key of the table)."""
    task = _TaskMerge(stores, handler, now, sweep_keys)
    if stores.transactional:  # the whole input first: its partitions' producers together
        held = list(batches)
        stores.prepare(_partitions(held))
        batches = _let_go(held)
    # a micro-batch's records of one key are merged in one call: how records fall into
    # batches decides which intermediate images are events
    for batch in batches:
        task.collect(batch)
    task.truncate()  # first: the batch's records are merged under the floors it raises,
    # and a barrier's sweep leaves out the keys they give events
    task.sweeper.advance((RESET, TRUNCATE))  # the removals before the batch's new rows
    for (topic, part, key), records in task.by_key.items():
        task.merge_key((topic, part), key, records)
        if len(task.out) >= _CHUNK:
            yield _batch(task.out)
            task.out.clear()  # (_batch copied it)
    task.fire_expiries()
    task.rewrite_live()  # after the merge: the rows as they are now, after the barrier
    task.free_dropped()
    task.sweeper.save()
    task.out.append(task.counts())
    yield _batch(task.out)


def merge_whole(batches: Iterator[Any], stores: TaskStores, handler: KeyMaterializer,
                now: int, check_whole: Callable[[], None], sweep_keys: int = 0
                ) -> Iterator[Any]:
    """merge(), then close `stores`: committed only if `check_whole` (called once the input
    is read to its end) says the task got all of it, else aborted, as for any failure
    (`check_whole` raises; so does this)."""
    try:
        yield from merge(batches, stores, handler, now, sweep_keys)
        check_whole()  # a cut input must commit nothing: the rerun reads it whole
    except BaseException:  # (GeneratorExit too: Spark stopped reading, the task ends)
        stores.close(failed=True)
        raise
    stores.close()


class _TaskMerge:
    """One task's merge as it goes: the copies read, grouped by key (in arrival order), the
    table-dropped records per partition, the copy counts, the events not yet handed on."""

    def __init__(self, stores: TaskStores, handler: KeyMaterializer, now: int,
                 sweep_keys: int) -> None:
        self.stores, self.handler, self.now = stores, handler, now
        self.stats = TaskStats()  # the task's own; each raw partition's in `seen`
        self.seen: dict[Where, TaskStats] = {}
        self.dead_at_start = dict(handler.dead_lettered)  # a worker's handler serves many tasks
        self.by_key: dict[tuple[str, int, bytes], list[RawRecord]] = {}
        self.drops: dict[Where, list[TableDrop]] = {}
        # with their offsets and values
        self.truncates: dict[Where, list[tuple[int, bytes, TableTruncate]]] = {}
        self.barriers: dict[Where, list[tuple[int, bytes, TruncateBarrier]]] = {}
        self.copies_in = self.dropped = 0
        self.out: list[tuple[Any, ...]] = []  # at-least-once: Spark's sink writes them
        self.sweeper = TableSweeper(stores, handler, now, self.emit, self.saw, sweep_keys)

    def collect(self, batch: Any) -> None:
        """Read one input batch: heartbeats counted, table drops noted, copies seen before
        dropped, the rest grouped by key."""
        stores = self.stores
        for topic, part, keys, values, offsets in _by_partition(batch.to_pydict()):
            first_copy = stores.get(topic, part).first_copy
            if not stores.read((topic, part), offsets[0], offsets[-1]):
                continue  # its batch committed already (exactly-once): nothing to write
            self.copies_in += len(keys)
            for pk, value, offset in zip(keys, values, offsets, strict=True):
                if value and value[0] == HEARTBEAT_BYTE:  # its partition's store is open:
                    self.copies_in -= 1  # that was its work (the expiries below)
                    with contextlib.suppress(ValueError, KeyError):  # a damaged one: no age
                        beat = decode_heartbeat(value)
                        self.saw((topic, part)).heartbeat(beat.host, beat.at_ms)
                    continue
                if value and value[0] == TABLE_DROP_BYTE:  # freed after the merge
                    self.copies_in -= 1
                    _note(self.drops, (topic, part), offset, "table-dropped",
                          lambda v=value: decode_table_drop(v))
                    continue
                if value and value[0] == TABLE_TRUNCATE_BYTE:  # applied before the merge
                    self.copies_in -= 1
                    _note(self.truncates, (topic, part), offset, "table-truncated",
                          lambda v=value, o=offset: (o, v, decode_table_truncate(v)))
                    continue
                if value and value[0] == TRUNCATE_BARRIER_BYTE:  # rows again after the merge
                    self.copies_in -= 1
                    _note(self.barriers, (topic, part), offset, "truncate-barrier",
                          lambda v=value, o=offset: (o, v, decode_truncate_barrier(v)))
                    continue
                # (a value of another format goes on, to the dead-letter topic)
                if value[:1] == VERSION_BYTE and not first_copy(value[1:_COPY_KEY_END]):
                    self.dropped += 1
                    continue
                self.by_key.setdefault((topic, part, pk), []).append(
                    RawRecord(value, part, offset))

    def saw(self, where: Where) -> TaskStats:
        """What raw partition `where`'s batch saw (committed with it, exactly-once)."""
        stats = self.seen.get(where)
        if stats is None:
            stats = self.seen[where] = TaskStats()
        return stats

    def emit(self, where: Where, outputs: Iterable[tuple[str, bytes | None, bytes | None]]
             ) -> None:
        """Hand on events of raw partition `where`: into its transaction (exactly-once), or
        to the task's output rows."""
        if self.stores.transactional:
            self.stores.produce(where, outputs)
        else:
            self.out.extend((t, k, v, *_COUNTS) for t, k, v in outputs)

    def merge_key(self, where: Where, key: bytes, records: list[RawRecord]) -> None:
        """Merge one key's records of the micro-batch with its stored state; emit its
        events."""
        topic, part = where
        if key is None or len(key) <= TABLE_ID_SIZE:  # not a raw key (topic_names.raw_key)
            self.emit(where, self.handler.reject(topic, key, records).outputs)
            return
        store = self.stores.get(topic, part)
        table_id = key[:TABLE_ID_SIZE]
        if self.stores.dropped[where].dropped_before(table_id):
            self.saw(where).late += len(records)  # a lagging publisher's copies of a dropped table
            return
        self.sweeper.settle(where, key)  # first: what a sweep still owes the key
        blob, schema_hash, timer = unpack_entry(store.get(entry_key(key)))
        result = self.handler.handle(topic, key[TABLE_ID_SIZE:], records, blob, schema_hash,
                                     self.now, page_source(store, key), table_id,
                                     self.stores.truncated[where].floor(table_id),
                                     self.stores.truncated[where].reset_floor(table_id))
        self.saw(where).covered += result.covered
        if result.outputs:  # (a barrier's sweep leaves it out)
            self.sweeper.touched(where, key)
        apply_result(store, key, timer, result)
        if result.write_times_us and result.table is not None:
            written_s = time.time()
            seen = self.saw(where)
            for ts_us in result.write_times_us:
                seen.event(result.table, max(0.0, written_s - ts_us / 1e6))
        self.emit(where, result.outputs)

    def truncate(self) -> None:
        """Start the batch's sweeps (`materializer.task.table_sweep`), before its merge:
        each table-truncated record that raises its table's floor in its partition's store
        removes what the truncation removed from every key of the table there (their rows'
        `d` events); a reset removes every row and then the key's state, raising no floor;
        each truncate barrier writes the table's live rows again (`r` events), leaving out
        the keys the merge gives events (those come after the truncate events already)."""
        self.sweeper.start_truncates(self.truncates)
        self.sweeper.start_rewrites(self.barriers)

    def rewrite_live(self) -> None:
        """Take the barriers' sweeps on: the live rows as they are after the merge."""
        self.sweeper.advance((REWRITE,))

    def fire_expiries(self) -> None:
        """Fire the due TTL expiries of every store the task opened (not in a partition
        whose batch committed already)."""
        for (topic, part), store in self.stores.open.items():
            if (topic, part) in self.stores.skipped:
                continue
            for at_ms, key in list(store.due(self.now)):
                store.fired(at_ms, key)  # first: the key's next timer may index this again
                blob, schema_hash, timer = unpack_entry(store.get(entry_key(key)))
                if timer == at_ms:  # else the key moved on (or rolled back) since indexed
                    if self.sweeper.settle((topic, part), key):  # (its entry changed)
                        blob, schema_hash, timer = unpack_entry(store.get(entry_key(key)))
                    result = self.handler.expire(key[TABLE_ID_SIZE:], blob, schema_hash,
                                                 self.now, page_source(store, key), topic)
                    # old timer None: the next one is indexed even if it is the same time
                    # (this index entry is spent)
                    apply_result(store, key, None, result)
                    if result.outputs:
                        self.sweeper.touched((topic, part), key)
                    self.emit((topic, part), result.outputs)

    def free_dropped(self) -> None:
        """Free the entries of every table a table-dropped record of the batch named."""
        for where, table_drops in self.drops.items():
            for drop in table_drops:
                self.saw(where).drop(drop.name,
                                     self.stores.dropped[where].drop(drop.table_id.bytes))

    def counts(self) -> tuple[Any, ...]:
        """The task's row of counts (TASK_SCHEMA, topic null)."""
        stores = self.stores
        keys = sum(s.estimated_keys() for s in stores.open.values())
        for where, seen in self.seen.items():
            stores.keep_stats(where, seen.to_json())
            self.stats.add(seen)
        for where in stores.skipped:  # its batch's, as its committed attempt saw them
            committed = stores.committed_stats(where)
            if committed is not None:
                self.stats.add(TaskStats.from_json(committed))
        for topic, count in self.handler.dead_lettered.items():
            self.stats.dead_letter(topic, count - self.dead_at_start.get(topic, 0))
        for init_s in stores.inits:
            self.stats.producer(init_s)
        for commit_s, topics in stores.earlier_commits():
            self.stats.committed(commit_s, topics)
        return (None, None, None, self.copies_in, self.dropped, keys, len(stores.open),
                stores.stores_restored, stores.writes_restored, stores.produced,
                self.stats.to_json())


def _note(records: dict[Where, list[Any]], where: Where, offset: int, what: str,
          decode: Callable[[], Any]) -> None:
    """Note a control record of the raw topic (a table dropped or truncated, a truncate
    barrier) for its partition's store; a damaged one is logged and left out."""
    try:
        records.setdefault(where, []).append(decode())
    except (ValueError, KeyError, TypeError) as exc:
        log.error(f"a {what} record cannot be read; left out",
                  extra={"topic": where[0], "partition": where[1], "offset": offset,
                         "error": str(exc)})
