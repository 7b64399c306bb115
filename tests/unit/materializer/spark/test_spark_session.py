"""The Spark session's settings derived from the raw topics (materializer.spark.job)."""

from __future__ import annotations

from pathlib import Path

import pytest

from materializer.settings import SparkSettings
from materializer.spark import class_archive
from materializer.spark.job import (
    PARTITION_LOCALITY_WAIT,
    SPARK_CONSUMER_CACHE,
    consumer_cache_capacity,
    driver_java_options,
    scheduling_conf,
    sink_producer,
    spark_conf,
    sweep_budget,
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


def test_the_job_runs_without_speculation_whatever_else_is_set() -> None:
    """(issue 71, case 7) spark.conf cannot turn it on (SparkSettings refuses it); this
    setting of the job's, over the user's and spark-submit's, is what turns it off."""
    user = SparkSettings(conf={"spark.locality.wait": "1s", "spark.task.maxFailures": "2"})
    assert spark_conf(user) == {"spark.locality.wait": "1s", "spark.task.maxFailures": "2",
                                "spark.speculation": "false"}
    assert spark_conf(SparkSettings())["spark.speculation"] == "false"


def test_table_sweeps_are_bounded_a_batch_unless_the_run_ends_at_the_topics_end() -> None:
    assert sweep_budget(SparkSettings(), available_now=False) == 50_000
    assert sweep_budget(SparkSettings(sweep_keys=10), available_now=False) == 10
    assert sweep_budget(SparkSettings(), available_now=True) == 0  # no later batch
    with pytest.raises(ValueError, match=r"spark\.sweep_keys -1: 0"):
        SparkSettings(sweep_keys=-1)


def test_the_driver_jvm_compiles_with_the_first_tier_by_default() -> None:
    assert driver_java_options(SparkSettings()) == "-XX:TieredStopAtLevel=1"
    assert driver_java_options(SparkSettings(driver_jit="tiered")) == ""


def test_the_users_java_options_come_after_the_jit_flag_and_before_the_archive() -> None:
    archive = class_archive.Plan("-XX:SharedArchiveFile=/a/x.jsa", False, Path("/a/x.jsa"),
                                 Path("/a/x.part"), Path("/a/x.lock"))
    user = SparkSettings(conf={"spark.driver.extraJavaOptions": " -XX:TieredStopAtLevel=4 "})
    # HotSpot takes the last of a repeated flag: the user's own wins over the default
    assert driver_java_options(user, archive) == (
        "-XX:TieredStopAtLevel=1 -XX:TieredStopAtLevel=4 -XX:SharedArchiveFile=/a/x.jsa")
    assert driver_java_options(SparkSettings(driver_jit="tiered"), archive) == (
        "-XX:SharedArchiveFile=/a/x.jsa")


def test_an_unknown_jit_is_refused_with_the_choices() -> None:
    with pytest.raises(ValueError, match=r"spark\.driver_jit 'c2': one of c1, tiered"):
        SparkSettings(driver_jit="c2")


def test_the_at_least_once_sinks_settings_and_the_users_over_them() -> None:
    assert sink_producer({}) == {"acks": "all", "enable.idempotence": "true",
                                 "compression.type": "lz4"}
    conf = sink_producer({"linger.ms": "50", "compression.type": "zstd"})
    assert conf["linger.ms"] == "50" and conf["compression.type"] == "zstd"
