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
"""

from __future__ import annotations

from collections.abc import Iterable

from scheduler.dra.allocator import MODE_EXACT, Prepared
from scheduler.dra.inventory import DeviceID, Inventory


def _shares(device: object) -> bool:
    # DRAConsumableCapacity marks such a device ``multi`` (allowMultipleAllocations): it can
    # serve several claims, so being held never makes it unavailable.
    return getattr(device, "multi", False) is True


class FreeIndex:
    """Per node, how many of its devices no claim holds (see the module docstring)."""

    __slots__ = ("inventory", "_node_of", "_free", "_always", "_freeable", "_open")

    def __init__(self, inventory: Inventory, held: Iterable[DeviceID]) -> None:
        self.inventory = inventory
        self._node_of: dict[DeviceID, str] = {}
        self._free: dict[str, int] = {}
        self._always: set[str] = set()
        # devices held by a claim reserved for one pod alone (preemption may free them)
        self._freeable: dict[str, int] = {}
        # nodes where the claims may fit now or after a preemption: free, shared or freeable
        self._open: set[str] = set()
        for node, devices in inventory.local_devices().items():
            n = 0
            for d in devices:
                if _shares(d):
                    self._always.add(node)
                    continue
                self._node_of[d.id] = node
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
            self._recheck(node)

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
