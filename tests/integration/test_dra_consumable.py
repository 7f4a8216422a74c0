"""Consumable capacity over HTTP: two pods whose claims ask for part of one shared device
(``allowMultipleAllocations``) share it, a third that would overdraw it waits with
kube-scheduler's words, and gets it when one of the first two goes away."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.integration.dra import dra_cluster
from tests.integration.harness import for_api, wait_until
from tests.unit.dra.builders import exactly, template, template_pod

NAMES = ["c1", "c2", "c3"]


async def test_pods_share_a_device_by_capacity_and_an_overdraw_waits(
    sandbox_factory: Any, tmp_path: Path
) -> None:
    # one shared device of 100Gi on the first node, asked for in steps of 10Gi
    async with dra_cluster(sandbox_factory, tmp_path, nodes=2,
                           dra_devices="nic=1:memory=100Gi:shared=true:step=10Gi:nodes=1") as env:
        cluster = env.cluster
        nic_node = env.nodes[0]
        await env.create("resourceclaimtemplates", template("nic-40g", exactly(
            "nic", "nic.example.com", capacity={"memory": "35Gi"})))  # rounded up to 40Gi
        for name in NAMES:
            await cluster.create_pod(for_api(template_pod(name, "nic-40g", claim="nic")))

        async def two_bound_one_refused() -> bool:
            placed = await env.bound(NAMES)
            pending = [n for n in NAMES if n not in placed]
            return len(placed) == 2 and any(
                "cannot allocate all claims" in note for note in await env.failed(pending[0]))

        await wait_until(two_bound_one_refused, timeout=30,
                         message="two pods share the device, the third is refused")
        placed = await env.bound(NAMES)
        assert set(placed.values()) == {nic_node}

        got = await env.results()
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
            return len(await env.results()) == 2

        await wait_until(two_shares, timeout=30, message="the freed claim deallocated")
