"""A Python worker of the job's Spark session that dies of a signal (a native library's
crash): the task's error carries the worker's Python stacks (Python's faulthandler, which
the job's session turns on), so the crash can be traced to the call that made it."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from devstack.settings import StackSettings
from materializer.settings import MaterializerConfig
from materializer.spark import job

pytestmark = pytest.mark.integration


def test_a_crashed_python_worker_leaves_its_python_stack_in_the_error(
        broker: StackSettings, tmp_path) -> None:
    cfg = MaterializerConfig()
    cfg.kafka.bootstrap_servers = broker.bootstrap_servers
    cfg.kafka.topic_prefix = f"crash{uuid.uuid4().hex[:6]}"
    cfg.spark.checkpoint = str(tmp_path / "checkpoint")

    def _segfault_in_native_code(batches: Iterator) -> Iterator:
        # reads address 0 through ctypes: SIGSEGV in the worker (defined here, so that
        # Spark ships it by value: the workers cannot import this test module)
        import ctypes

        for batch in batches:
            ctypes.string_at(0)
            yield batch

    spark = job.session(cfg)
    try:
        with pytest.raises(Exception) as failed:
            spark.range(4).mapInArrow(_segfault_in_native_code, "id long").collect()
    finally:
        spark.stop()
    error = str(failed.value)
    assert "Fatal Python error: Segmentation fault" in error, error[-3000:]
    # the Python frame that made the native call, named in the stack
    assert "_segfault_in_native_code" in error and "string_at" in error, error[-3000:]
