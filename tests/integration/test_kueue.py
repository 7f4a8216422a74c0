"""Kueue in front of this scheduler: the sandbox plays the API server, the test plays Kueue.

Kueue admits plain pods by removing its ``kueue.x-k8s.io/admission`` scheduling gate (and
``kueue.x-k8s.io/topology`` for topology-aware scheduling) in the same merge patch that injects
the flavor's node selector and tolerations, and preempts by deleting pods. Everything here goes
over HTTP, as Kueue's own requests would.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import generate_latest

from scheduler.metrics import SchedulerMetrics
from scheduler.sandbox import Sandbox
from tests.builders import NodeBuilder, PodBuilder
from tests.integration.harness import for_api, running_scheduler, user_client, wait_until

ADMISSION = "kueue.x-k8s.io/admission"
TOPOLOGY = "kueue.x-k8s.io/topology"
SCHEDULER = "py-scheduler"
POD = "/api/v1/namespaces/default/pods/{}"
GPU_TOLERATION = {"key": "pool", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}


def _nodes() -> list[dict[str, Any]]:
    plain = NodeBuilder("plain").capacity(cpu="8", memory="16Gi", pods=110).labels(pool="cpu")
    gpu = (NodeBuilder("gpu").capacity(cpu="8", memory="16Gi", pods=110).labels(pool="gpu")
           .taint("pool", "gpu"))
    return [plain.obj(), gpu.obj()]


def _workload(name: str, *gates: str) -> dict[str, Any]:
    b = (PodBuilder(name).scheduler_name(SCHEDULER).req(cpu="1", memory="1Gi")
         .labels({"kueue.x-k8s.io/managed": "true", "kueue.x-k8s.io/queue-name": "team-a"}))
    if gates:
        b.scheduling_gates(*gates)
    return for_api(b.obj())


def _sample(metrics: SchedulerMetrics, name: str, **labels: str) -> float:
    for family in metrics.registry.collect():
        for s in family.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                return float(s.value)
    return 0.0


def _attempts(metrics: SchedulerMetrics) -> float:
    return sum(s.value for f in metrics.registry.collect() for s in f.samples
               if s.name == "scheduler_schedule_attempts_total")


async def test_kueue_gate_inject_ungate_and_preempt(sandbox_factory: Any, tmp_path: Path) -> None:
    sb: Sandbox = await sandbox_factory(nodes=0, simulate_kubelet=False)
    kc = sb.write_kubeconfig(tmp_path / "kc")
    metrics = SchedulerMetrics()
    async with user_client(kc) as cluster, running_scheduler(kc, metrics=metrics) as parts:
        for node in _nodes():
            await cluster.create_node(for_api(node))
        api = cluster.client
        # Kueue's webhook gates the pods at creation; a TAS pod carries both gates.
        await cluster.create_pod(_workload("job-a-0", ADMISSION))
        await cluster.create_pod(_workload("job-t-0", ADMISSION, TOPOLOGY))
        # A plain pod created after them is bound: the gated ones were never popped before it.
        await cluster.create_pod(_workload("plain"))
        await wait_until(lambda: cluster.node_name("plain"), message="the ungated pod bound")
        assert _attempts(metrics) == 1
        assert _sample(metrics, "scheduler_pending_pods", queue="gated") == 2
        assert b"scheduler_pending_pods{queue=\"gated\"} 2.0" in generate_latest(metrics.registry)
        assert [e for e in await cluster.events_for("job-a-0") if e["reason"] == "FailedScheduling"] == []

        # Admission: one merge patch removes the gate and injects the flavor's node selector
        # and toleration (KEP-3838 lets a gated pod gain them).
        admitted = await api.patch(POD.format("job-a-0"), {"spec": {
            "schedulingGates": None, "nodeSelector": {"pool": "gpu"}, "tolerations": [GPU_TOLERATION]}},
            patch_type="merge")
        assert admitted["spec"]["nodeSelector"] == {"pool": "gpu"}
        await wait_until(lambda: cluster.node_name("job-a-0"), timeout=5, message="admitted pod bound")
        # the injected selector and toleration decide the node: only the tainted gpu node fits
        assert await cluster.node_name("job-a-0") == "gpu"

        # TAS: the topology gate goes last; removing only the admission gate leaves it gated.
        await api.patch(POD.format("job-t-0"), {"spec": {
            "schedulingGates": [{"name": TOPOLOGY}], "nodeSelector": {"pool": "gpu"},
            "tolerations": [GPU_TOLERATION]}}, patch_type="merge")
        await cluster.create_pod(_workload("plain-2"))
        await wait_until(lambda: cluster.node_name("plain-2"), message="second ungated pod bound")
        assert await cluster.node_name("job-t-0") == ""
        assert _sample(metrics, "scheduler_pending_pods", queue="gated") == 1
        await api.patch(POD.format("job-t-0"), {"spec": {"schedulingGates": None}}, patch_type="merge")
        await wait_until(lambda: cluster.node_name("job-t-0"), timeout=5, message="last gate removed: bound")
        assert await cluster.node_name("job-t-0") == "gpu"
        assert _sample(metrics, "scheduler_pending_pods", queue="gated") == 0
        assert _attempts(metrics) == 4

        # Preemption: Kueue deletes the workload's pods (bound and still gated alike).
        await cluster.create_pod(_workload("job-b-0", ADMISSION))
        await wait_until(lambda: _sample(metrics, "scheduler_pending_pods", queue="gated") == 1,
                         message="job-b-0 gated")
        for name in ("job-a-0", "job-t-0", "job-b-0"):
            await cluster.delete_pod(name)
        cache = parts.scheduler.cache
        await wait_until(lambda: cache.pod_count() == 2, message="deleted pods gone from the cache")
        assert sorted(k for keys in cache.dump().nodes.values() for k in keys) == [
            "default/plain", "default/plain-2"]
        assert cache.dump().nodes["gpu"] == [] and cache.assumed_pod_count() == 0
        await wait_until(lambda: not any(parts.scheduler.queue.pending_pods().values()),
                         message="nothing left queued")
        assert _sample(metrics, "scheduler_pending_pods", queue="gated") == 0


PAGE = "docs/kueue.md"
REPO = Path(__file__).resolve().parents[2]
_FENCE = re.compile(r'^```(?P<lang>\w*)(?:\s+title="(?P<title>[^"]+)")?\s*$')


def section_blocks(page: str, section: str) -> list[tuple[str, str | None, str]]:
    """(language, title, text) of the fenced blocks under ``## section`` of a docs page."""
    out: list[tuple[str, str | None, str]] = []
    current, fence, body = "", None, []
    for line in (REPO / page).read_text().splitlines():
        if fence is not None:
            if line.strip() == "```":
                if current == section:
                    out.append((fence.group("lang"), fence.group("title"), "\n".join(body) + "\n"))
                fence, body = None, []
            else:
                body.append(line)
        elif (m := _FENCE.match(line.strip())) is not None:
            fence = m
        elif line.startswith("#"):
            current = line.lstrip("#").strip()
    return out


