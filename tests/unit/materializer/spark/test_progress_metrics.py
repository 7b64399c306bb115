"""Spark progress reports → materializer metrics (the integration test checks real reports)."""

from __future__ import annotations

from typing import Any

from materializer.spark.progress import ProgressMetrics
from shared.metrics import Registry


def report(batch: int, rows: int, ts: str, end: int, latest: int) -> dict[str, Any]:
    return {"name": "casscade_materializer", "batchId": batch, "timestamp": ts,
            "numInputRows": rows, "processedRowsPerSecond": rows / 2.0,
            "durationMs": {"triggerExecution": 2000},
            "sources": [{"description": "KafkaV2[SubscribePattern[p\\.raw\\..+]]",
                         "endOffset": {"p.raw.ks.t": {"0": end, "1": end}},
                         "latestOffset": {"p.raw.ks.t": {"0": latest, "1": end}}}],
            "sink": {"numOutputRows": rows + 1}}


def test_new_reports_are_counted_once_and_idle_reports_add_nothing() -> None:
    registry = Registry()
    m = ProgressMetrics(registry)
    first = [report(0, 100, "2026-11-22T10:00:00.000Z", 50, 80),
             report(1, 40, "2026-11-22T10:00:02.000Z", 70, 75)]
    assert m.observe_new(first) == 2
    # Spark's window repeats old reports; an idle report repeats the batch id with no rows
    idle = report(1, 0, "2026-11-22T10:00:12.000Z", 75, 75)
    assert m.observe_new([*first, idle]) == 1
    assert m.input_rows.get() == 140 and m.batches.get() == 2
    assert m.output_rows.get() == 142
    assert m.rate.get() == 20.0  # the last batch that read rows, not the idle report
    assert m.lag.get() == 0 and m.last_batch_id.get() == 1
    text = registry.render()
    assert "casscade_materializer_input_rows_total 140" in text
    assert "casscade_materializer_kafka_offsets_behind_latest 0" in text


class _Row(dict):
    """What a progress object's observed metrics are in PySpark: a Row (asDict)."""

    def asDict(self) -> dict[str, Any]:
        return dict(self)


def test_partition_store_counts_come_from_observed_metrics() -> None:
    """The merge counts the copies it dropped and the stores' keys as observed metrics, in
    a report's JSON (dict) or a progress object (Row)."""
    m = ProgressMetrics(Registry())
    r = report(3, 90, "2026-11-22T10:00:00.000Z", 10, 10)
    r["observedMetrics"] = {"partition_state": {"copies_in": 90, "copies_dropped": 58,
                                                "store_keys": 700}}
    m.observe(r)
    r2 = report(4, 30, "2026-11-22T10:00:02.000Z", 10, 10)
    r2["observedMetrics"] = {"partition_state": _Row(copies_in=30, copies_dropped=20,
                                                     store_keys=750)}
    m.observe(r2)
    m.observe({**r2, "numInputRows": 0, "timestamp": "2026-11-22T10:00:09.000Z"})  # idle
    assert m.copies_dropped.get() == 78 and m.store_keys.get() == 750


def test_lag_sums_every_partition_behind_its_latest_offset() -> None:
    m = ProgressMetrics(Registry())
    m.observe(report(3, 5, "2026-11-22T10:00:00.000Z", 10, 25))
    assert m.lag.get() == 15
    assert m.status()["last_progress"]["batchId"] == 3


def test_driver_health_turns_503_once_the_query_stopped() -> None:
    """The CLI's /health wiring: a running query is healthy, a stopped one is not."""
    import json
    import socket
    from types import SimpleNamespace

    from materializer.cli import _serve
    from materializer.settings import MaterializerConfig

    from support.services import http_get

    def health(port: int) -> tuple[int, str]:
        code, body = http_get(port, "/health")
        return code, json.loads(body)["status"]

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cfg = MaterializerConfig()
    cfg.http.port = port
    query = SimpleNamespace(isActive=True)
    server = _serve(cfg, [query], ProgressMetrics(Registry()))
    try:
        assert health(port) == (200, "ok")
        query.isActive = False  # the query ended (failed, or was stopped)
        assert health(port) == (503, "stalled")
    finally:
        server.shutdown()
        server.server_close()


def test_tasks_freshness_and_heartbeats_become_a_histogram_and_ages() -> None:
    import json
    import time

    m = ProgressMetrics(m_registry := Registry())
    now_ms = int(time.time() * 1000)
    tasks = [json.dumps({"fresh": {"shop.orders": [1, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 1, 702.5]},
                         "beats": {"node-1": now_ms - 4000}}),
             json.dumps({"fresh": {"shop.orders": [0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0.75]},
                         "beats": {"node-1": now_ms - 9000, "node-2": now_ms - 60_000}})]
    r = report(3, 90, "2026-11-22T10:00:00.000Z", 10, 10)
    r["observedMetrics"] = {"partition_state": {"copies_in": 90, "stats": tasks}}
    m.observe(r)
    text = m_registry.render()
    assert 'casscade_materializer_freshness_seconds_bucket{table="shop.orders",le="0.25"} 1' \
        in text
    assert 'casscade_materializer_freshness_seconds_bucket{table="shop.orders",le="1"} 4' \
        in text
    assert 'casscade_materializer_freshness_seconds_bucket{table="shop.orders",le="+Inf"} 5' \
        in text
    assert 'casscade_materializer_freshness_seconds_sum{table="shop.orders"} 703.25' in text
    assert 'casscade_materializer_freshness_seconds_count{table="shop.orders"} 5' in text
    assert 3.5 < m.heartbeat_age.get("node-1") < 10 and 59 < m.heartbeat_age.get("node-2") < 70


