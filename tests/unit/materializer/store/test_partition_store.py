"""The partition store's rollback: a micro-batch cut short anywhere and run again leaves the
state, the copy digests and the expiry index as one clean run of it would (a real RocksDB in
a temporary directory; no Spark)."""

from __future__ import annotations

import random
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from materializer.store import partition_store
from materializer.store.partition_store import (
    ChangelogBehind,
    PartitionStore,
    StateAhead,
    StoreLocked,
    open_store,
)

KEYS = [b"k%d" % i for i in range(6)]
WINDOW_MS = 10_000


class Crash(Exception):
    """The task died here."""


class ListChangelog:
    """A changelog in a list (the Kafka one is tested against a broker): writes are durable
    once flushed; a process killed before that leaves a prefix of them."""

    def __init__(self) -> None:
        self.durable: list[tuple[bytes, bytes | None]] = []
        self.pending: list[tuple[bytes, bytes | None]] = []

    def end(self) -> int:
        return len(self.durable)

    def read(self, start: int) -> Iterator[tuple[bytes, bytes | None]]:
        yield from self.durable[start:]

    def write(self, key: bytes, value: bytes | None) -> None:
        self.pending.append((key, value))

    def flush(self) -> int:
        self.durable += self.pending
        self.pending = []
        return len(self.durable)

    def killed(self, rng: random.Random) -> None:
        """The writer died: some of its writes reached the log, in order."""
        self.durable += self.pending[:rng.randint(0, len(self.pending))]
        self.pending = []


class Killed(Exception):
    """The task's process died here: the store was not closed."""


def _run(path: Path, batch: int, now_ms: int, ops: list[tuple], crash_at: int | None,
         changelog: ListChangelog | None = None, kill: bool = False
         ) -> tuple[list[bytes], list[tuple[int, bytes]]]:
    """Apply one batch's ops; raise Crash after `crash_at` ops (or Killed: the store is left
    without its close). Returns the digests taken as first copies and the expiries fired,
    in order."""
    store = PartitionStore(path, batch, WINDOW_MS, now_ms, changelog)
    firsts, fired = [], []
    try:
        for i, op in enumerate(ops):
            if crash_at is not None and i == crash_at:
                raise Crash
            if op[0] == "put":  # read-modify-write, as the job does with a key's state
                _, key, tag = op
                old = store.get(key) or b""
                store.put(key, None if tag is None else old[-8:] + tag)
            elif op[0] == "copy":
                if store.first_copy(op[1]):
                    firsts.append(op[1])
            elif op[0] == "schedule":  # as the job: the key's own timer, then the index
                store.put(b"t" + op[2], b"%d" % op[1])
                store.schedule(op[1], op[2])
            elif op[0] == "due":
                # the index may hold entries an aborted attempt wrote, or that a key moved
                # on from: the key's own timer decides, as in the job (found by CI: an
                # aborted attempt's entry for a timer already fired and set again)
                for at_ms, key in list(store.due(now_ms)):
                    if store.get(b"t" + key) == b"%d" % at_ms:
                        fired.append((at_ms, key))
                        store.put(b"t" + key, None)  # handled: the key's timer moves on
                    store.fired(at_ms, key)
        return firsts, fired
    except Crash:
        if kill:
            store._db.close()  # what reached the disk stays, without the close's mark
            raise Killed from None
        raise
    finally:
        if not kill:
            store.close()


def _snapshot(path: Path, batch: int, changelog: ListChangelog | None = None
              ) -> dict[bytes, bytes | None]:
    store = PartitionStore(path, batch, WINDOW_MS, 0, changelog)
    try:
        return {k: store.get(k) for k in KEYS + [b"t" + k for k in KEYS]}
    finally:
        store.close()


OPS = st.one_of(
    st.tuples(st.just("put"), st.sampled_from(KEYS),
              st.one_of(st.none(), st.binary(min_size=1, max_size=3))),
    st.tuples(st.just("copy"), st.sampled_from([b"d1", b"d2", b"d3", b"d4"])),
    st.tuples(st.just("schedule"), st.integers(0, 50_000), st.sampled_from(KEYS)),
    st.just(("due",)))


# up to six batches of ops, where each batch's first attempt is cut short (or not)
BATCHES = given(batches=st.lists(st.lists(OPS, max_size=12), min_size=1, max_size=6),
                crashes=st.lists(st.one_of(st.none(), st.integers(0, 12)), min_size=6,
                                 max_size=6),
                seed=st.integers(0, 1000))


@settings(max_examples=60, deadline=None)
@example(batches=[[], [], [], [("schedule", 0, b"k3"), ("due",)],
                  [("due",), ("copy", b"d1"), ("copy", b"d1"), ("schedule", 0, b"k3"),
                   ("copy", b"d1")]],
         crashes=[None, None, None, None, 0, None], seed=3)
