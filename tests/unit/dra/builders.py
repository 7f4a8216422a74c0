"""Builders of resource.k8s.io/v1 objects (DeviceClass, ResourceSlice, ResourceClaim) as the
API serves them, and of pods that use claims, for the DRA tests."""

from __future__ import annotations

from typing import Any

from tests.builders import PodBuilder

DRIVER = "gpu.example.com"


def claim_pod(name: str, claim_name: str, *, scheduler: str = "py-scheduler"
              ) -> dict[str, Any]:
    """A pod of ``scheduler`` (100m CPU, 64Mi) using the claim ``claim_name`` as "gpu"."""
    p = (PodBuilder(name, "default").scheduler_name(scheduler)
         .req(cpu="100m", memory="64Mi").obj())
    p["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": claim_name}]
    return p


def template_pod(name: str, template_name: str, *, claim: str = "gpu",
                 scheduler: str = "py-scheduler") -> dict[str, Any]:
    """A pod of ``scheduler`` (100m CPU, 64Mi) whose claim ``claim`` the resourceclaim
    controller makes from the template ``template_name``."""
    p = (PodBuilder(name, "default").scheduler_name(scheduler)
         .req(cpu="100m", memory="64Mi").obj())
    p["spec"]["resourceClaims"] = [{"name": claim, "resourceClaimTemplateName": template_name}]
    return p


def device(name: str, *, attrs: dict[str, Any] | None = None,
           capacity: dict[str, str] | None = None,
           taints: list[dict[str, Any]] | None = None,
           consumes: dict[str, dict[str, str]] | None = None) -> dict[str, Any]:
    """A device; ``attrs`` values are typed by Python type (int/bool/str), a ``v:`` prefix
    makes a version; ``consumes``: counter set -> counter -> quantity (partitionable)."""
    out: dict[str, Any] = {"name": name}
    if attrs:
        typed: dict[str, Any] = {}
        for k, v in attrs.items():
            if isinstance(v, bool):
                typed[k] = {"bool": v}
            elif isinstance(v, int):
                typed[k] = {"int": v}
            elif isinstance(v, str) and v.startswith("v:"):
                typed[k] = {"version": v[2:]}
            else:
                typed[k] = {"string": v}
        out["attributes"] = typed
    if capacity:
        out["capacity"] = {k: {"value": v} for k, v in capacity.items()}
    if taints:
        out["taints"] = taints
    if consumes:
        out["consumesCounters"] = [
            {"counterSet": cs, "counters": {k: {"value": v} for k, v in counters.items()}}
            for cs, counters in consumes.items()]
    return out


def counter_slice(name: str, *, node: str, pool: str | None = None, generation: int = 1,
                  slice_count: int = 2, driver: str = DRIVER,
                  **sets: dict[str, str]) -> dict[str, Any]:
    """A slice of shared counters only (``sets``: counter set -> counter -> quantity); since
    1.34 a slice holds devices or counters, not both."""
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": name, "uid": f"uid-{name}", "resourceVersion": "1"},
            "spec": {"driver": driver, "nodeName": node,
                     "pool": {"name": pool or node, "generation": generation,
                              "resourceSliceCount": slice_count},
                     "sharedCounters": [
                         {"name": cs, "counters": {k: {"value": v} for k, v in c.items()}}
                         for cs, c in sets.items()]}}


def resource_slice(name: str, *, node: str | None = None, devices: list[dict[str, Any]],
                   driver: str = DRIVER, pool: str | None = None, generation: int = 1,
                   slice_count: int = 1, all_nodes: bool = False,
                   node_selector: dict[str, Any] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "driver": driver,
        "pool": {"name": pool or node or name, "generation": generation,
                 "resourceSliceCount": slice_count},
        "devices": devices,
    }
    if node is not None:
        spec["nodeName"] = node
    elif node_selector is not None:
        spec["nodeSelector"] = node_selector
    elif all_nodes:
        spec["allNodes"] = True
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": name, "uid": f"uid-{name}", "resourceVersion": "1"},
            "spec": spec}


def device_class(name: str, *expressions: str, config: list[dict[str, Any]] | None = None
                 ) -> dict[str, Any]:
    spec: dict[str, Any] = {"selectors": [{"cel": {"expression": e}} for e in expressions]}
    if config:
        spec["config"] = config
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
            "metadata": {"name": name, "uid": f"uid-{name}", "resourceVersion": "1"},
            "spec": spec}


def exactly(name: str, device_class_name: str = "gpu", *, count: int | None = None,
            all_devices: bool = False, selectors: tuple[str, ...] = (), admin: bool = False,
            tolerations: list[dict[str, Any]] | None = None,
            capacity: dict[str, str] | None = None) -> dict[str, Any]:
    """A request for ``count`` devices (or all) of a class; ``capacity``: the share of a
    device's consumable capacity it asks for (DRAConsumableCapacity)."""
    ex: dict[str, Any] = {"deviceClassName": device_class_name}
    if all_devices:
        ex["allocationMode"] = "All"
    else:
        ex["allocationMode"] = "ExactCount"
        ex["count"] = 1 if count is None else count
    if selectors:
        ex["selectors"] = [{"cel": {"expression": e}} for e in selectors]
    if admin:
        ex["adminAccess"] = True
    if tolerations:
        ex["tolerations"] = tolerations
    if capacity:
        ex["capacity"] = {"requests": dict(capacity)}
    return {"name": name, "exactly": ex}


def first_available(name: str, *subs: tuple[str, str, int]) -> dict[str, Any]:
    """``subs``: (subrequest name, class, count)."""
    return {"name": name, "firstAvailable": [
        {"name": s, "deviceClassName": c, "allocationMode": "ExactCount", "count": n}
        for s, c, n in subs]}


def claim(name: str, *requests: dict[str, Any], namespace: str = "default",
          constraints: list[dict[str, Any]] | None = None,
          config: list[dict[str, Any]] | None = None,
          allocation: dict[str, Any] | None = None,
          reserved_for: list[dict[str, Any]] | None = None,
          deleting: bool = False) -> dict[str, Any]:
    devices: dict[str, Any] = {"requests": list(requests)}
    if constraints:
        devices["constraints"] = constraints
    if config:
        devices["config"] = config
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "uid": f"uid-{name}",
                            "resourceVersion": "1"}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    status: dict[str, Any] = {}
    if allocation is not None:
        status["allocation"] = allocation
    if reserved_for is not None:
        status["reservedFor"] = reserved_for
    out: dict[str, Any] = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                           "metadata": meta, "spec": {"devices": devices}}
    if status:
        out["status"] = status
    return out


def template(name: str, *requests: dict[str, Any], namespace: str = "default"
             ) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}"},
            "spec": {"spec": {"devices": {"requests": list(requests)}}}}


def node(name: str, **labels: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": dict(labels), "resourceVersion": "1"}}


def gpu_class() -> dict[str, Any]:
    return device_class("gpu", f'device.driver == "{DRIVER}"')


def model_classes() -> dict[str, dict[str, Any]]:
    """The property tests' classes by name: "any" (every device of the driver) and "a"/"b"
    (devices whose ``model`` attribute is that letter)."""
    return {"any": device_class("any", f'device.driver == "{DRIVER}"'),
            **{m: device_class(m, f'device.attributes["{DRIVER}"].model == "{m}"')
               for m in ("a", "b")}}
