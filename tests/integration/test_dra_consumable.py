"""Consumable capacity over HTTP: two pods whose claims ask for part of one shared device
(``allowMultipleAllocations``) share it, a third that would overdraw it waits with
kube-scheduler's words, and gets it when one of the first two goes away."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.builders import PodBuilder
from tests.integration.harness import for_api, running_scheduler, user_client, wait_until

API = "/apis/resource.k8s.io/v1"
NAMES = ["c1", "c2", "c3"]


def templated(name: str) -> dict[str, Any]:
    p = for_api(PodBuilder(name, "default").scheduler_name("py-scheduler")
                .req(cpu="100m", memory="64Mi").obj())
    p["spec"]["resourceClaims"] = [{"name": "nic", "resourceClaimTemplateName": "nic-40g"}]
    return p


async def test_pods_share_a_device_by_capacity_and_an_overdraw_waits(
    sandbox_factory: Any, tmp_path: Path
) -> None:
    # one shared device of 100Gi on the first node, asked for in steps of 10Gi
    sb = await sandbox_factory(nodes=2, node_cpu="4", node_memory="16Gi",
                               dra_devices="nic=1:memory=100Gi:shared=true:step=10Gi:nodes=1")
    kc = sb.write_kubeconfig(tmp_path / "kc")
    async with user_client(kc) as cluster, running_scheduler(kc):
        api = cluster.client
        nic_node = sorted(n["metadata"]["name"] for n in await cluster.list_nodes())[0]
        await api.create(f"{API}/namespaces/default/resourceclaimtemplates", {
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": "nic-40g", "namespace": "default"},
            "spec": {"spec": {"devices": {"requests": [{"name": "nic", "exactly": {
                "deviceClassName": "nic.example.com",
                "capacity": {"requests": {"memory": "35Gi"}}}}]}}}})  # rounded up to 40Gi

        async def bound() -> dict[str, str]:
            return {n: node for n in NAMES if (node := await cluster.node_name(n))}

        for name in NAMES:
            await cluster.create_pod(templated(name))

        async def two_bound_one_refused() -> bool:
            placed = await bound()
            pending = [n for n in NAMES if n not in placed]
            return len(placed) == 2 and any(
                e["reason"] == "FailedScheduling" and "cannot allocate all claims" in e["note"]
                for e in await cluster.events_for(pending[0]))

        await wait_until(two_bound_one_refused, timeout=30,
                         message="two pods share the device, the third is refused")
        placed = await bound()
        assert set(placed.values()) == {nic_node}

        async def shares() -> list[dict[str, Any]]:
            claims = (await api.get(f"{API}/namespaces/default/resourceclaims"))["items"]
            return [r for c in claims
                    for r in ((c.get("status") or {}).get("allocation") or {})
                    .get("devices", {}).get("results", [])]

        got = await shares()
        assert [(r["device"], r["consumedCapacity"]) for r in got] == [
            ("nic-0", {"memory": "40Gi"})] * 2
        assert len({r["shareID"] for r in got}) == 2

        # one of the two goes: its share returns and the third pod gets the device
        [waiting] = set(NAMES) - set(placed)
        await cluster.delete_pod(sorted(placed)[0])
        await wait_until(lambda: cluster.node_name(waiting), timeout=30,
                         message="the third pod bound once a share is free")
        assert await cluster.node_name(waiting) == nic_node

        async def two_shares() -> bool:
            return len(await shares()) == 2

        await wait_until(two_shares, timeout=30, message="the freed claim deallocated")