@BATCHES
def test_a_batch_cut_short_and_run_again_equals_one_clean_run(tmp_path_factory, batches,
                                                              crashes, seed) -> None:
    clean = tmp_path_factory.mktemp("clean")
    chaos = tmp_path_factory.mktemp("chaos")
    rng = random.Random(seed)
    for batch, ops in enumerate(batches):
        now = batch * 7_000
        want = _run(clean, batch, now, ops, None)
        crash = crashes[batch]
        if crash is not None and crash < len(ops):
            with pytest.raises(Crash):
                _run(chaos, batch, now, ops, crash)
            if rng.random() < 0.5:  # a second attempt dies too
                with pytest.raises(Crash):
                    _run(chaos, batch, now, ops, rng.randrange(len(ops)))
        got = _run(chaos, batch, now, ops, None)
        assert got == want, (batch, ops)
        assert _snapshot(chaos, batch + 1) == _snapshot(clean, batch + 1)


@settings(max_examples=60, deadline=None)
@BATCHES
def test_a_store_that_moves_between_machines_and_is_killed_equals_one_clean_run(
        tmp_path_factory, batches, crashes, seed) -> None:
    """Each attempt runs on one of three machines (a store dir each, one changelog); an
    attempt fails (its store closed) or its process is killed (not closed, part of its
    changelog writes lost); the next attempt may run anywhere."""
    clean = tmp_path_factory.mktemp("clean")
    machines = [tmp_path_factory.mktemp(f"machine{i}") for i in range(3)]
    changelog = ListChangelog()
    rng = random.Random(seed)
    for batch, ops in enumerate(batches):
        now = batch * 7_000
        want = _run(clean, batch, now, ops, None)
        crash = crashes[batch]
        if crash is not None and crash < len(ops):
            kill = rng.random() < 0.5
            with pytest.raises(Killed if kill else Crash):
                _run(rng.choice(machines), batch, now, ops, crash, changelog, kill)
            if kill:
                changelog.killed(rng)
        got = _run(rng.choice(machines), batch, now, ops, None, changelog)
        # copy digests stay on their machine: a moved store may take a copy for new (it is
        # merged again, changing nothing), never drop one that a clean run merges
        assert got[1] == want[1] and set(got[0]) >= set(want[0]), (batch, ops)
        assert (_snapshot(rng.choice(machines), batch + 1, changelog)
                == _snapshot(clean, batch + 1))


def test_a_new_machine_rebuilds_a_store_and_an_old_one_catches_up(tmp_path) -> None:
    changelog = ListChangelog()
    a, b = tmp_path / "a", tmp_path / "b"
    s = PartitionStore(a, 0, 0, 0, changelog)
    for k in KEYS:
        s.put(k, b"v0")
    s.close()
    s = PartitionStore(b, 1, 0, 0, changelog)  # another machine: rebuilt from the changelog
    assert s.restored == len(KEYS) + 1 and s.get(KEYS[0]) == b"v0"
    s.put(KEYS[0], b"v1")
    s.close()
    s = PartitionStore(b, 2, 0, 0, changelog)  # back where it was left: nothing to read
    assert s.restored == 0
    s.close()
    s = PartitionStore(a, 3, 0, 0, changelog)  # the first machine reads what it missed only
    assert s.restored == 3  # batch 1's newest mark, its write, batch 2's newest mark
    assert [s.get(k) for k in KEYS] == [b"v1"] + [b"v0"] * (len(KEYS) - 1)
    s.close()


def test_a_store_left_too_long_is_rebuilt_not_caught_up(tmp_path, monkeypatch) -> None:
    """Compaction drops a deleted key's tombstone after a while: a store that old could
    keep the key, so it is rebuilt whole."""
    changelog = ListChangelog()
    s = PartitionStore(tmp_path / "a", 0, 0, 0, changelog)
    s.put(b"k", b"v0")
    s.close()
    s = PartitionStore(tmp_path / "b", 1, 0, 0, changelog)
    s.put(b"k", None)
    s.close()
    monkeypatch.setattr(partition_store, "CATCH_UP_WITHIN_MS", -1)
    s = PartitionStore(tmp_path / "a", 2, 0, 0, changelog)
    assert s.restored == 4 and s.get(b"k") is None  # all four writes, not the two it missed
    s.close()


def test_writes_that_never_reached_the_changelog_are_dropped(tmp_path) -> None:
    # a store written without a changelog (or cut short before its first close) holds
    # writes no other executor can see: with an empty changelog it starts again empty
    s = PartitionStore(tmp_path / "a", 0, 0, 0)
    s.put(b"k", b"v0")
    s.close()
    changelog = ListChangelog()
    s = PartitionStore(tmp_path / "a", 1, 0, 0, changelog)
    assert s.get(b"k") is None and s.restored == 0
    s.put(b"k", b"v1")
    s.close()
    s = PartitionStore(tmp_path / "b", 2, 0, 0, changelog)  # another executor
    assert s.get(b"k") == b"v1"
    s.close()


