"""What a partition store's open costs: every task opens its raw partitions' RocksDB stores
and closes them at its end, every micro-batch (`materializer.store.partition_store`).

A store of STORE_KEYS keys in STORE_FILES table files is opened, given one write, flushed
and closed STORE_OPENS times with the job's options (`store_options`), and as many times
with RocksDB's default of 16 table-file opening threads instead of the job's one, the two
alternated in rounds of 20; first on an idle machine, then with STORE_SPINNERS processes
spinning on the cores (as the Cassandra nodes, Kafka and the job's JVM keep the two cores
of the latency benchmark busy). Printed: the CPU (every thread of this process) and the
wall time of one open, write, flush and close.

`.venv/bin/python -m pytest tests/benchmarks/bench_store_open.py -s -o
python_files='bench_*.py' -o python_functions='test_bench_*'`
"""

from __future__ import annotations

import multiprocessing
import os
import time
from pathlib import Path

from rocksdict import Options, Rdict, WriteOptions

from materializer.store.partition_store import open_store, store_options

KEYS = int(os.environ.get("STORE_KEYS", "20000"))
FILES = int(os.environ.get("STORE_FILES", "3"))
OPENS = int(os.environ.get("STORE_OPENS", "200"))
SPINNERS = int(os.environ.get("STORE_SPINNERS", str(os.cpu_count() or 2)))
ROCKSDB_DEFAULT_THREADS = 16  # RocksDB's max_file_opening_threads
ROUND = 20


def _default_threads() -> Options:
    """The job's options but for RocksDB's default table-file opening threads."""
    options = store_options()
    options.set_max_file_opening_threads(ROCKSDB_DEFAULT_THREADS)
    return options


def _fill(path: Path) -> None:
    """KEYS keys of about 200 bytes, flushed into FILES table files."""
    db = open_store(path)
    try:
        for f in range(FILES):
            for k in range(f, KEYS, FILES):
                db.put(b"e" + k.to_bytes(8, "big"), os.urandom(200))
            db.flush()
    finally:
        db.close()


def _cycle(path: Path, options: Options, i: int) -> tuple[float, float]:
    """One open, write, flush and close: (CPU s, wall s)."""
    cpu, wall = time.process_time(), time.perf_counter()
    db = Rdict(str(path), options)
    no_wal = WriteOptions()
    no_wal.disable_wal = True
    db.set_write_options(no_wal)
    db.put(b"mnewest-batch", i.to_bytes(8, "big"))
    db.flush()
    db.close()
    return time.process_time() - cpu, time.perf_counter() - wall


def _spin() -> None:
    while True:
        pass


def _measure(path: Path) -> dict[str, tuple[float, float]]:
    """Per variant: mean CPU and wall ms of a cycle over OPENS cycles, alternated."""
    variants = {"the job's (1 thread)": store_options, "RocksDB's default (16)": _default_threads}
    used = {name: [0.0, 0.0] for name in variants}
    i = 0
    for _ in range(OPENS // ROUND):
        for name, make in variants.items():
            for _ in range(ROUND):
                cpu, wall = _cycle(path, make(), i)
                used[name][0] += cpu
                used[name][1] += wall
                i += 1
    return {name: (c / OPENS * 1000, w / OPENS * 1000) for name, (c, w) in used.items()}


def test_bench_store_open(tmp_path: Path) -> None:
    """Open, write, flush, close of a store: the job's options against RocksDB's default
    file-opening threads, idle and on busy cores."""
    path = tmp_path / "store"
    _fill(path)
    print(f"\na store of {KEYS:,} keys in {FILES} table files, {OPENS} cycles of open, one "
          "write, flush, close per variant (alternated):")
    for when in ("idle", f"{SPINNERS} processes spinning"):
        spinners = []
        if when != "idle":
            spinners = [multiprocessing.Process(target=_spin, daemon=True)
                        for _ in range(SPINNERS)]
            for proc in spinners:
                proc.start()
        try:
            figures = _measure(path)
        finally:
            for proc in spinners:
                proc.kill()
                proc.join()
        print(f"  {when}: " + "; ".join(f"{name} {cpu:.2f} ms CPU, {wall:.2f} ms wall"
                                        for name, (cpu, wall) in figures.items()))
        assert all(cpu > 0 and wall > 0 for cpu, wall in figures.values())