def test_a_publisher_silent_past_the_forget_time_leaves_the_heartbeat_gauge() -> None:
    import json
    import time

    from materializer.spark.progress import HEARTBEAT_FORGET_S

    m = ProgressMetrics(m_registry := Registry())
    now_ms = int(time.time() * 1000)
    gone_ms = now_ms - int((HEARTBEAT_FORGET_S + 60) * 1000)
    r = report(1, 10, "2026-11-22T10:00:00.000Z", 10, 10)
    r["observedMetrics"] = {"partition_state": {"copies_in": 10, "stats": [json.dumps(
        {"beats": {"node-1": now_ms - 2000, "node-old": gone_ms}})]}}
    m.observe(r)
    text = m_registry.render()
    assert 'heartbeat_age_seconds{host="node-1"}' in text
    assert "node-old" not in text  # decommissioned long ago: no stale series left behind
    # a heartbeat of it again (the agent back) brings it back
    r = report(2, 10, "2026-11-22T10:00:01.000Z", 10, 10)
    r["observedMetrics"] = {"partition_state": {"copies_in": 10, "stats": [json.dumps(
        {"beats": {"node-old": now_ms}})]}}
    m.observe(r)
    assert m.heartbeat_age.get("node-old") < 60 and 'host="node-old"' in m_registry.render()


def test_dead_letters_are_counted_by_the_topic_they_were_meant_for() -> None:
    import json

    m = ProgressMetrics(m_registry := Registry())
    for batch, dead in ((1, {"p.shop.orders": 2, "p.raw": 1}), (2, {"p.shop.orders": 1})):
        r = report(batch, 10, f"2026-11-22T10:00:0{batch}.000Z", 10, 10)
        r["observedMetrics"] = {"partition_state": {"copies_in": 10, "stats": [json.dumps(
            {"dead": dead})]}}
        m.observe(r)
    text = m_registry.render()
    assert 'casscade_materializer_dead_letters_total{topic="p.shop.orders"} 3' in text
    assert 'casscade_materializer_dead_letters_total{topic="p.raw"} 1' in text


def test_the_raw_age_gauges_show_the_probes_last_reading_and_its_position() -> None:
    m = ProgressMetrics(m_registry := Registry())
    reading: list[tuple[float | None, float] | None] = [None]
    m.watch_raw_age(lambda: reading[0])
    text = m_registry.render()
    assert "casscade_materializer_raw_oldest_unread_age_seconds 0" in text  # no reading yet
    m.observe(report(0, 10, "2026-11-22T10:00:00.000Z", 50, 80))
    assert m.end_offsets == {"p.raw.ks.t": {0: 50, 1: 50}}  # what the probe reads past
    reading[0] = (3600.0, 42.5)
    text = m_registry.render()
    assert "casscade_materializer_raw_retention_seconds 3600" in text
    assert "casscade_materializer_raw_oldest_unread_age_seconds 42.5" in text


def test_offsets_given_as_json_text_as_pyspark_gives_them_count_too() -> None:
    """PySpark 4's StreamingQueryProgress holds a source's offsets as JSON text."""
    import json

    m = ProgressMetrics(Registry())
    r = report(0, 10, "2026-11-22T10:00:00.000Z", 50, 80)
    for source in r["sources"]:
        source["endOffset"] = json.dumps(source["endOffset"])
        source["latestOffset"] = json.dumps(source["latestOffset"])
    m.observe(r)
    assert m.lag.get() == 30 and m.end_offsets == {"p.raw.ks.t": {0: 50, 1: 50}}


def test_transactions_are_counted_from_the_tasks_reports() -> None:
    """A task's producers initialised and its producers' last commits (TaskStats.txn) add
    up across tasks and batches."""
    import json

    from materializer.task.task_stats import TaskStats

    first, second = TaskStats(), TaskStats()
    first.producer(0.25)
    first.producer(0.5)
    second.committed(0.1, 3)
    second.committed(0.3, 101)
    m = ProgressMetrics(m_registry := Registry())
    for batch, stats in ((1, first), (2, second)):
        r = report(batch, 10, f"2026-11-22T10:00:0{batch}.000Z", 10, 10)
        r["observedMetrics"] = {"partition_state": {"copies_in": 10, "stats": [
            stats.to_json()]}}
        m.observe(r)
    assert json.loads(second.to_json())["txn"] == [0, 0.0, 2, 0.4, 104]
    text = m_registry.render()
    assert "casscade_materializer_producers_initialised_total 2" in text
    assert "casscade_materializer_producer_init_seconds_total 0.75" in text
    assert "casscade_materializer_transaction_commits_total 2" in text
    assert "casscade_materializer_transaction_topics_total 104" in text