async def _sh(script: str, *, cwd: Path, kubeconfig: Path) -> str:
    proc = await asyncio.create_subprocess_exec(
        "bash", "-euo", "pipefail", "-c", script, cwd=cwd,
        env={**os.environ, "KUBECONFIG": str(kubeconfig)},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), timeout=60)
    assert proc.returncode == 0, f"{script}\n{err.decode()}"
    return out.decode()


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl not installed")
async def test_docs_kueue_page(sandbox_factory: Any, tmp_path: Path) -> None:
    """The page's "Trying the flow" blocks, run as written against a sandbox and the scheduler."""
    sb: Sandbox = await sandbox_factory(nodes=0, simulate_kubelet=False)
    kc = sb.write_kubeconfig(tmp_path / "kc")
    blocks = section_blocks(PAGE, "Trying the flow")
    assert [lang for lang, _, _ in blocks] == ["yaml", "bash", "bash", "bash"]
    async with user_client(kc) as cluster, running_scheduler(kc) as parts:
        await cluster.create_node(for_api(NodeBuilder("on-demand").capacity(cpu="8", memory="16Gi", pods=110).obj()))
        for i in range(2):
            await cluster.create_node(for_api(
                NodeBuilder(f"spot-{i}").capacity(cpu="8", memory="16Gi", pods=110).labels(pool="spot")
                .taint("pool", "spot").obj()))
        (_, title, manifest), created, admitted, deleted = blocks
        assert title is not None
        (tmp_path / title).write_text(manifest)
        out = await _sh(created[2], cwd=tmp_path, kubeconfig=kc)
        assert out.strip().endswith(ADMISSION)
        assert await cluster.node_name("train-0") == ""
        gated = await cluster.get_pod("train-0")
        assert gated is not None and [(c["type"], c["reason"]) for c in gated["status"]["conditions"]] == [
            ("PodScheduled", "SchedulingGated")]
        await _sh(admitted[2], cwd=tmp_path, kubeconfig=kc)
        assert (await cluster.node_name("train-0")).startswith("spot-")
        await _sh(deleted[2], cwd=tmp_path, kubeconfig=kc)
        await wait_until(lambda: parts.scheduler.cache.pod_count() == 0, message="train-0 forgotten")
