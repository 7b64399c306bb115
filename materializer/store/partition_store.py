"""The state of one raw partition in a local RocksDB: the entries of its keys, of every
table (`materializer.store.layout`), the copy digests seen, and an index of TTL expiry
times.

Why every value carries a batch id: Spark runs a micro-batch again after a crash, and
retries a failed task, so a store that already holds some of a batch's effects must be able
to take them back. Each entry is written as (the batch that wrote it, its value, its value
before that batch). A replay of batch b reads the before value of the entries b wrote, so a
rollback needs no undo log, no scan and no atomic commit: each entry rolls back on its own,
however much of the batch reached the store. Only the last batch ever runs again (Spark
starts batch b+1 after b's commit), so one before value is enough.

The same holds for the copy digests (a digest first seen by batch b is new again in b's
replay, until this attempt sees it) and the expiry index (an expiry fired by batch b fires
again in b's replay).

Why a changelog: the task of a Kafka partition may run on another machine next batch (an
executor lost, a cluster's scheduling), so every write but the copy digests also goes to a
`Changelog` (a compacted Kafka topic partition, `materializer.kafka.changelog`), durable
before the task ends. A store remembers the changelog's end it matches (a mark written when
it closes, removed when it opens); one that is behind catches up from its mark, one without
a mark (new on this machine, or cut short mid-batch) is rebuilt from the changelog. The
changelog holds the same values, batch ids and before values as the store, so a replay rolls
back a restored store as it does a local one. Copy digests stay local: a copy merged again
after a restore changes nothing.
"""

from __future__ import annotations

import logging
import shutil
import struct
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

from rocksdict import Options, Rdict, WriteOptions

log = logging.getLogger(__name__)
_HEAD = struct.Struct(">qii")  # batch id, length of the value, length of the before value
_BATCH = struct.Struct(">q")
_SLOT = struct.Struct(">I")
_ENTRY, _COPY, _EXPIRY, _META = b"e", b"c", b"x", b"m"
_NEWEST = _META + b"newest-batch"
_RECORD = _META + b"r/"  # the records of wrappers (materializer.store.dropped_tables)
_MARK = b"l"  # (local only) the changelog end this store matched when it last closed, and when
_MARK_VALUE = struct.Struct(">qq")  # changelog end, wall clock ms
# a store whose mark is older than this is rebuilt, not caught up: compaction may have
# dropped the tombstones (kept delete.retention.ms, a day by default) of keys it still holds
CATCH_UP_WITHIN_MS = 12 * 3600 * 1000
_FIRED_NOT = -1  # an expiry index entry not fired yet


def store_options() -> Options:
    """The RocksDB options of a partition store (opened by every task, every micro-batch)."""
    options = Options(raw_mode=True)
    # RocksDB starts a new info LOG at every open, one per task and micro-batch here, and
    # keeps 1,000 old ones by default
    options.set_keep_log_file_num(2)
    # and at every open it starts threads to open the table files, 16 by default whatever
    # their number (a store holds a few): on busy cores the open waits for each to run
    # (tests/benchmarks/bench_store_open.py)
    options.set_max_file_opening_threads(1)
    return options


# how long an open waits for a store's lock: after a SIGKILL of the driver, the Python
# workers of its last tasks (their own process group) live on until their daemon sees the
# JVM gone and hangs them up, under a second mostly
LOCK_WAIT_S = 30.0


class StoreLocked(Exception):
    """Another process holds a partition store's lock for longer than LOCK_WAIT_S."""


def open_store(path: Path, wait_s: float = LOCK_WAIT_S) -> Rdict:
    """Open the RocksDB at `path`, waiting up to `wait_s` for a process that holds it."""
    deadline = time.monotonic() + wait_s
    warned = False
    while True:
        try:
            return Rdict(str(path), store_options())
        except Exception as exc:  # rocksdict raises a bare Exception with RocksDB's status
            if "lock" not in str(exc).lower():
                raise
            if time.monotonic() >= deadline:
                raise StoreLocked(
                    f"{path}: another process holds this partition store for over {wait_s:g}"
                    " s (a second job on the same checkpoint, or a worker of a stopped one "
                    f"that is still running): {exc}") from exc
            if not warned:
                log.warning(f"{path}: the store is held by another process (a worker of a "
                            f"killed attempt, mostly); waiting up to {wait_s:g} s")
                warned = True
            time.sleep(0.05)


