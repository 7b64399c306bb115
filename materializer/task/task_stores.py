"""The partition stores one task of the merge opens, with their changelogs and, under
exactly-once delivery, their raw partitions' transactions (`materializer.kafka.
transactions`).

Exactly-once, per raw partition of the task: the partition's transactional producer is
taken (made and initialised first if this process's may be stale: that fences every earlier
attempt) before its store is opened and caught up, so the changelog read is final; the
store's writes, the partition's events and the record of the raw offsets consumed go into
the transaction; closing the store commits it, and only then marks the store as matching
the changelog. A failed attempt aborts its transactions and leaves its stores unmarked, so
they are rebuilt from the changelog, which holds committed writes only.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from materializer.kafka.changelog import ChangelogJob, Changelogs
from materializer.kafka.transactions import PartitionTransaction, take_commits
from materializer.store.consumed_offsets import ConsumedOffsets
from materializer.store.dropped_tables import DroppedTables
from materializer.store.layout import store_path
from materializer.store.partition_store import PartitionStore
from materializer.store.table_sweeps import TableSweeps
from materializer.store.truncated_tables import TruncatedTables

log = logging.getLogger(__name__)
Where = tuple[str, int]  # a raw (topic, partition)


def owner_file(store: Path) -> Path:
    """Beside a store: the token of the producer that last took its partition's
    transactional id in this store's place (`transactions.transaction_for`)."""
    return store.with_name(f"txn-owner.{store.name}")


