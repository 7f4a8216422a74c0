"""DeviceTaintRules end to end: a rule tainting one node's GPU keeps the scheduler off it; a
pod that finds no untainted device waits with kube-scheduler's words, and deleting the rule
requeues it (the DeviceTaintRule event's queueing hint) onto the freed device."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.builders import dra_taint_rule
from tests.integration.dra import API, CLAIMS, dra_cluster, pod
from tests.integration.harness import wait_until
from tests.unit.dra.builders import claim, device, exactly, resource_slice


async def test_rule_keeps_a_tainted_gpu_free_until_deleted(sandbox_factory: Any, tmp_path: Path) -> None:
    async with dra_cluster(sandbox_factory, tmp_path, nodes=2) as env:
        cluster, api = env.cluster, env.api
        tainted, clean = env.nodes
        await env.publish(*(resource_slice(f"{node}-gpus", node=node, devices=[device("gpu-0")])
                            for node in (tainted, clean)))
        await api.create(f"{API}/devicetaintrules", dra_taint_rule(
            "maintenance", key="example.com/maintenance", effect="NoSchedule", pool=tainted))
        await env.create("resourceclaims", *(claim(name, exactly("gpu", "gpu"))
                                             for name in ("first", "second")))
        await cluster.create_pod(pod("p1", "first"))
        await wait_until(lambda: cluster.node_name("p1"), timeout=20, message="p1 bound")
        assert await cluster.node_name("p1") == clean

        await cluster.create_pod(pod("p2", "second"))
        await wait_until(lambda: env.failed("p2"), timeout=20, message="p2 FailedScheduling")
        assert "cannot allocate all claims" in (await env.failed("p2"))[0]

        await api.delete(f"{API}/devicetaintrules/maintenance")
        await wait_until(lambda: cluster.node_name("p2"), timeout=30,
                         message="p2 bound once the rule is gone")
        assert await cluster.node_name("p2") == tainted
        got = await api.get(f"{CLAIMS}/second")
        assert got["status"]["allocation"]["devices"]["results"][0]["pool"] == tainted
