"""The Spark side: a transformWithState processor over KeyHandler, one group per key bucket.

Why buckets (measured, README "Measured"): in PySpark 4.2.0 every group costs
a state-server round trip to set the grouping key and one Arrow batch back to the JVM, about
0.35 ms before any work. Grouping by (raw topic, bucket), bucket = xxhash64(Kafka key) mod
`spark.state_buckets`, pays that once per bucket and micro-batch. Per-key semantics are
unchanged: each partition key has its own entry in the MapState "partitions" (state blob,
schema hash, next expiry), read once and written once per micro-batch, and its records are
merged into it alone. A wide partition's rows sit in row pages, entries of the MapState
"pages" keyed by (partition key, page id) (`materializer.rules.pages`), read and written only when
the batch can change them. The reads and writes of a bucket go to the state server
pipelined (`materializer.spark.state_batch`) where the PySpark version allows.

TTL expiry: the MapState "expiries" maps a time (ms) to the partition keys of the bucket
whose next expiry is then, and one processing-time timer is registered per such time. When
it fires, only those keys are read; a key whose expiry moved since is skipped (its own entry
is authoritative, and it is indexed at its new time too). Checkpoints from before the index
have one timer per bucket (ValueState "bucket_timer"); when such a timer fires, the bucket's
entries are scanned once, as then, and indexed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from pyspark.sql import Row
from pyspark.sql.streaming.stateful_processor import (
    ExpiredTimerInfo,
    StatefulProcessor,
    StatefulProcessorHandle,
    TimerValues,
)

from materializer.handler import EventSettings, KeyHandler, RawRecord, Result
from materializer.output.avro_registry import ConfluentRegistry, SchemaPublisher, SchemaTopic
from materializer.rules.pages import DEFAULT_PAGE_ROWS
from materializer.spark import state_batch
from materializer.spark.schema_cache import SchemaCache
from shared.kafka_topics import TopicCreator

# The state layout (grouping key and state variables). A checkpoint written under another
# layout is refused by Spark (STATE_STORE_KEY_SCHEMA_NOT_COMPATIBLE): start a new one.
# Adding a state variable keeps the layout (Spark accepts it on an existing checkpoint).
STATE_LAYOUT = 2  # 1: one group per partition key, ValueState; 2: key buckets, MapState
OUTPUT_SCHEMA = "topic STRING, key BINARY, value BINARY"
ENTRY_KEY_SCHEMA = "pk BINARY"
PAGE_KEY_SCHEMA = "pk BINARY, page LONG"  # a wide partition's row pages (ids from 1)
PAGE_SCHEMA = "blob BINARY"
EXPIRY_KEY_SCHEMA = "at_ms LONG"
EXPIRY_SCHEMA = "pks BINARY"  # the partition keys due then, each 4-byte length + bytes
ENTRY_SCHEMA = "blob BINARY, schema_hash STRING, timer_ms LONG"
TIMER_SCHEMA = "timer_ms LONG"
# Per Python worker (Spark reuses workers across tasks): schemas, known topics, Avro
# schema headers.
_CACHES: dict[tuple[str, str], SchemaCache] = {}
_TOPICS: dict[str, TopicCreator] = {}
_PUBLISHERS: dict[tuple[str, str], SchemaPublisher] = {}


def bucket_column(key_col: Any, buckets: int) -> Any:
    """The bucket of a raw record's Kafka key: pmod(xxhash64(key), buckets) (Spark's own
    hash: the same on every run and executor)."""
    from pyspark.sql import functions as F

    return F.pmod(F.xxhash64(key_col), F.lit(buckets)).cast("int")


# The Python worker's Kafka clients are shared by every task it runs, one per client
# config (librdkafka settings: brokers and security).
def _cache(kafka: dict[str, str], topic: str) -> SchemaCache:
    key = (_conf_key(kafka), topic)
    cache = _CACHES.get(key)
    if cache is None:
        cache = _CACHES[key] = SchemaCache(kafka, topic)
    return cache


def _publisher(kafka: dict[str, str], settings: EventSettings) -> SchemaPublisher | None:
    if settings.format != "avro":
        return None
    key = (_conf_key(kafka), settings.schema_registry_url or settings.avro_schemas)
    publisher = _PUBLISHERS.get(key)
    if publisher is None:
        publisher = _PUBLISHERS[key] = (
            ConfluentRegistry(settings.schema_registry_url, settings.schema_registry)
            if settings.schema_registry_url
            else SchemaTopic(kafka, settings.avro_schemas, _topics(kafka, settings).ensure))
    return publisher


def _topics(kafka: dict[str, str], settings: EventSettings) -> TopicCreator:
    key = _conf_key(kafka)
    creator = _TOPICS.get(key)
    if creator is None:
        creator = _TOPICS[key] = TopicCreator(kafka, settings.partitions,
                                              settings.replication_factor)
    return creator


def key_handler(kafka: dict[str, str], schema_topic: str, settings: EventSettings,
                page_rows: int = DEFAULT_PAGE_ROWS, made: frozenset[str] = frozenset()
                ) -> KeyHandler:
    """A KeyHandler over the Python worker's shared schema cache, topic creator and schema
    publisher (for this processor, and for any other Spark function that merges); `made`:
    the event topics the driver made at start, which the worker takes as made (it would
    otherwise read the cluster's whole metadata and probe each one's partitions once per
    table it meets)."""
    creator = _topics(kafka, settings)
    creator.known.update(made)
    return KeyHandler(_cache(kafka, schema_topic), settings, creator.ensure,
                      _publisher(kafka, settings), page_rows)


def _conf_key(kafka: dict[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(kafka.items()))


def _entry(value: Any) -> tuple[bytes | None, str | None, int | None]:
    if value is None:
        return None, None, None
    return (bytes(value[0]) if value[0] is not None else None), value[1], value[2]


class _Map:
    """One MapState of a bucket, read and written many keys at a time (pipelined if
    possible)."""

    def __init__(self, handle: StatefulProcessorHandle, name: str, key_schema: str,
                 value_schema: str, batched: bool) -> None:
        self.map = handle.getMapState(name, key_schema, value_schema)
        self.pipe = (state_batch.BatchedMapState(handle, self.map)
                     if batched and state_batch.supported() else None)

    def get_many(self, keys: list[tuple]) -> list[Any]:
        if self.pipe is not None:
            return self.pipe.get_many(keys)
        return [self.map.getValue(k) for k in keys]

    def write(self, updates: list[tuple[tuple, tuple]], removes: list[tuple]) -> None:
        if self.pipe is not None:
            if updates:
                self.pipe.update_many(updates)
            if removes:
                self.pipe.remove_many(removes)
            return
        for k, v in updates:
            self.map.updateValue(k, v)
        for k in removes:
            self.map.removeKey(k)


class _Writes:
    """A bucket's state writes of one call: partition entries and row pages."""

    def __init__(self) -> None:
        self.entries: list[tuple[tuple, tuple]] = []
        self.gone: list[tuple] = []
        self.pages: list[tuple[tuple, tuple]] = []
        self.gone_pages: list[tuple] = []

    def collect(self, pk: bytes, result: Result, existed: bool) -> None:
        """Queue what `result` says about partition `pk`."""
        if result.state is not None:
            self.entries.append(((pk,), (result.state, result.schema_hash,
                                         result.next_timer_ms)))
        elif existed:
            self.gone.append((pk,))
        for page, blob in result.pages.items():
            if blob is None:
                self.gone_pages.append((pk, page))
            else:
                self.pages.append(((pk, page), (blob,)))

    def apply(self, entries: _Map, pages: _Map) -> None:
        """Write them (a micro-batch's state writes commit together, in any order)."""
        pages.write(self.pages, self.gone_pages)
        entries.write(self.entries, self.gone)


