"""The monitoring as shipped: a Cassandra node of its own with an agent run from
deploy/publisher.yaml, the job from deploy/materializer.yaml, and a real Prometheus from
deploy/monitoring/prometheus.yml and alerts.yml. Only what an operator puts in their own
copies is substituted (addresses, paths, the topic prefix, a one-broker replication factor,
the targets), plus what a test's patience needs: 1-s intervals, and the two alerts made to
fire here with their thresholds and `for` in seconds (their shipped values are checked by
`promtool test rules` in test_alert_rules.py).

Healthy, every target is up, nothing fires, and each table's freshness and each publisher's
heartbeat read back. The driver's JVM stopped (SIGSTOP) while the driver answers: the
stalled-query alert fires. The broker stopped while rows are written: the publisher-behind
alert fires. Both end once what was stopped goes on."""

from __future__ import annotations

import os
import re
import signal
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from devstack import kafka
from devstack.cassandra import cql_cluster
from devstack.settings import StackSettings

from support.materializer_harness import descendants, kill_group, start_materializer
from support.paths import ROOT
from support.prometheus import firing, query, shipped_prometheus
from support.publisher_harness import AgentProcess
from support.services import free_port, wait_until

pytestmark = pytest.mark.integration

DEPLOY = ROOT / "deploy"
ROWS = 200
# alert → (threshold as shipped, as here); `for:` of these becomes 5 s
FAST = {"CasscadeMaterializerStalled": ("> 300", "> 20"),
        "CasscadePublisherBehind": ("> 300", "> 10")}


@pytest.fixture(scope="module")
def node(agent_node):
    """The publisher tests' node (agent_node): this module's writes go to a keyspace of its
    own."""
    return agent_node


def _set(doc: dict, dotted: str, value: Any) -> None:
    *path, key = dotted.split(".")
    for part in path:
        doc = doc.setdefault(part, {})
    assert key in doc, f"the shipped config has no {dotted}"  # a renamed setting shows here
    doc[key] = value


def _shipped(name: str, settings: dict[str, Any]) -> dict:
    doc = yaml.safe_load((DEPLOY / name).read_text())
    for dotted, value in settings.items():
        _set(doc, dotted, value)
    return doc


def _fast_rules() -> str:
    """alerts.yml with FAST's alerts' thresholds and `for` in seconds."""
    text = (DEPLOY / "monitoring" / "alerts.yml").read_text()
    for alert, (shipped, here) in FAST.items():
        head, _, rule = text.partition(f"- alert: {alert}\n")
        body, sep, rest = rule.partition("\n      - alert: ")
        assert shipped in body, (alert, body)
        body = re.sub(r"for: \w+", "for: 5s", body.replace(shipped, here, 1))
        text = f"{head}- alert: {alert}\n{body}{sep}{rest}"
    return text


def _value(url: str, promql: str) -> float | None:
    result = query(url, promql)
    return float(result[0]["value"][1]) if result else None


def _write(session: Any, first: int, count: int) -> None:
    for n in range(first, first + count):
        session.execute("INSERT INTO mon.t (id, v) VALUES (%s, %s)", (n, f"v{n}"))


