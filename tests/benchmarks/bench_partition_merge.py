"""Where a logical change's Python time goes in the job's partition stores, in process (no
Spark, no Kafka): the task function's own merge (`merge_loop.merge`) over bench_rf3's
input (rf3_copies: raw keys, table id then partition key, as in the raw topic), each change
three times with different `source` blocks, shuffled, as Arrow batches of 10,000 rows
(Spark's default spark.sql.execution.arrow.maxRecordsPerBatch), one micro-batch of
PARTITION_BATCH copies after the other, real RocksDB stores in a temporary directory, the
real KeyMaterializer writing JSON (or BENCH_FORMAT=avro) events; BENCH_COLUMNS=10: rows of
10 columns; BENCH_READER=python: the pure-Python RowUpdate reader instead of the
compiled one.

Printed: changes/s on one core and a breakdown, exclusive time per change for each phase:
Arrow -> Python lists, copy check, RowUpdate decode, merge, render (rows and source
blocks), encode (JSON/Avro bytes), state (de)serialisation, store calls, output Arrow batch,
and the rest (grouping, loops). What this leaves out, Spark's side (Kafka source and sink,
JVM -> Python transfer), is the difference to bench_jvm_floor's "partition" run.
"""

from __future__ import annotations

import os
import random
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
from raw_workload import COLUMNS, FORMAT, SchemaHeaders, TableSchemas
from rf3_copies import KEYS, copies

from materializer import key_materializer as handler_module
from materializer.key_materializer import KeyMaterializer
from materializer.output.envelope import EnvelopeWriter
from materializer.output.event_settings import EventSettings
from materializer.rules import model
from materializer.rules.events import ChangeDetector
from materializer.store.partition_store import PartitionStore
from materializer.task import merge_loop
from materializer.task.task_stores import TaskStores
from shared import rowupdate_reader, topic_names

CHANGES = int(os.environ.get("PARTITION_CHANGES", "120000"))
PER_BATCH = int(os.environ.get("PARTITION_BATCH", "60000"))  # copies per micro-batch
ARROW_ROWS = 10_000
TOPIC = topic_names.raw_topic("bench")  # "bench.raw"