class TaskStores:
    """The partition stores one task opens, at most one per raw partition,
    each caught up with its changelog in `changelogs` (None: local stores only);
    `job` with `transactional` set: exactly-once, one transaction per raw partition."""

    def __init__(self, root: Path, batch: int, window_ms: int, now_ms: int,
                 changelogs: Changelogs | None = None,
                 changelog_topics: Mapping[str, int] | None = None,
                 job: ChangelogJob | None = None) -> None:
        self.root, self.batch, self.window_ms, self.now_ms = root, batch, window_ms, now_ms
        self.changelogs = changelogs
        self.changelog_topics = changelog_topics or {}  # their ends are read at first use
        self.job_id = job.job_id if job is not None else ""  # (the truncate barrier's)
        self.job = job if job is not None and job.transactional else None
        self._ends: dict[tuple[str, int], int] | None = None
        self.open: dict[Where, PartitionStore] = {}
        self.dropped: dict[Where, DroppedTables] = {}  # each open store's
        self.truncated: dict[Where, TruncatedTables] = {}  # each open store's
        self.sweeps: dict[Where, TableSweeps] = {}  # each open store's
        self.txns: dict[Where, PartitionTransaction] = {}
        self.consumed: dict[Where, ConsumedOffsets] = {}
        self.ranges: dict[Where, list[int]] = {}  # first and last raw offset read
        self.skipped: set[Where] = set()  # committed already: this attempt writes nothing
        self.stats: dict[Where, str] = {}  # exactly-once: what each partition's batch saw
        self.stores_restored = self.writes_restored = 0
        self.produced = 0  # events and dead letters written in the transactions
        self.inits: list[float] = []  # seconds of each producer initialised for the task
        self._taken: dict[Where, tuple[PartitionTransaction, bool]] = {}  # by `prepare`

    @property
    def transactional(self) -> bool:
        """Whether the task delivers exactly once (its events go through `produce`)."""
        return self.job is not None

    def earlier_commits(self) -> list[tuple[float, int]]:
        """Exactly-once: the commits of this Python worker's earlier tasks not reported
        yet, (seconds waited for the broker, topics written) each (`transactions.
        take_commits`); a task's own are reported by the worker's next task."""
        return take_commits() if self.job is not None else []

    def prepare(self, wheres: Iterable[Where]) -> None:
        """Exactly-once: take the producers of raw partitions `wheres` (the task's) at once,
        before any store opens: a producer to initialise waits for the transaction
        coordinator (a few ms, at times 0.5 s), and a task whose partitions all moved from
        another Python worker waits for them together, not one after the other."""
        todo = [w for w in wheres if w not in self.open and w not in self._taken]
        if self.job is None or self.changelogs is None or len(todo) < 2:
            return  # (one: `get` takes it)
        with ThreadPoolExecutor(len(todo)) as pool:
            self._taken.update(zip(todo, pool.map(self._take, todo), strict=True))

    def _take(self, where: Where) -> tuple[PartitionTransaction, bool]:
        """The producer of raw partition `where` and whether it is new
        (`ChangelogJob.transaction`)."""
        assert self.job is not None and self.changelogs is not None
        if self._ends is None:  # every changelog end this task may need, at once
            self._ends = self.changelogs.ends(self.changelog_topics)
        topic, partition = where
        return self.job.transaction(topic, partition,
                                    owner_file(store_path(self.root, topic, partition)),
                                    self._ends.get((self.changelogs.topic, partition)))

    def get(self, topic: str, partition: int) -> PartitionStore:
        """The store of (topic, partition), opened on first use."""
        store = self.open.get((topic, partition))
        if store is None:
            path = store_path(self.root, topic, partition)
            changelog = None
            if self.changelogs is not None:
                if self._ends is None:  # every changelog end this task may need, at once
                    self._ends = self.changelogs.ends(self.changelog_topics)
                if self.job is not None:
                    taken = self._taken.pop((topic, partition), None)
                    txn, new = taken or self._take((topic, partition))
                    self.txns[(topic, partition)] = txn
                    if new:
                        self.inits.append(txn.init_s)
                    # an end read before this producer fenced the earlier ones is not final
                    changelog = self.changelogs.partition(topic, partition,
                                                          None if new else self._ends, txn)
                else:
                    changelog = self.changelogs.partition(topic, partition, self._ends)
            store = self.open[(topic, partition)] = PartitionStore(
                path, self.batch, self.window_ms, self.now_ms, changelog)
            self.stores_restored += store.restored > 0
            self.writes_restored += store.restored
            self.dropped[(topic, partition)] = DroppedTables(store)
            self.truncated[(topic, partition)] = TruncatedTables(store)
            self.sweeps[(topic, partition)] = TableSweeps(store)
            if self.job is not None:
                self.consumed[(topic, partition)] = ConsumedOffsets(store)
        return store

    def read(self, where: Where, first: int, last: int) -> bool:
        """Note that raw offsets `first` to `last` of `where` were read; whether to merge
        them (False: the partition's batch committed already, exactly-once)."""
        seen = self.ranges.get(where)
        if seen is None:
            self.ranges[where] = [first, last]
            if self.job is not None and self.consumed[where].committed(first):
                self.skipped.add(where)
                log.warning(f"micro-batch {self.batch} of {where[0]}[{where[1]}] committed "
                            "already: its records are skipped")
        else:
            seen[1] = last
        return where not in self.skipped

    def keep_stats(self, where: Where, stats: str | None) -> None:
        """Exactly-once: what raw partition `where`'s batch saw (TaskStats JSON), to commit
        with its offsets (a later attempt that skips the partition reports them)."""
        if self.job is not None and stats is not None:
            self.stats[where] = stats

    def committed_stats(self, where: Where) -> str | None:
        """What a skipped partition's committed batch saw (TaskStats JSON; None: nothing)."""
        return self.consumed[where].stats if where in self.skipped else None

    def produce(self, where: Where, outputs: Iterable[tuple[str, bytes | None, bytes | None]]
                ) -> None:
        """Write events of raw partition `where` in its transaction."""
        txn = self.txns[where]
        for topic, key, value in outputs:
            txn.produce(topic, key, value)
            self.produced += 1

    def close(self, failed: bool = False) -> None:
        """Close every store opened (each one, even if another fails; then the first error);
        exactly-once: each raw partition's transaction commits, with the offsets it read,
        as its store closes, the partitions' commits at once (each waits for the broker);
        `failed`: the task failed, and they are aborted."""
        if self.job is not None and len(self.open) > 1:
            with ThreadPoolExecutor(len(self.open)) as pool:
                found = list(pool.map(lambda item: self._close(*item, failed),
                                      self.open.items()))
        else:
            found = [self._close(where, store, failed) for where, store in self.open.items()]
        errors = [e for e in found if e is not None]
        if errors:
            raise errors[0]

    def _close(self, where: Where, store: PartitionStore, failed: bool) -> Exception | None:
        """Close one store (exactly-once: record its offsets, commit); the error, if any."""
        error = None
        ok = not failed
        try:
            if self.job is not None and ok and where in self.ranges:
                first, last = self.ranges[where]
                if where in self.skipped:
                    self.consumed[where].check_end(last)
                else:
                    self.consumed[where].record(first, last, self.stats.get(where))
        except Exception as exc:  # noqa: BLE001 (returned: the other stores still close)
            error, ok = exc, False
        try:
            store.close(failed=not ok)
        except Exception as exc:  # noqa: BLE001 (as above)
            error = error or exc
        return error
