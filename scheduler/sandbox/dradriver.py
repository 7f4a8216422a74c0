"""A simulated DRA driver: the ResourceSlices and DeviceClass a node-local driver publishes.

Why: DynamicResources can only allocate devices some driver published. On a cluster each
node's driver (a kubelet plugin) publishes a ResourceSlice per node, with an owner reference to
the Node; scheduler_perf's test driver does the same with synthetic devices. ``sandbox
--dra-devices gpu=8`` (and ``run --sandbox --dra-devices``) reproduces that: for every
simulated node, one ResourceSlice of driver ``gpu.example.com``, pool = the node's name,
``generation`` 1, ``resourceSliceCount`` 1, eight devices ``gpu-0`` .. ``gpu-7`` with the
attributes ``index`` (int), ``model`` (string), ``uuid`` (string), ``driverVersion``
(semver) and the capacity ``memory``; plus a DeviceClass ``gpu.example.com`` whose CEL
selector picks the driver's devices. Every write goes through the registry (validation,
watch events). Nodes added later get their slice when they appear; a deleted node's slices go
with it (the garbage collector follows the owner reference; the driver also removes them).

Spec grammar, one per kind (the flag repeats, or kinds are comma-separated):
``KIND=COUNT[:KEY=VALUE...]``: ``memory`` is the capacity of each device (default 80Gi),
``model`` its model attribute (default ``<KIND>-model``), ``nodes`` how many nodes have such
devices (the first ones by name; default all), any other key an extra attribute
(an int if it parses as one, else a string). ``KIND`` is a DNS label; the driver is
``KIND.example.com``.

``partitions=N`` (N >= 2) publishes each device as a partitionable device
(DRAPartitionableDevices), as a MIG-capable GPU's driver does: a counter set ``<KIND>-<i>``
with the counter ``memory`` (the device's memory) in a slice of its own, and in a second
slice of the same pool the whole device ``<KIND>-<i>`` consuming all of it beside ``N``
partitions ``<KIND>-<i>-part-<j>`` consuming a ``N``-th each (attribute ``partition``: j,
capacity ``memory``: their share). Allocating the whole device leaves no partition, and the
other way round.

``shared=true`` publishes each device with ``allowMultipleAllocations: true``
(DRAConsumableCapacity): several claims share it while the ``memory`` they ask for
(``capacity.requests``) adds up to at most its capacity; ``step=Q`` adds a request policy
(``validRange`` from Q to the device's memory in steps of Q, default Q).

``extendedResourceName=NAME`` (DRAExtendedResource) publishes the DeviceClass with
``spec.extendedResourceName: NAME``: pods asking for ``NAME`` in their containers' resources
get the driver's devices through a claim the scheduler makes (every class also backs its
implicit ``deviceclass.resource.kubernetes.io/<class>``).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from scheduler.objects.resources import is_extended_resource_name

from .dra import dns_label
from .errors import ApiError
from .resources import ResourceType
from .store import ADDED, DELETED, Event, Informer
from .validation import parse_quantity
from .wakeloop import wake_loop

if TYPE_CHECKING:
    from .registry import Registry

Obj = dict[str, Any]
log = logging.getLogger("scheduler.sandbox")

DRIVER_DOMAIN = "example.com"
DRIVER_VERSION = "1.0.0"
MAX_DEVICES = 128  # one slice holds at most 128 devices
MAX_PARTITIONED_DEVICES = 64  # ... and at most 64 when they consume counters


@dataclass(frozen=True)
class DeviceKind:
    """One kind of simulated device and how many each node has."""

    name: str
    count: int
    memory: str = "80Gi"
    model: str = ""
    attributes: dict[str, int | str] = field(default_factory=dict)
    nodes: int | None = None  # publish on this many nodes only (None: all)
    partitions: int = 0  # publish each device with this many partitions (0: plain devices)
    shared: bool = False  # allowMultipleAllocations: shared by capacity
    step: str = ""  # the shared memory's request policy step (validRange)
    extended_resource: str = ""  # the DeviceClass's spec.extendedResourceName ("" none)

    @property
    def driver(self) -> str:
        return f"{self.name}.{DRIVER_DOMAIN}"


def parse_device_kinds(text: str) -> list[DeviceKind]:
    """``gpu=8,nic=2:model=cx7``; raises ValueError naming the bad part."""
    out: list[DeviceKind] = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        head, *opts = part.split(":")
        kind, eq, count_s = head.partition("=")
        kind = kind.strip()
        if not eq:
            raise ValueError(f"{part!r}: expected KIND=COUNT")
        if dns_label(kind, "kind"):
            raise ValueError(f"{part!r}: the kind {kind!r} must be a lowercase DNS label")
        try:
            count = int(count_s)
        except ValueError:
            raise ValueError(f"{part!r}: the count {count_s!r} is not an integer") from None
        if not 0 < count <= MAX_DEVICES:
            raise ValueError(f"{part!r}: the count must be between 1 and {MAX_DEVICES}")
        memory, model, attrs, nodes, partitions = "80Gi", f"{kind}-model", {}, None, 0
        shared, step, extended = False, "", ""
        for opt in opts:
            k, eq, v = opt.partition("=")
            if not eq or not k:
                raise ValueError(f"{part!r}: option {opt!r} is not KEY=VALUE")
            if k == "memory":
                q = parse_quantity(v)
                if q is None or q < 0:
                    raise ValueError(f"{part!r}: memory {v!r} is not a quantity")
                memory = v
            elif k == "model":
                model = v
            elif k == "nodes":
                if not v.isdigit():
                    raise ValueError(f"{part!r}: nodes {v!r} is not a non-negative integer")
                nodes = int(v)
            elif k == "partitions":
                if not v.isdigit() or int(v) < 2:
                    raise ValueError(f"{part!r}: partitions {v!r} is not an integer of at least 2")
                partitions = int(v)
            elif k == "shared":
                if v not in ("true", "false"):
                    raise ValueError(f"{part!r}: shared {v!r} is not true or false")
                shared = v == "true"
            elif k == "extendedResourceName":
                if not is_extended_resource_name(v):
                    raise ValueError(f"{part!r}: extendedResourceName {v!r} is not a valid "
                                     "extended resource name")
                extended = v
            elif k == "step":
                q = parse_quantity(v)
                if q is None or q <= 0:
                    raise ValueError(f"{part!r}: step {v!r} is not a positive quantity")
                step = v
            else:
                attrs[k] = int(v) if v.lstrip("-").isdigit() else v
        if any(k.name == kind for k in out):
            raise ValueError(f"{part!r}: the kind {kind!r} is given twice")
        if partitions and count * (partitions + 1) > MAX_PARTITIONED_DEVICES:
            raise ValueError(f"{part!r}: {count} devices of {partitions} partitions make "
                             f"{count * (partitions + 1)} devices, more than a slice holds "
                             f"({MAX_PARTITIONED_DEVICES})")
        if shared and partitions:
            raise ValueError(f"{part!r}: shared and partitions do not go together")
        if step and not shared:
            raise ValueError(f"{part!r}: step needs shared=true")
        out.append(DeviceKind(kind, count, memory=memory, model=model, attributes=attrs, nodes=nodes,
                              partitions=partitions, shared=shared, step=step,
                              extended_resource=extended))
    return out


def device_class(kind: DeviceKind) -> Obj:
    spec: Obj = {"selectors": [{"cel": {"expression": f'device.driver == "{kind.driver}"'}}]}
    if kind.extended_resource:
        spec["extendedResourceName"] = kind.extended_resource
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": kind.driver},
            "spec": spec}


def _attr(v: int | str) -> Obj:
    return {"int": v} if isinstance(v, int) else {"string": v}


def _device(kind: DeviceKind, node_name: str, name: str, i: int, memory: str) -> Obj:
    key = str(i) if name == f"{kind.name}-{i}" else name  # a plain device's uuid as before
    attrs: Obj = {"index": {"int": i}, "model": {"string": kind.model},
                  "uuid": {"string": str(uuid.uuid5(uuid.NAMESPACE_URL, f"{kind.driver}/{node_name}/{key}"))},
                  "driverVersion": {"version": DRIVER_VERSION}}
    attrs.update({k: _attr(v) for k, v in kind.attributes.items()})
    return {"name": name, "attributes": attrs, "capacity": {"memory": {"value": memory}}}


def node_slices(kind: DeviceKind, node: Obj) -> list[Obj]:
    """The ResourceSlices ``kind``'s driver publishes for ``node``: one of devices, plus one
    of shared counters for partitionable devices."""
    nmd = node["metadata"]
    name = nmd["name"]
    devices = []
    counter_sets = []
    for i in range(kind.count):
        if kind.partitions:
            whole = f"{kind.name}-{i}"
            q = parse_quantity(kind.memory) or 0
            share = str(int(q) // kind.partitions)
            counter_sets.append({"name": whole, "counters": {"memory": {"value": kind.memory}}})
            dev = _device(kind, name, whole, i, kind.memory)
            dev["consumesCounters"] = [{"counterSet": whole,
                                        "counters": {"memory": {"value": kind.memory}}}]
            devices.append(dev)
            for j in range(kind.partitions):
                part = _device(kind, name, f"{whole}-part-{j}", i, share)
                part["attributes"]["partition"] = {"int": j}
                part["consumesCounters"] = [{"counterSet": whole,
                                             "counters": {"memory": {"value": share}}}]
                devices.append(part)
        else:
            dev = _device(kind, name, f"{kind.name}-{i}", i, kind.memory)
            if kind.shared:
                dev["allowMultipleAllocations"] = True
                if kind.step:
                    dev["capacity"]["memory"]["requestPolicy"] = {
                        "default": kind.step,
                        "validRange": {"min": kind.step, "max": kind.memory, "step": kind.step}}
            devices.append(dev)
    count = 2 if counter_sets else 1

    def one(spec: Obj) -> Obj:
        return {
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"generateName": f"{name}-{kind.driver}-",
                         "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": name,
                                              "uid": nmd["uid"], "controller": True}]},
            "spec": {"driver": kind.driver, "nodeName": name,
                     "pool": {"name": name, "generation": 1, "resourceSliceCount": count},
                     **spec},
        }

    out = [one({"devices": devices})]
    if counter_sets:
        out.append(one({"sharedCounters": counter_sets}))
    return out


class DraDriverSim:
    """Publishes the slices of every simulated node, and the device classes."""

    def __init__(self, registry: Registry, kinds: list[DeviceKind], *, delay: float = 0.003) -> None:
        self.registry = registry
        self.kinds = kinds
        self.delay = delay
        cat = registry.catalog
        self.nodes_rt = cat.builtin("", "nodes")
        self.slices_rt = cat.builtin("resource.k8s.io", "resourceslices")
        self.classes_rt = cat.builtin("resource.k8s.io", "deviceclasses")
        self._wake = asyncio.Event()
        self.informer = Informer(registry.store, wake=self._wake, types=(self.nodes_rt,), keep=_added_or_removed)

    def publish_all(self) -> None:
        """The device classes, and a slice per kind for every simulated node that lacks one."""
        for kind in self.kinds:
            if self.registry.ts(self.classes_rt).get("", kind.driver) is None:
                self.registry.create(self.classes_rt, "", device_class(kind))
        nodes = sorted((e.obj for e in self.registry.ts(self.nodes_rt).entries()),
                       key=lambda n: str(n["metadata"]["name"]))
        published = self._published()
        for node in nodes:
            self.node_added(node, published=published)

    def _published(self) -> set[tuple[str, str]]:
        """(node, driver) of every node-local slice in the store."""
        out = set()
        for e in self.registry.ts(self.slices_rt).entries():
            spec = e.obj.get("spec") or {}
            if spec.get("nodeName"):
                out.add((str(spec["nodeName"]), str(spec.get("driver", ""))))
        return out

    def _slices_of(self, node_name: str) -> list[Obj]:
        return [e.obj for e in self.registry.ts(self.slices_rt).entries()
                if (e.obj.get("spec") or {}).get("nodeName") == node_name]

    def node_added(self, node: Obj, *, published: set[tuple[str, str]] | None = None) -> None:
        from .kubelet import SIMULATED

        if ((node["metadata"].get("annotations") or {}).get(SIMULATED)) == "false":
            return  # a node without the simulated kubelet has no simulated driver either
        if published is None:
            published = self._published()
        name = str(node["metadata"]["name"])
        for kind in self.kinds:
            if (name, kind.driver) in published:
                continue
            if kind.nodes is not None and sum(1 for _, d in published if d == kind.driver) >= kind.nodes:
                continue
            for sl in node_slices(kind, node):
                self.registry.create(self.slices_rt, "", sl)
            published.add((name, kind.driver))

    def node_removed(self, node: Obj) -> None:
        drivers = {k.driver for k in self.kinds}
        for s in self._slices_of(node["metadata"]["name"]):
            if (s.get("spec") or {}).get("driver") in drivers:
                try:
                    self.registry.delete(self.slices_rt, "", s["metadata"]["name"], {})
                except ApiError as err:
                    if err.code != 404:
                        raise

    # ------------------------------------------------------------ the watch and the loop

    def sync(self) -> None:
        """One pass: on the informer's initial list (its first open, or a reopening), publish
        for every node listed (and the classes); then act on the nodes added and removed since."""
        if self.informer.open():
            self.publish_all()
        for _, ev in self.informer.drain():
            try:
                if ev.type == ADDED:
                    self.node_added(ev.obj)
                else:
                    self.node_removed(ev.obj)
            except Exception:  # one node's failure must not drop the others' events
                log.exception("dra driver simulation failed")

    def _open(self) -> None:
        if not self.informer.is_open:
            self._wake.set()  # the initial list is the first pass's

    async def run(self, *, iterations: int | None = None) -> None:
        try:
            await wake_loop(self._wake, self.sync, delay=self.delay, before=self._open,
                            what="dra driver simulation", iterations=iterations)
        finally:
            self.informer.close()


def _added_or_removed(rt: ResourceType, ev: Event) -> bool:
    """The node events the driver acts on, chosen before queueing (an update changes no slice)."""
    return ev.type in (ADDED, DELETED)
