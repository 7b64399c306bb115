"""One materializer job per topic prefix: a lease in Kafka that a second job is refused by,
and that fences a job that lost it.

Why: two jobs on one prefix (two hosts each with a default local checkpoint, a checkpoint
recreated while the old job runs) each merge every raw record and write every event, so
read_committed consumers get each change twice, however exactly-once each job is on its
own. Their tasks' transactional ids are the prefix's, not the job's
(`shared.topic_names.transactional_id`), so at most one job at a time commits a raw
partition; the lease makes sure the other one stops instead of taking it back.

How: the lease is a transactional id of the prefix (`shared.topic_names.
lease_transactional_id`) and a compacted topic `<prefix>.jobs` with the holder's claim
(host, pid, checkpoint, when, the holder's own lease). A job that starts reads the last
claim: another checkpoint's claim renewed within the holder's lease means that job runs
(unless it was of this machine's process space, and its process is gone), and this one is
refused, naming it; the holder's lease, not the newcomer's, decides (a newcomer with a short
lease must not take a prefix from a holder that renews less often). Else
it initialises the lease's producer, which fences the earlier holder's, and writes its
claim in a transaction; then it renews the claim every `lease_s / 6` seconds, each time in
a transaction. A holder whose renewal is refused as fenced, with another checkpoint's claim
last, has lost the lease to that job: it stops at once, naming it (with its own claim last,
its producer failed on its own, say the broker aborted a renewal an outage held open, and
it is made again). A claim names its process by a token of its own as well as host and pid:
two containers with one hostname can have one pid, and are two jobs. A clean stop writes a
released claim, so the next job may start at once. A claim's age is read against this
host's clock: hosts whose clocks disagree by more than a few seconds shorten or lengthen the
lease by that much.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass

from confluent_kafka import KafkaException, Producer

from materializer.kafka.transactions import is_fenced
from shared.kafka_security import client_conf, with_refusal_log
from shared.kafka_topics import TopicCreator, read_to_end
from shared.pids import pid_alive
from shared.topic_names import job_topic, lease_transactional_id

log = logging.getLogger(__name__)
TIMEOUT_S = 30.0
_KEY = b"lease"
# The share of its lease a holder may go without a renewal before it stops writing: another
# job may take the prefix once the whole lease has passed since the last renewal
DOUBT_SHARE = 2 / 3
# compacted, and rolled often, so a start reads a few hundred records at most
TOPIC_CONFIG = {"segment.ms": str(10 * 60 * 1000), "min.cleanable.dirty.ratio": "0.01"}


@dataclass(frozen=True)
class Claim:
    """Who holds (or last held) a prefix's lease."""

    checkpoint: str  # where the job keeps its checkpoint (a local path names its host)
    host: str
    pid: int
    at_ms: int  # when it was last renewed
    released: bool = False
    # (written since issue 71; a claim of an older job has the defaults)
    lease_s: float = 0.0  # the holder's kafka.job_lease_s (0: not said)
    token: str = ""  # this JobLease's own, random: which process of (host, pid) it is
    # boot id and pid namespace: processes of one space can see whether `pid` runs
    space: str = ""

    @classmethod
    def from_json(cls, value: bytes) -> Claim:
        """A claim as written to the jobs topic (fields a later version adds: left out)."""
        body = json.loads(value)
        return cls(**{k: v for k, v in body.items() if k in cls.__dataclass_fields__})

    def same_process(self, other: Claim) -> bool:
        """Whether `other` was written by the process that wrote this one."""
        if self.token and other.token:
            return self.token == other.token
        return (self.host, self.pid) == (other.host, other.pid)

    def describe(self) -> str:
        """The holder, for a person: which job it is and where it runs."""
        return f"the job with checkpoint {self.checkpoint} (host {self.host}, pid {self.pid})"


class LeaseRefused(Exception):
    """Another job holds the prefix's lease: this one must not start."""


