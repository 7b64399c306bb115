"""What spark.state_mode partition refuses at start (pure checks on a temporary directory)."""

from __future__ import annotations

import json

import pytest

from materializer.settings import SparkSettings
from materializer.spark.partition_job import (
    PartitionModeRefused,
    check_start,
    job_id,
    state_root,
)


def test_a_checkpoint_the_driver_cannot_mount_is_refused(tmp_path) -> None:
    with pytest.raises(PartitionModeRefused, match="a path the driver's machine mounts"):
        check_start("hdfs://nn/ckpt", False, {})  # type: ignore[arg-type]


def test_a_checkpoint_keeps_its_stores_job_id(tmp_path) -> None:
    made = job_id(tmp_path)
    assert len(made) == 12 and job_id(tmp_path) == made and job_id(tmp_path / "b") != made


def test_a_checkpoint_started_in_the_other_mode_is_refused(tmp_path) -> None:
    with pytest.raises(PartitionModeRefused, match=r"started with spark\.state_mode spark"):
        check_start(tmp_path, True, {})
    check_start(tmp_path, False, {"p.raw.ks.t": 3})
    check_start(tmp_path, True, {"p.raw.ks.t": 3})  # its own mode: fine


def test_a_raw_topic_that_gained_partitions_is_refused_new_topics_are_recorded(tmp_path
                                                                               ) -> None:
    check_start(tmp_path, False, {"p.raw.ks.t": 3})
    check_start(tmp_path, True, {"p.raw.ks.t": 3, "p.raw.ks.u": 6})
    known = json.loads((state_root(tmp_path) / "partitions.json").read_text())
    assert known == {"p.raw.ks.t": 3, "p.raw.ks.u": 6}
    with pytest.raises(PartitionModeRefused, match=r"p\.raw\.ks\.u 6 -> 12"):
        check_start(tmp_path, True, {"p.raw.ks.t": 3, "p.raw.ks.u": 12})


def test_an_unknown_state_mode_is_a_config_error() -> None:
    with pytest.raises(ValueError, match=r"spark\.state_mode must be one of spark, partition"):
        SparkSettings(state_mode="shuffle-free")


def test_state_and_rescale_refuse_a_partition_mode_checkpoint(tmp_path) -> None:
    """Both read or move Spark's state store, which this mode does not have: a clear refusal
    before Spark starts."""
    from click.testing import CliRunner

    from casscade.cli import cli

    state_root(tmp_path).mkdir(parents=True)
    runner = CliRunner()
    out = runner.invoke(cli, ["materializer", "state", "--set", f"spark.checkpoint={tmp_path}"])
    assert out.exit_code == 1 and "spark.state_mode partition" in out.output, out.output
    out = runner.invoke(cli, ["materializer", "rescale", "--from-checkpoint", str(tmp_path),
                              "--set", f"spark.checkpoint={tmp_path / 'new'}"])
    assert out.exit_code == 1 and "rescale refused" in out.output, out.output
