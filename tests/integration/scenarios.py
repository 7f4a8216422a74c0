"""Helpers for end-to-end plugin scenarios: a small hand-built cluster in a sandbox, the real
scheduler against it, and waits that read what a user would see (placement, events).

Each scenario builds its nodes explicitly (names, zones, taints, sizes) so that placements
and the counts in FailedScheduling messages are deterministic.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scheduler.app import Components
from scheduler.config.types import KubeSchedulerConfiguration
from scheduler.sandbox import Sandbox
from tests.builders import NodeBuilder, PodBuilder
from tests.integration.harness import (
    Cluster,
    for_api,
    running_scheduler,
    user_client,
    wait_until,
)

SCHEDULER = "py-scheduler"
ZONE = "topology.kubernetes.io/zone"
HOSTNAME = "kubernetes.io/hostname"

# Upstream preemption wording that follows the filter reasons in a FailedScheduling message.
NOT_HELPFUL = "Preemption is not helpful for scheduling"
NO_VICTIMS = "No preemption victims found for incoming pod"


def failed_message(total: int, reasons: Sequence[tuple[int, str]], *,
                   preemption: str | None = None) -> str:
    """``0/N nodes are available: <count reason, ...>.`` (sorted as upstream sorts the
    "<count> <reason>" strings), then `` preemption: <message>`` when given."""
    parts = sorted(f"{n} {reason}" for n, reason in reasons)
    message = f"0/{total} nodes are available: {', '.join(parts)}."
    if preemption is not None:
        # Since 1.30 the PostFilter message is appended as is (it carries its own period).
        message += f" preemption: {preemption}"
    return message


def preemption_fit_error(total: int, reason: str) -> str:
    """The message of the FitError that preemption returns when it finds no candidate and
    every node got the same status."""
    return failed_message(total, [(total, reason)])


def node(name: str, *, zone: str = "zone-a", cpu: str = "4", memory: str = "16Gi",
         pods: int = 110, labels: dict[str, str] | None = None,
         taints: Iterable[tuple[str, str, str]] = ()) -> dict[str, Any]:
    """A Ready node as a kubelet would register it; ``taints`` are (key, value, effect)."""
    b = NodeBuilder(name).capacity(cpu=cpu, memory=memory, pods=pods).labels(
        {ZONE: zone, "topology.kubernetes.io/region": "region-1",
         "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64", **(labels or {})})
    for key, value, effect in taints:
        b.taint(key, value, effect)
    return for_api(b.obj())


def pod(name: str, *, cpu: str = "100m", memory: str = "128Mi",
        scheduler: str = SCHEDULER) -> PodBuilder:
    """A builder for one of our pods; finish it with :func:`api`."""
    return PodBuilder(name).scheduler_name(scheduler).req(cpu=cpu, memory=memory)


def api(builder: PodBuilder) -> dict[str, Any]:
    return for_api(builder.obj())


@dataclass
class Env:
    sandbox: Sandbox
    cluster: Cluster
    parts: Components
    kubeconfig: Path


@contextlib.asynccontextmanager
async def scenario(
    sandbox_factory: Callable[..., Awaitable[Sandbox]],
    tmp_path: Path,
    nodes: Sequence[dict[str, Any]],
    *,
    config: KubeSchedulerConfiguration | None = None,
    objects: Sequence[tuple[str, dict[str, Any]]] = (),
    **sandbox_kwargs: Any,
) -> AsyncIterator[Env]:
    """A sandbox holding exactly ``nodes`` (and ``objects``: (collection path, body) pairs
    created before the scheduler starts), with the scheduler synced and running."""
    sb = await sandbox_factory(nodes=0, **sandbox_kwargs)
    kc = sb.write_kubeconfig(tmp_path / "kc")
    async with user_client(kc) as cluster:
        for n in nodes:
            await cluster.create_node(n)
        for path, body in objects:
            await cluster.client.create(path, body)
        async with running_scheduler(kc, config=config) as parts:
            yield Env(sb, cluster, parts, kc)


async def wait_bound(cluster: Cluster, names: Iterable[str], *, timeout: float = 10.0
                     ) -> dict[str, str]:
    """Wait until every named pod has a node; return name -> node."""
    wanted = list(names)
    placement: dict[str, str] = {}

    async def all_bound() -> bool:
        placement.clear()
        for p in await cluster.list_pods("default"):
            name = p["metadata"]["name"]
            if name in wanted and p["spec"].get("nodeName"):
                placement[name] = p["spec"]["nodeName"]
        return len(placement) == len(wanted)

    try:
        await wait_until(all_bound, timeout=timeout, message=f"{wanted} bound")
    except AssertionError as e:
        missing = sorted(set(wanted) - set(placement))
        notes = {n: await failed_notes(cluster, n) for n in missing}
        raise AssertionError(f"{e}; unbound: {notes}") from None
    return dict(placement)


async def failed_notes(cluster: Cluster, name: str) -> list[str]:
    return [e.get("note", "") for e in await cluster.events_for(name)
            if e.get("reason") == "FailedScheduling"]


async def refusal_notes(cluster: Cluster, name: str, *, timeout: float = 10.0) -> list[str]:
    """Wait until the pod has a FailedScheduling event and a matching PodScheduled=False
    condition; return the raw notes of its FailedScheduling events."""
    async def condition() -> dict[str, Any]:
        current = await cluster.get_pod(name)
        status = (current or {}).get("status") or {}
        conds = {c["type"]: c for c in status.get("conditions", [])}
        return dict(conds.get("PodScheduled") or {})

    async def seen() -> bool:
        notes = await failed_notes(cluster, name)
        return bool(notes) and (await condition()).get("message") in notes

    try:
        await wait_until(seen, timeout=timeout, message=f"FailedScheduling of {name}")
    except AssertionError as e:
        raise AssertionError(f"{e}; notes: {await failed_notes(cluster, name)!r}, "
                             f"condition: {await condition()!r}") from None
    cond = await condition()
    assert (cond["status"], cond["reason"]) == ("False", "Unschedulable"), cond
    assert not await cluster.node_name(name)
    return await failed_notes(cluster, name)


async def wait_failed(cluster: Cluster, name: str, expected: str, *,
                      timeout: float = 10.0) -> None:
    """Wait for a FailedScheduling event on ``name`` saying exactly ``expected``, and check
    that every FailedScheduling note the pod got says the same."""
    async def matching() -> bool:
        return expected in await failed_notes(cluster, name)

    try:
        await wait_until(matching, timeout=timeout, message=f"FailedScheduling of {name}")
    except AssertionError as e:
        raise AssertionError(
            f"{e}\nexpected: {expected!r}\ngot:      {await failed_notes(cluster, name)!r}"
        ) from None
    notes = await refusal_notes(cluster, name, timeout=timeout)
    assert set(notes) == {expected}, notes


def count_by(placement: dict[str, str], key: Callable[[str], str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for node_name in placement.values():
        k = key(node_name)
        out[k] = out.get(k, 0) + 1
    return out


# --- storage objects -------------------------------------------------------------------------

PVS = "/api/v1/persistentvolumes"
PVCS = "/api/v1/namespaces/default/persistentvolumeclaims"
STORAGE_CLASSES = "/apis/storage.k8s.io/v1/storageclasses"


def storage_class(name: str, *, provisioner: str = "kubernetes.io/no-provisioner",
                  allowed_zones: Sequence[str] | None = None) -> tuple[str, dict[str, Any]]:
    sc: dict[str, Any] = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                          "metadata": {"name": name}, "provisioner": provisioner,
                          "volumeBindingMode": "WaitForFirstConsumer",
                          "reclaimPolicy": "Delete"}
    if allowed_zones is not None:
        sc["allowedTopologies"] = [{"matchLabelExpressions": [
            {"key": ZONE, "values": list(allowed_zones)}]}]
    return STORAGE_CLASSES, sc


def zonal_pv(name: str, zone: str, *, storage_class_name: str, size: str = "10Gi"
             ) -> tuple[str, dict[str, Any]]:
    """A static local volume usable only from nodes of ``zone``."""
    return PVS, {
        "apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name},
        "spec": {"capacity": {"storage": size}, "accessModes": ["ReadWriteOnce"],
                 "persistentVolumeReclaimPolicy": "Retain",
                 "storageClassName": storage_class_name,
                 "local": {"path": f"/mnt/disks/{name}"},
                 "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                     {"key": ZONE, "operator": "In", "values": [zone]}]}]}}}}


def claim(name: str, *, storage_class_name: str, size: str = "5Gi"
          ) -> tuple[str, dict[str, Any]]:
    return PVCS, {
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": storage_class_name,
                 "resources": {"requests": {"storage": size}}}}


async def get_claim(cluster: Cluster, name: str) -> dict[str, Any]:
    result: dict[str, Any] = await cluster.client.get(f"{PVCS}/{name}")
    return result


async def get_volume(cluster: Cluster, name: str) -> dict[str, Any]:
    result: dict[str, Any] = await cluster.client.get(f"{PVS}/{name}")
    return result


async def wait_claims_bound(cluster: Cluster, names: Iterable[str], *, timeout: float = 10.0
                            ) -> dict[str, dict[str, Any]]:
    """Wait until every named PVC is phase Bound; return name -> PVC."""
    wanted = list(names)
    claims: dict[str, dict[str, Any]] = {}

    async def bound() -> bool:
        for n in wanted:
            claims[n] = await get_claim(cluster, n)
        return all((c.get("status") or {}).get("phase") == "Bound" for c in claims.values())

    try:
        await wait_until(bound, timeout=timeout, message=f"claims {wanted} Bound")
    except AssertionError as e:
        raise AssertionError(f"{e}; claims: {claims}") from None
    return claims


def volume_zone(pv: dict[str, Any]) -> str:
    """The single zone a volume's node affinity allows."""
    [term] = pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"]
    [expr] = [e for e in term["matchExpressions"] if e["key"] == ZONE]
    [zone] = expr["values"]
    return str(zone)
