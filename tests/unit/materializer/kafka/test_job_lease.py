"""Who may take a topic prefix's job lease (materializer.kafka.job_lease; the Kafka side is
tested in tests/integration/materializer/test_one_job_per_prefix.py)."""

from __future__ import annotations

import pytest

from materializer.kafka.job_lease import Claim, checkpoint_identity, refusal
from materializer.settings import KafkaSettings

NOW_MS = 1_800_000_000_000
MINE = Claim("hdfs://nn/ckpt/b", "host-b", 20, 0)


def _other(age_s: float, released: bool = False, checkpoint: str = "hdfs://nn/ckpt/a",
           lease_s: float = 0.0) -> Claim:
    return Claim(checkpoint, "host-a", 10, NOW_MS - int(age_s * 1000), released, lease_s)


def test_another_checkpoints_fresh_claim_refuses_naming_it() -> None:
    why = refusal(_other(4), MINE, NOW_MS, 30)
    assert why is not None
    assert "the job with checkpoint hdfs://nn/ckpt/a (host host-a, pid 10)" in why
    assert "renewed 4 s ago" in why and "another kafka.topic_prefix" in why


def test_a_lapsed_or_released_claim_or_none_lets_a_job_start() -> None:
    assert refusal(None, MINE, NOW_MS, 30) is None
    assert refusal(_other(30), MINE, NOW_MS, 30) is None
    assert refusal(_other(1, released=True), MINE, NOW_MS, 30) is None
    # a claim of a job before claims said their lease: the reader's lease decides
    assert refusal(_other(31), MINE, NOW_MS, 60) is not None


def test_the_holders_lease_decides_when_its_claim_lapses_not_the_newcomers() -> None:
    """A newcomer with a 5-s lease took a healthy 30-s holder's prefix after 6 s, and
    re-emitted from the earliest offset."""
    healthy = _other(6, lease_s=30)
    why = refusal(healthy, MINE, NOW_MS, 5)
    assert why is not None and "frees the prefix 30 s after its last renewal" in why
    assert refusal(_other(31, lease_s=30), MINE, NOW_MS, 5) is None
    assert refusal(_other(6, lease_s=5), MINE, NOW_MS, 60) is None


def test_a_holder_killed_in_this_process_space_frees_the_prefix_at_once() -> None:
    here = Claim("host-a:/ckpt/b", "host-a", 20, 0, space="boot-1/pid:[1]")
    killed = Claim("host-a:/ckpt/a", "host-a", 10, NOW_MS - 1000, space="boot-1/pid:[1]")
    assert refusal(killed, here, NOW_MS, 30, alive=lambda pid: pid != 10) is None
    assert refusal(killed, here, NOW_MS, 30, alive=lambda pid: True) is not None
    # another host's process cannot be looked at: its lease must lapse
    assert refusal(_other(1), MINE, NOW_MS, 30, alive=lambda pid: False) is not None
    # nor another container's of one hostname (another pid namespace), nor an older claim's
    for space in ("boot-1/pid:[2]", ""):
        beside = Claim("host-a:/ckpt/a", "host-a", 10, NOW_MS - 1000, space=space)
        assert refusal(beside, here, NOW_MS, 30, alive=lambda pid: False) is not None


def test_two_processes_of_one_host_and_pid_are_told_apart_by_their_tokens() -> None:
    one = Claim("c", "host-a", 1, 0, token="t1")
    assert one.same_process(Claim("c", "host-a", 1, 5, token="t1"))
    assert not one.same_process(Claim("c", "host-a", 1, 5, token="t2"))
    assert one.same_process(Claim("c", "host-a", 1, 5))  # an older job's claim: host and pid
    assert not one.same_process(Claim("c", "host-b", 1, 5))


def test_a_claim_reads_back_and_fields_a_later_version_adds_are_left_out() -> None:
    import json
    from dataclasses import asdict

    claim = Claim("c", "h", 1, 2, False, 30.0, "t", "s")
    assert Claim.from_json(json.dumps(asdict(claim)).encode()) == claim
    later = json.dumps(asdict(claim) | {"region": "eu"}).encode()
    assert Claim.from_json(later) == claim
    older = json.dumps({"checkpoint": "c", "host": "h", "pid": 1, "at_ms": 2}).encode()
    assert Claim.from_json(older) == Claim("c", "h", 1, 2)


def test_the_same_checkpoint_takes_its_own_lease_back_at_once() -> None:
    """A job restarted after a kill: its last claim is fresh, and its own."""
    assert refusal(_other(1, checkpoint=MINE.checkpoint), MINE, NOW_MS, 30) is None


def test_a_local_checkpoint_is_its_hosts() -> None:
    assert checkpoint_identity("/var/lib/casscade/ckpt", "h1") == "h1:/var/lib/casscade/ckpt"
    assert checkpoint_identity("hdfs://nn:8020/ckpt", "h1") == "hdfs://nn:8020/ckpt"
    assert (checkpoint_identity("/var/ckpt", "h1") != checkpoint_identity("/var/ckpt", "h2"))