class Changelog(Protocol):
    """Where one store's writes become durable beyond this machine, in order."""

    def end(self) -> int:
        """The position after the last write that is durable."""

    def read(self, start: int) -> Iterator[tuple[bytes, bytes | None]]:
        """The writes (key, value; None: removed) from position `start` to `end()`."""

    def write(self, key: bytes, value: bytes | None) -> None:
        """Append one write (None: the key is removed)."""

    def flush(self) -> int:
        """Wait until every write is durable (raise if one is not); the end after them."""

    def abort(self) -> int | None:
        """After a failed attempt: make its writes durable (the end after them), or take
        them back (None: the store must be rebuilt)."""


class ChangelogBehind(Exception):
    """A store matched a changelog position the changelog no longer reaches."""


class StateAhead(Exception):
    """The store holds a batch newer than the one the checkpoint runs: it belongs to another
    checkpoint, or the checkpoint was rolled back."""


def _pack(batch: int, value: bytes | None, before: bytes | None) -> bytes:
    return (_HEAD.pack(batch, -1 if value is None else len(value),
                       -1 if before is None else len(before))
            + (value or b"") + (before or b""))


def _unpack(raw: bytes) -> tuple[int, bytes | None, bytes | None]:
    batch, n, m = _HEAD.unpack_from(raw)
    at = _HEAD.size
    value = None if n < 0 else raw[at:at + n]
    at += max(n, 0)
    return batch, value, (None if m < 0 else raw[at:at + m])


