"""Gang-aware preemption over HTTP (issue 22): the shipped profile (CapacityScheduling's
PostFilter preempting on DefaultPreemption's machinery) against the sandbox.  A
higher-priority gang preempts for all of its members in one plan, across nodes; a gang that
would not fit even after preemption evicts nothing; PDB budgets are spent across the plan."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from scheduler.sandbox import Sandbox
from tests.integration.harness import running_scheduler, user_client, wait_until
from tests.integration.procs import (
    coscheduling_config,
    create_pod_group,
    gang_pod,
    install_crd,
    pod_group,
)

MERGE_PATCH = "application/merge-patch+json"


async def _setup(sandbox_factory: Any, tmp_path: Path, *, nodes: int) -> tuple[Sandbox, Path]:
    sb: Sandbox = await sandbox_factory(nodes=nodes, node_cpu="4", node_memory="8Gi")
    kc = sb.write_kubeconfig(tmp_path / "kc")
    async with user_client(kc) as cluster:
        await install_crd(cluster.client)
    return sb, kc


async def _fill(cluster: Any, names: list[str], *, labels: dict[str, str] | None = None) -> None:
    """One 3-CPU, priority-0 pod per 4-CPU node (no two fit one node)."""
    pods = [gang_pod(n, None, cpu="3", priority=0) for n in names]
    for pod in pods:
        if labels:
            pod["metadata"].setdefault("labels", {}).update(labels)
    await cluster.create_pods(pods)

    async def bound() -> bool:
        return all([await cluster.node_name(n) for n in names])
    await wait_until(bound, timeout=20, interval=0.1, message="fillers bound")


async def _names(cluster: Any) -> set[str]:
    return {p["metadata"]["name"] for p in await cluster.list_pods("default")
            if not p["metadata"].get("deletionTimestamp")}


async def test_a_gang_of_four_preempts_on_four_nodes_in_one_plan(
    sandbox_factory: Any, tmp_path: Path
) -> None:
    sb, kc = await _setup(sandbox_factory, tmp_path, nodes=4)
    fillers = [f"filler-{i}" for i in range(4)]
    members = [f"vip-{i}" for i in range(4)]
    async with user_client(kc) as cluster, running_scheduler(kc, config=coscheduling_config()):
        await _fill(cluster, fillers)
        await create_pod_group(cluster.client, pod_group("vip", 4))
        await cluster.create_pods([gang_pod(n, "vip", cpu="3", priority=100) for n in members])

        async def all_bound() -> bool:
            return all([await cluster.node_name(n) for n in members])
        await wait_until(all_bound, timeout=30, interval=0.1, message="the gang bound")
        nodes = {await cluster.node_name(n) for n in members}
        assert len(nodes) == 4, nodes
        assert not (await _names(cluster)) & set(fillers), "every filler preempted"
        preempted = [e for f in fillers for e in await cluster.events_for(f)
                     if e["reason"] == "Preempted"]
        # One plan: every victim was preempted by the same member (the first one tried).
        assert len(preempted) == 4, preempted
        assert len({e["note"].split(" on node ")[0] for e in preempted}) == 1, preempted
        assert sb.counters()["bindings"] == 4 + 4


async def test_a_gang_that_cannot_fit_even_after_preemption_evicts_nothing(
    sandbox_factory: Any, tmp_path: Path
) -> None:
    # Four nodes, but the members may use three of them only (a node selector): the
    # cluster-wide room counts four, the plan finds no node for the fourth member.
    _sb, kc = await _setup(sandbox_factory, tmp_path, nodes=4)
    fillers = [f"filler-{i}" for i in range(4)]
    members = [f"vip-{i}" for i in range(4)]
    async with user_client(kc) as cluster, running_scheduler(kc, config=coscheduling_config()):
        await _fill(cluster, fillers)
        for node in sorted(n["metadata"]["name"] for n in await cluster.list_nodes())[:3]:
            await cluster.client.request(
                "PATCH", f"/api/v1/nodes/{node}",
                body={"metadata": {"labels": {"pool": "gang"}}}, content_type=MERGE_PATCH)
        await create_pod_group(cluster.client, pod_group("vip", 4))
        await cluster.create_pods([gang_pod(n, "vip", cpu="3", priority=100,
                                            node_selector={"pool": "gang"}) for n in members])

        async def refused() -> bool:
            notes = [str(e.get("note") or "") for n in members
                     for e in await cluster.events_for(n) if e["reason"] == "FailedScheduling"]
            return any("does not fit even after preemption" in n for n in notes)
        await wait_until(refused, timeout=20, interval=0.1,
                         message="the plan refused: no node for the fourth member")
        await asyncio.sleep(1.0)  # a few retries more: still nothing evicted
        assert set(fillers) <= await _names(cluster)
        for name in members:
            assert not await cluster.node_name(name)
            pod = await cluster.get_pod(name)
            assert pod is not None and not (pod.get("status") or {}).get("nominatedNodeName")


async def test_pdb_budget_is_spent_across_the_plan(sandbox_factory: Any, tmp_path: Path) -> None:
    # Four protected fillers (a PDB allowing one disruption) and one unprotected: a gang of
    # two takes one protected filler and the unprotected one, never two protected ones.
    _sb, kc = await _setup(sandbox_factory, tmp_path, nodes=5)
    protected = [f"protected-{i}" for i in range(4)]
    members = ["vip-0", "vip-1"]
    async with user_client(kc) as cluster, running_scheduler(kc, config=coscheduling_config()):
        # The unprotected filler starts first: one pod at a time, preemption would prefer
        # the younger protected ones (latest start) and take two of them.
        await _fill(cluster, ["free"])
        await asyncio.sleep(1.1)  # startTime has a one-second resolution
        await _fill(cluster, protected, labels={"app": "protected"})
        pdb = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
               "metadata": {"name": "protected", "namespace": "default"},
               "spec": {"minAvailable": 3, "selector": {"matchLabels": {"app": "protected"}}}}
        path = "/apis/policy/v1/namespaces/default/poddisruptionbudgets"
        await cluster.client.create(path, pdb)
        await cluster.client.request(
            "PATCH", f"{path}/protected/status",
            body={"status": {"disruptionsAllowed": 1, "currentHealthy": 4, "desiredHealthy": 3,
                             "expectedPods": 4}},
            content_type=MERGE_PATCH)
        await create_pod_group(cluster.client, pod_group("vip", 2))
        await cluster.create_pods([gang_pod(n, "vip", cpu="3", priority=100) for n in members])

        async def all_bound() -> bool:
            return all([await cluster.node_name(n) for n in members])
        await wait_until(all_bound, timeout=30, interval=0.1, message="the gang bound")
        left = await _names(cluster)
        assert "free" not in left
        assert len(set(protected) & left) == 3, left
