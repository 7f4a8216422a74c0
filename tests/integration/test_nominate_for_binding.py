"""NominatedNodeNameForExpectation end to end over HTTP against the sandbox: a gang member
waiting at Permit shows ``status.nominatedNodeName`` while it waits, the failed gang clears
it, the API server clears it at binding, and a plain pod is never nominated; a pod whose
volume PreBind binds is nominated to its node first."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any

from scheduler.sandbox import Sandbox
from tests.integration.harness import running_scheduler, user_client, wait_until
from tests.integration.scenarios import (
    api,
    claim,
    node,
    pod,
    scenario,
    storage_class,
    wait_bound,
    wait_claims_bound,
    zonal_pv,
)
from tests.integration.procs import (
    coscheduling_config,
    create_pod_group,
    gang_pod,
    install_crd,
    pod_group,
)

NODE = "node-0000"
PODS = "/api/v1/namespaces/default/pods"


async def test_a_waiting_gang_member_is_nominated_then_cleared_and_a_plain_pod_never(
    sandbox_factory: Any, tmp_path: Path
) -> None:
    sb: Sandbox = await sandbox_factory(nodes=2)
    kc = sb.write_kubeconfig(tmp_path / "kc")
    # Every version of every pod the API server sent: (name, nominatedNodeName, nodeName).
    seen: list[tuple[str, str, str]] = []
    async with user_client(kc) as cluster:
        await install_crd(cluster.client)

        # From the list's resourceVersion: no version is missed however late the watch connects.
        listed = await cluster.client.get(PODS)
        since = {"resourceVersion": str(listed["metadata"]["resourceVersion"])}

        async def watch() -> None:
            async for event in cluster.client.watch(PODS, since):
                pod = event.get("object") or {}
                seen.append((pod["metadata"]["name"],
                             str((pod.get("status") or {}).get("nominatedNodeName") or ""),
                             str((pod.get("spec") or {}).get("nodeName") or "")))

        watcher = asyncio.create_task(watch(), name="test-pod-watch")
        try:
            async with running_scheduler(kc, config=coscheduling_config()):
                await create_pod_group(cluster.client, pod_group("duo", 2))
                # duo-0 fits NODE and waits at Permit for duo-1, which fits nowhere yet.
                await cluster.create_pods([
                    gang_pod("duo-0", "duo", node_selector={"kubernetes.io/hostname": NODE}),
                    gang_pod("duo-1", "duo", node_selector={"tier": "gpu"}),
                ])

                def versions(name: str) -> list[tuple[str, str]]:
                    return [(nnn, node) for n, nnn, node in seen if n == name]

                async def nominated_then_cleared() -> bool:
                    vs = versions("duo-0")
                    if (NODE, "") not in vs:
                        return False
                    return ("", "") in vs[vs.index((NODE, "")):]
                await wait_until(nominated_then_cleared, timeout=15,
                                 message="duo-0 nominated while waiting, cleared on failure")

                # A plain pod: bound without ever being nominated (no extra status write).
                await cluster.create_pod(gang_pod("plain", None))

                async def plain_bound() -> bool:
                    return any(node for _nnn, node in versions("plain"))
                await wait_until(plain_bound, timeout=10, message="plain pod bound")
                assert all(nnn == "" for nnn, _node in versions("plain")), versions("plain")

                # duo-1 gets a node: the gang binds, and binding clears the nomination.
                other = "/api/v1/nodes/node-0001"
                node = await cluster.client.get(other)
                node["metadata"]["labels"]["tier"] = "gpu"
                await cluster.client.update(other, node)

                async def gang_bound() -> bool:
                    return all([await cluster.node_name(n) for n in ("duo-0", "duo-1")])
                await wait_until(gang_bound, timeout=15, message="the gang bound")
                for name in ("duo-0", "duo-1"):
                    pod = await cluster.get_pod(name)
                    assert pod is not None
                    assert not pod["status"].get("nominatedNodeName"), pod["status"]
        finally:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await watcher


async def test_a_pod_with_a_volume_to_bind_is_nominated_before_prebind(
    sandbox_factory: Any, tmp_path: Path
) -> None:
    nodes = [node("a0", zone="zone-a"), node("b0", zone="zone-b")]
    objects = [storage_class("local-wffc"),
               zonal_pv("pv-b", "zone-b", storage_class_name="local-wffc"),
               claim("data", storage_class_name="local-wffc")]
    seen: list[tuple[str, str]] = []  # (nominatedNodeName, nodeName) of every version
    async with scenario(sandbox_factory, tmp_path, nodes, objects=objects) as env:

        listed = await env.cluster.client.get(PODS)
        since = {"resourceVersion": str(listed["metadata"]["resourceVersion"])}

        async def watch() -> None:
            async for event in env.cluster.client.watch(PODS, since):
                pod_ = event.get("object") or {}
                if pod_["metadata"]["name"] == "db":
                    seen.append((str((pod_.get("status") or {}).get("nominatedNodeName") or ""),
                                 str((pod_.get("spec") or {}).get("nodeName") or "")))

        watcher = asyncio.create_task(watch(), name="test-pod-watch")
        try:
            await env.cluster.create_pod(api(pod("db").pvc("data", "data")))
            await wait_bound(env.cluster, ["db"])

            async def bound_seen() -> bool:
                return ("", "b0") in seen
            await wait_until(bound_seen, timeout=5, message="the bound version watched")
        finally:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await watcher
        # Nominated to the volume's node while PreBind bound the volume, then bound there
        # (the API server clears the nomination at binding).
        assert seen.index(("b0", "")) < seen.index(("", "b0")), seen
        claims = await wait_claims_bound(env.cluster, ["data"])
        assert claims["data"]["spec"]["volumeName"] == "pv-b"
