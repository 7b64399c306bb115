"""A real Prometheus scrapes a running publisher and materializer, and reads back each
publisher's heartbeat age and each table's freshness through its HTTP API."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Producer

from devstack.settings import StackSettings
from publisher.kafka_sink import schema_record
from shared.kafka_topics import TopicCreator
from shared.topic_names import raw_key, raw_topic

from support.materializer_harness import kill_group, materializer_command, start_materializer
from support.mutations import TABLE, body, i32, mutation
from support.prometheus import prometheus, query, rules
from support.publisher_harness import AgentProcess
from support.services import free_port

pytestmark = pytest.mark.integration
CHANGES = 200


def _wait(url: str, promql: str, ok, what: str, timeout_s: float = 180) -> list:
    deadline = time.monotonic() + timeout_s
    while True:
        result = query(url, promql)
        if result and ok(result):
            return result
        assert time.monotonic() < deadline, f"{what}: {promql} gave {result}"
        time.sleep(1)


def test_prometheus_reads_heartbeat_ages_and_freshness(stack: StackSettings,
                                                       tmp_path: Path) -> None:
    prefix = f"mon{uuid.uuid4().hex[:6]}"
    raw = raw_topic(prefix)
    TopicCreator(stack.bootstrap_servers, 2, 1).ensure(raw)
    TopicCreator(stack.bootstrap_servers, 1, 1).ensure(f"{prefix}.schemas")
    (tmp_path / "cdc_raw").mkdir()
    # an agent of its own on an empty cdc_raw: it serves /metrics and sends heartbeats
    agent = AgentProcess(stack, stack, tmp_path / "agent", prefix, http_port=free_port(),
                         host_name="node-mon",
                         sections={"cdc": {"cdc_raw": str(tmp_path / "cdc_raw")},
                                   "kafka": {"heartbeat_interval_s": 1.0}})
    job_port = free_port()
    job = None
    agent.start()
    try:
        agent.wait_serving()
        job = start_materializer(materializer_command(
            stack, prefix, tmp_path / "checkpoint", f"http.port={job_port}",
            available_now=False), tmp_path / "job.log")
        producer = Producer({"bootstrap.servers": stack.bootstrap_servers})
        producer.produce(f"{prefix}.schemas", key=TABLE.schema_hash.encode(),
                         value=schema_record(TABLE))
        written_us = int(time.time() * 1_000_000)
        for n in range(CHANGES):  # changes written now: their events are seconds fresh
            (value,) = mutation(n, body("ROW", n, ts=written_us, v=f"v{n}", insert=True))
            producer.produce(raw, key=raw_key(TABLE.id, i32(2)), value=value)
        assert producer.flush(30) == 0
        with prometheus(tmp_path / "prometheus", {
                "casscade-publisher": [f"127.0.0.1:{agent.http_port}"],
                "casscade-materializer": [f"127.0.0.1:{job_port}"]}) as url:
            assert "CasscadePublisherHeartbeatStale" in rules(url)
            count = _wait(url, 'casscade_materializer_freshness_seconds_count{table="ks.t"}',
                          lambda r: float(r[0]["value"][1]) >= CHANGES, "freshness count")
            assert float(count[0]["value"][1]) == CHANGES
            p99 = query(url, 'histogram_quantile(0.99, sum by (le) '
                             '(casscade_materializer_freshness_seconds_bucket{table="ks.t"}))')
            assert 0 < float(p99[0]["value"][1]) <= 600
            beat = _wait(url, 'casscade_materializer_heartbeat_age_seconds{host="node-mon"}',
                         lambda r: True, "heartbeat age")
            assert 0 <= float(beat[0]["value"][1]) < 30
            lag = _wait(url, 'casscade_publisher_lag_seconds{job="casscade-publisher"}',
                        lambda r: True, "the publisher's lag")
            assert float(lag[0]["value"][1]) >= 0
    finally:
        if job is not None:
            kill_group(job)
        agent.stop()
