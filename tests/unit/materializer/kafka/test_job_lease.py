"""Who may take a topic prefix's job lease (materializer.kafka.job_lease; the Kafka side is
tested in tests/integration/materializer/test_one_job_per_prefix.py)."""

from __future__ import annotations

from materializer.kafka.job_lease import Claim, checkpoint_identity, refusal

NOW_MS = 1_800_000_000_000
MINE = Claim("hdfs://nn/ckpt/b", "host-b", 20, 0)


def _other(age_s: float, released: bool = False, checkpoint: str = "hdfs://nn/ckpt/a") -> Claim:
    return Claim(checkpoint, "host-a", 10, NOW_MS - int(age_s * 1000), released)


def test_another_checkpoints_fresh_claim_refuses_naming_it() -> None:
    why = refusal(_other(4), MINE, NOW_MS, 30)
    assert why is not None
    assert "the job with checkpoint hdfs://nn/ckpt/a (host host-a, pid 10)" in why
    assert "renewed 4 s ago" in why and "another kafka.topic_prefix" in why


def test_a_lapsed_or_released_claim_or_none_lets_a_job_start() -> None:
    assert refusal(None, MINE, NOW_MS, 30) is None
    assert refusal(_other(30), MINE, NOW_MS, 30) is None
    assert refusal(_other(1, released=True), MINE, NOW_MS, 30) is None
    assert refusal(_other(31), MINE, NOW_MS, 60) is not None  # the reader's lease decides


def test_the_same_checkpoint_takes_its_own_lease_back_at_once() -> None:
    """A job restarted after a kill: its last claim is fresh, and its own."""
    assert refusal(_other(1, checkpoint=MINE.checkpoint), MINE, NOW_MS, 30) is None


def test_a_local_checkpoint_is_its_hosts() -> None:
    assert checkpoint_identity("/var/lib/casscade/ckpt", "h1") == "h1:/var/lib/casscade/ckpt"
    assert checkpoint_identity("hdfs://nn:8020/ckpt", "h1") == "hdfs://nn:8020/ckpt"
    assert (checkpoint_identity("/var/ckpt", "h1") != checkpoint_identity("/var/ckpt", "h2"))
