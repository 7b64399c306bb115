"""The PySpark internals `materializer.spark.pyspark_internals` reaches are still there in
the installed PySpark (no Spark started: the symbols and the code that sets them)."""

from __future__ import annotations

import inspect
import json
import logging
import zipfile
from pathlib import Path
from types import SimpleNamespace

import pyspark
import pyspark.java_gateway
import pytest
from pyspark import SparkContext

from materializer.spark import pyspark_internals


def test_the_spark_context_still_has_the_jvm_and_its_hadoop_conf() -> None:
    assert hasattr(SparkContext, "_jvm") and hasattr(SparkContext, "_gateway")
    # the context's Java SparkContext, whose Hadoop configuration Spark resolves paths with
    assert "self._jsc" in inspect.getsource(SparkContext)


def test_the_gateway_still_keeps_the_driver_jvms_process() -> None:
    assert "gateway.proc = proc" in inspect.getsource(pyspark.java_gateway.launch_gateway)


def test_without_the_process_the_archive_is_not_written_and_a_warning_says_so(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(SparkContext, "_gateway", SimpleNamespace())  # no `proc`
    with caplog.at_level(logging.WARNING):
        assert pyspark_internals.driver_process() is None
    assert "class archive is not written" in caplog.text
    proc = object()
    monkeypatch.setattr(SparkContext, "_gateway", SimpleNamespace(proc=proc))
    assert pyspark_internals.driver_process() is proc


def test_the_gateway_launcher_still_takes_popen_arguments_where_the_context_calls_it() -> None:
    from pyspark.core import context

    assert "popen_kwargs" in inspect.signature(pyspark.java_gateway.launch_gateway).parameters
    assert context.launch_gateway is pyspark.java_gateway.launch_gateway
    assert "launch_gateway(conf)" in inspect.getsource(context)


def test_the_driver_jvm_starts_in_a_session_of_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    from pyspark.core import context

    seen: list = []
    monkeypatch.setattr(context, "launch_gateway", lambda conf=None, popen_kwargs=None:
                        seen.append(popen_kwargs))
    with pyspark_internals.jvm_in_own_session():
        context.launch_gateway("conf")
    context.launch_gateway("conf")  # restored after: PySpark's own again
    assert seen == [{"start_new_session": True}, None]


def test_without_the_launcher_a_warning_says_ctrl_c_reaches_the_tasks(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    from pyspark.core import context

    monkeypatch.delattr(context, "launch_gateway")
    with caplog.at_level(logging.WARNING), pyspark_internals.jvm_in_own_session():
        pass
    assert "Ctrl-C also interrupts its running tasks" in caplog.text


def test_the_daemon_still_prints_a_workers_failure_with_print_exc() -> None:
    import pyspark.daemon

    source = inspect.getsource(pyspark.daemon.manager)
    assert "traceback.print_exc()" in source
    assert "def manager" in inspect.getsource(pyspark.daemon)


def test_the_quiet_daemon_leaves_out_only_a_closed_socket(capsys) -> None:
    from materializer.spark.pyspark_daemon import print_exc_unless_gone

    for exc in (BrokenPipeError(32, "Broken pipe"), ConnectionResetError(104, "reset"),
                ValueError("a real failure")):
        try:
            raise exc
        except Exception:  # noqa: BLE001 — what the daemon's handler sees
            print_exc_unless_gone()
    said = capsys.readouterr().err
    assert "ValueError: a real failure" in said
    assert "BrokenPipeError" not in said and "ConnectionResetError" not in said


def _spark_jar(name: str) -> zipfile.ZipFile:
    """The installed PySpark's jar `name`-<version>.jar."""
    (jar,) = (Path(pyspark.__file__).parent / "jars").glob(f"{name}_*.jar")
    return zipfile.ZipFile(jar)


def test_spark_still_has_the_checkpoint_file_manager_setting_and_the_file_system_class() -> None:
    class_file = pyspark_internals.FILE_SYSTEM_CHECKPOINT_FILES.replace(".", "/") + ".class"
    with _spark_jar("spark-sql") as jar:
        assert class_file in jar.namelist()
    with _spark_jar("spark-catalyst") as jar:
        conf = jar.read("org/apache/spark/sql/internal/SQLConf$.class")
    assert pyspark_internals.CHECKPOINT_FILE_MANAGER.encode() in conf


def test_checkpoint_logs_through_file_system_sets_the_session_conf() -> None:
    seen: dict[str, str] = {}
    spark = SimpleNamespace(conf=SimpleNamespace(set=seen.__setitem__,
                                                 get=lambda key, default: seen.get(key,
                                                                                   default)))
    assert pyspark_internals.checkpoint_file_manager(spark) is None  # type: ignore[arg-type]
    pyspark_internals.checkpoint_logs_through_file_system(spark)  # type: ignore[arg-type]
    assert seen == {pyspark_internals.CHECKPOINT_FILE_MANAGER:
                    pyspark_internals.FILE_SYSTEM_CHECKPOINT_FILES}
    assert (pyspark_internals.checkpoint_file_manager(spark)  # type: ignore[arg-type]
            == pyspark_internals.FILE_SYSTEM_CHECKPOINT_FILES)


def test_pysparks_recent_progress_still_renders_each_java_report() -> None:
    """What `progress_since` does for the new reports only: the Java query's reports, each
    rendered by its `json()`."""
    from pyspark.sql.streaming.query import StreamingQuery

    source = inspect.getsource(StreamingQuery.recentProgress.fget)
    assert "self._jsq.recentProgress()" in source and "p.json()" in source


def test_progress_since_reads_the_new_reports_from_the_newest_back() -> None:
    class _Report:
        def __init__(self, batch: int) -> None:
            self.at = f"2026-12-02T10:00:0{batch}.000Z"
            self.batch = batch
            self.rendered = 0

        def timestamp(self) -> str:
            return self.at

        def json(self) -> str:
            self.rendered += 1
            return json.dumps({"batchId": self.batch, "timestamp": self.at})

    kept = [_Report(b) for b in range(6)]
    query = SimpleNamespace(_jsq=SimpleNamespace(recentProgress=lambda: kept))
    new = pyspark_internals.progress_since(query, kept[3].at)
    assert [r["batchId"] for r in new] == [4, 5]
    assert [r.rendered for r in kept] == [0, 0, 0, 0, 1, 1]  # the seen ones not rendered
    assert [r["batchId"] for r in pyspark_internals.progress_since(query, "")] == list(range(6))
    assert pyspark_internals.progress_since(query, kept[5].at) == []
    plain = SimpleNamespace(recentProgress=[{"batchId": 1, "timestamp": "b"},
                                            {"batchId": 0, "timestamp": "a"}])
    assert pyspark_internals.progress_since(plain, "a") == [{"batchId": 1, "timestamp": "b"}]