class PartitionStore:
    """One Kafka partition's state, opened by the task that runs one micro-batch of it
    (RocksDB's lock keeps out a second opener: it waits, then fails loudly)."""

    def __init__(self, path: Path, batch: int, copy_window_ms: int, now_ms: int,
                 changelog: Changelog | None = None) -> None:
        path.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.batch = batch
        self._log = changelog
        self._newest_pending = False
        self._db = self._open()
        self.restored = 0  # writes read back from the changelog by this open
        try:
            if changelog is not None:
                self.restored = self._catch_up(changelog)
                self._db.delete(_MARK)  # until close(): a store cut short is rebuilt
            newest = self._db.get(_NEWEST)
            if newest is not None and _BATCH.unpack(newest)[0] > batch:
                raise StateAhead(
                    f"{path} holds micro-batch {_BATCH.unpack(newest)[0]}, newer than the "
                    f"checkpoint's {batch}: it belongs to another checkpoint (keep the state "
                    "directory inside its checkpoint, and remove both together)")
            # (a replay that writes nothing writes nothing). To the changelog with this
            # attempt's first write, or at its close: a changelog written in a transaction
            # opens it at its first write, which should come as late as it can (after the
            # task has read its input and opened its other stores)
            self._newest_pending = newest != _BATCH.pack(batch)
            if self._newest_pending:
                self._db.put(_NEWEST, _BATCH.pack(batch))
        except BaseException:
            self._db.close()
            raise
        self.replay = newest is not None and _BATCH.unpack(newest)[0] == batch
        if self.replay:
            # (exactly-once: a batch that committed is then skipped, `consumed_offsets`)
            log.warning(f"micro-batch {batch} runs again on {path}: what an earlier attempt "
                        "left is rolled back")
        self._window_ms = copy_window_ms
        self._slot = now_ms // copy_window_ms if copy_window_ms > 0 else 0
        self._copies: set[bytes] = set()  # digests this attempt has seen
        self._fired: set[bytes] = set()  # expiry index keys this attempt has fired
        self._written: dict[bytes, bytes | None] = {}  # entries this attempt wrote
        self._before: dict[bytes, bytes | None] = {}  # entries as the previous batch left them
        self._slot_prefix = _COPY + _SLOT.pack(self._slot)
        self._batch_value = _BATCH.pack(batch)
        if copy_window_ms > 0 and self._slot > 0:
            # digests of earlier slots are past the window: gone in one cut
            self._db.delete_range(_COPY + _SLOT.pack(0), self._slot_prefix)

    def _open(self) -> Rdict:
        db = open_store(self.path)
        # No write-ahead log (a third of a put's cost): close() flushes the batch's writes
        # to a table file before the task can succeed, which is all Spark's commit relies
        # on; an attempt killed before that leaves fewer of its writes, and a replay takes
        # back whichever of them are there
        no_wal = WriteOptions()
        no_wal.disable_wal = True
        db.set_write_options(no_wal)
        return db

    def _catch_up(self, changelog: Changelog) -> int:
        """Bring the local store to the changelog's end; how many writes that read."""
        end = changelog.end()
        raw = self._db.get(_MARK)
        mark, marked_ms = (None, 0) if raw is None else _MARK_VALUE.unpack(raw)
        if mark == end:
            return 0
        if mark is not None and mark > end:
            raise ChangelogBehind(
                f"{self.path} matched its changelog up to position {mark}, but the changelog "
                f"ends at {end}: it was deleted or truncated, and the state it held is gone "
                "from Kafka (replay the raw topics into a new checkpoint)")
        if mark is None and end == 0 and self._empty():
            return 0  # a new store of a new partition
        if mark is not None and time.time() * 1000 - marked_ms > CATCH_UP_WITHIN_MS:
            mark = None  # too old to catch up safely
        if mark is None:  # new on this machine, cut short, or too old: the changelog has it all
            self._db.close()
            shutil.rmtree(self.path)
            self.path.mkdir(parents=True)
            self._db = self._open()
        started, count = time.monotonic(), 0
        for key, value in changelog.read(mark or 0):
            if value is None:
                self._db.delete(key)
            else:
                self._db.put(key, value)
            count += 1
        # a warning: in steady state a store stays where its partition's task runs
        log.warning(f"{self.path}: {'rebuilt' if mark is None else 'caught up'} from its changelog "
                 f"({count} writes from position {mark or 0} to {end}, "
                 f"{time.monotonic() - started:.2f} s)")
        return count

    def _empty(self) -> bool:
        """Whether the RocksDB holds no key at all (a store with writes but no mark was
        never closed: what it holds never reached the changelog, and is rebuilt)."""
        it = self._db.iter()
        it.seek_to_first()
        empty = not it.valid()
        del it
        return empty

    def _put(self, key: bytes, value: bytes) -> None:
        self._db.put(key, value)
        self._log_write(key, value)

    def _delete(self, key: bytes) -> None:
        self._db.delete(key)
        self._log_write(key, None)

    def _log_write(self, key: bytes, value: bytes | None) -> None:
        """One write to the changelog, after the batch id this attempt holds back until its
        first."""
        if self._log is None:
            return
        if self._newest_pending:
            self._newest_pending = False
            self._log.write(_NEWEST, _BATCH.pack(self.batch))
        self._log.write(key, value)

    def close(self, failed: bool = False) -> None:
        """Make this attempt's writes durable in the changelog, then flush them to disk with
        the changelog's end as the store's mark, and close the RocksDB; `failed`: the
        attempt failed, and its changelog decides what becomes of its writes
        (`Changelog.abort`)."""
        try:
            if self._log is not None:
                if not failed and self._newest_pending:
                    self._newest_pending = False
                    self._log.write(_NEWEST, _BATCH.pack(self.batch))
                end = self._log.abort() if failed else self._log.flush()
                if end is not None:
                    self._db.put(_MARK, _MARK_VALUE.pack(end, int(time.time() * 1000)))
            self._db.flush()
        finally:
            self._db.close()

    def get(self, key: bytes) -> bytes | None:
        """The value of `key` as of the end of the previous batch, or as this batch left it."""
        if key in self._written:
            return self._written[key]
        return self._before_batch(key)

    def _before_batch(self, key: bytes) -> bytes | None:
        """`key`'s value at the end of the previous batch (read once per attempt)."""
        if key in self._before:
            return self._before[key]
        raw = self._db.get(_ENTRY + key)
        value = None
        if raw is not None:
            batch, value, before = _unpack(raw)
            if batch > self.batch:
                raise StateAhead(f"{self.path}: an entry of micro-batch {batch} in batch "
                                 f"{self.batch}")
            if batch == self.batch:
                value = before  # a replay: this batch's earlier attempt wrote it
        self._before[key] = value
        return value

    def put(self, key: bytes, value: bytes | None) -> None:
        """Set (None: remove) `key`'s value for this batch, keeping the value before it."""
        before = self._before_batch(key)
        self._written[key] = value
        if value is None and before is None:
            self._delete(_ENTRY + key)
        else:
            self._put(_ENTRY + key, _pack(self.batch, value, before))

    def entry_keys(self, prefix: bytes, after: bytes | None = None, limit: int | None = None
                   ) -> list[bytes]:
        """The keys of every entry whose key starts with `prefix`, in key order, as RocksDB
        holds them now (an entry this attempt removed may be listed: `get` says); only
        those after `after`, and at most `limit` of them, if given."""
        it = self._db.iter()
        start = _ENTRY + prefix
        it.seek(start if after is None else _ENTRY + after)
        if after is not None and it.valid() and it.key() == _ENTRY + after:
            it.next()
        keys: list[bytes] = []
        while it.valid() and it.key().startswith(start) and (limit is None
                                                             or len(keys) < limit):
            keys.append(it.key()[1:])
            it.next()
        del it
        return keys

    def forget(self, key: bytes) -> None:
        """Remove an entry with no before value to keep: one a committed batch removed (`put`
        None keeps the value before it, for a replay)."""
        self._delete(_ENTRY + key)

    def record(self, name: bytes) -> bytes | None:
        """A record of the store's own under `name` (a wrapper's bookkeeping)."""
        return self._db.get(_RECORD + name)

    def records(self, prefix: bytes) -> dict[bytes, bytes]:
        """The store's own records whose names start with `prefix`, by name."""
        it = self._db.iter()
        start = _RECORD + prefix
        it.seek(start)
        found = {}
        while it.valid() and it.key().startswith(start):
            found[it.key()[len(_RECORD):]] = it.value()
            it.next()
        del it
        return found

    def set_record(self, name: bytes, value: bytes) -> None:
        """Write a record of the store's own (to the changelog too)."""
        self._put(_RECORD + name, value)

    def first_copy(self, digest: bytes) -> bool:
        """Whether a record with this copy digest is seen for the first time within the
        window (then it is recorded); False: a copy of one seen before, to drop."""
        if self._window_ms <= 0:
            return True
        if digest in self._copies:
            return False
        # only the current slot is looked at: a copy whose first one came before the slot
        # began (under a second before, mostly, of a window of minutes) is merged, harmlessly
        key = self._slot_prefix + digest
        raw = self._db.get(key)
        if raw is not None and _BATCH.unpack(raw)[0] < self.batch:
            return False  # seen by a committed batch (one of this batch: a replay)
        self._db.put(key, self._batch_value)
        self._copies.add(digest)
        return True

    def schedule(self, at_ms: int, key: bytes) -> None:
        """Index `key` as due for a look at `at_ms` (an entry that moved on is skipped)."""
        self._put(_EXPIRY + _BATCH.pack(at_ms) + key, _BATCH.pack(_FIRED_NOT))

    def due(self, now_ms: int) -> Iterator[tuple[int, bytes]]:
        """The (time, key) index entries due at `now_ms` not fired yet: each is fired (by
        `fired`) or stays due. Entries fired by committed batches are removed on the way."""
        it = self._db.iter()
        it.seek(_EXPIRY)
        end = _EXPIRY + _BATCH.pack(now_ms + 1)
        found: list[tuple[bytes, int]] = []
        while it.valid() and it.key() < end:
            found.append((it.key(), _BATCH.unpack(it.value())[0]))
            it.next()
        del it
        for index_key, fired_in in found:
            if fired_in != _FIRED_NOT and fired_in < self.batch:
                self._delete(index_key)
            elif fired_in == _FIRED_NOT or index_key not in self._fired:
                yield (_BATCH.unpack_from(index_key, 1)[0], index_key[1 + _BATCH.size:])

    def fired(self, at_ms: int, key: bytes) -> None:
        """Mark the index entry (at_ms, key) fired by this batch."""
        index_key = _EXPIRY + _BATCH.pack(at_ms) + key
        self._put(index_key, _BATCH.pack(self.batch))
        self._fired.add(index_key)

    def estimated_keys(self) -> int:
        """RocksDB's estimate of the keys it holds (entries, digests, index)."""
        return int(self._db.property_int_value("rocksdb.estimate-num-keys") or 0)


def entry_value(raw: bytes) -> bytes | None:
    """An entry's value as the batch that wrote it left it (a changelog's, a RocksDB's)."""
    return _unpack(raw)[1]


def record_key(name: bytes) -> bytes:
    """The RocksDB key (as the changelog holds it) of the store record `name`."""
    return _RECORD + name


def owner_of(raw_key: bytes) -> tuple[str, bytes] | None:
    """What a store's RocksDB key (as its changelog holds it) belongs to: ("entry", the
    entry's key) or ("expiry", the key whose expiry it indexes); None for the store's own
    records (its newest batch), which every store has."""
    kind = raw_key[:1]
    if kind == _ENTRY:
        return "entry", raw_key[1:]
    if kind == _EXPIRY:
        return "expiry", raw_key[1 + _BATCH.size:]
    return None