class _Expiries:
    """Which partition keys of a bucket are due at which time (MapState "expiries"), with a
    processing-time timer registered for each such time."""

    def __init__(self, handle: StatefulProcessorHandle, batched: bool) -> None:
        self.handle = handle
        self.map = _Map(handle, "expiries", EXPIRY_KEY_SCHEMA, EXPIRY_SCHEMA, batched)

    def add(self, due: dict[int, list[bytes]]) -> None:
        """Index keys at their times (ms); a time new to the bucket gets its timer."""
        if not due:
            return
        times = sorted(due)
        updates: list[tuple[tuple, tuple]] = []
        for at, current in zip(times, self.map.get_many([(t,) for t in times]), strict=True):
            pks = due[at]
            if current is None:
                self.handle.registerTimer(at)
            else:
                pks = unpack_keys(bytes(current[0])) + pks
            updates.append(((at,), (pack_keys(pks),)))
        self.map.write(updates, [])

    def take(self, at_ms: int) -> list[bytes] | None:
        """The keys indexed at `at_ms`, once each (the entry is removed); None: no entry."""
        current = self.map.get_many([(at_ms,)])[0]
        if current is None:
            return None
        self.map.write([], [(at_ms,)])
        return list(dict.fromkeys(unpack_keys(bytes(current[0]))))