class LeaseLost(Exception):
    """Another job took the prefix's lease: this one must stop."""


def checkpoint_identity(checkpoint: str, host: str) -> str:
    """One job's checkpoint as other hosts see it: a URI as it is, a local path with its
    host (two hosts' default local checkpoints are two jobs)."""
    return checkpoint if "://" in checkpoint else f"{host}:{checkpoint}"


def refusal(last: Claim | None, mine: Claim, now_ms: int, lease_s: float,
            alive: Callable[[int], bool] = lambda _pid: True) -> str | None:
    """Why `mine` may not take the lease from `last` (None: it may): another checkpoint's
    claim, not released, renewed within the holder's lease (`lease_s`, this job's, for a
    claim that does not say), by a job that is not known to be gone (`alive`: whether a
    process runs, for a claim of this process space)."""
    if last is None or last.released or last.checkpoint == mine.checkpoint:
        return None
    if last.space and last.space == mine.space and not alive(last.pid):
        return None  # killed where this job runs: its lease needs no lapse
    age_s = (now_ms - last.at_ms) / 1000
    lease_s = last.lease_s or lease_s
    if age_s >= lease_s:
        return None
    return (f"{last.describe()} writes this topic prefix (its lease renewed {age_s:.0f} s "
            f"ago): one job per prefix. Stop that job first, or give this one another "
            f"kafka.topic_prefix; a job that died frees the prefix {lease_s:.0f} s after "
            "its last renewal")


