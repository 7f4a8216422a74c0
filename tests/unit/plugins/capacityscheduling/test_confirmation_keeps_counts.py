"""CapacityScheduling's per-node counts follow the NodeInfo's ``plugin_generation``: a
binding's confirmation (the bound version of an assumed pod, which reads alike) counts no
node again; a change the counts read (a phase, a deletion) does. A node whose count read a
ResourceClaim is counted on every call, since a claim's allocation moves no NodeInfo."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from scheduler.cache.cache import Cache
from scheduler.cache.snapshot import Snapshot
from scheduler.objects.pod import PodInfo
from scheduler.plugins.capacityscheduling.plugin import CapacityScheduling
from tests.builders import NodeBuilder
from tests.fakes import SnapshotHandle
from tests.unit.plugins.capacityscheduling.harness import pod, quota

GPUS = "gpu.example.com.deviceclass.resource.k8s.io/devices"


def _bound(name: str, node: str, *, cpu: str = "1", phase: str = "") -> dict[str, Any]:
    """What the binding's confirmation carries beyond the assumed copy: fields no plugin
    reads (a resourceVersion, the PodScheduled condition, a start time)."""
    p = pod(name, "team-a", cpu, node_name=node, phase=phase)
    p["metadata"]["resourceVersion"] = "7"
    p.setdefault("status", {})["conditions"] = [{"type": "PodScheduled", "status": "True"}]
    p["status"]["startTime"] = "2024-01-01T00:00:00Z"
    return p


Op = Callable[[Cache], None]

# (step, whether n1 is counted again (its seed's requests read), team-a's CPU used after
# it, in millicores: a seed on each node, 1 CPU each)
STEPS: list[tuple[str, Op, bool, int]] = [
    ("nothing", lambda c: None, False, 2000),
    ("assume", lambda c: c.assume_pod(PodInfo.from_pod(pod("p1", "team-a", "1",
                                                           node_name="n1"))), True, 3000),
    ("confirm", lambda c: c.add_pod(PodInfo.from_pod(_bound("p1", "n1"))), False, 3000),
    ("finish", lambda c: c.update_pod(_bound("p1", "n1"), PodInfo.from_pod(
        _bound("p1", "n1", phase="Succeeded"))), True, 2000),
    ("delete", lambda c: c.remove_pod(_bound("p1", "n1", phase="Succeeded")), True, 2000),
]


def _cluster(claims: list[dict[str, Any]] | None = None) -> tuple[Cache, Snapshot, SnapshotHandle]:
    cache, snapshot = Cache(), Snapshot()
    for name in ("n1", "n2"):
        cache.add_node(NodeBuilder(name).capacity(cpu="8", memory="64Gi", pods=110).obj())
    for name in ("n1", "n2"):
        cache.add_pod(PodInfo.from_pod(_bound(f"seed-{name}", name)))
    cache.update_snapshot(snapshot)
    limits = {"cpu": "8", GPUS: "8"}
    handle = SnapshotHandle(snapshot, objects={
        "elasticquotas": [quota("team-a", min=limits, max=limits)],
        "resourceclaims": claims or []})
    return cache, snapshot, handle


def _counting(plugin: CapacityScheduling, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The pods whose requests a count read, in order."""
    read: list[str] = []
    real = plugin.requests_of

    def counting(pod_info: PodInfo) -> Any:
        read.append(pod_info.name)
        return real(pod_info)

    monkeypatch.setattr(plugin, "requests_of", counting)
    return read


def test_a_confirmation_counts_no_node_again(monkeypatch: pytest.MonkeyPatch) -> None:
    cache, snapshot, handle = _cluster()
    kept = CapacityScheduling({}, handle)
    read = _counting(kept, monkeypatch)
    kept.usage()
    for step, op, recounts, used in STEPS:
        op(cache)
        cache.update_snapshot(snapshot)
        read.clear()
        usage = kept.usage().get("team-a")
        assert usage is not None
        assert ("seed-n1" in read, usage.used.milli_cpu) == (recounts, used), (step, read)
        fresh = CapacityScheduling({}, handle).usage().get("team-a")
        assert fresh is not None and fresh.used == usage.used and fresh.base == usage.base, step


def _claim(*, allocated: int) -> dict[str, Any]:
    """All the devices of the class: counted as 1 until allocated, then as many as it got."""
    claim: dict[str, Any] = {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": "all-gpus", "namespace": "team-a"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
            "deviceClassName": "gpu.example.com", "allocationMode": "All"}}]}}}
    if allocated:
        claim["status"] = {"allocation": {"devices": {"results": [
            {"request": "gpu", "driver": "gpu.example.com", "pool": "n1", "device": f"gpu-{i}"}
            for i in range(allocated)]}}}
    return claim


def test_a_claims_allocation_is_counted_though_no_node_changed(
        monkeypatch: pytest.MonkeyPatch) -> None:
    cache, snapshot, handle = _cluster([_claim(allocated=0)])
    claiming = _bound("trainer", "n1")
    claiming["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "all-gpus"}]
    cache.add_pod(PodInfo.from_pod(claiming))
    cache.update_snapshot(snapshot)
    kept = CapacityScheduling({}, handle)
    read = _counting(kept, monkeypatch)

    def used() -> int:
        usage = kept.usage().get("team-a")
        assert usage is not None
        return usage.used.scalar_resources.get(GPUS, 0)

    assert used() == 1
    # the claim's allocation, written by the binding cycle: no NodeInfo moves
    handle._listers.objects["resourceclaims"] = [_claim(allocated=3)]
    read.clear()
    assert used() == 3
    assert sorted(read) == ["seed-n1", "trainer"]  # only the node whose count read a claim
