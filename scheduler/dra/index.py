"""Which nodes could possibly satisfy a pod's claims: a per-node count of free devices, kept
incrementally, so that Filter rejects a node whose devices are all held in O(1) instead of
running the allocator over them.

The count is *conservative* (a node it rules out is one where the allocator fails too):

- It is kept only while every device is node-local (``spec.nodeName`` slices); with a
  selector or all-nodes pool a node's devices are not a fixed list and :func:`build` gives
  None (no narrowing).
- A node's free count is the number of its node-local devices (of valid pools: the only ones
  the allocator offers that node) that no claim holds.  Taints, selectors, shared counters and
  pool completeness can only reject more of them, never accept a held one: so a node with
  count 0 has no device a non-admin request may take.
- A device that allows several allocations (consumable capacity: ``allowMultipleAllocations``)
  counts as possibly free whatever holds it: its node is never ruled out.
- The rule applies only to pods where some claim has a request that needs at least one device
  it must hold (:func:`needs_free_device`: ExactCount with count >= 1, not adminAccess, on
  every ``firstAvailable`` alternative).  An ``All`` request, or an adminAccess one, may be
  satisfied without a free device, so such pods are never narrowed by it.

Held devices come from :class:`ClaimTracker` (informer claims and allocations in flight):
the tracker calls :meth:`FreeIndex.held_changed` when a device becomes held or free.

For the common request shape (one device of a class, :func:`allocator.first_fit_shape`)
the index also answers Filter itself (:meth:`FreeIndex.pick`): per node a bit mask of its
held devices (kept with the counts) and, per selector set, a cached mask of the devices
they select (filled lazily, in first-fit order, as the allocator evaluates them); the first
free selected devices are then the lowest bits of one AND, exactly the devices the
allocator's first-fit would take.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from scheduler.dra.allocator import (
    AllocationError,
    MODE_EXACT,
    Alternative as _Alternative,
    Allocated,
    Prepared,
    allocated_at,
    first_fit_accepts,
    first_fit_shape,
)
from scheduler.dra.inventory import Device, DeviceID, Inventory


def _shares(device: object) -> bool:
    # DRAConsumableCapacity marks such a device ``multi`` (allowMultipleAllocations): it can
    # serve several claims, so being held never makes it unavailable.
    return getattr(device, "multi", False) is True


class FreeIndex:
    """Per node, how many of its devices no claim holds (see the module docstring)."""

    __slots__ = ("inventory", "_node_of", "_free", "_always", "_freeable", "_open", "_bit",
                 "_held_mask", "_masks", "_ready")

    def __init__(self, inventory: Inventory, held: Iterable[DeviceID]) -> None:
        self.inventory = inventory
        self._node_of: dict[DeviceID, str] = {}
        self._free: dict[str, int] = {}
        self._always: set[str] = set()
        # devices held by a claim reserved for one pod alone (preemption may free them)
        self._freeable: dict[str, int] = {}
        # nodes where the claims may fit now or after a preemption: free, shared or freeable
        self._open: set[str] = set()
        # each node-local device's bit in its node's masks (its position in the node's list)
        self._bit: dict[DeviceID, int] = {}
        self._held_mask: dict[str, int] = {}
        # (selected_key, device_taints, taints version) -> node -> [the node's devices, the
        # mask of those first-fit accepts, the mask of those looked at, the mask of all its
        # devices], or None (pick cannot answer there); devices are looked at lazily, in
        # first-fit order.  Per selection first, so that Filter's pass over the nodes is one
        # dict lookup a node (``first_fit_into``).
        self._masks: dict[tuple[str, bool, int], dict[str, list[Any] | None]] = {}
        # per selection as ``_masks``: node -> the device first-fit takes there, for the nodes
        # whose masks answer at once (``_answer``); kept as the held masks and the looked-at
        # masks change, so that Filter's pass over the nodes is one dict lookup a node
        # (``first_fit_into``)
        self._ready: dict[tuple[str, bool, int], dict[str, Device]] = {}
        for node, devices in inventory.local_devices().items():
            n = 0
            self._held_mask[node] = 0
            for i, d in enumerate(devices):
                if _shares(d):
                    self._always.add(node)
                    continue
                self._node_of[d.id] = node
                self._bit[d.id] = 1 << i
                n += 1
            self._free[node] = n
            if n:
                self._open.add(node)
        self._open |= self._always
        for ident in held:
            self.held_changed(ident, True)

    def _recheck(self, node: str) -> None:
        if self._free[node] > 0 or self._freeable.get(node, 0) > 0 or node in self._always:
            self._open.add(node)
        else:
            self._open.discard(node)

    def held_changed(self, ident: DeviceID, held: bool) -> None:
        """``ident`` became held (by its first holder) or free (its last holder let go)."""
        node = self._node_of.get(ident)
        if node is not None:
            self._free[node] += -1 if held else 1
            if held:
                self._held_mask[node] |= self._bit[ident]
            else:
                self._held_mask[node] &= ~self._bit[ident]
            self._recheck(node)
            for key, table in self._masks.items():
                entry = table.get(node)
                if entry is not None:
                    self._set_ready(key, node, entry)

    def _set_ready(self, key: tuple[str, bool, int], name: str, entry: list[Any]) -> None:
        """Record whether ``name``'s masks (``entry``) answer at once, and with which device."""
        ready = self._ready.setdefault(key, {})
        device = _answer(entry, self._held_mask[name])
        if device is None:
            ready.pop(name, None)
        else:
            ready[name] = device

    def reserved_changed(self, devices: Iterable[DeviceID], delta: int) -> None:
        """A claim reserved for one pod alone came (+1) or went (-1) with these devices."""
        for ident in devices:
            node = self._node_of.get(ident)
            if node is not None:
                self._freeable[node] = self._freeable.get(node, 0) + delta
                self._recheck(node)

    def open_count(self) -> int:
        """How many nodes :meth:`candidates` would give (without copying them)."""
        return len(self._open)

    def candidates(self) -> set[str]:
        """The nodes where the claims could be allocated, now (a free device) or once
        preemption evicted a pod (a device held by a claim reserved for one pod alone):
        a copy."""
        return set(self._open)

    def may_fit(self, node_name: str) -> bool:
        """False only when every device of the node is held (and none is shared)."""
        return self._free.get(node_name, 0) > 0 or node_name in self._always

    def free(self, node_name: str) -> int:
        return self._free.get(node_name, 0)

    def pick(self, prepared: Prepared, node: Mapping[str, Any], *, device_taints: bool,
             taints_version: int = 0, shape: _Alternative | None = None,
             node_name: str | None = None) -> Allocated | None:
        """The allocation the allocator's first-fit makes on ``node`` for the common shape
        (``shape``: :func:`allocator.first_fit_shape` of ``prepared``, worked out here when
        not given), from the held and candidate masks; None when this cannot answer
        (another shape, a selector error, a device shared by capacity, devices offered in
        another order) or the node has too few free selected devices: the caller then runs
        the allocator, which says why.  Exact only for ``in_use`` = the tracker's held
        devices (no preemption what-if) and no shared counters.  ``taints_version`` changes
        whenever the devices' taints may have (DeviceTaintRules applied again): the
        candidate masks are per version."""
        alt = shape if shape is not None else first_fit_shape(prepared)
        if alt is None:
            return None
        name = node_name if node_name is not None else \
            str((node.get("metadata") or {}).get("name") or "")
        key = (alt.selected_key, device_taints, taints_version)
        table = self._masks.setdefault(key, {})
        entry = table.get(name)
        if entry is None:
            if name in table:
                return None
            entry = table[name] = self._candidates(node, name)
            if entry is None:
                return None
            self._set_ready(key, name, entry)
        devices, cand, known, full = entry
        avail = ~self._held_mask.get(name, 0) & full
        count = alt.count
        picks: list[Device] = []
        unknown = avail & ~known
        if count == 1:
            # first-fit's device: the lowest free accepted one, if no free device below it
            # is still to be looked at
            low = cand & avail
            low &= -low
            if low and (not unknown or (unknown & -unknown) > low):
                return allocated_at(prepared, [devices[low.bit_length() - 1]], name,
                                    device_taints=device_taints, shape=alt)
        if unknown:
            # Some free device was never looked at: in first-fit order, evaluate the
            # selectors on the free devices not seen yet, as far as first-fit goes.
            try:
                while avail and len(picks) < count:
                    low = avail & -avail
                    avail ^= low
                    if not known & low:
                        if first_fit_accepts(prepared, devices[low.bit_length() - 1],
                                             device_taints=device_taints):
                            cand |= low
                        known |= low  # only once it evaluated without an error
                    if cand & low:
                        picks.append(devices[low.bit_length() - 1])
            except AllocationError:
                return None  # the allocator reports it
            finally:
                if entry[1] != cand or entry[2] != known:
                    entry[1], entry[2] = cand, known
                    self._set_ready(key, name, entry)
        else:
            free = cand & avail
            while free and len(picks) < count:
                low = free & -free
                picks.append(devices[low.bit_length() - 1])
                free ^= low
        if len(picks) < count:
            return None
        return allocated_at(prepared, picks, name, device_taints=device_taints, shape=alt)

    def first_fit_into(self, names: Sequence[str], picked: dict[str, Device], *,
                       device_taints: bool, taints_version: int, shape: _Alternative
                       ) -> list[int]:
        """For a one-device request (``shape.count`` 1): for each node of ``names`` whose
        masks answer at once (the node's masks known, every free device below the pick
        looked at), the device :meth:`pick` would allocate there goes into ``picked`` (by
        node name); the positions in ``names`` of the other nodes are returned (ask
        :meth:`may_fit` and :meth:`pick`).  A name the index does not know (``""`` for a
        node without its object) is one of the others.  A device, not an allocation:
        nothing is allocated per node (at hundreds of nodes a pod, the allocations and
        their closures were most of Filter's cost, much of it in the garbage collector).
        The answers are kept as the masks change (``_ready``): one dict lookup a node."""
        assert shape.count == 1
        ready = self._ready.get((shape.selected_key, device_taints, taints_version))
        if ready is None:
            return list(range(len(names)))
        get = ready.get
        others: list[int] = []
        for i, name in enumerate(names):
            device = get(name)
            if device is not None:
                picked[name] = device
            else:
                others.append(i)
        return others

    def _candidates(self, node: Mapping[str, Any], name: str) -> list[Any] | None:
        """[the node's devices, the candidate mask, the mask of devices looked at] (no
        device looked at yet), or None where pick cannot answer: a device shared by
        capacity, devices offered in another order than the index's."""
        if name in self._always or name not in self._held_mask:
            return None  # a device shared by capacity; or no node-local device at all
        local = self.inventory.local_devices().get(name, ())
        offered = self.inventory.devices_for_node(node)
        if len(offered) != len(local) or any(a is not b for a, b in zip(offered, local)):
            return None
        if any(d.multi for d in local):
            return None
        return [local, 0, 0, (1 << len(local)) - 1]


def _answer(entry: list[Any], held: int) -> Device | None:
    """The device first-fit takes on a node from its masks (``entry``: its devices, the
    candidate mask, the looked-at mask, all its devices; ``held``: its held mask), when they
    answer at once: the lowest free candidate, no free device below it still to be looked
    at; else None."""
    avail = ~held & entry[3]
    low = entry[1] & avail
    low &= -low
    if not low:
        return None
    unknown = avail & ~entry[2]
    if unknown and (unknown & -unknown) < low:
        return None
    device: Device = entry[0][low.bit_length() - 1]
    return device


def build(inventory: Inventory, held: Iterable[DeviceID]) -> FreeIndex | None:
    """The index for this inventory, or None when some devices are not node-local."""
    if inventory.has_shared_devices():
        return None
    return FreeIndex(inventory, held)


def needs_free_device(prepared: Prepared) -> bool:
    """Whether every allocation of these claims must hold at least one device (some request
    is ExactCount with count >= 1 and no adminAccess, on every alternative)."""
    for req in prepared.requests:
        if req.alternatives and all(alt.mode == MODE_EXACT and alt.count >= 1
                                    and not alt.admin for alt in req.alternatives):
            return True
    return False
