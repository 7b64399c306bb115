"""The shipped scrape config and the shipped stage configs agree: each job of
deploy/monitoring/prometheus.yml scrapes the port its stage's shipped config serves on, and
that config listens where another host can reach it (not loopback only). The same for the
Kubernetes sidecar's annotations. A real Prometheus scraping them with these files runs in
tests/integration/monitoring/test_shipped_monitoring.py."""

from __future__ import annotations

import pytest
import yaml

from materializer.settings import MaterializerConfig
from publisher.settings import PublisherConfig
from shared.config import load

from support.paths import ROOT

DEPLOY = ROOT / "deploy"
STAGES = {"casscade-publisher": (PublisherConfig, DEPLOY / "publisher.yaml"),
          "casscade-materializer": (MaterializerConfig, DEPLOY / "materializer.yaml")}


def _targets() -> dict[str, list[str]]:
    doc = yaml.safe_load((DEPLOY / "monitoring" / "prometheus.yml").read_text())
    return {job["job_name"]: [t for c in job["static_configs"] for t in c["targets"]]
            for job in doc["scrape_configs"]}


@pytest.mark.parametrize("job", sorted(STAGES))
def test_each_scrape_job_meets_its_stage_where_the_shipped_config_serves(job: str) -> None:
    model, path = STAGES[job]
    http = load(model, path, (), env={}).http  # the file alone
    targets = _targets()[job]
    assert targets, f"prometheus.yml has no targets for {job}"
    assert {t.rsplit(":", 1)[1] for t in targets} == {str(http.port)}, (targets, path)
    assert http.port != 0, f"{path} turns its /metrics off"
    assert not http.host.startswith("127.") and http.host not in ("localhost", "::1"), \
        f"{path} listens on {http.host}: a scraper on another host cannot reach it"


def test_the_sidecar_is_scraped_at_the_port_its_agent_serves() -> None:
    docs = list(yaml.safe_load_all((DEPLOY / "k8s" / "publisher-sidecar.yaml").read_text()))
    config_map = next(d for d in docs if d["kind"] == "ConfigMap")
    (text,) = config_map["data"].values()
    http = yaml.safe_load(text)["http"]
    pod = next(d for d in docs if d["kind"] == "StatefulSet")["spec"]["template"]
    assert pod["metadata"]["annotations"]["prometheus.io/port"] == str(http["port"])
    assert http["host"] == "0.0.0.0"

