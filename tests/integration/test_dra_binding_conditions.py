"""Device binding conditions end to end: the scheduler allocates a fabric device that needs
binding conditions, writes the allocation (pinned to the node, conditions copied, the
allocation timestamp) and the reservation, says it waits, and binds the pod only once the
test, playing the device's controller, reports the condition True in the claim's
``status.devices``; a failure condition instead makes the scheduler deallocate the claim,
and with the failed device tainted by a DeviceTaintRule the pod gets the other one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.builders import dra_taint_rule
from tests.integration.harness import running_scheduler, user_client, wait_until
from tests.integration.dra import API, pod, strip
from tests.unit.dra.builders import DRIVER, claim, device, exactly, gpu_class, resource_slice

CLAIMS = f"{API}/namespaces/default/resourceclaims"


def fabric(*names: str) -> dict[str, Any]:
    devs = []
    for n in names:
        d = device(n)
        d.update(bindingConditions=["example.com/attached"],
                 bindingFailureConditions=["example.com/attach-failed"], bindsToNode=True)
        devs.append(d)
    return strip(resource_slice("fabric", pool="fabric", all_nodes=True, devices=devs))


async def _report(api: Any, name: str, device_name: str, condition: str) -> None:
    got = await api.get(f"{CLAIMS}/{name}")
    got["status"]["devices"] = [{"driver": DRIVER, "pool": "fabric", "device": device_name, "conditions": [
        {"type": condition, "status": "True", "reason": "Test", "message": "",
         "lastTransitionTime": "2026-11-26T00:00:00Z"}]}]
    await api.update(f"{CLAIMS}/{name}/status", got)


async def test_pod_binds_only_once_the_binding_condition_is_true(sandbox_factory: Any, tmp_path: Path) -> None:
    sb = await sandbox_factory(nodes=2, node_cpu="4", node_memory="16Gi")
    kc = sb.write_kubeconfig(tmp_path / "kc")
    async with user_client(kc) as cluster, running_scheduler(kc):
        api = cluster.client
        await api.create(f"{API}/deviceclasses", strip(gpu_class()))
        await api.create(f"{API}/resourceslices", fabric("f0", "f1"))
        await api.create(CLAIMS, strip(claim("c", exactly("gpu", "gpu"))))
        await cluster.create_pod(pod("p", "c"))

        async def allocated() -> dict[str, Any] | None:
            got = await api.get(f"{CLAIMS}/c")
            return got if (got.get("status") or {}).get("reservedFor") else None

        await wait_until(allocated, timeout=20, message="claim allocated and reserved")
        got = await allocated()
        assert got is not None
        alloc = got["status"]["allocation"]
        [res] = alloc["devices"]["results"]
        assert res["bindingConditions"] == ["example.com/attached"]
        assert res["bindingFailureConditions"] == ["example.com/attach-failed"]
        assert alloc["allocationTimestamp"].endswith("Z")
        assert alloc["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]["key"] == "metadata.name"

        async def pending_event() -> bool:
            return any(e["reason"] == "BindingConditionsPending" for e in await cluster.events_for("p"))

        await wait_until(pending_event, timeout=20, message="BindingConditionsPending event")
        assert not await cluster.node_name("p")  # not bound while the condition is not True

        # the device's controller fails the first device: the claim is deallocated, and a
        # DeviceTaintRule keeps the scheduler off that device
        first = res["device"]
        await api.create(f"{API}/devicetaintrules", dra_taint_rule(
            "broken", key="example.com/broken", effect="NoSchedule", driver=DRIVER, pool="fabric",
            device=first))
        await _report(api, "c", first, "example.com/attach-failed")

        async def reallocated() -> dict[str, Any] | None:
            got = await api.get(f"{CLAIMS}/c")
            a = (got.get("status") or {}).get("allocation")
            return got if a and a["devices"]["results"][0]["device"] != first else None

        await wait_until(reallocated, timeout=40, message="claim allocated again, to the other device")
        again = await reallocated()
        assert again is not None and "devices" not in again["status"]
        second = again["status"]["allocation"]["devices"]["results"][0]["device"]
        assert not await cluster.node_name("p")

        await _report(api, "c", second, "example.com/attached")
        await wait_until(lambda: cluster.node_name("p"), timeout=30, message="p bound once attached")
        assert await cluster.node_name("p") == again["status"]["allocation"]["nodeSelector"][
            "nodeSelectorTerms"][0]["matchFields"][0]["values"][0]