def test_a_changelog_shorter_than_a_store_is_refused(tmp_path) -> None:
    changelog = ListChangelog()
    PartitionStore(tmp_path, 0, 0, 0, changelog).close()
    with pytest.raises(ChangelogBehind, match="deleted or truncated"):
        PartitionStore(tmp_path, 1, 0, 0, ListChangelog())


def test_a_key_written_twice_in_a_replayed_batch_keeps_the_value_before_it(tmp_path) -> None:
    s = PartitionStore(tmp_path, 0, 0, 0)
    s.put(b"k", b"v0")
    s.close()
    s = PartitionStore(tmp_path, 1, 0, 0)
    s.put(b"k", b"v1")
    s.put(b"k", b"v2")
    s.close()
    s = PartitionStore(tmp_path, 1, 0, 0)  # batch 1 again: its writes are not seen
    assert s.replay and s.get(b"k") == b"v0"
    s.put(b"k", None)
    assert s.get(b"k") is None
    s.close()
    s = PartitionStore(tmp_path, 1, 0, 0)
    assert s.get(b"k") == b"v0"
    s.close()


def test_copies_are_dropped_within_their_window_slot_and_forgotten_after_it(tmp_path) -> None:
    s = PartitionStore(tmp_path, 0, WINDOW_MS, 0)
    assert s.first_copy(b"d") and not s.first_copy(b"d")
    s.close()
    s = PartitionStore(tmp_path, 1, WINDOW_MS, 9_000)  # the same window slot: still seen
    assert not s.first_copy(b"d")
    s.close()
    s = PartitionStore(tmp_path, 2, WINDOW_MS, 12_000)  # the next slot: forgotten, merged
    assert s.first_copy(b"d") and not s.first_copy(b"d")
    s.close()


def test_a_store_ahead_of_its_checkpoint_is_refused(tmp_path) -> None:
    PartitionStore(tmp_path, 5, 0, 0).close()
    with pytest.raises(StateAhead, match=str(tmp_path)):
        PartitionStore(tmp_path, 4, 0, 0)
    PartitionStore(tmp_path, 5, 0, 0).close()  # the lock was released by the refusal


def _held(path: Path, seconds: float) -> subprocess.Popen:
    """Another process (a worker of a killed attempt) holding the store for `seconds`."""
    code = ("import sys, time; from materializer.store.partition_store import open_store; "
            "db = open_store(__import__('pathlib').Path(sys.argv[1])); print('held', "
            "flush=True); time.sleep(float(sys.argv[2])); db.close()")
    proc = subprocess.Popen([sys.executable, "-c", code, str(path), str(seconds)],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


def test_a_store_held_by_another_process_is_waited_for_then_refused(tmp_path, caplog) -> None:
    PartitionStore(tmp_path, 1, 0, 0).close()
    proc = _held(tmp_path, 0.5)
    try:
        store = PartitionStore(tmp_path, 2, 0, 0)  # waits for the holder to let go
        store.close()
        assert "held by another process" in caplog.text
    finally:
        proc.wait(30)
    proc = _held(tmp_path, 30)
    try:
        with pytest.raises(StoreLocked, match=f"{tmp_path}.*holds this partition store"):
            open_store(tmp_path, wait_s=0.3)
    finally:
        proc.kill()
        proc.wait(30)


def test_an_open_writes_nothing_to_the_changelog_until_the_first_write(tmp_path) -> None:
    """A transactional changelog opens its transaction at its first write: opening a store
    (and reading from it) must not make one, or the transaction would stay open while the
    task reads its input and opens its other stores."""
    log = ListChangelog()
    store = PartitionStore(tmp_path / "s", 1, WINDOW_MS, 0, log)
    store.get(b"k0")
    store.first_copy(b"d" * 16)
    assert log.pending == []
    store.put(b"k0", b"v0")
    assert [k for k, _ in log.pending] == [partition_store._NEWEST,
                                            partition_store._ENTRY + b"k0"]
    store.close()
    # a batch that writes nothing still leaves its batch id, at its close
    store = PartitionStore(tmp_path / "s", 2, WINDOW_MS, 0, log)
    assert log.pending == []
    store.close()
    assert log.durable[-1] == (partition_store._NEWEST, partition_store._BATCH.pack(2))
    # and what a rebuild reads back is the same store
    rebuilt = PartitionStore(tmp_path / "r", 3, WINDOW_MS, 0, log)
    assert rebuilt.get(b"k0") == b"v0" and rebuilt.restored == len(log.durable)
    rebuilt.close()
