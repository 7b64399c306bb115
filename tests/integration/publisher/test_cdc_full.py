"""The runbook's "agent down for hours" procedure on a real node: cdc_raw fills, Cassandra
rejects writes to CDC tables, the agent is started and frees it, writes are accepted again,
and every accepted write reaches Kafka."""

from __future__ import annotations

import os
from dataclasses import replace

import pytest
from cassandra import WriteFailure

from devstack import cassandra
from devstack import stack as devstack
from devstack.cassandra import cql_cluster
from shared.topic_names import raw_topic

from support.publisher_harness import AgentProcess, read_topic
from support.services import wait_until

pytestmark = pytest.mark.integration
PORTS = {"cql_port": 19342, "storage_port": 17400, "jmx_port": 17499}


def test_full_cdc_raw_rejects_writes_until_the_agent_frees_it(stack, tmp_path) -> None:
    node = replace(stack, state_dir=tmp_path / "node", cluster_name="casscade-full",
                   cdc_total_space="16MiB", **PORTS)
    devstack.up(node, log=lambda m: print(f"[full-node] {m}"), with_kafka=False)
    cluster = cql_cluster(node)
    agent = None
    try:
        session = cluster.connect()
        session.execute("CREATE KEYSPACE cdcfull WITH replication = "
                        "{'class': 'SimpleStrategy', 'replication_factor': 1}")
        session.execute("CREATE TABLE cdcfull.t (k int PRIMARY KEY, b blob) WITH cdc = true")
        insert = session.prepare("INSERT INTO cdcfull.t (k, b) VALUES (?, ?)")
        blob = os.urandom(100_000)
        accepted, rejection = 0, None
        for k in range(1000):  # 100 MB at most: far past 16 MiB
            try:
                session.execute(insert, (k, blob), timeout=30)
                accepted += 1
            except Exception as exc:  # noqa: BLE001 — the server's rejection, whatever its class
                rejection = exc
                break
        assert rejection is not None, "Cassandra never rejected a write to a full cdc_raw"
        assert isinstance(rejection, WriteFailure), rejection
        # the client sees a write failure; the node's log names the cause
        log = (node.cassandra_dir / "logs" / "system.log").read_text(errors="replace")
        assert "Rejecting mutation to keyspace cdcfull" in log
        print(f"\ncdc_raw full after {accepted} writes of 100 kB: {type(rejection).__name__}")

        agent = AgentProcess(node, stack, tmp_path / "agent", http_port=18111)
        agent.start()

        def write_accepted() -> bool:
            try:
                session.execute(insert, (10_000, blob), timeout=30)
                return True
            except Exception:  # noqa: BLE001 — still rejected: wait
                return False

        wait_until(write_accepted, 120, "a write to be accepted once the agent runs")
        records = read_topic(stack.bootstrap_servers, raw_topic(agent.prefix),
                             expect_at_least=accepted + 1, timeout_s=120, table="cdcfull.t")
        keys = {int.from_bytes(r["partition_key"], "big", signed=True)
                for _p, _o, _key, r in records}
        assert set(range(accepted)) | {10_000} <= keys  # every accepted write published
    finally:
        if agent is not None:
            assert agent.stop() == 0
        cluster.shutdown()
        cassandra.shutdown(node, drain=False)
