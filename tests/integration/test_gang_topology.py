"""Gang topology end to end over HTTP (issue 22): PodGroups annotated with
``kube-py-scheduler.io/required-topology`` land whole in the tightest rack that fits, and a
gang no rack can hold stays pending with a message naming the key."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
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


async def _submit(cluster: Any, name: str, size: int, *, cpu: str = "4",
                  priority: int | None = None) -> list[str]:
    """A PodGroup of ``size`` that requires one rack, and its members (``cpu`` each): their
    names."""
    pg = pod_group(name, size)
    pg["metadata"]["annotations"] = {REQUIRED: RACK}
    await create_pod_group(cluster.client, pg)
    names = [f"{name}-{i}" for i in range(size)]
    await cluster.create_pods([gang_pod(n, name, cpu=cpu, priority=priority) for n in names])
    return names


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
            # Four more: a is full, b holds them.
            for gang, rack in (("small", "a"), ("more", "b")):
                names = await _submit(cluster, gang, 4)

                async def placed(names: list[str] = names) -> bool:
                    return await racks(names) is not None
                await wait_until(placed, timeout=15, message=f"gang {gang} bound")
                assert await racks(names) == {rack}

            # Four again: b has room for two, a for none: pending, the key named.
            late = await _submit(cluster, "late", 4)

            async def refused() -> bool:
                notes = [str(e.get("note") or "") for e in await cluster.events_for("late-0")
                         if e["reason"] == "FailedScheduling"]
                return any(f"one {RACK} domain" in n for n in notes)
            await wait_until(refused, timeout=15, message="gang late refused naming the key")
            notes = [str(e.get("note") or "") for e in await cluster.events_for("late-0")]
            assert any(f"{RACK}=a: 0 of 4 fit" in n and f"{RACK}=b: 2 of 4 fit" in n
                       for n in notes), notes
            assert await racks(late) is None


# --- preemption within one domain ----------------------------------------------------------

FILLERS = {"a-0": 0, "a-1": 1000, "b-0": 50, "b-1": 50, "c-0": 1000, "c-1": 0}


@contextlib.asynccontextmanager
async def _vip_over_fillers(sandbox_factory: Any, tmp_path: Path, fillers: dict[str, int]
                            ) -> AsyncIterator[tuple[Any, list[str]]]:
    """One 4-CPU node per key of ``fillers`` (rack: its first letter), each holding a
    bound 3-CPU filler of the given priority; then, the scheduler running, the gang "vip"
    of two 3-CPU members of priority 100 that requires one rack: the user's client and the
    members' names."""
    sb: Sandbox = await sandbox_factory(nodes=0)
    kc = sb.write_kubeconfig(tmp_path / "kc")
    async with user_client(kc) as cluster:
        await install_crd(cluster.client)
        for name in fillers:
            await cluster.create_node(for_api(make_node(
                name, cpu="4", memory="8Gi", labels={RACK: name[0]})))
        for name, priority in fillers.items():
            pod = gang_pod(f"filler-{name}", None, cpu="3", priority=priority)
            pod["spec"]["nodeName"] = name
            await cluster.create_pod(pod)
        async with running_scheduler(kc, config=coscheduling_config()):
            yield cluster, await _submit(cluster, "vip", 2, cpu="3", priority=100)


async def _live(cluster: Any) -> set[str]:
    return {p["metadata"]["name"] for p in await cluster.list_pods("default")
            if not p["metadata"].get("deletionTimestamp")}


async def test_a_gang_with_a_required_rack_preempts_within_one_rack(
    sandbox_factory: Any, tmp_path: Path
) -> None:
    # Cluster-wide the cheapest victims are filler-a-0 and filler-c-1 (priority 0), in two
    # racks; only rack b can hold both members after preemption (its fillers: 50 < 100).
    async with _vip_over_fillers(sandbox_factory, tmp_path, FILLERS) as (cluster, members):

        async def bound() -> bool:
            return all([await cluster.node_name(n) for n in members])
        await wait_until(bound, timeout=30, interval=0.1, message="the gang bound in rack b")
        assert {await cluster.node_name(n) for n in members} == {"b-0", "b-1"}
        live = await _live(cluster)
        assert not {"filler-b-0", "filler-b-1"} & live
        assert {"filler-a-0", "filler-a-1", "filler-c-0", "filler-c-1"} <= live


async def test_a_gang_no_rack_can_hold_even_after_preemption_evicts_nothing(
    sandbox_factory: Any, tmp_path: Path
) -> None:
    # Rack b gone: each rack has room for one member after preemption, the cluster for two.
    fillers = {k: v for k, v in FILLERS.items() if not k.startswith("b")}
    async with _vip_over_fillers(sandbox_factory, tmp_path, fillers) as (cluster, members):

        async def refusals() -> list[str]:
            return [str(e.get("note") or "") for n in members
                    for e in await cluster.events_for(n) if e["reason"] == "FailedScheduling"
                    and "even after preemption" in str(e.get("note") or "")]

        async def refused() -> bool:
            return bool(await refusals())
        await wait_until(refused, timeout=20, interval=0.1,
                         message="refused: no rack holds the gang even after preemption")
        notes = await refusals()
        assert any(f"one {RACK} domain" in n and f"{RACK}=a:" in n and f"{RACK}=c:" in n
                   for n in notes), notes
        assert {f"filler-{n}" for n in fillers} <= await _live(cluster)
        for name in members:
            pod = await cluster.get_pod(name)
            assert pod is not None and not pod["spec"].get("nodeName")
            assert not (pod.get("status") or {}).get("nominatedNodeName")
