"""DeviceTaintRules end to end: a rule tainting one node's GPU keeps the scheduler off it; a
pod that finds no untainted device waits with kube-scheduler's words, and deleting the rule
requeues it (the DeviceTaintRule event's queueing hint) onto the freed device."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.builders import dra_taint_rule
from tests.integration.harness import running_scheduler, user_client, wait_until
from tests.integration.test_dra import API, pod, strip
from tests.unit.dra.builders import claim, device, exactly, gpu_class, resource_slice


async def test_rule_keeps_a_tainted_gpu_free_until_deleted(sandbox_factory: Any, tmp_path: Path) -> None:
    sb = await sandbox_factory(nodes=2, node_cpu="4", node_memory="16Gi")
    kc = sb.write_kubeconfig(tmp_path / "kc")
    async with user_client(kc) as cluster, running_scheduler(kc):
        api = cluster.client
        tainted, clean = sorted(n["metadata"]["name"] for n in await cluster.list_nodes())
        await api.create(f"{API}/deviceclasses", strip(gpu_class()))
        for node in (tainted, clean):
            await api.create(f"{API}/resourceslices", strip(resource_slice(
                f"{node}-gpus", node=node, devices=[device("gpu-0")])))
        await api.create(f"{API}/devicetaintrules", dra_taint_rule(
            "maintenance", key="example.com/maintenance", effect="NoSchedule", pool=tainted))
        for name in ("first", "second"):
            await api.create(f"{API}/namespaces/default/resourceclaims",
                             strip(claim(name, exactly("gpu", "gpu"))))
        await cluster.create_pod(pod("p1", "first"))
        await wait_until(lambda: cluster.node_name("p1"), timeout=20, message="p1 bound")
        assert await cluster.node_name("p1") == clean

        await cluster.create_pod(pod("p2", "second"))

        async def failed() -> list[dict[str, Any]]:
            return [e for e in await cluster.events_for("p2") if e["reason"] == "FailedScheduling"]

        await wait_until(failed, timeout=20, message="p2 FailedScheduling")
        assert "cannot allocate all claims" in (await failed())[0]["note"]

        await api.delete(f"{API}/devicetaintrules/maintenance")
        await wait_until(lambda: cluster.node_name("p2"), timeout=30,
                         message="p2 bound once the rule is gone")
        assert await cluster.node_name("p2") == tainted
        got = await api.get(f"{API}/namespaces/default/resourceclaims/second")
        assert got["status"]["allocation"]["devices"]["results"][0]["pool"] == tainted
