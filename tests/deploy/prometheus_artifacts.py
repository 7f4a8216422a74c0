"""The Prometheus Operator and Grafana objects of manifests/prometheus/, derived from their one
source in the chart (``files/alerts.yaml``, ``files/dashboard.json``).

``python -m tests.deploy.prometheus_artifacts`` rewrites them after the chart's files change;
``test_prometheus_artifacts`` fails while they differ.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
CHART_FILES = REPO / "deploy" / "helm" / "kube-py-scheduler" / "files"
ALERTS = CHART_FILES / "alerts.yaml"
DASHBOARD = CHART_FILES / "dashboard.json"
PROMETHEUS_MANIFESTS = REPO / "manifests" / "prometheus"
RULE_MANIFEST = PROMETHEUS_MANIFESTS / "prometheusrule.yaml"
DASHBOARD_MANIFEST = PROMETHEUS_MANIFESTS / "grafana-dashboard.yaml"
PROMTOOL_TESTS = REPO / "tests" / "deploy" / "alerts"

_RULE_HEAD = """\
# Optional (needs the Prometheus Operator): kube-py-scheduler's alerts, the rule groups of
# deploy/helm/kube-py-scheduler/files/alerts.yaml (docs/metrics.md explains each). Apply after
# the Prometheus Operator's CRDs; your Prometheus' ruleSelector must match its labels.
# Generated: python -m tests.deploy.prometheus_artifacts
apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata:
  name: kube-py-scheduler
  namespace: kube-py-scheduler
  labels:
    app.kubernetes.io/name: kube-py-scheduler
spec:
"""

_DASHBOARD_HEAD = """\
# Optional: kube-py-scheduler's Grafana dashboard (deploy/helm/kube-py-scheduler/files/
# dashboard.json), for the Grafana sidecar that loads ConfigMaps labelled grafana_dashboard: "1"
# (kube-prometheus-stack's default). Put it in the namespace the sidecar watches.
# Generated: python -m tests.deploy.prometheus_artifacts
apiVersion: v1
kind: ConfigMap
metadata:
  name: kube-py-scheduler-dashboard
  namespace: kube-py-scheduler
  labels:
    app.kubernetes.io/name: kube-py-scheduler
    grafana_dashboard: "1"
data:
  kube-py-scheduler.json: |
"""


def _indent(text: str, prefix: str) -> str:
    return "".join(prefix + line if line.strip() else line for line in text.splitlines(True))


def expected_manifests() -> dict[Path, str]:
    alerts = "".join(line for line in ALERTS.read_text().splitlines(True)
                     if not line.startswith("#"))
    return {
        RULE_MANIFEST: _RULE_HEAD + _indent(alerts, "  "),
        DASHBOARD_MANIFEST: _DASHBOARD_HEAD + _indent(DASHBOARD.read_text(), "    "),
    }


def rule_groups() -> dict[str, Any]:
    """The rules file (``groups:``) Prometheus and promtool load."""
    return dict(yaml.safe_load(ALERTS.read_text()))


def dashboard() -> dict[str, Any]:
    return dict(json.loads(DASHBOARD.read_text()))


def panel_queries() -> list[tuple[str, str]]:
    """(panel title, PromQL) of every target of every panel."""
    return [(panel["title"], target["expr"])
            for panel in dashboard()["panels"] for target in panel.get("targets", [])]


# Grafana's variables in the queries, as Grafana substitutes them for the scheduler's job(s).
GRAFANA_VARIABLES = {"$__rate_interval": "1m", "$job": ".*kube-py-scheduler.*"}


def concrete(expr: str) -> str:
    for name, value in GRAFANA_VARIABLES.items():
        expr = expr.replace(name, value)
    return expr


if __name__ == "__main__":
    for path, text in expected_manifests().items():
        path.write_text(text)
        print(f"wrote {path.relative_to(REPO)}")
