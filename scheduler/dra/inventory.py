"""Typed views of resource.k8s.io/v1 objects the allocator reads: ResourceSlices gathered into
pools of devices, DeviceClasses, and a device's taints.

A pool is ``(driver, pool.name)``; only the slices of its newest ``pool.generation`` count
(older ones are being replaced, as upstream ignores them); the pool is *incomplete* while
fewer slices of that generation than ``pool.resourceSliceCount`` are known.  A malformed
slice is skipped and reported in ``Inventory.problems`` (object and field), never raised: the
rest of the cluster's devices stay usable.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from scheduler.dra.cel import DeviceEnv
from scheduler.objects.errors import ObjectError
from scheduler.objects.node_affinity import NodeSelector

DeviceID = tuple[str, str, str]  # (driver, pool, device)

TAINT_EFFECTS = frozenset({"NoSchedule", "NoExecute"})


@dataclass(frozen=True, slots=True)
class DeviceTaint:
    key: str
    value: str
    effect: str


@dataclass(slots=True, eq=False)
class Device:
    driver: str
    pool: str
    name: str
    attributes: Mapping[str, Any]
    capacity: Mapping[str, Any]
    taints: tuple[DeviceTaint, ...]
    slice_name: str
    node_name: str | None
    node_selector: NodeSelector | None
    node_selector_raw: Mapping[str, Any] | None
    all_nodes: bool
    env: DeviceEnv
    pool_ref: Pool | None = None
    # allowMultipleAllocations: shared by capacity (DRAConsumableCapacity)
    multi: bool = False
    # consumable capacity worked out from ``capacity`` (which never changes): what a request's
    # capacity.requests consume, and the capacities' values (capacity.py's results)
    capacity_cache: dict[Any, Any] = field(default_factory=dict)
    # expression -> result (a device's attributes never change: a changed slice is a new
    # Device); a CEL error is not kept
    selected: dict[str, bool] = field(default_factory=dict)

    id: DeviceID = ("", "", "")
    # the slice's own taints; ``taints`` adds those of matching DeviceTaintRules
    # (scheduler/dra/taintrules.py)
    slice_taints: tuple[DeviceTaint, ...] = ()
    # DRADeviceBindingConditions: conditions the claim's status.devices entry must show True
    # (or one failure condition True) before the pod is bound; bindsToNode pins the claim
    binding_conditions: tuple[str, ...] = ()
    binding_failure_conditions: tuple[str, ...] = ()
    binds_to_node: bool = False

    def __post_init__(self) -> None:
        self.id = (self.driver, self.pool, self.name)
        self.slice_taints = self.taints

    def attribute(self, qualified: str) -> object:
        """The value of ``domain/id`` (or a bare id in the driver's domain), or None."""
        domain, sep, ident = qualified.rpartition("/")
        raw = self.attributes.get(qualified)
        if raw is None and sep and domain == self.driver:
            raw = self.attributes.get(ident)
        if not isinstance(raw, Mapping):
            return None
        for kind in ("int", "bool", "string", "version"):
            if kind in raw:
                return (kind, raw[kind])
        return None

    def available_on(self, node: Mapping[str, Any], node_name: str) -> bool:
        if self.node_name is not None:
            return self.node_name == node_name
        if self.node_selector is not None:
            return self.node_selector.match(node)
        return self.all_nodes


@dataclass(slots=True, eq=False)
class Pool:
    driver: str
    name: str
    generation: int
    slice_count: int
    slices: int = 0
    devices: list[Device] = field(default_factory=list)
    invalid: str = ""

    @property
    def incomplete(self) -> bool:
        return self.slices < self.slice_count


def _meta_name(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata")
    name = meta.get("name") if isinstance(meta, Mapping) else None
    return name if isinstance(name, str) else ""


def _err(obj: Mapping[str, Any], field_: str, msg: str, kind: str) -> ObjectError:
    return ObjectError(msg, kind=kind, name=_meta_name(obj), field=field_)


def _parse_taints(sl: Mapping[str, Any], raw: Any, path: str) -> tuple[DeviceTaint, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise _err(sl, path, "must be a list", "ResourceSlice")
    out = []
    for i, t in enumerate(raw):
        if not isinstance(t, Mapping) or not isinstance(t.get("key"), str):
            raise _err(sl, f"{path}[{i}]", "must be an object with a key", "ResourceSlice")
        out.append(DeviceTaint(t["key"], str(t.get("value") or ""), str(t.get("effect") or "")))
    return tuple(out)


def _strings(sl: Mapping[str, Any], raw: Any, path: str) -> tuple[str, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list) or not all(isinstance(x, str) for x in raw):
        raise _err(sl, path, "must be a list of strings", "ResourceSlice")
    return tuple(raw)


def _parse_selector(sl: Mapping[str, Any], raw: Any, path: str) -> NodeSelector:
    return NodeSelector.from_dict(raw, where=path, obj=sl, kind="ResourceSlice")


def _parse_slice(sl: Mapping[str, Any]) -> tuple[str, str, int, int, list[Device]]:
    spec = sl.get("spec")
    if not isinstance(spec, Mapping):
        raise _err(sl, "spec", "must be an object", "ResourceSlice")
    driver = spec.get("driver")
    if not isinstance(driver, str) or not driver:
        raise _err(sl, "spec.driver", "must be a non-empty string", "ResourceSlice")
    pool = spec.get("pool")
    if not isinstance(pool, Mapping) or not isinstance(pool.get("name"), str):
        raise _err(sl, "spec.pool.name", "must be a string", "ResourceSlice")
    gen = pool.get("generation", 0)
    count = pool.get("resourceSliceCount", 1)
    if not isinstance(gen, int) or isinstance(gen, bool):
        raise _err(sl, "spec.pool.generation", "must be an integer", "ResourceSlice")
    if not isinstance(count, int) or isinstance(count, bool) or count < 1:
        raise _err(sl, "spec.pool.resourceSliceCount", "must be a positive integer",
                   "ResourceSlice")
    node_name = spec.get("nodeName")
    if node_name is not None and not isinstance(node_name, str):
        raise _err(sl, "spec.nodeName", "must be a string", "ResourceSlice")
    selector_raw = spec.get("nodeSelector")
    selector = (_parse_selector(sl, selector_raw, "spec.nodeSelector")
                if selector_raw is not None else None)
    all_nodes = spec.get("allNodes") is True
    per_device = spec.get("perDeviceNodeSelection") is True
    if not per_device and node_name is None and selector is None and not all_nodes:
        raise _err(sl, "spec", "exactly one of nodeName, nodeSelector, allNodes, "
                   "perDeviceNodeSelection is required", "ResourceSlice")
    raw_devices = spec.get("devices") or []
    if not isinstance(raw_devices, list):
        raise _err(sl, "spec.devices", "must be a list", "ResourceSlice")
    devices: list[Device] = []
    for i, d in enumerate(raw_devices):
        path = f"spec.devices[{i}]"
        if not isinstance(d, Mapping) or not isinstance(d.get("name"), str):
            raise _err(sl, f"{path}.name", "must be a string", "ResourceSlice")
        attrs = d.get("attributes") or {}
        caps = d.get("capacity") or {}
        if not isinstance(attrs, Mapping):
            raise _err(sl, f"{path}.attributes", "must be an object", "ResourceSlice")
        if not isinstance(caps, Mapping):
            raise _err(sl, f"{path}.capacity", "must be an object", "ResourceSlice")
        d_node, d_sel, d_sel_raw, d_all = node_name, selector, selector_raw, all_nodes
        if per_device:
            d_node = d.get("nodeName") if isinstance(d.get("nodeName"), str) else None
            d_sel_raw = d.get("nodeSelector")
            d_sel = (_parse_selector(sl, d_sel_raw, f"{path}.nodeSelector")
                     if d_sel_raw is not None else None)
            d_all = d.get("allNodes") is True
        devices.append(Device(
            driver=driver, pool=pool["name"], name=d["name"], attributes=attrs, capacity=caps,
            taints=_parse_taints(sl, d.get("taints"), f"{path}.taints"),
            slice_name=_meta_name(sl), node_name=d_node, node_selector=d_sel,
            node_selector_raw=d_sel_raw, all_nodes=d_all,
            env=DeviceEnv(driver=driver, attributes=attrs, capacity=caps),
            binding_conditions=_strings(sl, d.get("bindingConditions"), f"{path}.bindingConditions"),
            binding_failure_conditions=_strings(sl, d.get("bindingFailureConditions"),
                                                f"{path}.bindingFailureConditions"),
            binds_to_node=d.get("bindsToNode") is True,
            multi=d.get("allowMultipleAllocations") is True,
        ))
    return driver, pool["name"], gen, count, devices


ParsedSlice = tuple[str, str, int, int, list[Device]]  # driver, pool, generation, count


class Inventory:
    """Every pool of devices, from the cluster's ResourceSlices (rebuilt when they change)."""

    def __init__(self, slices: Iterable[Mapping[str, Any]]) -> None:
        problems: list[str] = []
        parsed: list[ParsedSlice] = []
        for sl in slices:
            try:
                parsed.append(_parse_slice(sl))
            except ObjectError as e:
                problems.append(str(e))
        self._assemble(parsed, problems)

    @classmethod
    def from_parsed(cls, parsed: Iterable[ParsedSlice], problems: Iterable[str] = ()
                    ) -> Inventory:
        """From slices parsed before (their Device objects, and the selector results they
        cache, are reused: a slice that did not change is not parsed again)."""
        inv = cls.__new__(cls)
        inv._assemble(list(parsed), list(problems))
        return inv

    def _assemble(self, parsed: list[ParsedSlice], problems: list[str]) -> None:
        self.problems = problems
        newest: dict[tuple[str, str], int] = {}
        for p in parsed:
            key = (p[0], p[1])
            newest[key] = max(newest.get(key, p[2]), p[2])
        self.pools: dict[tuple[str, str], Pool] = {}
        for driver, pool_name, gen, count, devices in parsed:
            key = (driver, pool_name)
            if gen != newest[key]:
                continue  # an older generation, being replaced
            pool = self.pools.get(key)
            if pool is None:
                pool = self.pools[key] = Pool(driver, pool_name, gen, count)
            pool.slices += 1
            pool.slice_count = max(pool.slice_count, count)
            pool.devices.extend(devices)
        for pool in self.pools.values():
            seen: set[str] = set()
            for d in pool.devices:
                d.pool_ref = pool
                if d.name in seen:
                    pool.invalid = f"device {d.name} is listed more than once"
                seen.add(d.name)
        self._by_node: dict[tuple[str, str], list[Device]] = {}
        # node-local devices by node name; the others (selector, all nodes) checked per node
        self._local: dict[str, list[Device]] = {}
        self._shared: list[Device] = []
        for pool in self.pools.values():
            if pool.invalid:
                continue
            for d in pool.devices:
                if d.node_name is not None:
                    self._local.setdefault(d.node_name, []).append(d)
                else:
                    self._shared.append(d)
        self._local_ids: dict[DeviceID, str] = {
            d.id: name for name, devs in self._local.items() for d in devs}
        # (node, request selectors) whose every device was evaluated without a CEL error
        self.checked: set[tuple[str, str]] = set()
        # with DRADeviceBindingConditions off, devices with binding conditions are never
        # offered (set by the reader before the first devices_for_node)
        self.skip_binding_conditions = False

    def has_shared_devices(self) -> bool:
        """Whether some device is offered by a node selector or to all nodes."""
        return bool(self._shared)

    def local_devices(self) -> Mapping[str, Sequence[Device]]:
        """The node-local devices (``spec.nodeName``) of valid pools, by node name."""
        return self._local

    def held_by_node(self, in_use: Iterable[DeviceID]) -> dict[str, int]:
        """How many node-local devices of each node ``in_use`` holds (ids of devices this
        inventory does not have are not counted): once per pod, so that Filter tells a node
        whose devices are all held with one comparison."""
        local = self._local_ids
        out: dict[str, int] = {}
        for ident in in_use:
            name = local.get(ident)
            if name is not None:
                out[name] = out.get(name, 0) + 1
        return out

    def all_held(self, node_name: str, held: Mapping[str, int]) -> bool:
        """Every device usable from the node is held: there is no device of a selector or
        all-nodes pool, and ``held`` (``held_by_node``) counts all of the node's own."""
        if self._shared:
            return False
        return held.get(node_name, 0) >= len(self._local.get(node_name, ()))

    def devices_for_node(self, node: Mapping[str, Any]) -> list[Device]:
        """The devices usable from ``node``, in a stable order (pool, then slice order)."""
        meta = node.get("metadata") or {}
        name = str(meta.get("name") or "")
        key = (name, str(meta.get("resourceVersion") or ""))
        hit = self._by_node.get(key)
        if hit is None:
            hit = self._local.get(name, []) + [
                d for d in self._shared if d.available_on(node, name)]
            if any(d.binding_conditions for d in hit):
                if self.skip_binding_conditions:  # DRADeviceBindingConditions off
                    hit = [d for d in hit if not d.binding_conditions]
                else:
                    # devices that need binding conditions are tried after the others
                    # (upstream orders pools without binding conditions first)
                    hit.sort(key=lambda d: bool(d.binding_conditions))
            if len(self._by_node) > 100_000:
                self._by_node.clear()
            self._by_node[key] = hit
        return hit


class SliceTracker:
    """The cluster's :class:`Inventory` kept from ResourceSlice informer events.

    Reading it between changes costs nothing per pod (no walk over the slices); a slice
    added, changed or deleted marks it stale, and the next read assembles it again from the
    slices parsed so far: only the changed slice is parsed anew, the others keep their
    Device objects and the CEL results cached on them.  A malformed slice is kept as its
    problem (logged once by the caller through :attr:`new_problems`)."""

    def __init__(self) -> None:
        # slice key (uid, else name) -> (resourceVersion, parsed slice or the problem)
        self._slices: dict[str, tuple[str, ParsedSlice | str]] = {}
        self._raw: dict[str, Mapping[str, Any]] = {}  # the slices as the informer has them
        self._inventory: Inventory | None = None
        self.new_problems: list[str] = []

    @staticmethod
    def _key(sl: Mapping[str, Any]) -> str:
        meta = sl.get("metadata")
        meta = meta if isinstance(meta, Mapping) else {}
        return str(meta.get("uid") or meta.get("name") or "")

    def slice_added(self, sl: Mapping[str, Any]) -> None:
        meta = sl.get("metadata")
        rv = str((meta if isinstance(meta, Mapping) else {}).get("resourceVersion") or "")
        key = self._key(sl)
        known = self._slices.get(key)
        if known is not None and known[0] == rv and rv:
            return  # a resync of what we have
        try:
            parsed: ParsedSlice | str = _parse_slice(sl)
        except ObjectError as e:
            parsed = str(e)
            self.new_problems.append(parsed)
        self._slices[key] = (rv, parsed)
        self._raw[key] = sl
        self._inventory = None

    def slice_updated(self, old: Mapping[str, Any], new: Mapping[str, Any]) -> None:
        if self._key(old) != self._key(new):
            self.slice_deleted(old)
        self.slice_added(new)

    def slice_deleted(self, sl: Mapping[str, Any]) -> None:
        key = self._key(sl)
        self._raw.pop(key, None)
        if self._slices.pop(key, None) is not None:
            self._inventory = None

    def slices(self) -> list[Mapping[str, Any]]:
        """The current slices, in the order the inventory is assembled from."""
        return list(self._raw.values())

    def inventory(self) -> Inventory:
        inv = self._inventory
        if inv is None:
            parsed = [p for _rv, p in self._slices.values() if not isinstance(p, str)]
            problems = [p for _rv, p in self._slices.values() if isinstance(p, str)]
            inv = self._inventory = Inventory.from_parsed(parsed, problems)
        return inv


def device_ids_of(allocation: Mapping[str, Any] | None, *,
                  include_admin: bool = False, include_shared: bool = True) -> list[DeviceID]:
    """The devices an allocation (``status.allocation``) holds (adminAccess ones left out;
    with ``include_shared`` False also the shares of a device allocated by capacity, the
    results with ``consumedCapacity``)."""
    if not isinstance(allocation, Mapping):
        return []
    devices = allocation.get("devices")
    results = devices.get("results") if isinstance(devices, Mapping) else None
    out: list[DeviceID] = []
    for r in results if isinstance(results, list) else ():
        if not isinstance(r, Mapping):
            continue
        if r.get("adminAccess") is True and not include_admin:
            continue
        if not include_shared and r.get("consumedCapacity") is not None:
            continue
        ident = (r.get("driver"), r.get("pool"), r.get("device"))
        if all(isinstance(x, str) for x in ident):
            out.append(ident)  # type: ignore[arg-type]
    return out


def class_selectors(cls: Mapping[str, Any]) -> Sequence[Any]:
    spec = cls.get("spec")
    sels = spec.get("selectors") if isinstance(spec, Mapping) else None
    return sels if isinstance(sels, list) else []
