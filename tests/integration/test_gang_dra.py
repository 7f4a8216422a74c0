"""A gang whose members need devices (issue 24): the gang is placed only when every member's
claims can be allocated. PodGroup minMember 3, each member a claim from a template, devices
for two members only: nothing is bound and no device stays held; a third node's devices
appear: all three are bound, each with its own device."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.builders import with_pod_claims
from tests.integration.dra import dra_cluster
from tests.integration.harness import wait_until
from tests.integration.procs import (
    coscheduling_config,
    create_pod_group,
    gang_pod,
    install_crd,
    pod_group,
)
from tests.unit.dra.builders import device, exactly, resource_slice, template

NAMES = ["trio-0", "trio-1", "trio-2"]


def member(name: str) -> dict[str, Any]:
    return with_pod_claims(gang_pod(name, "trio"), ("gpu", "template", "one-gpu"))


async def test_gang_with_claims_binds_only_when_every_member_gets_a_device(
    sandbox_factory: Any, tmp_path: Path
) -> None:
    # 3 nodes, one GPU on each of the first two (the simulated driver)
    async with dra_cluster(sandbox_factory, tmp_path, nodes=3, dra_devices="gpu=1:nodes=2",
                           config=coscheduling_config(),
                           before_scheduler=lambda cluster: install_crd(cluster.client)) as env:
        cluster, nodes, sb, claims = env.cluster, env.nodes, env.sandbox, env.claims
        await env.create("resourceclaimtemplates",
                         template("one-gpu", exactly("gpu", "gpu.example.com")))
        await create_pod_group(cluster.client, pod_group("trio", 3))
        await cluster.create_pods([member(n) for n in NAMES])

        async def refused() -> bool:
            # every member's claim exists and every member was refused at least once
            if len(await claims()) != 3:
                return False
            for n in NAMES:
                if not await env.failed(n):
                    return False
            return True

        await wait_until(refused, timeout=30, message="all three members refused")
        pods = {p["metadata"]["name"]: p for p in await cluster.list_pods("default")}
        assert not any(pods[n]["spec"].get("nodeName") for n in NAMES)
        assert sb.counters()["bindings"] == 0
        # the two members that got a device in Reserve gave it back: no claim is allocated
        # (nothing was written), so nothing is leaked
        assert not [c["metadata"]["name"] for c in await claims()
                    if (c.get("status") or {}).get("allocation")]

        # the third node's driver publishes its GPU: the whole gang goes through
        third = nodes[2]
        sl = resource_slice(f"{third}-gpu", node=third, driver="gpu.example.com",
                            devices=[device("gpu-0", attrs={"index": 0})])
        await env.create("resourceslices", sl)

        async def all_bound() -> bool:
            pods = {p["metadata"]["name"]: p for p in await cluster.list_pods("default")}
            return all(pods[n]["spec"].get("nodeName") for n in NAMES)

        await wait_until(all_bound, timeout=45, message="all three members bound")
        pods = {p["metadata"]["name"]: p for p in await cluster.list_pods("default")}
        assert sorted(pods[n]["spec"]["nodeName"] for n in NAMES) == nodes
        held = []
        for c in await claims():
            alloc = c["status"]["allocation"]
            [r] = alloc["devices"]["results"]
            held.append((r["pool"], r["device"]))
            [user] = c["status"]["reservedFor"]
            assert pods[user["name"]]["spec"]["nodeName"] == r["pool"]
        assert sorted(held) == [(n, "gpu-0") for n in nodes]
