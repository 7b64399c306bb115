"""The keys' work of a task's table sweeps (`materializer.store.table_sweeps`): a TRUNCATE's
removals (`d` events), a reset's (`d` events, state gone), a truncate barrier's live rows
written again (`r` events), done key by key, at most `sweep_keys` keys a task per
micro-batch, the rest in the batches after.

Why not the whole table at once: a task's events and store writes go into its raw
partitions' transactions, which the broker aborts after `events.transaction_timeout_s`. A
sweep of a table of millions of keys could outlast that, and every replay would then do
the same work and fail the same way. A sweep's cursor is committed with the batch, so each
batch goes on where the last committed one stopped.

While a sweep is under way, the merge goes on for every key: a key the merge or an expiry
is about to change has its sweeps' work done first (`settle`), so its events keep their
order (its removals before its new row, say), and a key that gets events while a barrier's
sweep has not reached it is left out of that sweep (`touched`): its row came after the
truncate events already. A TRUNCATE or reset reports to the truncate barrier once its sweep
is through the whole table.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from materializer.key_materializer import KeyMaterializer
from materializer.rules.truncate_barrier import Applied
from materializer.store.layout import ENTRY, entry_key, unpack_entry
from materializer.store.partition_store import PartitionStore
from materializer.store.table_sweeps import RESET, REWRITE, TRUNCATE, Sweep, TableSweeps
from materializer.task.key_writes import apply_result, page_source, write_pages
from materializer.task.task_stats import TaskStats
from materializer.task.task_stores import TaskStores, Where
from shared.table_truncate import TableTruncate, decode_table_truncate
from shared.topic_names import TABLE_ID_SIZE, truncations_topic
from shared.truncate_barrier import TruncateBarrier

Emit = Callable[[Where, Iterable[tuple[str, bytes | None, bytes | None]]], None]
_CHUNK = 1_000  # keys read from the store at a time


class TableSweeper:
    """One task's sweeps: started by its batch's records, advanced within its budget."""

    def __init__(self, stores: TaskStores, handler: KeyMaterializer, now: int, emit: Emit,
                 saw: Callable[[Where], TaskStats], sweep_keys: int) -> None:
        self.stores, self.handler, self.now = stores, handler, now
        self.emit, self.saw = emit, saw
        self.left: int | None = sweep_keys if sweep_keys > 0 else None  # None: no bound
        self._truncates: dict[bytes, TableTruncate] = {}  # decoded control records

    def start_truncates(self, truncates: dict[Where, list[tuple[int, bytes, TableTruncate]]]
                        ) -> None:
        """Start a sweep for each table-truncated record that raises its table's floor
        (each reset); the others were applied before (another replica's, say)."""
        for where, records in truncates.items():
            floors = self.stores.truncated[where]
            for offset, value, truncate in records:
                table_id = truncate.table_id.bytes
                if self.stores.dropped[where].dropped_before(table_id) or not (
                        truncate.reset or floors.raise_to(table_id, truncate.floor_us)):
                    continue
                if truncate.reset:
                    floors.reset_at(table_id, truncate.floor_us)
                self.stores.sweeps[where].start(Sweep(
                    RESET if truncate.reset else TRUNCATE, table_id, offset, value,
                    truncate.schema_hash))
                self.saw(where).truncate(truncate.name, 0)

    def start_rewrites(self, barriers: dict[Where, list[tuple[int, bytes, TruncateBarrier]]]
                       ) -> None:
        """Start a sweep for each truncate barrier, before the batch's merge: keys the merge
        gives events are left out (`touched`), theirs come after the truncate events."""
        for where, records in barriers.items():
            if where in self.stores.skipped:
                continue
            sweeps = self.stores.sweeps[where]
            for offset, value, barrier in records:
                table_id = barrier.table_id.bytes
                if self.stores.dropped[where].dropped_before(table_id):
                    continue
                sweeps.start(Sweep(REWRITE, table_id, offset, value))

    def settle(self, where: Where, key: bytes, advancing: Sweep | None = None) -> bool:
        """Do the removals still owed to `key` (its table's reset and TRUNCATE sweeps that
        have not reached it), before the key changes; `advancing`: the sweep at this key
        in its turn (it leaves no mark). Whether any was owed (the key's entry may have
        changed)."""
        sweeps = self.stores.sweeps[where]
        of = sweeps.of(key)
        owed = False
        for kind in (RESET, TRUNCATE):
            sweep = of.get(kind)
            if sweep is None or not sweeps.pending(sweep, key):
                continue
            owed = True
            if self._remove(where, sweep, key):
                self.touched(where, key)
            if kind == RESET and sweep is not advancing:
                sweeps.mark(sweep, key)  # (a reset done twice would remove a new row)
        return owed

    def touched(self, where: Where, key: bytes) -> None:
        """`key` got events: a barrier's sweep that has not reached it leaves it out."""
        sweeps = self.stores.sweeps[where]
        sweep = sweeps.of(key).get(REWRITE)
        if sweep is not None and sweeps.pending(sweep, key):
            sweeps.mark(sweep, key)

    def advance(self, kinds: tuple[bytes, ...]) -> None:
        """Take the sweeps of `kinds` under way on, store by store, while the budget
        lasts; a sweep that gets through its table is finished."""
        for where, store in list(self.stores.open.items()):
            if where in self.stores.skipped:
                continue
            sweeps = self.stores.sweeps[where]
            for sweep in sweeps.under_way():
                if sweep.kind not in kinds:
                    continue
                if self.stores.dropped[where].dropped_before(sweep.table_id):
                    sweeps.finish(sweep)
                    continue
                if not self._advance(where, store, sweeps, sweep):
                    return  # the budget is spent

    def _advance(self, where: Where, store: PartitionStore, sweeps: TableSweeps,
                 sweep: Sweep) -> bool:
        """Take one sweep on; False if the budget ran out before its table's end."""
        prefix = entry_key(sweep.table_id)
        while True:
            after = entry_key(sweep.cursor) if sweep.cursor else None
            if self.left == 0:  # spent: done if no key is left, else on in the next batch
                if store.entry_keys(prefix, after, 1):
                    return False  # (its cursor is saved with the others', `save`)
                self._finish(where, sweeps, sweep)
                return True
            chunk = _CHUNK if self.left is None else min(_CHUNK, self.left)
            keys = store.entry_keys(prefix, after, chunk)
            for store_key in keys:
                key = store_key[len(ENTRY):]
                if sweeps.pending(sweep, key):  # (a marked key passes free)
                    self.settle(where, key, sweep)
                    if sweep.kind == REWRITE and sweeps.pending(sweep, key):
                        self._rewrite(where, store, key)
                    if self.left is not None:
                        self.left -= 1
                sweep.cursor = key
            if len(keys) < chunk:
                self._finish(where, sweeps, sweep)
                return True

    def save(self) -> None:
        """Write the cursors the task moved to the stores (with the batch's other writes)."""
        for where in self.stores.open:
            if where not in self.stores.skipped:
                self.stores.sweeps[where].save_all()

    def _remove(self, where: Where, sweep: Sweep, key: bytes) -> bool:
        """A reset's or TRUNCATE's removal from one key; whether it gave events."""
        store = self.stores.get(*where)
        blob, schema_hash, timer = unpack_entry(store.get(entry_key(key)))
        if blob is None:
            return False
        sweep.version = schema_hash or sweep.version
        truncate = self._truncate(sweep)
        result = self.handler.truncate((*where, sweep.offset), key[TABLE_ID_SIZE:], blob,
                                       schema_hash, self.now, truncate,
                                       page_source(store, key))
        if sweep.kind == RESET:  # every row gone, and the key's state with them: what
            write_pages(store, key, result)  # comes next merges into empty state
            store.put(entry_key(key), None)
        else:
            apply_result(store, key, timer, result)
        self.emit(where, result.outputs)
        self.saw(where).truncate(truncate.name, bool(result.outputs))
        return bool(result.outputs)

    def _rewrite(self, where: Where, store: PartitionStore, key: bytes) -> None:
        """A barrier's `r` events of one key's live rows."""
        blob, schema_hash, _timer = unpack_entry(store.get(entry_key(key)))
        result = self.handler.live_rows(key[TABLE_ID_SIZE:], blob, schema_hash, self.now,
                                        page_source(store, key), where[0])
        self.emit(where, result.outputs)

    def _finish(self, where: Where, sweeps: TableSweeps, sweep: Sweep) -> None:
        """The sweep is through its table: gone; a removal reports to the barrier, in the
        transaction that finished it (this partition is done)."""
        sweeps.finish(sweep)
        if sweep.kind == REWRITE:
            return
        truncate = self._truncate(sweep)
        applied = Applied(self.stores.job_id, truncate.table_id, truncate.keyspace,
                          truncate.table, truncate.floor_us, *where, sweep.version or None,
                          truncate.reset)
        self.emit(where, [(truncations_topic(self.handler.topic_prefix), *applied.record())])

    def _truncate(self, sweep: Sweep) -> TableTruncate:
        truncate = self._truncates.get(sweep.control)
        if truncate is None:
            truncate = self._truncates[sweep.control] = decode_table_truncate(sweep.control)
        return truncate