def _rows(outputs: list[tuple[str, bytes | None, bytes | None]]) -> Iterator[Row]:
    return iter([Row(topic=t, key=k, value=v) for t, k, v in outputs])


def pack_keys(pks: list[bytes]) -> bytes:
    """Partition keys as one value: each a 4-byte big-endian length, then its bytes."""
    return b"".join(len(pk).to_bytes(4, "big") + pk for pk in pks)


def unpack_keys(data: bytes) -> list[bytes]:
    """Inverse of pack_keys."""
    out, pos = [], 0
    while pos < len(data):
        n = int.from_bytes(data[pos:pos + 4], "big")
        out.append(data[pos + 4:pos + 4 + n])
        pos += 4 + n
    return out


class MaterializeProcessor(StatefulProcessor):
    """Merges the raw records of every partition key of one bucket into its own state."""

    def __init__(self, kafka: dict[str, str], schema_topic: str, settings: EventSettings,
                 batched_state: bool = True, page_rows: int = DEFAULT_PAGE_ROWS,
                 made_topics: frozenset[str] = frozenset()) -> None:
        self.kafka = kafka  # librdkafka settings of the worker's own clients
        self.made_topics = made_topics  # event topics the driver made (key_handler)
        self.schema_topic = schema_topic
        self.settings = settings
        self.batched_state = batched_state  # pipelined state calls (PySpark internals)
        self.page_rows = page_rows  # rows per page of a wide partition

    def init(self, handle: StatefulProcessorHandle) -> None:
        """Declare the state (runs on the driver once, then once per task)."""
        self.handle = handle
        self.entries = _Map(handle, "partitions", ENTRY_KEY_SCHEMA, ENTRY_SCHEMA,
                            self.batched_state)
        self.pages = _Map(handle, "pages", PAGE_KEY_SCHEMA, PAGE_SCHEMA, self.batched_state)
        self.expiries = _Expiries(handle, self.batched_state)
        # only read when an old checkpoint's single bucket timer fires
        self.timer = handle.getValueState("bucket_timer", TIMER_SCHEMA)
        if self.batched_state and state_batch.supported():
            state_batch.install_schema_cache()
            state_batch.install_fast_row_decode()
        self.handler = key_handler(self.kafka, self.schema_topic, self.settings,
                                   self.page_rows, self.made_topics)

    def handleInputRows(self, key: Any, rows: Iterator[Row],
                        timerValues: TimerValues) -> Iterator[Row]:
        """A micro-batch of one bucket's raw records (any number of partition keys)."""
        by_pk: dict[bytes, list[RawRecord]] = {}
        for r in rows:
            by_pk.setdefault(bytes(r.key), []).append(
                RawRecord(bytes(r.value), r.partition, r.offset))
        return _rows(self.merge_bucket(key[0], by_pk,
                                       timerValues.getCurrentProcessingTimeInMs()))

    def merge_bucket(self, topic: str, by_pk: dict[bytes, list[RawRecord]],
                     now: int) -> list[tuple[str, bytes | None, bytes | None]]:
        """Merge each partition key's records into its state: the outputs (topic, key,
        value), whatever form the input came in (Rows here, pandas in a benchmark)."""
        pks = list(by_pk)
        outputs: list[tuple[str, bytes | None, bytes | None]] = []
        writes = _Writes()
        due: dict[int, list[bytes]] = {}
        for pk, current in zip(pks, self.entries.get_many([(pk,) for pk in pks]), strict=True):
            blob, schema_hash, timer = _entry(current)
            result = self.handler.handle(topic, pk, by_pk[pk], blob, schema_hash, now,
                                         self._page_reader(pk))
            outputs.extend(result.outputs)
            if result.schema_hash is None:  # nothing usable: only dead letters
                continue
            writes.collect(pk, result, current is not None)
            at = result.next_timer_ms
            if at is not None and at != timer:  # an unchanged time is indexed already
                due.setdefault(at, []).append(pk)
        writes.apply(self.entries, self.pages)
        self.expiries.add(due)
        return outputs

    def handleInitialState(self, key: Any, initialState: Row,
                           timerValues: TimerValues) -> None:
        """Seed a new checkpoint (`casscade materializer rescale`, first micro-batch only):
        one kind of the old checkpoint's state for this bucket, many entries, written as
        they were; "timers" are the old store's registered timers, registered again."""
        kind = initialState["kind"]
        items = initialState["items"]
        if kind == "partitions":
            self.entries.write([((i["pk"],), (i["blob"], i["hash"], i["at"])) for i in items],
                               [])
        elif kind == "pages":
            self.pages.write([((i["pk"], i["page"]), (i["blob"],)) for i in items], [])
        elif kind == "expiries":
            self.expiries.map.write([((i["at"],), (i["blob"],)) for i in items], [])
        elif kind == "bucket_timer":
            self.timer.update((items[0]["at"],))
        elif kind == "timers":
            for i in items:
                self.handle.registerTimer(i["at"])
        else:
            raise ValueError(f"unknown initial state kind {kind!r}")

    def _page_reader(self, pk: bytes) -> Callable[[list[int]], list[bytes | None]]:
        """Reads row pages of one partition (KeyHandler's page source)."""
        def read(ids: list[int]) -> list[bytes | None]:
            return [bytes(v[0]) if v is not None else None
                    for v in self.pages.get_many([(pk, i) for i in ids])]
        return read

    def handleExpiredTimer(self, key: Any, timerValues: TimerValues,
                           expiredTimerInfo: ExpiredTimerInfo) -> Iterator[Row]:
        """A time some keys of the bucket expire at came: expire the keys that are due."""
        return _rows(self.expire_due(key[0], timerValues.getCurrentProcessingTimeInMs(),
                                     expiredTimerInfo.getExpiryTimeInMs()))

    def expire_due(self, topic: str, now: int,
                   at_ms: int) -> list[tuple[str, bytes | None, bytes | None]]:
        """Expire the bucket's keys indexed at `at_ms` that are due: the outputs."""
        pks = self.expiries.take(at_ms)
        if pks is None:  # an old checkpoint's bucket timer: scan the bucket once, and index
            self.timer.clear()
            items = [(bytes(k[0]), v) for k, v in self.entries.map.iterator()]
        else:
            items = list(zip(pks, self.entries.get_many([(pk,) for pk in pks]), strict=True))
        outputs: list[tuple[str, bytes | None, bytes | None]] = []
        writes = _Writes()
        due: dict[int, list[bytes]] = {}
        for pk, v in items:
            blob, schema_hash, timer = _entry(v)
            if timer is None:
                continue  # gone, or nothing left to expire
            if timer <= now:
                result = self.handler.expire(pk, blob, schema_hash, now,
                                             self._page_reader(pk), topic)
                if result.schema_hash is None:
                    continue
                outputs.extend(result.outputs)
                writes.collect(pk, result, True)
                timer = result.next_timer_ms
            elif pks is not None:
                continue  # its expiry moved later: indexed at that time already
            if timer is not None and timer > now:
                due.setdefault(timer, []).append(pk)
        writes.apply(self.entries, self.pages)
        self.expiries.add(due)
        return outputs

    def close(self) -> None:
        """Nothing to release: the schema cache lives for the worker."""

