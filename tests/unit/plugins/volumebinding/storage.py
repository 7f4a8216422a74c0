"""Builders for storage objects (PV, PVC, StorageClass, CSINode) used by the volume plugin tests."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

ZONE = "topology.kubernetes.io/zone"
WFFC = "WaitForFirstConsumer"


def pv(name: str, *, size: str = "10Gi", cls: str = "local", modes: Sequence[str] = ("ReadWriteOnce",),
       phase: str = "Available", zone: str | None = None, node: str | None = None,
       labels: Mapping[str, str] | None = None, claim: tuple[str, str] | None = None,
       claim_uid: str = "", csi: tuple[str, str] | None = None, rv: str = "1",
       volume_mode: str | None = None, source: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A PV; ``zone``/``node`` add required node affinity on the zone / hostname label."""
    obj: dict[str, Any] = {
        "apiVersion": "v1", "kind": "PersistentVolume",
        "metadata": {"name": name, "resourceVersion": rv, "labels": dict(labels or {})},
        "spec": {"capacity": {"storage": size}, "accessModes": list(modes),
                 "storageClassName": cls},
        "status": {"phase": phase},
    }
    exprs = []
    if zone is not None:
        exprs.append({"key": ZONE, "operator": "In", "values": [zone]})
    if node is not None:
        exprs.append({"key": "kubernetes.io/hostname", "operator": "In", "values": [node]})
    if exprs:
        obj["spec"]["nodeAffinity"] = {"required": {"nodeSelectorTerms": [
            {"matchExpressions": exprs}]}}
    if claim is not None:
        obj["spec"]["claimRef"] = {"namespace": claim[0], "name": claim[1], "uid": claim_uid}
    if csi is not None:
        obj["spec"]["csi"] = {"driver": csi[0], "volumeHandle": csi[1]}
    if volume_mode is not None:
        obj["spec"]["volumeMode"] = volume_mode
    if source:
        obj["spec"].update(source)
    return obj


def pvc(name: str, *, ns: str = "default", size: str = "5Gi", cls: str | None = "local",
        modes: Sequence[str] = ("ReadWriteOnce",), volume: str = "", bound: bool = False,
        phase: str = "Pending", selector: Mapping[str, Any] | None = None, rv: str = "1",
        annotations: Mapping[str, str] | None = None, uid: str | None = None,
        owner_uid: str | None = None) -> dict[str, Any]:
    """A PVC; ``bound`` marks it fully bound to ``volume`` (annotation + phase)."""
    obj: dict[str, Any] = {
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": ns, "uid": uid or f"uid-pvc-{ns}-{name}",
                     "resourceVersion": rv, "annotations": dict(annotations or {})},
        "spec": {"accessModes": list(modes), "resources": {"requests": {"storage": size}}},
        "status": {"phase": phase},
    }
    if cls is not None:
        obj["spec"]["storageClassName"] = cls
    if volume:
        obj["spec"]["volumeName"] = volume
    if bound:
        obj["metadata"]["annotations"]["pv.kubernetes.io/bind-completed"] = "yes"
        obj["status"]["phase"] = "Bound"
    if selector is not None:
        obj["spec"]["selector"] = dict(selector)
    if owner_uid is not None:
        obj["metadata"]["ownerReferences"] = [
            {"apiVersion": "v1", "kind": "Pod", "name": "owner", "uid": owner_uid,
             "controller": True}]
    return obj


def storage_class(name: str, *, provisioner: str = "kubernetes.io/no-provisioner",
                  mode: str = WFFC, allowed_zones: Sequence[str] | None = None) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
        "metadata": {"name": name}, "provisioner": provisioner, "volumeBindingMode": mode,
    }
    if allowed_zones is not None:
        obj["allowedTopologies"] = [{"matchLabelExpressions": [
            {"key": ZONE, "values": list(allowed_zones)}]}]
    return obj


def csi_node(node: str, limits: Mapping[str, int | None],
             migrated: Sequence[str] = ()) -> dict[str, Any]:
    drivers = []
    for driver, count in limits.items():
        d: dict[str, Any] = {"name": driver, "nodeID": node}
        if count is not None:
            d["allocatable"] = {"count": count}
        drivers.append(d)
    meta: dict[str, Any] = {"name": node}
    if migrated:
        meta["annotations"] = {"storage.alpha.kubernetes.io/migrated-plugins": ",".join(migrated)}
    return {"apiVersion": "storage.k8s.io/v1", "kind": "CSINode", "metadata": meta,
            "spec": {"drivers": drivers}}
