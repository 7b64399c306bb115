"""What the job refuses at start, and its checkpoint records (pure checks on a temporary
directory)."""

from __future__ import annotations

import json

import pytest

from materializer.checkpoint.files import LocalFiles
from materializer.checkpoint.records import (
    DELIVERY_RECORD,
    OWNER_RECORD,
    CheckpointRefused,
    check_delivery,
    check_owner,
    check_start,
    job_id,
    refuse_another_owner,
)
from materializer.settings import SparkSettings
from materializer.spark.hadoop_files import files
from materializer.store.layout import state_root


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


def test_a_checkpoint_of_the_spark_state_mode_is_refused(tmp_path) -> None:
    """A checkpoint an earlier casscade started in its spark state mode (Spark's state store,
    no partition records) is refused, naming the way forward; one started here is not."""
    with pytest.raises(CheckpointRefused, match=r"started in the spark state mode .* start a "
                       r"new spark\.checkpoint .*Upgrading from the spark state mode"):
        check_start(LocalFiles(tmp_path), True, {}, "p")
    check_start(LocalFiles(tmp_path), False, {"p.raw": 3}, "p")
    check_start(LocalFiles(tmp_path), True, {"p.raw": 3}, "p")  # its own records: fine


def test_a_raw_topic_that_gained_partitions_is_refused_one_made_later_is_recorded(tmp_path
                                                                                 ) -> None:
    check_start(LocalFiles(tmp_path), False, {}, "p")  # no raw topic yet: nothing to record
    assert json.loads((state_root(tmp_path) / "partitions.json").read_text()) == {}
    check_start(LocalFiles(tmp_path), True, {"p.raw": 6}, "p")
    known = json.loads((state_root(tmp_path) / "partitions.json").read_text())
    assert known == {"p.raw": 6}
    with pytest.raises(CheckpointRefused, match=r"p\.raw 6 -> 12; .* `casscade materializer "
                       r"reshard"):
        check_start(LocalFiles(tmp_path), True, {"p.raw": 12}, "p")


def test_a_checkpoint_of_the_per_table_raw_topics_is_refused(tmp_path) -> None:
    """A checkpoint an earlier casscade wrote for its per-table raw topics holds stores keyed
    without table ids: refused in one line naming what to do."""
    (state_root(tmp_path)).mkdir(parents=True)
    (state_root(tmp_path) / "partitions.json").write_text(
        json.dumps({"p.raw.ks.t": 3, "p.raw.ks.u": 3}))
    with pytest.raises(CheckpointRefused, match=r"written for the per-table raw topics of an "
                       r"earlier casscade \(p\.raw\.ks\.t and 1 more\), .* start a new "
                       r"spark\.checkpoint, and publish the tables' rows again with "
                       r"`casscade snapshot`"):
        check_start(LocalFiles(tmp_path), True, {"p.raw": 3}, "p")


def test_the_spark_state_modes_settings_are_refused_by_name() -> None:
    """A config that still sets the gone mode's settings says what happened, not only
    "unknown setting"."""
    from click.testing import CliRunner

    from casscade.cli import cli

    for setting in ("spark.state_mode=spark", "spark.shuffle_partitions=4"):
        out = CliRunner().invoke(cli, ["materializer", "run", "--print-config", "--set", setting])
        assert out.exit_code != 0, out.output
        assert f"{setting.split('=')[0]}: the spark state mode is gone" in out.output, out.output
    out = CliRunner().invoke(cli, ["materializer", "--help"])
    assert "reshard" in out.output and "rescale" not in out.output, out.output


