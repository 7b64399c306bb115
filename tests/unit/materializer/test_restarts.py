"""When the runner starts a failed query again (materializer.restarts)."""

from __future__ import annotations

from materializer.restarts import RestartPolicy, permanent_reason, short_reason

# What Spark's Kafka sink raised when ten event topics were created at once (issue 13).
EXPIRING = ("[STREAM_FAILED] Query [id = 1, runId = 2] terminated with exception: Job aborted "
            "due to stage failure: org.apache.kafka.common.errors.TimeoutException: Expiring 2 "
            "record(s) for casscade.ks.t-3:120001 ms has passed since batch creation")
DATA_LOSS = ("Partition casscade.raw.ks.t-0's offset was changed from 1200 to 100, some data "
             "may have been missed. Some data may have been lost because they are not "
             "available in Kafka any more; ... set the source option 'failOnDataLoss' to "
             "'false'.")


def test_transient_broker_errors_are_restarted_with_growing_backoff() -> None:
    policy = RestartPolicy(max_restarts=4, backoff_s=5, max_backoff_s=30)
    assert permanent_reason(EXPIRING) is None
    assert [policy.next_delay(EXPIRING) for _ in range(5)] == [5, 10, 20, 30, None]


def test_a_completed_batch_resets_the_count() -> None:
    policy = RestartPolicy(max_restarts=2, backoff_s=1)
    assert policy.next_delay(EXPIRING) == 1
    assert policy.next_delay(EXPIRING) == 2
    policy.progressed()
    assert policy.next_delay(EXPIRING) == 1


def test_data_loss_is_permanent_and_says_why() -> None:
    assert "deleted before the job read them" in (permanent_reason(DATA_LOSS) or "")
    assert RestartPolicy().next_delay(DATA_LOSS) is None


def test_zero_restarts_never_restarts() -> None:
    assert RestartPolicy(max_restarts=0).next_delay(EXPIRING) is None


def test_metric_label_is_the_exception_class() -> None:
    assert short_reason("org.apache.kafka.common.errors.NotLeaderOrFollowerException: x") \
        == "NotLeaderOrFollowerException"
    assert short_reason("something odd") == "unknown"

