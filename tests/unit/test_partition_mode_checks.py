"""What spark.state_mode partition refuses at start (pure checks on a temporary directory)."""

from __future__ import annotations

import json

import pytest

from materializer.settings import SparkSettings
from materializer.spark.checkpoint_files import LocalFiles, files
from materializer.spark.partition_job import (
    PartitionModeRefused,
    check_start,
    job_id,
    started_mode,
    state_root,
)


def test_a_uri_checkpoint_without_spark_is_a_clear_error() -> None:
    """Offline commands read a checkpoint with Python's file calls: a URI needs Spark's
    file systems, so it is refused by name (a local path is not)."""
    with pytest.raises(ValueError, match=r"checkpoint s3a://b/ckpt: .* give a local path"):
        files(None, "s3a://b/ckpt")
    assert isinstance(files(None, "/var/ckpt"), LocalFiles)


def test_a_uri_checkpoint_setting_keeps_its_scheme() -> None:
    """A Hadoop URI stays as given (a Path would fold "s3a://b" into "s3a:/b"); a path is
    tidied."""
    assert SparkSettings(checkpoint="s3a://bucket/ckpt/").checkpoint == "s3a://bucket/ckpt/"
    assert SparkSettings(checkpoint="/var//ckpt/").checkpoint == "/var/ckpt"


def test_local_files_write_whole_and_read_back(tmp_path) -> None:
    """Offline commands (reshard) rewrite the records the job reads through Hadoop."""
    local = LocalFiles(tmp_path)
    assert local.read_text("a/b.json") is None and not local.exists("a")
    local.write_text("a/b.json", "one")
    (tmp_path / "a" / ".b.json.crc").write_bytes(b"crc of one")  # as Hadoop's would be
    local.write_text("a/b.json", "two")
    assert local.read_text("a/b.json") == "two" and local.exists("a")
    # no temporary left, and no checksum that Hadoop would check "two" against
    assert [p.name for p in (tmp_path / "a").iterdir()] == ["b.json"]


def test_a_checkpoint_keeps_its_stores_job_id(tmp_path) -> None:
    made = job_id(LocalFiles(tmp_path))
    assert len(made) == 12 and job_id(LocalFiles(tmp_path)) == made
    assert job_id(LocalFiles(tmp_path / "b")) != made


def test_a_checkpoint_started_in_the_other_mode_is_refused(tmp_path) -> None:
    with pytest.raises(PartitionModeRefused, match=r"started with spark\.state_mode spark"):
        check_start(LocalFiles(tmp_path), True, {})
    check_start(LocalFiles(tmp_path), False, {"p.raw.ks.t": 3})
    check_start(LocalFiles(tmp_path), True, {"p.raw.ks.t": 3})  # its own mode: fine


def test_a_raw_topic_that_gained_partitions_is_refused_new_topics_are_recorded(tmp_path
                                                                               ) -> None:
    check_start(LocalFiles(tmp_path), False, {"p.raw.ks.t": 3})
    check_start(LocalFiles(tmp_path), True, {"p.raw.ks.t": 3, "p.raw.ks.u": 6})
    known = json.loads((state_root(tmp_path) / "partitions.json").read_text())
    assert known == {"p.raw.ks.t": 3, "p.raw.ks.u": 6}
    with pytest.raises(PartitionModeRefused, match=r"p\.raw\.ks\.u 6 -> 12"):
        check_start(LocalFiles(tmp_path), True, {"p.raw.ks.t": 3, "p.raw.ks.u": 12})


def test_an_unknown_state_mode_is_a_config_error() -> None:
    with pytest.raises(ValueError,
                       match=r"spark\.state_mode must be one of auto, partition, spark"):
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


def test_a_checkpoint_keeps_the_mode_it_was_started_in(tmp_path) -> None:
    """spark.state_mode auto: a new checkpoint has no mode yet (partition is taken); one that
    Spark's query started without the partition records is the spark mode's."""
    files = LocalFiles(tmp_path)
    assert started_mode(files) is None
    (tmp_path / "metadata").write_text('{"id": "q"}')
    assert started_mode(files) == "spark"
    check_start(LocalFiles(tmp_path / "p"), False, {"p.raw.ks.t": 3})
    assert started_mode(LocalFiles(tmp_path / "p")) == "partition"
