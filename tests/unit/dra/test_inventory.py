"""SliceTracker: the inventory kept from ResourceSlice events is the one built from the
slices there are, whatever the sequence of adds, updates and deletes; an unchanged slice's
devices (and their cached selector results) are kept across changes of other slices."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.dra.inventory import Inventory, SliceTracker
from tests.unit.dra.builders import device, node, resource_slice

NODES = [node("n1", zone="a"), node("n2", zone="b")]


def _slice(name: str, variant: int) -> dict[str, Any]:
    """Slice ``name`` in one of a few shapes: node-local, another pool generation, a
    selector pool, all nodes, a pool spread over two slices, malformed."""
    devices = [device(f"d{i}", attrs={"v": variant}) for i in range(1 + variant % 3)]
    if variant == 0:
        sl = resource_slice(name, node="n1", devices=devices)
    elif variant == 1:
        sl = resource_slice(name, node="n2", devices=devices, pool="shared-pool", generation=2)
    elif variant == 2:
        sl = resource_slice(name, devices=devices, pool="shared-pool", generation=1,
                            all_nodes=True)
    elif variant == 3:
        sl = resource_slice(name, devices=[device(f"{name}-x")], pool="two", slice_count=2,
                            node_selector={"nodeSelectorTerms": [{"matchExpressions": [
                                {"key": "zone", "operator": "In", "values": ["a"]}]}]})
    elif variant == 4:
        sl = resource_slice(name, node="n2", devices=devices)
    else:
        sl = resource_slice(name, node="n1", devices=devices)
        sl["spec"]["pool"]["generation"] = "old"  # malformed
    return sl


def _view(inv: Inventory) -> tuple[Any, ...]:
    pools = sorted((k, p.generation, p.slice_count, p.slices, p.invalid,
                    [d.id for d in p.devices]) for k, p in inv.pools.items())
    per_node = [[d.id for d in inv.devices_for_node(n)] for n in NODES]
    return pools, per_node, sorted(inv.problems)


ops = st.lists(st.tuples(st.sampled_from(["put", "delete"]),
                         st.sampled_from(["a", "b", "c", "d"]), st.integers(0, 5)),
               max_size=25)


@settings(max_examples=150, deadline=None)
@given(ops)
def test_tracked_inventory_equals_one_built_from_the_current_slices(
        steps: list[tuple[str, str, int]]) -> None:
    tracker = SliceTracker()
    store: dict[str, dict[str, Any]] = {}  # uid -> slice, in the informer's order
    rv = 0
    for op, name, variant in steps:
        uid = f"uid-{name}"
        if op == "delete":
            gone = store.pop(uid, None)
            if gone is not None:
                tracker.slice_deleted(gone)
            continue
        rv += 1
        sl = _slice(name, variant)
        sl["metadata"]["resourceVersion"] = str(rv)
        old = store.get(uid)
        store[uid] = sl
        if old is None:
            tracker.slice_added(sl)
        else:
            tracker.slice_updated(old, sl)
        assert _view(tracker.inventory()) == _view(Inventory(list(store.values())))
    assert _view(tracker.inventory()) == _view(Inventory(list(store.values())))


def test_unchanged_slices_keep_their_devices_and_reads_between_changes_are_free() -> None:
    tracker = SliceTracker()
    a, b = _slice("a", 0), _slice("b", 4)
    tracker.slice_added(a)
    tracker.slice_added(b)
    first = tracker.inventory()
    assert tracker.inventory() is first  # nothing changed: the same inventory
    [da] = first.devices_for_node(NODES[0])
    da.selected["expr"] = True  # a cached selector result
    b2 = copy.deepcopy(b)
    b2["metadata"]["resourceVersion"] = "9"
    b2["spec"]["devices"].append(device("new"))
    tracker.slice_updated(b, b2)
    second = tracker.inventory()
    assert second is not first
    [da2] = second.devices_for_node(NODES[0])
    assert da2 is da and da2.selected == {"expr": True}
    assert [d.name for d in second.devices_for_node(NODES[1])] == ["d0", "d1", "new"]
    # the same object again (an informer resync) changes nothing
    tracker.slice_updated(b2, b2)
    assert tracker.inventory() is second


def test_a_malformed_slice_is_reported_once_and_its_fix_replaces_it() -> None:
    tracker = SliceTracker()
    bad = _slice("a", 5)
    tracker.slice_added(bad)
    assert len(tracker.new_problems) == 1 and "spec.pool.generation" in tracker.new_problems[0]
    tracker.new_problems.clear()
    assert tracker.inventory().pools == {}
    assert len(tracker.inventory().problems) == 1
    fixed = _slice("a", 0)
    fixed["metadata"]["resourceVersion"] = "2"
    tracker.slice_updated(bad, fixed)
    assert tracker.new_problems == []
    assert tracker.inventory().problems == []
    assert [d.name for d in tracker.inventory().devices_for_node(NODES[0])] == ["d0"]