class JobLease:
    """This job's hold on topic prefix `prefix` (acquire, renew in a thread, release)."""

    def __init__(self, kafka: Mapping[str, str], prefix: str, checkpoint: str,
                 replication: int, lease_s: float) -> None:
        self.kafka, self.prefix, self.lease_s = dict(kafka), prefix, lease_s
        host = socket.gethostname()
        self.mine = Claim(checkpoint_identity(str(checkpoint), host), host, os.getpid(), 0,
                          lease_s=lease_s, token=uuid.uuid4().hex, space=process_space())
        self.topic = job_topic(prefix)
        self._creator = TopicCreator(kafka, 1, replication, TIMEOUT_S)
        self._producer: Producer | None = None
        self.lost: str | None = None  # why the lease was lost, once it is
        self._renewed: float | None = None  # (monotonic) the last renewal that committed
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def last_claim(self) -> Claim | None:
        """The prefix's last committed claim (None: none yet)."""
        last = None
        for msg in read_to_end(self.kafka, self.topic, TIMEOUT_S):
            if msg.key() == _KEY and msg.value():
                last = Claim.from_json(msg.value())
        return last

    def acquire(self) -> None:
        """Take the lease, or LeaseRefused naming the job that holds it."""
        self._creator.ensure_many([self.topic], compacted=True, config=TOPIC_CONFIG)
        why = refusal(self.last_claim(), self.mine, _now_ms(), self.lease_s, pid_alive)
        if why is not None:
            raise LeaseRefused(f"topic prefix {self.prefix}: {why}")
        try:
            self._producer = self._new_producer()
            self.renew()
        except LeaseLost as exc:  # another job took it between the look and the claim
            raise LeaseRefused(str(exc)) from exc
        except KafkaException as exc:
            raise LeaseRefused(f"topic prefix {self.prefix}: the job lease could not be "
                               f"taken: {exc}") from exc
        self._thread = threading.Thread(target=self._renew_until_stopped, daemon=True,
                                        name="job-lease")
        self._thread.start()

    def _new_producer(self) -> Producer:
        """The lease's transactional producer, initialised (fencing any earlier one)."""
        producer = Producer(with_refusal_log(client_conf(self.kafka), log) | {
            "transactional.id": lease_transactional_id(self.prefix),
            "transaction.timeout.ms": int(self.lease_s * 2000), "acks": "all"})
        producer.init_transactions(TIMEOUT_S)
        return producer

    def renew(self, released: bool = False) -> None:
        """Write this job's claim, now, in a transaction. LeaseLost when another job's claim
        is the last one and this job's producer was fenced; a producer that failed for a
        reason of its own (the broker aborted a transaction that outlived its timeout during
        an outage) is made again. KafkaException when Kafka is away (the next renewal tries
        again)."""
        if self._producer is None:  # failed at an earlier renewal
            self._check_not_taken(None)
            self._producer = self._new_producer()
        try:
            self._write_claim(self._producer, released)
            self._renewed = time.monotonic()
        except KafkaException as exc:
            if is_fenced(exc):
                self._check_not_taken(exc)
            self._producer = None  # made again at the next renewal
            raise

    def unrenewed_s(self) -> float | None:
        """Seconds since the last renewal that committed, once past DOUBT_SHARE of the
        lease (None before: the lease is sure). Past it the job must stop writing: at the
        whole lease another job may take the prefix, and this one may not hear of it
        (Kafka away from the renewals, say, while its tasks still commit)."""
        if self._renewed is None:
            return None
        unrenewed = time.monotonic() - self._renewed
        return unrenewed if unrenewed > self.lease_s * DOUBT_SHARE else None

    def _write_claim(self, producer: Producer, released: bool) -> None:
        claim = Claim(**(asdict(self.mine) | {"at_ms": _now_ms(), "released": released}))
        producer.begin_transaction()
        try:
            producer.produce(self.topic, json.dumps(asdict(claim)).encode(), _KEY)
            deadline = time.monotonic() + TIMEOUT_S
            while True:
                try:
                    producer.commit_transaction(max(1.0, deadline - time.monotonic()))
                    return
                except KafkaException as exc:  # retriable: call it again for the outcome
                    if not exc.args[0].retriable() or time.monotonic() >= deadline:
                        raise
        except KafkaException as exc:
            if exc.args[0].txn_requires_abort():
                with contextlib.suppress(KafkaException):
                    producer.abort_transaction(TIMEOUT_S)
            raise

    def _check_not_taken(self, cause: Exception | None) -> None:
        """LeaseLost if the last claim is another process's (not released): another job's,
        or this checkpoint's started again elsewhere."""
        try:
            other = self.last_claim()
        except KafkaException:
            return
        if other is not None and not other.released and not other.same_process(self.mine):
            raise LeaseLost(
                f"topic prefix {self.prefix}: {other.describe()} took over this prefix's "
                f"lease; this job ({self.mine.describe()}) stops. One job per prefix: stop "
                "one of them") from cause

    def _renew_until_stopped(self) -> None:
        while not self._stop.wait(self.lease_s / 6):
            try:
                self.renew()
            except LeaseLost as exc:
                self.lost = str(exc)
                log.error(self.lost)
                return
            except KafkaException as exc:  # Kafka away: the next renewal tries again
                log.warning("the job lease could not be renewed",
                            extra={"topic_prefix": self.prefix, "error": str(exc)})

    def release(self) -> None:
        """Stop renewing and mark the lease released (a job may start at once)."""
        self._stop.set()
        if self._thread is None or self.lost is not None:
            return  # never taken, or lost
        self._thread.join(2 * TIMEOUT_S)
        if not self._thread.is_alive():  # (else still renewing, Kafka away: it lapses)
            try:
                self.renew(released=True)
            except (KafkaException, LeaseLost) as exc:
                log.warning("the job lease could not be released; the next job waits for "
                            "it to lapse", extra={"topic_prefix": self.prefix,
                                                  "lease_s": self.lease_s, "error": str(exc)})


def process_space() -> str:
    """This process's machine boot and pid namespace ("" where /proc cannot say): two
    processes with one space see each other's pids."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as boot:
            return f"{boot.read().strip()}/{os.readlink('/proc/self/ns/pid')}"
    except OSError:
        return ""


def _now_ms() -> int:
    return int(time.time() * 1000)