def test_a_checkpoint_of_another_job_is_refused_by_its_owner(tmp_path) -> None:
    check_owner(LocalFiles(tmp_path), "cluster-a", "shop")
    check_owner(LocalFiles(tmp_path), "cluster-a", "shop")  # its own job, again: fine
    with pytest.raises(CheckpointRefused, match=r"belongs to the job that reads shop\.raw "
                       r"on Kafka cluster cluster-a; this config reads shop\.raw on "
                       r"Kafka cluster cluster-b: give this job a spark.checkpoint"):
        check_owner(LocalFiles(tmp_path), "cluster-b", "shop")
    with pytest.raises(CheckpointRefused, match=r"this config reads billing\.raw "):
        check_owner(LocalFiles(tmp_path), "cluster-a", "billing")
    # the CLI's check before Spark, on the record it read
    owner = LocalFiles(tmp_path).read_text(OWNER_RECORD)
    assert owner is not None
    with pytest.raises(CheckpointRefused, match=rf"checkpoint {tmp_path} belongs to .* "
                       r"this config reads billing\.raw "):
        refuse_another_owner(str(tmp_path), owner, "cluster-a", "billing")
    refuse_another_owner(str(tmp_path), owner, "cluster-a", "shop")


def _logs(root, offsets: int, commits: int) -> LocalFiles:
    """A checkpoint whose offset and commit logs hold batches 0..offsets-1, 0..commits-1."""
    for log, n in (("offsets", offsets), ("commits", commits)):
        (root / log).mkdir(exist_ok=True)
        for b in range(n):
            (root / log / str(b)).write_text("v1\n{}\n")
    return LocalFiles(root)


def test_the_delivery_mode_is_recorded_and_a_switch_between_batches_is_taken(tmp_path) -> None:
    files = _logs(tmp_path, offsets=3, commits=3)
    check_delivery(files, "exactly-once")
    assert json.loads(files.read_text(DELIVERY_RECORD)) == {"delivery": "exactly-once"}
    check_delivery(files, "exactly-once")
    check_delivery(files, "at-least-once")  # every planned batch committed: safe
    assert json.loads(files.read_text(DELIVERY_RECORD)) == {"delivery": "at-least-once"}


@pytest.mark.parametrize(("began", "now"), [("at-least-once", "exactly-once"),
                                            ("exactly-once", "at-least-once")])
def test_a_switch_with_a_batch_unfinished_is_refused_with_the_steps(tmp_path, began,
                                                                    now) -> None:
    files = _logs(tmp_path, offsets=4, commits=3)
    files.write_text(DELIVERY_RECORD, json.dumps({"delivery": began}))  # (its start wrote it)
    with pytest.raises(CheckpointRefused, match=(
            rf"micro-batch 3 began with events.delivery {began} and did not finish.*"
            rf"Run the job once with events.delivery {began} and --available-now")):
        check_delivery(files, now)
    assert json.loads(files.read_text(DELIVERY_RECORD)) == {"delivery": began}
    check_delivery(files, began)  # the same mode finishes it


def test_a_checkpoint_without_a_record_takes_this_mode_between_batches(tmp_path) -> None:
    files = _logs(tmp_path, offsets=3, commits=3)  # an earlier casscade's, every batch done
    check_delivery(files, "at-least-once")
    assert json.loads(files.read_text(DELIVERY_RECORD)) == {"delivery": "at-least-once"}


@pytest.mark.parametrize("now", ["exactly-once", "at-least-once"])
def test_a_checkpoint_without_a_record_mid_batch_is_refused_with_the_way_out(
        tmp_path, now) -> None:
    """Which mode began the unfinished batch is not known (issue 71, case 6): before, this
    start's mode was taken, and a batch begun in the other was finished in this one."""
    files = _logs(tmp_path, offsets=4, commits=3)  # an earlier casscade's, mid-batch
    with pytest.raises(CheckpointRefused, match=(
            r"micro-batch 3 did not finish, and the checkpoint does not say which "
            r"events.delivery began it.*write the mode it ran with to")):
        check_delivery(files, now)
    assert files.read_text(DELIVERY_RECORD) is None
    files.write_text(DELIVERY_RECORD, json.dumps({"delivery": "exactly-once"}))  # the way out
    check_delivery(files, "exactly-once")


def test_speculation_is_refused_and_off_by_default() -> None:
    with pytest.raises(ValueError, match=r"spark\.speculation: the job runs without it"):
        SparkSettings(conf={"spark.speculation": "true"})
    assert SparkSettings(conf={"spark.speculation": "false"}).conf
    assert "spark.speculation" not in SparkSettings().conf
