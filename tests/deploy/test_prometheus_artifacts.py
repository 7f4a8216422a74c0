"""The alerts and the dashboard as shipped: one source (the chart's files/), the same in
manifests/prometheus/ and in the chart's PrometheusRule and ConfigMap, the rules valid for
Prometheus' own `promtool` and each alert firing in its scenario only (tests/deploy/alerts/)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.deploy import prometheus_artifacts as artifacts
from tests.deploy import support
from tests.deploy.support import find

PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(
    PROMTOOL is None, reason="promtool not installed (Debian's prometheus package; .ci/run "
    "installs it)")

ALERTS = [rule["alert"] for group in artifacts.rule_groups()["groups"]
          for rule in group["rules"] if "alert" in rule]


def test_manifests_are_generated_from_the_charts_files() -> None:
    for path, text in artifacts.expected_manifests().items():
        assert path.read_text() == text, (
            f"{path.name} differs from the chart's files: run "
            "`python -m tests.deploy.prometheus_artifacts`")


def test_the_prometheus_rule_manifest_holds_the_rule_groups() -> None:
    rule = yaml.safe_load(artifacts.RULE_MANIFEST.read_text())
    assert (rule["apiVersion"], rule["kind"]) == ("monitoring.coreos.com/v1", "PrometheusRule")
    assert rule["spec"] == artifacts.rule_groups()


def test_every_failure_mode_has_an_alert() -> None:
    assert set(ALERTS) == {
        "KubePySchedulerDown", "KubePySchedulerNoLeader", "KubePySchedulerSchedulingErrors",
        "KubePySchedulerPodsPendingTooLong", "KubePySchedulerAttemptsPerPodGrowing",
        "KubePySchedulerExtenderFailures", "KubePySchedulerBindingSlow",
        "KubePySchedulerBindingErrors"}
    for group in artifacts.rule_groups()["groups"]:
        for rule in group["rules"]:
            assert rule["labels"]["severity"] in ("critical", "warning"), rule["alert"]
            assert {"summary", "description", "runbook_url"} <= set(rule["annotations"])
            # Only this scheduler's targets: kube-scheduler exports the same names.
            assert 'job=~".*kube-py-scheduler.*"' in rule["expr"], rule["alert"]


@needs_promtool
def test_promtool_checks_the_rules() -> None:
    done = subprocess.run([str(PROMTOOL), "check", "rules", str(artifacts.ALERTS)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"SUCCESS: {len(ALERTS)} rules found" in done.stdout


@needs_promtool
def test_each_alert_fires_in_its_scenario_and_not_otherwise() -> None:
    scenarios = sorted(artifacts.PROMTOOL_TESTS.glob("*.yaml"))
    done = subprocess.run([str(PROMTOOL), "test", "rules", *map(str, scenarios)],
                          capture_output=True, text=True, timeout=120,
                          cwd=artifacts.PROMTOOL_TESTS)
    assert done.returncode == 0, done.stdout + done.stderr
    # Every alert is tested firing and silent.
    tests = [t for path in scenarios for t in yaml.safe_load(path.read_text())["tests"]]
    checks = [c for t in tests for c in t["alert_rule_test"]]
    fired = {c["alertname"] for c in checks if c.get("exp_alerts")}
    silent = {c["alertname"] for c in checks if not c.get("exp_alerts")}
    assert fired == set(ALERTS) and silent == set(ALERTS)


@needs_promtool
def test_promtool_catches_a_broken_scenario(tmp_path: Path) -> None:
    """The scenarios can fail: one expecting the down alert while the scheduler is up."""
    broken = {
        "rule_files": [str(artifacts.ALERTS)],
        "evaluation_interval": "1m",
        "tests": [{"interval": "1m",
                   "input_series": [{"series": 'up{job="kube-py-scheduler-metrics"}',
                                     "values": "1x20"}],
                   "alert_rule_test": [{"eval_time": "15m", "alertname": "KubePySchedulerDown",
                                        "exp_alerts": [{"exp_labels": {"severity": "critical"}}]
                                        }]}],
    }
    path = tmp_path / "broken_test.yaml"
    path.write_text(yaml.safe_dump(broken))
    done = subprocess.run([str(PROMTOOL), "test", "rules", str(path)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and "FAILED" in done.stdout + done.stderr


def test_the_dashboard_has_the_panels_operators_look_for() -> None:
    dash = artifacts.dashboard()
    titles = " | ".join(p["title"] for p in dash["panels"]).lower()
    for topic in ("throughput", "attempt latency", "pending pods by queue",
                  "unschedulable pods by plugin", "preemption", "gangs", "binding", "extender"):
        assert topic in titles, topic
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids))
    for panel in dash["panels"]:
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            assert target["datasource"]["uid"] == "${datasource}"
    assert {v["name"] for v in dash["templating"]["list"]} == {"datasource", "job"}


def test_the_dashboard_configmap_is_for_grafanas_sidecar() -> None:
    cm = yaml.safe_load(artifacts.DASHBOARD_MANIFEST.read_text())
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(cm["data"]["kube-py-scheduler.json"]) == artifacts.dashboard()
    assert support.errors(cm) == []


def test_the_chart_ships_both_when_asked_and_neither_by_default() -> None:
    assert not [o for o in support.render({}) if o["kind"] == "PrometheusRule"
                or "grafana_dashboard" in (o["metadata"].get("labels") or {})]
    objs = support.render({"prometheusRule": {"enabled": True, "labels": {"release": "prom"}},
                           "grafanaDashboard": {"enabled": True, "namespace": "monitoring"}})
    rule = find(objs, "PrometheusRule")
    assert rule["spec"] == artifacts.rule_groups()
    assert rule["metadata"]["labels"]["release"] == "prom"
    cm = find(objs, "ConfigMap", f"{rule['metadata']['name']}-dashboard")
    assert cm["metadata"]["namespace"] == "monitoring"
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(cm["data"]["kube-py-scheduler.json"]) == artifacts.dashboard()
    assert support.errors(cm) == []


def test_the_docs_chart_values_turn_everything_on() -> None:
    from tests.docs.markdown import section_blocks

    (block,) = section_blocks("With the chart", lang="yaml", page="docs/metrics.md")
    values = yaml.safe_load(block.text)
    objs = support.render(values)
    sm = find(objs, "ServiceMonitor")
    rule = find(objs, "PrometheusRule")
    assert sm["metadata"]["labels"]["release"] == rule["metadata"]["labels"]["release"] == "prom"
    assert rule["spec"] == artifacts.rule_groups()
    (dashboard,) = [o for o in objs if o["kind"] == "ConfigMap"
                    and (o["metadata"].get("labels") or {}).get("grafana_dashboard") == "1"]
    assert dashboard["metadata"]["namespace"] == "monitoring"
    bindings = [o for o in objs if o["kind"] == "ClusterRoleBinding"
                and o["roleRef"]["name"].endswith("metrics-reader")]
    assert [s for b in bindings for s in b["subjects"]] == values["metrics"]["readers"]
