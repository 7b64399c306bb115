"""The shipped monitoring files, checked with Prometheus's own tools: every alert rule's
unit tests (`promtool test rules`), the scrape config, and the dashboard's queries naming
only metrics the stages export."""

from __future__ import annotations

import json
import re
import subprocess

from support.paths import ROOT
from support.prometheus import binary

MONITORING = ROOT / "deploy" / "monitoring"


def _promtool(*args: str) -> str:
    out = subprocess.run([binary("promtool"), *args], cwd=MONITORING, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout + out.stderr


def test_every_alert_rule_passes_its_promtool_tests() -> None:
    said = _promtool("test", "rules", "alerts_test.yml")
    assert "SUCCESS" in said
    tested = set(re.findall(r"alertname: (\w+)", (MONITORING / "alerts_test.yml").read_text()))
    rules = set(re.findall(r"- alert: (\w+)", (MONITORING / "alerts.yml").read_text()))
    assert rules and tested == rules  # no rule without a test


def test_the_scrape_config_and_its_rules_are_valid() -> None:
    said = _promtool("check", "config", "prometheus.yml")
    rules = re.findall(r"- alert: (\w+)", (MONITORING / "alerts.yml").read_text())
    assert f"SUCCESS: {len(rules)} rules found" in said, said


def _exported() -> set[str]:
    """Every metric name the code registers (literal, or the materializer's _P +)."""
    names: set[str] = set()
    for path in (*ROOT.glob("publisher/**/*.py"), *ROOT.glob("materializer/**/*.py"),
                 *ROOT.glob("shared/**/*.py"), *ROOT.glob("casscade/**/*.py")):
        text = path.read_text()
        names |= set(re.findall(r'"(casscade_[a-z_]+)"', text))
        names |= {"casscade_materializer_" + n for n in re.findall(r'_P \+ "([a-z_]+)"', text)}
    return names


def test_rules_and_dashboard_name_only_exported_metrics() -> None:
    exported = _exported() | {"up"}
    histogram = {f"{n}_{s}" for n in exported for s in ("bucket", "sum", "count")}
    texts = [(MONITORING / "alerts.yml").read_text()]
    dashboard = json.loads((MONITORING / "grafana-dashboard.json").read_text())
    texts += [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    used = {m for text in texts for m in re.findall(r"\b(casscade_[a-z_]+|up)\b", text)}
    assert used - exported - histogram == set()
    assert {"casscade_materializer_freshness_seconds",
            "casscade_materializer_heartbeat_age_seconds",
            "casscade_publisher_cdc_raw_bytes"} <= exported
