"""A scheduler restart while a claim is being allocated (issue 24): the first scheduler is
stopped in the middle of PreBind (latency injected on ResourceClaim writes), a second one
starts with a second pod wanting the same single device. Whatever the first one managed to
write, no device ends up in two claims and none is leaked: the second scheduler reads the
allocations back from the API (never from memory), and deleting the bound pod hands the
device to the other one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.integration.harness import for_api, running_scheduler, user_client, wait_until
from tests.unit.dra.builders import claim, claim_pod, exactly

API = "/apis/resource.k8s.io/v1"
CLAIMS = f"{API}/namespaces/default/resourceclaims"
CLAIM_WRITES = "resourceclaims.resource.k8s.io"


def pod(name: str, claim_name: str) -> dict[str, Any]:
    return for_api(claim_pod(name, claim_name))


def new_claim(name: str) -> dict[str, Any]:
    c = claim(name, exactly("gpu", "gpu.example.com"))
    c["metadata"] = {"name": name, "namespace": "default"}
    return c


async def _allocations(api: Any) -> dict[str, tuple[list[tuple[str, str]], list[str]]]:
    """claim -> (devices it holds, pods it is reserved for)."""
    out = {}
    for c in (await api.get(CLAIMS))["items"]:
        st = c.get("status") or {}
        results = ((st.get("allocation") or {}).get("devices") or {}).get("results") or []
        out[c["metadata"]["name"]] = ([(r["pool"], r["device"]) for r in results],
                                      [u["name"] for u in st.get("reservedFor") or []])
    return out


def _no_device_twice(allocs: dict[str, tuple[list[tuple[str, str]], list[str]]]) -> None:
    held = [d for devs, _ in allocs.values() for d in devs]
    assert len(held) == len(set(held)), f"a device is allocated to two claims: {allocs}"


async def test_restart_mid_prebind_allocates_no_device_twice_and_leaks_none(
    sandbox_factory: Any, tmp_path: Path
) -> None:
    # one GPU in the whole cluster (the simulated driver, on the first node)
    sb = await sandbox_factory(nodes=2, node_cpu="4", node_memory="16Gi",
                               dra_devices="gpu=1:nodes=1")
    kc = sb.write_kubeconfig(tmp_path / "kc")
    async with user_client(kc) as cluster:
        api = cluster.client
        gpu_node = sorted(n["metadata"]["name"] for n in await cluster.list_nodes())[0]
        for name in ("c1", "c2"):
            c = new_claim(name)
            # with the finalizer already there, PreBind's one write is the status update
            # (allocation and reservation): the write the restart must not duplicate
            c["metadata"]["finalizers"] = ["resource.kubernetes.io/delete-protection"]
            await api.create(CLAIMS, c)
        await cluster.create_pod(pod("p1", "c1"))
        sb.faults.add_latency(3.0, "update", CLAIM_WRITES)

        # the first scheduler reaches PreBind (its status write is under way: the sandbox
        # will apply it 3 s after it arrived, while the second scheduler runs), then stops
        async with running_scheduler(kc):
            async def writing() -> bool:
                reqs = sb.counters()["requests"]
                return any(k.startswith(f"update {CLAIM_WRITES}") for k in reqs)

            await wait_until(writing, timeout=20, message="PreBind writing the claim")
        sb.faults.clear()
        # A's status write was sent and is still in the sandbox's hands
        assert sb.counters()["requests"].get(f"update {CLAIM_WRITES}/status") == 1
        _no_device_twice(await _allocations(api))

        # a second pod for the same device, and a new scheduler (nothing in memory)
        await cluster.create_pod(pod("p2", "c2"))
        async with running_scheduler(kc):
            async def one_bound() -> bool:
                return bool(await cluster.node_name("p1") or await cluster.node_name("p2"))

            await wait_until(one_bound, timeout=30, message="one of the pods bound")
            first = "p1" if await cluster.node_name("p1") else "p2"
            other = "p2" if first == "p1" else "p1"
            mine, theirs = ("c1", "c2") if first == "p1" else ("c2", "c1")

            async def other_refused() -> bool:
                return any(e["reason"] == "FailedScheduling"
                           and "cannot allocate all claims" in str(e.get("note"))
                           for e in await cluster.events_for(other))

            await wait_until(other_refused, timeout=30, message=f"{other} refused")
            allocs = await _allocations(api)
            _no_device_twice(allocs)
            assert allocs[mine] == ([(gpu_node, "gpu-0")], [first]), allocs
            assert allocs[theirs] == ([], []), allocs
            assert await cluster.node_name(first) == gpu_node
            assert not await cluster.node_name(other)

            # the device is not leaked: the bound pod goes, the other one gets it
            await cluster.delete_pod(first)
            await wait_until(lambda: cluster.node_name(other), timeout=30,
                             message=f"{other} bound once the device is free")
            allocs = await _allocations(api)
            _no_device_twice(allocs)
            assert allocs[theirs] == ([(gpu_node, "gpu-0")], [other]), allocs
