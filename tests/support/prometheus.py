"""A real Prometheus on loopback for the tests (Debian's `prometheus` package)."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

from support.paths import ROOT
from support.services import free_port

RULES = ROOT / "deploy" / "monitoring" / "alerts.yml"
SCRAPE_CONFIG = ROOT / "deploy" / "monitoring" / "prometheus.yml"


def binary(name: str) -> str:
    """The path of `prometheus` or `promtool`; fails loudly when it is not installed."""
    path = shutil.which(name)
    assert path is not None, (f"{name} is not installed: Debian's prometheus package has it "
                              "(apt-get install prometheus; .ci/run installs it)")
    return path


@contextmanager
def prometheus(workdir: Path, jobs: dict[str, list[str]]) -> Iterator[str]:
    """Prometheus scraping `jobs` (job name → host:port targets) every second, with the
    shipped alert rules loaded; yields its base URL, stopped after."""
    workdir.mkdir(parents=True, exist_ok=True)
    shutil.copy(RULES, workdir / "alerts.yml")
    config = {"global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
              "rule_files": ["alerts.yml"],
              "scrape_configs": [{"job_name": job, "static_configs": [{"targets": targets}]}
                                 for job, targets in jobs.items()]}
    with _running(workdir, config) as url:
        yield url


@contextmanager
def shipped_prometheus(workdir: Path, targets: dict[str, list[str]],
                       rules_text: str | None = None) -> Iterator[str]:
    """Prometheus with deploy/monitoring/prometheus.yml as shipped, but each job's
    placeholder targets replaced by `targets` (job name → host:port, as an operator puts
    in their own) and the intervals made 1 s (a test's patience); `rules_text`: alerts.yml
    as given (default the shipped file). Yields its base URL."""
    workdir.mkdir(parents=True, exist_ok=True)
    config = yaml.safe_load(SCRAPE_CONFIG.read_text())
    config["global"].update(scrape_interval="1s", evaluation_interval="1s")
    for job in config["scrape_configs"]:
        job["static_configs"] = [{"targets": targets[job["job_name"]]}]
    (workdir / "alerts.yml").write_text(rules_text or RULES.read_text())
    assert config["rule_files"] == ["alerts.yml"], config["rule_files"]
    with _running(workdir, config) as url:
        yield url


@contextmanager
def _running(workdir: Path, config: dict[str, Any]) -> Iterator[str]:
    """Prometheus on loopback with `config` (written to workdir/prometheus.yml)."""
    (workdir / "prometheus.yml").write_text(yaml.safe_dump(config))
    port = free_port()
    log = (workdir / "prometheus.log").open("wb")
    proc = subprocess.Popen([binary("prometheus"), f"--config.file={workdir / 'prometheus.yml'}",
                             f"--storage.tsdb.path={workdir / 'data'}",
                             f"--web.listen-address=127.0.0.1:{port}"],
                            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, (workdir / "prometheus.log").read_text()[-2000:]
            try:
                with urllib.request.urlopen(f"{url}/-/ready", timeout=1) as resp:
                    if resp.status == 200:
                        break
            except OSError:
                pass
            assert time.monotonic() < deadline, "Prometheus did not get ready in 60 s"
            time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        log.close()


def firing(url: str) -> set[str]:
    """The names of the alerts firing now."""
    return {r["metric"]["alertname"] for r in query(url, 'ALERTS{alertstate="firing"}')}


def query(url: str, promql: str) -> list[dict[str, Any]]:
    """The result vector of an instant query through Prometheus's HTTP API."""
    q = urllib.parse.urlencode({"query": promql})
    with urllib.request.urlopen(f"{url}/api/v1/query?{q}", timeout=10) as resp:
        body = json.load(resp)
    assert body["status"] == "success", body
    return body["data"]["result"]


def rules(url: str) -> list[str]:
    """The names of the alerting rules Prometheus loaded."""
    with urllib.request.urlopen(f"{url}/api/v1/rules", timeout=10) as resp:
        body = json.load(resp)
    return [r["name"] for g in body["data"]["groups"] for r in g["rules"]]
