"""The warm-up's Python side (`materializer.spark.warm_workers`): what a worker forked from
the daemon starts with, and the warm-up's function passing its rows through. (That the
query's first micro-batch then finds its workers started: tests/integration/materializer/
test_warm_workers.py.)"""

from __future__ import annotations

import json
import subprocess
import sys

from materializer.spark import warm_workers

LOADED = ("pyarrow", "pandas", "materializer.spark.partition_job",
          "materializer.task.merge_loop", "confluent_kafka")


def test_preload_loads_what_a_merge_task_needs_which_a_fresh_interpreter_lacks() -> None:
    code = ("import json, sys\n"
            f"names = {LOADED!r}\n"
            "before = [n for n in names if n in sys.modules]\n"
            "from materializer.spark.warm_workers import preload\n"
            "preload()\n"
            "print(json.dumps([before, [n for n in names if n not in sys.modules]]))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=60)
    before, missing = json.loads(out.stdout)
    assert before == []  # (else the check below would show nothing)
    assert missing == []


def test_the_warm_up_passes_its_rows_through() -> None:
    assert list(warm_workers.ready(iter(["a", "b"]))) == ["a", "b"]
