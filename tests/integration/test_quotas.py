"""Elastic quotas end to end over HTTP: the shipped profile (CapacityScheduling on), the
ElasticQuota CRD the sandbox preinstalls, the status controller, and docs/quotas.md's
"Two teams borrow and reclaim" run as written with kubectl."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from scheduler.app import start_elastic_quota_controller
from scheduler.objects.pod import pod_requests
from scheduler.sandbox import Sandbox
from tests.builders import NodeBuilder
from tests.integration.harness import for_api, running_scheduler, user_client, wait_until
from tests.integration.procs import coscheduling_config
from tests.integration.test_explain import explain
from tests.integration.test_kueue import _sh, section_blocks

PAGE = "docs/quotas.md"
EQ = "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{ns}/elasticquotas/quota"


@contextlib.asynccontextmanager
async def _scheduler_with_controller(kc: Path) -> AsyncIterator[Any]:
    async with running_scheduler(kc, config=coscheduling_config()) as parts:
        stop = asyncio.Event()
        task = start_elastic_quota_controller(parts.scheduler, parts.client, stop)
        assert task is not None, "the shipped profile enables CapacityScheduling"
        try:
            yield parts
        finally:
            stop.set()
            await asyncio.wait_for(task, timeout=5)


async def _used(cluster: Any, ns: str) -> dict[str, str]:
    eq = await cluster.client.get(EQ.format(ns=ns))
    return dict((eq.get("status") or {}).get("used") or {})


async def _cpu_bound(cluster: Any, ns: str, *, phase: str | None = None) -> int:
    return sum(pod_requests(p).milli_cpu for p in await cluster.list_pods(ns)
               if p["spec"].get("nodeName") and not p["metadata"].get("deletionTimestamp")
               and (phase is None or (p.get("status") or {}).get("phase") == phase))


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl not installed")
async def test_docs_quotas_page(sandbox_factory: Any, tmp_path: Path) -> None:
    sb: Sandbox = await sandbox_factory(nodes=0, scheduler_prereqs=True)
    kc = sb.write_kubeconfig(tmp_path / "kc")
    blocks = section_blocks(PAGE, "Two teams borrow and reclaim")
    assert [lang for lang, _, _ in blocks] == ["yaml", "bash", "yaml", "bash", "yaml", "bash"]
    for _, title, text in blocks:
        if title:
            (tmp_path / title).write_text(text)
    scripts = [text for lang, _, text in blocks if lang == "bash"]
    async with user_client(kc) as cluster:
        await cluster.create_node(for_api(
            NodeBuilder("n1").capacity(cpu="4", memory="16Gi", pods=110).obj()))
        async with _scheduler_with_controller(kc):
            await _sh(scripts[0], cwd=tmp_path, kubeconfig=kc)
            await _sh(scripts[1], cwd=tmp_path, kubeconfig=kc)

            async def four_running() -> bool:
                return await _cpu_bound(cluster, "team-a", phase="Running") == 4000

            await wait_until(four_running, timeout=20, message="team A borrows up to its max")
            pending = [p for p in await cluster.list_pods("team-a") if not p["spec"].get("nodeName")]
            assert len(pending) == 1

            async def refused_over_max() -> bool:
                p = await cluster.get_pod(pending[0]["metadata"]["name"], "team-a")
                conds = (p or {}).get("status", {}).get("conditions") or []
                return any("because ElasticQuota team-a is more than Max" in c.get("message", "")
                           for c in conds)

            await wait_until(refused_over_max, timeout=10, message="the fifth worker refused by max")
            code, out, err = await explain(pending[0]["metadata"]["name"], "-n", "team-a",
                                           "--kubeconfig", str(kc))
            assert code == 0, err
            assert "ElasticQuota team-a/quota: used cpu 4; min cpu 2; max cpu 4" in out
            assert "CapacityScheduling: the pod would take the quota over its max" in out
            await wait_until(lambda: _used_is(cluster, "team-a", "4"), timeout=10,
                             message="status.used of team A")

            await _sh(scripts[2], cwd=tmp_path, kubeconfig=kc)
            assert await cluster.node_name("trainer", "team-b") == "n1"
            await wait_until(lambda: _used_is(cluster, "team-b", "2"), timeout=15,
                             message="status.used of team B")
            await wait_until(lambda: _used_is(cluster, "team-a", "2"), timeout=15,
                             message="team A back to its min")
            # nothing above its max, and team A's recreated workers wait
            assert await _cpu_bound(cluster, "team-a") <= 4000
            assert await _cpu_bound(cluster, "team-b") == 2000
            await asyncio.sleep(0)

        # A restart never trusts the old status: a wrong one is recounted from pods.
        await cluster.client.patch(EQ.format(ns="team-a") + "/status",
                                   {"status": {"used": {"cpu": "99"}}}, patch_type="merge")
        assert await _used(cluster, "team-a") == {"cpu": "99"}
        async with _scheduler_with_controller(kc):
            await wait_until(lambda: _used_is(cluster, "team-a", "2"), timeout=15,
                             message="status.used recounted after a restart")


async def _used_is(cluster: Any, ns: str, cpu: str) -> bool:
    return await _used(cluster, ns) == {"cpu": cpu}


async def test_a_gang_starts_only_when_all_of_it_fits_its_quota(sandbox_factory: Any,
                                                               tmp_path: Path) -> None:
    """A PodGroup of 3 one-CPU members against a quota of max 2: no member is bound (none
    holds quota waiting for the others); raising the max to 3 lets the whole gang run."""
    from tests.builders import PodBuilder

    sb: Sandbox = await sandbox_factory(nodes=0, scheduler_prereqs=True)
    kc = sb.write_kubeconfig(tmp_path / "kc")
    async with user_client(kc) as cluster:
        await cluster.create_node(for_api(
            NodeBuilder("n1").capacity(cpu="8", memory="16Gi", pods=110).obj()))
        await cluster.client.create("/api/v1/namespaces", {"metadata": {"name": "team-a"}})
        await cluster.client.create(
            "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/team-a/elasticquotas",
            {"metadata": {"name": "quota"}, "spec": {"min": {"cpu": "2"}, "max": {"cpu": "2"}}})
        await cluster.client.create(
            "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/team-a/podgroups",
            {"metadata": {"name": "train"}, "spec": {"minMember": 3}})
        async with _scheduler_with_controller(kc):
            for i in range(3):
                await cluster.create_pod(for_api(
                    PodBuilder(f"m{i}", "team-a").scheduler_name("py-scheduler").req(cpu="1")
                    .labels({"scheduling.x-k8s.io/pod-group": "train"}).obj()))

            async def all_refused() -> bool:
                pods = await cluster.list_pods("team-a")
                return all(any("for PodGroup train" in c.get("message", "")
                               for c in (p.get("status") or {}).get("conditions") or [])
                           for p in pods)

            await wait_until(all_refused, timeout=15, message="every member refused by the quota")
            assert await _cpu_bound(cluster, "team-a") == 0
            await cluster.client.patch(EQ.format(ns="team-a"),
                                       {"spec": {"min": {"cpu": "3"}, "max": {"cpu": "3"}}},
                                       patch_type="merge")

            async def all_bound() -> bool:
                return await _cpu_bound(cluster, "team-a") == 3000

            await wait_until(all_bound, timeout=20, message="the whole gang bound")