class _Producer:
    """A lease producer whose commits fail as told, then succeed."""

    def __init__(self, failures: list) -> None:
        self.failures, self.claims, self.aborted = list(failures), [], 0

    def begin_transaction(self) -> None:
        pass

    def produce(self, _topic: str, value: bytes, _key: bytes) -> None:
        self.claims.append(value)

    def commit_transaction(self, _timeout: float) -> None:
        if self.failures:
            raise self.failures.pop(0)

    def abort_transaction(self, _timeout: float) -> None:
        self.aborted += 1


def _error(code: int, fatal: bool = False, retriable: bool = False, abort: bool = False):
    from confluent_kafka import KafkaError, KafkaException

    return KafkaException(KafkaError(code, "told", fatal=fatal, retriable=retriable,
                                     txn_requires_abort=abort))


def _lease(monkeypatch, last: Claim | None, producers: list[_Producer]):
    from materializer.kafka import job_lease

    lease = job_lease.JobLease({"bootstrap.servers": "127.0.0.1:1"}, "p", "/ckpt", 1,
                               KafkaSettings().job_lease_s)
    monkeypatch.setattr(lease, "last_claim", lambda: last)
    made = iter(producers)
    monkeypatch.setattr(lease, "_new_producer", lambda: next(made))
    lease._producer = lease._new_producer()
    return lease


def test_a_renewal_fenced_by_another_jobs_claim_loses_the_lease(monkeypatch) -> None:
    from confluent_kafka import KafkaError

    from materializer.kafka.job_lease import LeaseLost

    lease = _lease(monkeypatch, _other(1), [_Producer([_error(KafkaError._FENCED,
                                                                fatal=True)])])
    with pytest.raises(LeaseLost, match=r"the job with checkpoint hdfs://nn/ckpt/a .* took "
                                        r"over this prefix's lease"):
        lease.renew()


def test_a_producer_failed_on_its_own_is_made_again_at_the_next_renewal(monkeypatch) -> None:
    """The broker aborted a lease transaction that outlived its timeout in an outage: the
    producer is fenced by its own epoch, the last claim is this job's."""
    from confluent_kafka import KafkaError, KafkaException

    first = _Producer([_error(KafkaError.INVALID_PRODUCER_EPOCH, fatal=True)])
    second = _Producer([])
    mine = Claim("h:/ckpt", "h", 1, NOW_MS)
    lease = _lease(monkeypatch, mine, [first, second])
    lease.mine = mine
    with pytest.raises(KafkaException):
        lease.renew()
    lease.renew()
    assert len(second.claims) == 1 and lease._producer is second


def test_a_commit_kafka_cannot_answer_yet_is_asked_again(monkeypatch) -> None:
    from confluent_kafka import KafkaError

    producer = _Producer([_error(KafkaError._TIMED_OUT, retriable=True)] * 2)
    lease = _lease(monkeypatch, None, [producer])
    lease.renew()
    assert producer.failures == [] and len(producer.claims) == 1


def test_a_transaction_kafka_says_to_abort_is_aborted_and_made_again(monkeypatch) -> None:
    from confluent_kafka import KafkaError, KafkaException

    broken = _Producer([_error(KafkaError._STATE, abort=True)])
    lease = _lease(monkeypatch, None, [broken, _Producer([])])
    with pytest.raises(KafkaException):
        lease.renew()
    assert broken.aborted == 1 and lease._producer is None
    lease.renew()


def test_the_same_checkpoint_started_again_elsewhere_takes_the_lease_from_a_live_one(
        monkeypatch) -> None:
    """Two processes of one checkpoint (an HDFS one started on a second host): the newer
    fenced the older, whose renewal then stops it rather than fencing back."""
    from confluent_kafka import KafkaError

    from materializer.kafka.job_lease import LeaseLost

    lease = _lease(monkeypatch, None, [_Producer([_error(KafkaError._FENCED, fatal=True)])])
    newer = Claim(lease.mine.checkpoint, "another-host", 99, NOW_MS)
    monkeypatch.setattr(lease, "last_claim", lambda: newer)
    with pytest.raises(LeaseLost, match="host another-host, pid 99"):
        lease.renew()


def test_a_lease_unrenewed_for_two_thirds_of_itself_is_in_doubt(monkeypatch) -> None:
    """Past DOUBT_SHARE of the lease without a renewal that committed, the job stops
    writing (materializer.spark.query_runner): at the whole lease another job may start."""
    from materializer.kafka import job_lease

    lease = _lease(monkeypatch, None, [_Producer([])])
    assert lease.unrenewed_s() is None  # not taken yet
    lease.renew()
    renewed = job_lease.time.monotonic()
    for after_s, doubt in ((19.5, False), (20.5, True)):
        monkeypatch.setattr(job_lease.time, "monotonic", lambda a=after_s: renewed + a)
        assert (lease.unrenewed_s() is not None) is doubt, after_s
    lease.renew()  # committed: sure again
    assert lease.unrenewed_s() is None
