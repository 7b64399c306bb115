"""The Spark session's settings derived from the raw topics (materializer.spark.job)."""

from __future__ import annotations

from materializer.settings import SparkSettings
from materializer.spark.job import (
    PARTITION_LOCALITY_WAIT,
    SPARK_CONSUMER_CACHE,
    consumer_cache_capacity,
    scheduling_conf,
)


def test_consumer_cache_holds_every_raw_partition_and_room_for_more() -> None:
    raw = {f"casscade.raw.ks.t{i}": 4 for i in range(100)}
    assert consumer_cache_capacity(raw) == 400 + SPARK_CONSUMER_CACHE
    # no raw topic yet: Spark's own default
    assert consumer_cache_capacity({}) == SPARK_CONSUMER_CACHE == 64


def test_a_task_waits_for_the_executor_holding_its_store() -> None:
    wait = {"spark.locality.wait.process": PARTITION_LOCALITY_WAIT}
    assert scheduling_conf(SparkSettings()) == wait
    # the user's wait stands, at either key
    for key in ("spark.locality.wait", "spark.locality.wait.process"):
        assert scheduling_conf(SparkSettings(conf={key: "1s"})) == {}
