"""Device binding conditions (DRADeviceBindingConditions, Beta and on in 1.37).

Why: some devices are attached only after the scheduler picked them (a fabric-attached GPU, a
device a controller must prepare).  Their ResourceSlice lists ``bindingConditions`` (and
``bindingFailureConditions``, and maybe ``bindsToNode``); kube-scheduler copies both lists
into the claim's allocation results, pins the claim to the chosen node when ``bindsToNode``
is set, writes the allocation and the reservation, then waits in PreBind until, for every
such device, the claim's ``status.devices`` entry (same driver, pool and device) has every
binding condition True.  A failure condition True, or the binding timeout passing, fails the
attempt: on the next one the claim counts as unavailable and PostFilter deallocates it.

This module holds what the plugin needs without the framework: decorating an allocation from
the inventory, and reading a claim's binding state.
"""

from __future__ import annotations

import calendar
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from scheduler.dra.inventory import Device, Inventory

READY = "ready"
PENDING = "pending"
FAILED = "failed"


def _pin(node_name: str) -> dict[str, Any]:
    return {"nodeSelectorTerms": [{"matchFields": [
        {"key": "metadata.name", "operator": "In", "values": [node_name]}]}]}


def _device(inventory: Inventory, driver: Any, pool: Any, name: Any) -> Device | None:
    p = inventory.pools.get((driver, pool)) if isinstance(driver, str) and isinstance(pool, str) else None
    if p is None:
        return None
    for d in p.devices:
        if d.name == name:
            return d
    return None


def decorate(allocation: dict[str, Any], inventory: Inventory, node_name: str) -> dict[str, Any]:
    """``allocation`` with each result's device's binding conditions copied in, and its node
    selector pinned to ``node_name`` when one of its devices binds to the node (a copy when
    anything changes; the allocation itself otherwise)."""
    devices = allocation.get("devices")
    results = devices.get("results") if isinstance(devices, Mapping) else None
    if not isinstance(results, list):
        return allocation
    out_results: list[Any] = []
    changed = pin = False
    for r in results:
        d = _device(inventory, r.get("driver"), r.get("pool"), r.get("device")) \
            if isinstance(r, Mapping) else None
        if d is None or not (d.binding_conditions or d.binding_failure_conditions or d.binds_to_node):
            out_results.append(r)
            continue
        pin = pin or d.binds_to_node
        r = dict(r)
        if d.binding_conditions:
            r["bindingConditions"] = list(d.binding_conditions)
        if d.binding_failure_conditions:
            r["bindingFailureConditions"] = list(d.binding_failure_conditions)
        out_results.append(r)
        changed = True
    if not changed:
        return allocation
    out = {**allocation, "devices": {**devices, "results": out_results}}  # type: ignore[dict-item]
    if pin:
        out["nodeSelector"] = _pin(node_name)
    return out


def has_binding_conditions(allocation: Mapping[str, Any] | None) -> bool:
    if not isinstance(allocation, Mapping):
        return False
    devices = allocation.get("devices")
    results = devices.get("results") if isinstance(devices, Mapping) else None
    return any(isinstance(r, Mapping) and r.get("bindingConditions")
               for r in (results if isinstance(results, list) else ()))


@dataclass(frozen=True, slots=True)
class BindingState:
    state: str  # READY, PENDING or FAILED
    message: str = ""


def binding_state(claim: Mapping[str, Any]) -> BindingState:
    """Whether the allocated claim's devices may be bound: READY when every result with
    binding conditions has its ``status.devices`` entry showing all of them True; FAILED
    when such an entry shows one of its failure conditions True; PENDING otherwise (a
    missing entry is not ready)."""
    status = claim.get("status")
    status = status if isinstance(status, Mapping) else {}
    alloc = status.get("allocation")
    if not isinstance(alloc, Mapping):
        return BindingState(PENDING, "not allocated")
    entries: dict[tuple[Any, Any, Any], Mapping[str, Any]] = {}
    for e in status.get("devices") or ():
        if isinstance(e, Mapping):
            entries.setdefault((e.get("driver"), e.get("pool"), e.get("device")), e)
    devices = alloc.get("devices")
    results = devices.get("results") if isinstance(devices, Mapping) else None
    pending = ""
    for r in results if isinstance(results, list) else ():
        if not isinstance(r, Mapping) or not r.get("bindingConditions"):
            continue
        ident = (r.get("driver"), r.get("pool"), r.get("device"))
        entry = entries.get(ident)
        where = "/".join(str(x) for x in ident)
        if entry is None:
            pending = pending or f"device {where}: no status reported yet"
            continue
        true = {c.get("type") for c in entry.get("conditions") or ()
                if isinstance(c, Mapping) and c.get("status") == "True"}
        failed = [t for t in r.get("bindingFailureConditions") or () if t in true]
        if failed:
            return BindingState(FAILED, f"device {where}: binding failure condition {failed[0]} is True")
        missing = [t for t in r["bindingConditions"] if t not in true]
        if missing:
            pending = pending or f"device {where}: binding condition {missing[0]} is not True"
    return BindingState(PENDING, pending) if pending else BindingState(READY)


def allocated_at(claim: Mapping[str, Any]) -> float | None:
    """``status.allocation.allocationTimestamp`` as seconds since the epoch, or None."""
    status = claim.get("status")
    alloc = status.get("allocation") if isinstance(status, Mapping) else None
    raw = alloc.get("allocationTimestamp") if isinstance(alloc, Mapping) else None
    if not isinstance(raw, str):
        return None
    try:
        return float(calendar.timegm(time.strptime(raw[:19], "%Y-%m-%dT%H:%M:%S")))
    except ValueError:
        return None


def timestamp(now: float) -> str:
    """RFC 3339 at second precision (metav1.Time)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now))