class PhaseClock:
    """Exclusive time per phase: a phase nested in another is taken out of the outer one."""

    def __init__(self) -> None:
        self.spent: dict[str, float] = defaultdict(float)
        self._stack: list[list[float]] = []

    def wrap(self, phase: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        """`fn` timed as `phase`."""
        def timed(*args: Any, **kwargs: Any) -> Any:
            self._stack.append([0.0])
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                took = time.perf_counter() - start
                children = self._stack.pop()[0]
                self.spent[phase] += took - children
                if self._stack:
                    self._stack[-1][0] += took
        return timed


class _TimedBatch:
    """An Arrow batch whose to_pydict is timed (the task's Arrow -> Python step)."""

    def __init__(self, batch: pa.RecordBatch, clock: PhaseClock) -> None:
        self.to_pydict = clock.wrap("arrow -> python", batch.to_pydict)


def _micro_batches() -> list[list[pa.RecordBatch]]:
    """The input as the Kafka source hands it to the task: micro-batches of Arrow batches."""
    rng = random.Random(3)
    rows: list[tuple[bytes, bytes]] = []
    block: list[tuple[bytes, bytes]] = []
    for version in range(CHANGES // KEYS):
        for key in range(KEYS):
            block.extend(copies(key, version))
            if len(block) >= 3000:
                rng.shuffle(block)
                rows.extend(block)
                block.clear()
    rng.shuffle(block)
    rows.extend(block)
    schema = pa.schema([("topic", pa.string()), ("key", pa.binary()), ("value", pa.binary()),
                        ("partition", pa.int32()), ("offset", pa.int64())])
    out = []
    for start in range(0, len(rows), PER_BATCH):
        part = rows[start:start + PER_BATCH]
        out.append([pa.RecordBatch.from_pydict(
            {"topic": [TOPIC] * len(chunk), "key": [k for k, _ in chunk],
             "value": [v for _, v in chunk], "partition": [0] * len(chunk),
             "offset": list(range(start + i, start + i + len(chunk)))}, schema=schema)
            for i in range(0, len(part), ARROW_ROWS) for chunk in [part[i:i + ARROW_ROWS]]])
    return out


def _instrument(clock: PhaseClock, monkeypatch: Any) -> None:
    """Time every phase of the merge by wrapping the functions that do it."""
    for cls, name, phase in [
            (PartitionStore, "first_copy", "copy check"), (PartitionStore, "get", "store calls"),
            (PartitionStore, "put", "store calls"), (PartitionStore, "schedule", "store calls"),
            (PartitionStore, "due", "store calls"), (ChangeDetector, "process", "merge"),
            (KeyMaterializer, "_render", "render"), (EnvelopeWriter, "value", "encode"),
            (EnvelopeWriter, "key", "encode")]:
        monkeypatch.setattr(cls, name, clock.wrap(phase, getattr(cls, name)))
    monkeypatch.setattr(handler_module, "read_row_update",
                        clock.wrap("decode", handler_module.read_row_update))
    monkeypatch.setattr(handler_module, "store", clock.wrap("state (de)serialise",
                                                            handler_module.store))
    monkeypatch.setattr(model.PartitionState, "loads", classmethod(clock.wrap(
        "state (de)serialise", model.PartitionState.loads.__func__)))
    monkeypatch.setattr(merge_loop, "_batch", clock.wrap("output arrow batch",
                                                            merge_loop._batch))


def test_bench_partition_merge_breakdown(tmp_path: Path, monkeypatch: Any) -> None:
    """Changes/s on one core of the partition merge, and its cost per change by phase."""
    if FORMAT == "avro":
        settings, publisher = EventSettings(format="avro"), SchemaHeaders()
    else:
        settings, publisher = EventSettings(), None
    if os.environ.get("BENCH_READER") == "python":  # the pure-Python RowUpdate reader
        monkeypatch.setattr(rowupdate_reader, "_reader", rowupdate_reader._read)
    handler = KeyMaterializer(TableSchemas(), settings, "bench", schema_publisher=publisher)
    micro = _micro_batches()
    plain, _ = _run(micro, tmp_path / "plain", handler, lambda b: b)  # before the clocks
    clock = PhaseClock()
    _instrument(clock, monkeypatch)
    cpu, events = _run(micro, tmp_path / "timed", handler, lambda b: _TimedBatch(b, clock))
    changes = (CHANGES // KEYS) * KEYS
    assert events == changes, (events, changes)
    timed = sum(clock.spent.values())
    reader = "compiled" if rowupdate_reader._reader is rowupdate_reader._compiled else "python"
    print(f"\npartition merge in process ({FORMAT} events, {COLUMNS} columns, {reader} "
          f"RowUpdate reader): {changes:,} changes = "
          f"{3 * changes:,} copies in micro-batches of {PER_BATCH:,}: {plain:.2f}s CPU = "
          f"{changes / plain:,.0f} changes/s on one core, {plain * 1e6 / changes:.0f} us per "
          f"change (with the phase clocks: {cpu * 1e6 / changes:.0f} us)")
    rest = cpu - timed
    for phase, secs in sorted([*clock.spent.items(), ("rest (grouping, loops)", rest)],
                              key=lambda kv: -kv[1]):
        print(f"  {phase:24s} {secs * 1e6 / changes:6.1f} us per change ({secs / cpu:.0%})")


def _run(micro: list[list[pa.RecordBatch]], root: Path, handler: KeyMaterializer,
         wrap: Callable[[pa.RecordBatch], Any]) -> tuple[float, int]:
    """CPU seconds of the merge over every micro-batch (a task each, its own stores under
    `root`), and the events it wrote."""
    events = 0
    start = time.process_time()
    for batch_id, batches in enumerate(micro):
        stores = TaskStores(root, batch_id, 120_000, 1_800_000_000_000)
        try:
            out = merge_loop.merge(iter([wrap(b) for b in batches]), stores, handler,
                                      1_800_000_000_000)
            events += sum(b.num_rows for b in out) - 1  # less the counts row
        finally:
            stores.close()
    return time.process_time() - start, events
