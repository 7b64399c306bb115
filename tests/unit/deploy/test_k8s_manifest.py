"""deploy/k8s/publisher-sidecar.yaml cannot hurt the Cassandra beside it (no cluster here:
its structure and probes, read as Kubernetes reads them): no readiness probe a Kafka outage
could fail, liveness on the agent's /health only, the volume the agent deletes from given
to the user it runs as, Cassandra started with the CDC settings the project ships, and the
agent's config pointing at the same cdc_raw."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from publisher.settings import PublisherConfig
from shared.config import load

from support.paths import ROOT

MANIFEST = ROOT / "deploy" / "k8s" / "publisher-sidecar.yaml"
CDC_SETTINGS = ROOT / "deploy" / "cassandra" / "cassandra-cdc-dc.yaml"
AGENT_DRAIN_S = 30  # the agent's flush on SIGTERM (publisher.agent.agent.Agent.shutdown)


@pytest.fixture(scope="module")
def docs() -> dict[str, Any]:
    return {d["kind"]: d for d in yaml.safe_load_all(MANIFEST.read_text())}


def _pod(docs: dict[str, Any]) -> dict[str, Any]:
    return docs["StatefulSet"]["spec"]["template"]["spec"]


def _container(docs: dict[str, Any], name: str) -> dict[str, Any]:
    return next(c for c in _pod(docs)["containers"] if c["name"] == name)


def test_no_readiness_probe_and_liveness_only_on_health(docs) -> None:
    pod = _pod(docs)
    assert all("readinessProbe" not in c for c in pod["containers"]
               if c["name"] != "cassandra")  # the pod's readiness is Cassandra's alone
    agent = _container(docs, "casscade-publisher")
    probe = agent["livenessProbe"]["httpGet"]
    ports = {p["name"]: p["containerPort"] for p in agent["ports"]}
    assert probe["path"] == "/health" and ports[probe["port"]] == 8000
    live = agent["livenessProbe"]
    # /health turns 503 after 30 s without a turn of the loop or of a wait for Kafka: a
    # restart needs several misses beyond that
    assert live["periodSeconds"] * live["failureThreshold"] >= 60, live


def test_the_agent_may_delete_from_cdc_raw(docs) -> None:
    pod = _pod(docs)
    ctx = pod["securityContext"]
    assert ctx["fsGroup"] == ctx["runAsGroup"] and ctx["runAsUser"], ctx
    agent = _container(docs, "casscade-publisher")
    assert agent["securityContext"]["allowPrivilegeEscalation"] is False
    mounts = {m["name"]: m["mountPath"] for m in agent["volumeMounts"]}
    cassandra_mounts = {m["name"]: m["mountPath"]
                        for m in _container(docs, "cassandra")["volumeMounts"]}
    assert mounts["data"] == cassandra_mounts["data"]
    assert pod["terminationGracePeriodSeconds"] > AGENT_DRAIN_S


def test_cassandra_gets_the_shipped_cdc_settings(docs) -> None:
    env = {e["name"]: e.get("value", "") for e in _container(docs, "cassandra")["env"]}
    flags = dict(f.removeprefix("-D").split("=", 1) for f in env["JVM_EXTRA_OPTS"].split())
    assert flags.pop("cassandra.config.allow_system_properties") == "true"
    given = {k.removeprefix("cassandra.settings."): v for k, v in flags.items()}
    shipped = {k: str(v).lower() if isinstance(v, bool) else str(v)
               for k, v in yaml.safe_load(CDC_SETTINGS.read_text()).items()}
    assert given == shipped


def test_the_agent_config_reads_that_cdc_raw(docs, tmp_path) -> None:
    config = tmp_path / "publisher.yaml"
    config.write_text(docs["ConfigMap"]["data"]["publisher.yaml"])
    cfg = load(PublisherConfig, config, env={})
    shipped = yaml.safe_load(CDC_SETTINGS.read_text())
    assert str(cfg.cdc.cdc_raw) == shipped["cdc_raw_directory"]
    assert cfg.http.host == "0.0.0.0" and cfg.http.port == 8000  # scraped in the cluster
    state = str(cfg.state.path)
    data = {m["mountPath"] for m in _container(docs, "casscade-publisher")["volumeMounts"]
            if m["name"] == "data"}
    assert any(state.startswith(d + "/") for d in data), state  # survives a restart


def test_the_sidecar_runs_the_publisher_image_of_this_version(docs) -> None:
    """deploy/images builds casscade-publisher:<pyproject's version>: the manifest names it."""
    import tomllib

    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert _container(docs, "casscade-publisher")["image"] == f"casscade-publisher:{version}"
