"""Raw partitions added by hand (outside `materializer reshard`): the job refuses to start,
and `reshard` to the count the topic has now moves the stores, since every record written
since is in its key's new partition; the job then writes each later change once, as an
update of the state it had."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections import defaultdict
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewPartitions

from devstack.settings import StackSettings, repo_root
from shared.partitioner import crc32_partition
from shared.topic_names import raw_key, raw_topic

from support.materializer_harness import (
    duplicates,
    inserted_rows,
    materializer_command,
    publish_inserts,
    run_materializer,
)
from support.mutations import TABLE, i32

pytestmark = pytest.mark.integration
ROWS = 200


def _by_partition(partitions: int) -> dict[int, list[int]]:
    """Rows by the raw partition the publishers' partitioner (CRC-32) gives their key."""
    rows: dict[int, list[int]] = defaultdict(list)
    for n in range(ROWS):
        rows[crc32_partition(raw_key(TABLE.id, i32(n)), partitions)].append(n)
    return rows


def _command(stack: StackSettings, *args: str, prefix: str, checkpoint: Path
             ) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "casscade.cli", "materializer", *args,
         "--set", f"kafka.bootstrap_servers={stack.bootstrap_servers}",
         "--set", f"kafka.topic_prefix={prefix}", "--set", f"spark.checkpoint={checkpoint}"],
        cwd=repo_root(), capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)


def test_partitions_added_by_hand_are_taken_by_reshard_and_the_job_goes_on(
        stack: StackSettings, tmp_path: Path) -> None:
    prefix = f"grow{uuid.uuid4().hex[:6]}"
    checkpoint = tmp_path / "checkpoint"
    publish_inserts(stack.bootstrap_servers, prefix, _by_partition(2))
    run_materializer(materializer_command(stack, prefix, checkpoint), tmp_path / "1.log")

    admin = AdminClient({"bootstrap.servers": stack.bootstrap_servers})
    admin.create_partitions([NewPartitions(raw_topic(prefix), 4)])[raw_topic(prefix)].result(30)
    # the publishers go on, at the count the topic has now: a later write of every row
    publish_inserts(stack.bootstrap_servers, prefix, _by_partition(4), version=1)

    refused = _command(stack, "run", "--available-now", prefix=prefix, checkpoint=checkpoint)
    assert refused.returncode == 1, refused.stderr[-3000:]
    assert f"{raw_topic(prefix)} 2 -> 4" in refused.stderr
    assert "casscade materializer reshard" in refused.stderr

    more = _command(stack, "reshard", "--partitions", "8", prefix=prefix,
                    checkpoint=checkpoint)
    assert more.returncode == 1
    assert "reshard it to that count first (--partitions 4)" in more.stderr

    done = _command(stack, "reshard", "--partitions", "4", prefix=prefix,
                    checkpoint=checkpoint)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout)["raw_topics"] == {raw_topic(prefix): [2, 4]}

    run_materializer(materializer_command(stack, prefix, checkpoint), tmp_path / "2.log")
    events = inserted_rows(stack.bootstrap_servers, prefix)
    assert duplicates(events) == []
    by_key: dict[int, list[str]] = defaultdict(list)
    for _p, _o, key, value in sorted(events, key=lambda e: (e[0], e[1])):
        by_key[key["p"]].append(value["op"])
    assert by_key == {n: ["c", "u"] for n in range(ROWS)}
    assert all(e[3]["after"]["v"] == f"v{e[2]['p']}-1" for e in events if e[3]["op"] == "u")