def test_the_shipped_monitoring_watches_the_shipped_stages(
        stack: StackSettings, node: StackSettings, tmp_path: Path) -> None:
    prefix = f"mon{uuid.uuid4().hex[:6]}"
    cluster = cql_cluster(node)
    session = cluster.connect()
    session.execute("CREATE KEYSPACE IF NOT EXISTS mon WITH replication = "
                    "{'class': 'SimpleStrategy', 'replication_factor': 1}")
    session.execute("CREATE TABLE IF NOT EXISTS mon.t (id int PRIMARY KEY, v text) "
                    "WITH cdc = true")
    agent_port, job_port = free_port(), free_port()
    agent = AgentProcess(node, stack, tmp_path / "agent", prefix, http_port=agent_port,
                         config=_shipped("publisher.yaml", {
                             "kafka.bootstrap_servers": stack.bootstrap_servers,
                             "kafka.topic_prefix": prefix, "kafka.replication_factor": 1,
                             "cassandra.contact_points": [node.host],
                             "cassandra.port": node.cql_port,
                             "cdc.cdc_raw": str(node.cdc_raw_dir),
                             "cdc.archive_dir": str(tmp_path / "archive"),
                             "state.path": str(tmp_path / "agent" / "state"),
                             "http.host": "127.0.0.1", "http.port": agent_port}))
    job_config = tmp_path / "materializer.yaml"
    job_config.write_text(yaml.safe_dump(_shipped("materializer.yaml", {
        "kafka.bootstrap_servers": stack.bootstrap_servers, "kafka.topic_prefix": prefix,
        "spark.checkpoint": str(tmp_path / "checkpoint"), "events.replication_factor": 1,
        "http.host": "127.0.0.1", "http.port": job_port})))
    job = None
    broker = kafka.running_pid(stack)
    assert broker is not None, "the stack's broker is not running"
    agent.start()
    try:
        agent.wait_serving()
        job = start_materializer([sys.executable, "-m", "casscade.cli", "materializer", "run",
                                  "--config", str(job_config)], tmp_path / "job.log")
        with shipped_prometheus(tmp_path / "prometheus", {
                "casscade-publisher": [f"127.0.0.1:{agent_port}"],
                "casscade-materializer": [f"127.0.0.1:{job_port}"]},
                _fast_rules()) as url:
            # healthy: every target up, the events' freshness and the heartbeat read back
            _write(session, 0, ROWS)
            wait_until(lambda: (_value(url, 'sum(casscade_materializer_freshness_seconds_count'
                                           '{table="mon.t"})') or 0) >= ROWS, 240,
                       f"{ROWS} events' freshness in Prometheus", interval_s=1)
            assert {r["metric"]["job"]: r["value"][1] for r in query(url, "up")} == {
                "casscade-publisher": "1", "casscade-materializer": "1"}
            beat = _value(url, 'casscade_materializer_heartbeat_age_seconds'
                               '{host="cassandra-dc2-1"}')
            assert beat is not None and 0 <= beat < 30, beat
            # the raw topic's retention as the broker has it (its default, 7 days), read
            # on the probe's thread
            wait_until(lambda: _value(url, "casscade_materializer_raw_retention_seconds"),
                       60, "the raw topic's retention in Prometheus", interval_s=1)
            assert _value(url, "casscade_materializer_raw_retention_seconds") == 7 * 86400
            time.sleep(10)  # long enough for a `for: 5s` alert to fire, were it pending
            assert firing(url) == set(), query(url, "ALERTS")

            # the query stalls while the driver answers
            jvms = [p for p in descendants(job.pid) if _is_java(p)]
            assert jvms, "the driver's JVM not found under the job"
            for pid in jvms:
                os.kill(pid, signal.SIGSTOP)
            try:
                wait_until(lambda: "CasscadeMaterializerStalled" in firing(url), 120,
                           "CasscadeMaterializerStalled firing", interval_s=1)
                assert _value(url, 'up{job="casscade-materializer"}') == 1
                assert "CasscadePublisherBehind" not in firing(url)
            finally:
                for pid in jvms:
                    os.kill(pid, signal.SIGCONT)
            wait_until(lambda: "CasscadeMaterializerStalled" not in firing(url), 120,
                       "CasscadeMaterializerStalled ended", interval_s=1)

            # the publisher falls behind: Kafka stopped while rows are written
            os.kill(broker, signal.SIGSTOP)
            try:
                _write(session, ROWS, ROWS)
                wait_until(lambda: "CasscadePublisherBehind" in firing(url), 150,
                           "CasscadePublisherBehind firing", interval_s=1)
                behind = _value(url, "casscade_publisher_lag_seconds")
                assert behind is not None and behind > 10, behind
            finally:
                os.kill(broker, signal.SIGCONT)
            wait_until(lambda: "CasscadePublisherBehind" not in firing(url), 180,
                       "CasscadePublisherBehind ended", interval_s=1)
            wait_until(lambda: (_value(url, 'sum(casscade_materializer_freshness_seconds_count'
                                           '{table="mon.t"})') or 0) >= 2 * ROWS, 300,
                       "the rows written with Kafka stopped, as events", interval_s=1)
    finally:
        os.kill(broker, signal.SIGCONT)  # never leave the session's broker stopped
        if job is not None:
            job.send_signal(signal.SIGTERM)  # the driver alone, as a supervisor stops it
            try:
                job.wait(120)
            finally:
                kill_group(job)
        agent.stop()
        cluster.shutdown()


def _is_java(pid: int) -> bool:
    try:
        return os.path.basename(os.readlink(f"/proc/{pid}/exe")).startswith("java")
    except OSError:
        return False


def test_fast_rules_change_only_the_two_alerts() -> None:
    """(_fast_rules, the one edit of the shipped rules above: the rest stays as shipped.)"""
    shipped = yaml.safe_load((DEPLOY / "monitoring" / "alerts.yml").read_text())
    fast = yaml.safe_load(_fast_rules())
    before = {r["alert"]: r for r in shipped["groups"][0]["rules"]}
    after = {r["alert"]: r for r in fast["groups"][0]["rules"]}
    assert before.keys() == after.keys()
    changed = {name for name in before if before[name] != after[name]}
    assert changed == set(FAST)
    assert all(after[name]["for"] == "5s" for name in FAST)
