"""The Spark session's settings derived from the raw topics (materializer.spark.job)."""

from __future__ import annotations

from materializer.spark.job import SPARK_CONSUMER_CACHE, consumer_cache_capacity


def test_consumer_cache_holds_every_raw_partition_and_room_for_more() -> None:
    raw = {f"casscade.raw.ks.t{i}": 4 for i in range(100)}
    assert consumer_cache_capacity(raw) == 400 + SPARK_CONSUMER_CACHE
    # no raw topic yet: Spark's own default
    assert consumer_cache_capacity({}) == SPARK_CONSUMER_CACHE == 64
