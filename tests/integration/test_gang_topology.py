"""Gang topology end to end over HTTP (issue 22): PodGroups annotated with
``kube-py-scheduler.io/required-topology`` land whole in the tightest rack that fits, and a
gang no rack can hold stays pending with a message naming the key."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from scheduler.sandbox import Sandbox
from tests.builders import make_node
from tests.integration.harness import for_api, running_scheduler, user_client, wait_until
from tests.integration.procs import (
    coscheduling_config,
    create_pod_group,
    gang_pod,
    install_crd,
    pod_group,
)

RACK = "example.com/rack"
REQUIRED = "kube-py-scheduler.io/required-topology"


def _gang(name: str, size: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    pg = pod_group(name, size)
    pg["metadata"]["annotations"] = {REQUIRED: RACK}
    return pg, [gang_pod(f"{name}-{i}", name, cpu="4") for i in range(size)]


async def test_required_topology_places_each_gang_in_one_rack(
    sandbox_factory: Any, tmp_path: Path
) -> None:
    sb: Sandbox = await sandbox_factory(nodes=0)
    kc = sb.write_kubeconfig(tmp_path / "kc")
    async with user_client(kc) as cluster:
        await install_crd(cluster.client)
        for rack, count in (("a", 2), ("b", 3)):
            for i in range(count):
                await cluster.create_node(for_api(make_node(
                    f"{rack}-{i}", cpu="8", memory="32Gi", labels={RACK: rack})))
        async with running_scheduler(kc, config=coscheduling_config()):
            rack_of = {n["metadata"]["name"]: n["metadata"]["labels"][RACK]
                       for n in await cluster.list_nodes()}

            async def racks(names: list[str]) -> set[str] | None:
                pods = {p["metadata"]["name"]: p for p in await cluster.list_pods("default")}
                nodes = [pods[n]["spec"].get("nodeName") for n in names]
                return None if not all(nodes) else {rack_of[str(n)] for n in nodes}

            # Four members of 4 CPU: rack a (16 CPU) fits them exactly; b (24) is looser.
            pg, small = _gang("small", 4)
            await create_pod_group(cluster.client, pg)
            await cluster.create_pods(small)
            names = [p["metadata"]["name"] for p in small]

            async def small_placed() -> bool:
                return await racks(names) is not None
            await wait_until(small_placed, timeout=15, message="gang small bound")
            assert await racks(names) == {"a"}

            # Four more: a is full, b holds them.
            pg, more = _gang("more", 4)
            await create_pod_group(cluster.client, pg)
            await cluster.create_pods(more)
            more_names = [p["metadata"]["name"] for p in more]

            async def more_placed() -> bool:
                return await racks(more_names) is not None
            await wait_until(more_placed, timeout=15, message="gang more bound")
            assert await racks(more_names) == {"b"}

            # Four again: b has room for two, a for none: pending, the key named.
            pg, late = _gang("late", 4)
            await create_pod_group(cluster.client, pg)
            await cluster.create_pods(late)

            async def refused() -> bool:
                notes = [str(e.get("note") or "") for e in await cluster.events_for("late-0")
                         if e["reason"] == "FailedScheduling"]
                return any(f"one {RACK} domain" in n for n in notes)
            await wait_until(refused, timeout=15, message="gang late refused naming the key")
            notes = [str(e.get("note") or "") for e in await cluster.events_for("late-0")]
            assert any(f"{RACK}=a: 0 of 4 fit" in n and f"{RACK}=b: 2 of 4 fit" in n
                       for n in notes), notes
            assert await racks([p["metadata"]["name"] for p in late]) is None
