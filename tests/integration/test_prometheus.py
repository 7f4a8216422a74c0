"""A Prometheus nobody here wrote scrapes the scheduler as we tell users to.

One run per module: the sandbox API server (TokenReview and SubjectAccessReview on), the
scheduler daemon with the shipped configuration (Coscheduling profile, leader election) and
the example HTTP extender, and Debian's ``prometheus`` scraping /metrics over HTTPS with a
bearer token exactly as manifests/prometheus/servicemonitor.yaml configures it, every second,
with our alert rules loaded. A workload of plain pods, pods that fit nowhere, a gang, an
incomplete gang, a preemption and a pod the extender turns away runs once; the tests then ask
Prometheus' HTTP API: the documented series with the values the cluster shows, every dashboard
query parsing and returning data, the rules loaded and healthy. The dashboard's PNG in the docs
is drawn from this run (``REGENERATE_DOCS_IMAGES=1`` rewrites it).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from scheduler.sandbox.testing import SandboxProcess
from tests.deploy import prometheus_artifacts as artifacts
from tests.integration.harness import user_client
from tests.integration.procs import (
    MANIFESTS,
    REPO,
    SchedulerProcess,
    configmap_config_text,
    create_pod_group,
    gang_pod,
    install_crd,
    pod_group,
)
from tests.integration.prometheus import (
    PROMETHEUS,
    PrometheusProcess,
    scrape_config_from_service_monitor,
)

pytestmark = pytest.mark.skipif(
    PROMETHEUS is None,
    reason="prometheus not installed (Debian's prometheus package; .ci/run installs it)")

TOKEN = "scraper-token"
# The sandbox's TokenReview knows the token as user "prometheus" (group "monitoring"); its
# SubjectAccessReview lets that user get /metrics, as the metrics-reader ClusterRole does.
AUTH_FLAGS = ["--auth-user", f"{TOKEN}=prometheus:monitoring",
              "--auth-allow", "prometheus:get:/metrics"]
JOB = "kube-py-scheduler-metrics"  # the Service's name: the job label the operator sets
EXAMPLE_EXTENDER = REPO / "examples" / "extenders" / "gpu_model_extender.py"
DOCS_METRICS = REPO / "docs" / "metrics.md"
PNG = REPO / "docs" / "img" / "dashboard.png"

PLAIN = [f"plain-{i}" for i in range(12)]
TOO_BIG = ["too-big-0", "too-big-1"]
GANG = [f"gang-{i}" for i in range(3)]
INCOMPLETE_GANG = [f"lonely-{i}" for i in range(2)]
FILLERS = [f"filler-{i}" for i in range(3)]
GPU_POD = "wants-tpu"
REGENERATE = os.environ.get("REGENERATE_DOCS_IMAGES") == "1"
# Seconds between the workload's phases: apart on the dashboard's graphs when the docs'
# picture is drawn; otherwise one scrape interval is all the assertions need.
PHASE_PAUSE = 4.0 if REGENERATE else 1.0
INTRUDER = "intruder"  # a second job on the same target with a token the API server refuses


@dataclass
class Run:
    prometheus: PrometheusProcess
    scheduler: SchedulerProcess
    exposition: str  # /metrics as scraped with the token at the end of the run
    started: float
    ended: float
    bound: dict[str, str] = field(default_factory=dict)  # pod -> node, at the end
    pending: list[str] = field(default_factory=list)
    victims: list[str] = field(default_factory=list)


def _service_monitor_endpoint() -> dict[str, Any]:
    (sm,) = [d for d in yaml.safe_load_all((MANIFESTS / "prometheus" / "servicemonitor.yaml")
                                           .read_text()) if d]
    (endpoint,) = sm["spec"]["endpoints"]
    return dict(endpoint)


def _scheduler_config(extender_url: str) -> str:
    config = yaml.safe_load(configmap_config_text())
    config["extenders"] = [{"urlPrefix": extender_url, "filterVerb": "filter",
                            "prioritizeVerb": "prioritize", "weight": 1}]
    return str(yaml.safe_dump(config))


def _start_extender() -> tuple[subprocess.Popen[bytes], str]:
    proc = subprocess.Popen([sys.executable, str(EXAMPLE_EXTENDER), "--port", "0"],
                            stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, cwd=REPO)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    try:
        return proc, str(json.loads(line)["ready"])
    except (ValueError, KeyError) as exc:
        proc.kill()
        raise AssertionError(f"the example extender did not start: {line!r}") from exc


async def _wait(predicate: Any, *, timeout: float, what: str, log: Any) -> None:
    deadline = time.monotonic() + timeout
    while not await predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}; scheduler "
                                 f"log:\n{log()}")
        await asyncio.sleep(0.1)


async def _workload(kubeconfig: Path, scheduler: SchedulerProcess, run: Run) -> None:
    from tests.builders import PodBuilder
    from tests.integration.harness import for_api

    async with user_client(kubeconfig) as cluster:
        async def node_of(name: str) -> str:
            return await cluster.node_name(name)

        async def all_bound(names: list[str]) -> bool:
            return all([await node_of(n) for n in names])

        # Fillers first (3 CPUs on each 4-CPU node), then the rest, then a preemptor.
        await cluster.create_pods([gang_pod(n, None, cpu="3", priority=0) for n in FILLERS])
        await _wait(lambda: all_bound(FILLERS), timeout=60, what="fillers bound",
                    log=scheduler.log_tail)
        await asyncio.sleep(PHASE_PAUSE)
        await cluster.create_pods([gang_pod(n, None, cpu="50m") for n in PLAIN])
        await cluster.create_pods([gang_pod(n, None, cpu="100") for n in TOO_BIG])
        await create_pod_group(cluster.client, pod_group("gang", 3))
        await cluster.create_pods([gang_pod(n, "gang", cpu="50m") for n in GANG])
        await create_pod_group(cluster.client, pod_group("lonely", 3))
        await cluster.create_pods([gang_pod(n, "lonely", cpu="50m") for n in INCOMPLETE_GANG])
        await cluster.create_pod(for_api(
            PodBuilder(GPU_POD).scheduler_name("py-scheduler").req(cpu="50m")
            .annotations({"example.com/gpu-model": "tpu-v5"}).obj()))
        await _wait(lambda: all_bound(PLAIN + GANG), timeout=90, what="plain and gang pods bound",
                    log=scheduler.log_tail)
        await asyncio.sleep(PHASE_PAUSE)
        await cluster.create_pod(gang_pod("vip", None, cpu="3", priority=1000))
        await _wait(lambda: all_bound(["vip"]), timeout=90, what="vip bound after preemption",
                    log=scheduler.log_tail)
        pods = [p for p in await cluster.list_pods("default")
                if p["spec"].get("schedulerName") == "py-scheduler"]
        live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
        run.bound = {p["metadata"]["name"]: p["spec"]["nodeName"] for p in live
                     if p["spec"].get("nodeName")}
        run.pending = sorted(p["metadata"]["name"] for p in live if not p["spec"].get("nodeName"))
        run.victims = sorted(set(FILLERS) - set(run.bound))


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    tmp = tmp_path_factory.mktemp("prometheus-run")
    extender, extender_url = _start_extender()
    sandbox = SandboxProcess(nodes=3, node_cpu="4", node_memory="16Gi", extra_args=AUTH_FLAGS)
    scheduler: SchedulerProcess | None = None
    prometheus: PrometheusProcess | None = None
    try:
        sandbox.start()

        async def prepare() -> None:
            async with user_client(sandbox.kubeconfig_path) as cluster:
                await cluster.client.create("/api/v1/namespaces", {
                    "apiVersion": "v1", "kind": "Namespace",
                    "metadata": {"name": "kube-py-scheduler"}})
                await install_crd(cluster.client)
        asyncio.run(prepare())
        config = tmp / "config.yaml"
        config.write_text(_scheduler_config(extender_url))
        scheduler = SchedulerProcess(kubeconfig=sandbox.kubeconfig_path, config=config,
                                     identity="prom", namespace="kube-py-scheduler",
                                     scheme="https").start()
        port = scheduler.wait_port()
        token_file = tmp / "token"  # the service account token Prometheus' pod would mount
        token_file.write_text(TOKEN)
        scrape = scrape_config_from_service_monitor(
            _service_monitor_endpoint(), job=JOB, target=f"127.0.0.1:{port}",
            token_file=token_file)
        intruder_token = tmp / "intruder-token"
        intruder_token.write_text("not-a-token")
        intruder = scrape_config_from_service_monitor(
            _service_monitor_endpoint(), job=INTRUDER, target=f"127.0.0.1:{port}",
            token_file=intruder_token)
        prometheus = PrometheusProcess(
            {"global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
             "scrape_configs": [scrape, intruder]},
            rule_files={"alerts.yaml": artifacts.ALERTS.read_text()}).start()
        # Prometheus hands new targets to its scrapers every 5 s: the workload starts once the
        # scheduler has been scraped.
        _wait_scraped(prometheus, since=0.0, scheduler=scheduler)
        started = time.time()
        result = Run(prometheus=prometheus, scheduler=scheduler, exposition="",
                     started=started, ended=0.0)
        asyncio.run(_workload(sandbox.kubeconfig_path, scheduler, result))
        # Settle: the unschedulable pods' retries done, then a scrape.
        time.sleep(PHASE_PAUSE)
        _wait_scraped(prometheus, since=time.time(), scheduler=scheduler)
        import ssl
        ctx = ssl.create_default_context()
        ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
        status, result.exposition = scheduler.get("/metrics", token=TOKEN, context=ctx)
        assert status == 200, result.exposition
        result.ended = time.time()
        yield result
    finally:
        if prometheus is not None:
            prometheus.stop()
        if scheduler is not None:
            scheduler.stop()
        sandbox.stop()
        extender.terminate()
        extender.wait(10)


def _wait_scraped(prometheus: PrometheusProcess, *, since: float,
                  scheduler: SchedulerProcess, timeout: float = 30) -> None:
    """Until Prometheus has scraped the scheduler successfully after ``since`` (twice)."""
    deadline = time.monotonic() + timeout
    while True:
        targets = prometheus.api("targets")["activeTargets"]
        ours = [t for t in targets if t["labels"].get("job") == JOB]
        if ours and ours[0]["health"] == "up":
            from datetime import datetime
            last = datetime.fromisoformat(ours[0]["lastScrape"].replace("Z", "+00:00"))
            if last.timestamp() > since + 1.0:
                return
        if time.monotonic() > deadline:
            raise AssertionError(f"Prometheus did not scrape the scheduler: {ours}\n"
                                 f"Prometheus log:\n{prometheus.log_tail()}\n"
                                 f"scheduler log:\n{scheduler.log_tail()}")
        time.sleep(0.2)


# --- the scrape itself ---------------------------------------------------------------------


def test_prometheus_scrapes_over_https_with_the_bearer_token(run: Run) -> None:
    (target,) = [t for t in run.prometheus.api("targets")["activeTargets"]
                 if t["labels"]["job"] == JOB]
    assert target["health"] == "up", target["lastError"]
    assert target["scrapeUrl"].startswith("https://127.0.0.1:")
    assert target["scrapeUrl"].endswith("/metrics")
    assert run.prometheus.value(f'up{{job="{JOB}"}}') == 1.0


def test_a_scrape_without_the_token_is_refused(run: Run) -> None:
    """The same scrape with a token the API server does not know (a second job of the run's
    Prometheus): down, with a 401."""
    deadline = time.monotonic() + 30
    targets: list[dict[str, Any]] = []
    while time.monotonic() < deadline:
        targets = [t for t in run.prometheus.api("targets")["activeTargets"]
                   if t["labels"]["job"] == INTRUDER]
        if targets and targets[0]["health"] == "down":
            break
        time.sleep(0.2)
    (target,) = targets
    assert target["health"] == "down", target
    assert "401" in target["lastError"], target["lastError"]


# --- the documented series, with the values the cluster shows -------------------------------


def _documented_series() -> list[str]:
    """Every series name docs/metrics.md lists in its reference tables."""
    text = DOCS_METRICS.read_text()
    return sorted(set(re.findall(
        r"^\| `((?:scheduler|rest_client|leader_election|process)_[a-z_]+)`", text, re.M)))


def _exported_families(exposition: str) -> dict[str, str]:
    """name -> type, from the exposition's TYPE lines (labelled metrics with no child yet
    still declare themselves there)."""
    return dict(re.findall(r"^# TYPE (\S+) (\S+)$", exposition, re.M))


def test_every_documented_series_is_exported_and_every_exported_one_documented(run: Run) -> None:
    documented = _documented_series()
    assert len(documented) > 20, "docs/metrics.md lists the series in tables"
    exported = set(_exported_families(run.exposition))  # a counter's TYPE names its _total
    assert set(documented) == exported, (
        "add the new series to docs/metrics.md's tables (or drop the stale rows): "
        f"undocumented {sorted(exported - set(documented))}, "
        f"not exported {sorted(set(documented) - exported)}")


def test_prometheus_knows_the_documented_series(run: Run) -> None:
    """Each documented series the scrape carried samples of, as Prometheus stored it (a
    histogram by its _count). A labelled series nothing has counted yet (no Event dropped, no
    batch flushed in this short run) has no samples to store: at least one each of the
    others."""
    families = _exported_families(run.exposition)
    with_samples = {line.split("{")[0].split(" ")[0]
                    for line in run.exposition.splitlines() if line and line[0] != "#"}
    stored_missing, unsampled = [], []
    for name in _documented_series():
        stored = name + "_count" if families.get(name) == "histogram" else name
        if stored not in with_samples:
            unsampled.append(name)
            continue
        if not run.prometheus.query(f'count({{__name__="{stored}", job="{JOB}"}})'):
            stored_missing.append(stored)
    assert stored_missing == [], f"scraped but not in Prometheus: {stored_missing}"
    # this run has no device with binding conditions: PreBind never waits for them
    unsampled = [n for n in unsampled if n not in NOT_EXERCISED]
    assert len(unsampled) <= 3, f"the run exercises too little: no samples of {unsampled}"


NOT_EXERCISED = frozenset({"scheduler_dra_bindingconditions_allocations_total",
                           "scheduler_dra_bindingconditions_wait_duration_seconds"})


def _eventually(run: Run, expr: str, expected: float, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    seen = []
    while True:
        seen.append(run.prometheus.value(expr))
        if seen[-1] == expected:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"{expr}: expected {expected}, Prometheus said {seen[-10:]}")
        time.sleep(0.5)


def _v(run: Run, expr: str) -> float:
    value = run.prometheus.value(expr)
    assert value is not None, f"{expr}: no data"
    return value


def test_values_match_what_was_scheduled(run: Run) -> None:
    j = f'job="{JOB}"'
    scheduled = len(run.bound) + len(run.victims)  # every pod bound, preempted ones too
    assert run.victims, "vip preempted a filler"
    assert sorted(run.pending) == sorted(TOO_BIG + INCOMPLETE_GANG + [GPU_POD])
    checks = {
        f'sum(scheduler_schedule_attempts_total{{{j}, result="scheduled"}})': scheduled,
        f"sum(scheduler_pod_scheduling_attempts_count{{{j}}})": scheduled,
        f'sum(scheduler_py_bind_requests_total{{{j}, result="success"}})': scheduled,
        f'sum(scheduler_schedule_attempts_total{{{j}, result="error"}}) or vector(0)': 0,
        f"sum(scheduler_preemption_victims_sum{{{j}}})": len(run.victims),
        f'max(leader_election_master_status{{{j}, name="py-scheduler"}})': 1,
    }
    got = {expr: _v(run, expr) for expr in checks}
    assert got == {expr: float(v) for expr, v in checks.items()}
    # Gauges move while the pending pods are retried (a pod being tried is in no queue):
    # what the queue holds between attempts.
    _eventually(run, f"sum(scheduler_pending_pods{{{j}}})", len(run.pending))
    _eventually(run, f'sum(scheduler_inflight_events{{{j}, event="PodPopped"}})', 0)
    # Counted at least once per pod and per bind, besides the lease, reviews and events.
    assert _v(run, f'sum(rest_client_requests_total{{{j}, method="POST", code="201"}})') \
        >= scheduled
    assert _v(run, f'sum(scheduler_unschedulable_pods{{{j}, plugin="NodeResourcesFit"}})') \
        >= len(TOO_BIG)
    assert _v(run, f"sum(scheduler_preemption_attempts_total{{{j}}})") >= 1
    assert _v(run, f'sum(scheduler_py_extender_requests_total{{{j}, verb="filter", '
                   f'result="success"}})') >= 1
    assert _v(run, f"sum(scheduler_scheduling_algorithm_duration_seconds_count{{{j}}})") \
        >= scheduled
    assert _v(run, f'sum(scheduler_event_handling_duration_seconds_count{{{j}, '
                   f'event="AssignedPodAdd"}})') >= len(run.bound)
    start = _v(run, f"process_start_time_seconds{{{j}}}")
    assert run.started - 120 < start < run.started


# --- the dashboard's queries -----------------------------------------------------------------


def _selector_names(expr: str) -> set[str]:
    return set(re.findall(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\{", expr))


@pytest.mark.parametrize(("title", "expr"), artifacts.panel_queries(),
                         ids=[f"{t}:{i}" for i, (t, _) in enumerate(artifacts.panel_queries())])
def test_every_dashboard_query_parses_names_exported_series_and_returns_data(
    run: Run, title: str, expr: str
) -> None:
    families = _exported_families(run.exposition)
    samples = set()
    for name, kind in families.items():
        samples |= ({name + s for s in ("_bucket", "_count", "_sum")} if kind == "histogram"
                    else {name})
    unknown = _selector_names(expr) - samples
    assert not unknown, f"{title}: names series the scheduler does not export: {unknown}"
    # Evaluated at the end of the run (rates over the last minute, which holds the workload).
    result = run.prometheus.api("query", query=artifacts.concrete(expr),
                                time=f"{run.ended:.3f}")["result"]  # raises on a parse error
    assert result, f"{title}: {expr} returned no data from the run"


def test_a_query_that_does_not_parse_fails_with_prometheus_reason(run: Run) -> None:
    from tests.integration.prometheus import PrometheusError

    with pytest.raises(PrometheusError, match="bad_data"):
        run.prometheus.query("sum(rate(scheduler_schedule_attempts_total[1m])")


# --- the alert rules in a real Prometheus ------------------------------------------------------


def test_the_alert_rules_load_and_evaluate_and_none_fires_on_a_healthy_run(run: Run) -> None:
    groups = run.prometheus.api("rules")["groups"]
    rules = [r for g in groups for r in g["rules"]]
    assert {r["name"] for r in rules} == {
        rule["alert"] for g in artifacts.rule_groups()["groups"] for rule in g["rules"]}
    assert all(r["health"] == "ok" for r in rules), [(r["name"], r.get("lastError"))
                                                      for r in rules]
    firing = [a for a in run.prometheus.api("alerts")["alerts"] if a["state"] == "firing"]
    assert firing == []


# --- the picture in the docs -------------------------------------------------------------------


def test_the_dashboard_picture_is_drawn_from_this_run(run: Run, tmp_path: Path) -> None:
    from tests.integration.dashboard_png import MAIN_PANELS, draw

    out = PNG if REGENERATE else tmp_path / "dashboard.png"
    drawn = draw(run.prometheus, start=run.started, end=run.ended, out=out)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert set(drawn) == {title for title, _ in MAIN_PANELS}
    assert all(drawn.values()), f"panels without data: {drawn}"
    assert PNG.exists(), "docs/img/dashboard.png: run with REGENERATE_DOCS_IMAGES=1"
