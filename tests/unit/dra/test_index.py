"""Property: the free-device index (scheduler/dra/index.py) never rules out a node where the
plain allocator finds an allocation, and kept incrementally it equals one built afresh."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from scheduler.dra.allocator import (
    Allocated,
    AllocationError,
    allocate,
    allocated_at,
    first_fit_shape,
    prepare,
)
from scheduler.dra.index import FreeIndex, build, needs_free_device
from scheduler.dra.inventory import DeviceID, Inventory
from tests.unit.dra.builders import (
    DRIVER,
    claim,
    device,
    device_class,
    exactly,
    first_available,
    model_classes,
    node,
    resource_slice,
)

NODES = ("n0", "n1", "n2")
CLASSES = model_classes()
TAINT = {"key": "broken", "value": "yes", "effect": "NoSchedule"}

# per node: devices (model, tainted)
node_devices_st = st.lists(st.tuples(st.sampled_from("ab"), st.booleans()), max_size=3)
# a request: ("exact", class, count, admin) | ("all", class) | ("first", class, class)
request_st = st.one_of(
    st.tuples(st.just("exact"), st.sampled_from(sorted(CLASSES)), st.integers(1, 2),
              st.booleans()),
    st.tuples(st.just("all"), st.sampled_from(sorted(CLASSES))),
    st.tuples(st.just("first"), st.sampled_from(sorted(CLASSES)),
              st.sampled_from(sorted(CLASSES))),
)
claims_st = st.lists(st.lists(request_st, min_size=1, max_size=2), min_size=1, max_size=2)


def _request(i: int, spec: tuple[Any, ...]) -> dict[str, Any]:
    if spec[0] == "exact":
        return exactly(f"r{i}", spec[1], count=spec[2], admin=spec[3])
    if spec[0] == "all":
        return exactly(f"r{i}", spec[1], all_devices=True)
    return first_available(f"r{i}", ("s0", spec[1], 1), ("s1", spec[2], 1))


def _inventory(per_node: list[list[tuple[str, bool]]]) -> tuple[Inventory, list[DeviceID]]:
    slices, ids = [], []
    for name, devs in zip(NODES, per_node):
        slices.append(resource_slice(f"{name}-s", node=name, devices=[
            device(f"d{i}", attrs={"model": m}, taints=[TAINT] if tainted else None)
            for i, (m, tainted) in enumerate(devs)]))
        ids += [(DRIVER, name, f"d{i}") for i in range(len(devs))]
    return Inventory(slices), ids


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(node_devices_st, min_size=3, max_size=3), claims_st,
       st.lists(st.booleans(), min_size=9, max_size=9))
def test_index_never_rules_out_a_node_the_allocator_accepts(
        per_node: list[list[tuple[str, bool]]], claims_in: list[list[tuple[Any, ...]]],
        held_mask: list[bool]) -> None:
    inv, ids = _inventory(per_node)
    held = {d for d, h in zip(ids, held_mask) if h}
    index = build(inv, held)
    assert index is not None  # every device is node-local
    claims = [claim(f"c{ci}", *[_request(i, r) for i, r in enumerate(reqs)])
              for ci, reqs in enumerate(claims_in)]
    prepared = prepare(claims, CLASSES)
    for name in NODES:
        try:
            out = allocate(prepared, node=node(name), inventory=inv, in_use=held)
        except AllocationError:
            continue
        if isinstance(out, Allocated):
            assert index.may_fit(name) or not needs_free_device(prepared), (name, claims_in)


@settings(max_examples=200, deadline=None)
@given(st.lists(node_devices_st, min_size=3, max_size=3),
       st.lists(st.tuples(st.integers(0, 8), st.booleans()), max_size=20))
def test_kept_incrementally_it_equals_a_fresh_build(
        per_node: list[list[tuple[str, bool]]], steps: list[tuple[int, bool]]) -> None:
    inv, ids = _inventory(per_node)
    index = FreeIndex(inv, ())
    held: set[DeviceID] = set()
    for i, take in steps:
        if i >= len(ids) or (ids[i] in held) == take:
            continue  # the tracker tells transitions only
        (held.add if take else held.discard)(ids[i])
        index.held_changed(ids[i], take)
        fresh = FreeIndex(inv, held)
        assert [index.free(n) for n in NODES] == [fresh.free(n) for n in NODES]
        for n in NODES:
            assert index.free(n) == sum(1 for d in ids if d[1] == n and d not in held)


def test_no_index_when_a_pool_serves_nodes_by_selector() -> None:
    inv = Inventory([resource_slice("shared", all_nodes=True, pool="p", devices=[device("d0")])])
    assert build(inv, ()) is None


def test_requests_that_need_no_free_device_do_not_narrow() -> None:
    cases = [
        ([exactly("r", "any")], True),
        ([exactly("r", "any", count=2)], True),
        ([exactly("r", "any", all_devices=True)], False),
        ([exactly("r", "any", admin=True)], False),
        ([first_available("r", ("s0", "any", 1), ("s1", "a", 2))], True),
        ([exactly("r", "any", all_devices=True), exactly("q", "a")], True),
    ]
    for requests, narrows in cases:
        assert needs_free_device(prepare([claim("c", *requests)], CLASSES)) is narrows, requests


# a class whose selector fails (no such attribute) on the devices of model "b"
ERRING = {"erring": device_class(
    "erring", f'device.attributes["{DRIVER}"].model == "a" || '
              f'device.attributes["{DRIVER}"].nothing == 1')}


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(node_devices_st, min_size=3, max_size=3),
       st.sampled_from(sorted(CLASSES) + ["erring"]), st.integers(1, 3), st.booleans(),
       st.booleans(), st.lists(st.tuples(st.integers(0, 8), st.booleans()), max_size=20))
# a selector failing on the first device, the second selected: an answer on no call
@example([[("b", False), ("a", False)], [], []], "erring", 1, False, True, [])
def test_pick_is_the_allocators_answer(
        per_node: list[list[tuple[str, bool]]], class_name: str, count: int, admin: bool,
        device_taints: bool, steps: list[tuple[int, bool]]) -> None:
    """Filter's shortcut (FreeIndex.pick: held mask kept incrementally, selectors looked at
    lazily across calls) gives the allocation the allocator gives after every change, on
    every node; it answers wherever the allocator finds one for its shape, and never where
    the allocator finds none or a selector fails."""
    inv, ids = _inventory(per_node)
    index = FreeIndex(inv, ())
    held: set[DeviceID] = set()
    prepared = prepare([claim("c", exactly("r", class_name, count=count, admin=admin))],
                       {**CLASSES, **ERRING})
    for i, take in [(0, False), *steps]:
        if i < len(ids) and (ids[i] in held) != take:  # the tracker tells transitions only
            (held.add if take else held.discard)(ids[i])
            index.held_changed(ids[i], take)
        for name in NODES:
            # twice: what the first call looked at must not change the second's answer
            index.pick(prepared, node(name), device_taints=device_taints)
            picked = index.pick(prepared, node(name), device_taints=device_taints)
            try:
                out = allocate(prepared, node=node(name), inventory=inv, in_use=held,
                               device_taints=device_taints)
            except AllocationError:
                assert picked is None
                continue
            if admin:
                assert picked is None  # not the shape it answers for
            elif isinstance(out, Allocated):
                assert picked is not None, (name, per_node, held)
                assert picked.allocations == out.allocations
            else:
                assert picked is None, (name, per_node, held)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(node_devices_st, min_size=3, max_size=3),
       st.sampled_from(sorted(CLASSES) + ["erring"]), st.booleans(),
       st.lists(st.tuples(st.integers(0, 8), st.booleans(), st.booleans()), max_size=20))
# a free device below the one looked at, never looked at itself: left to pick
@example([[("a", False), ("a", False)], [], []], "a", False, [(0, True, True), (0, False, False)])
def test_first_fit_into_answers_as_pick_or_leaves_the_node_to_it(
        per_node: list[list[tuple[str, bool]]], class_name: str, device_taints: bool,
        steps: list[tuple[int, bool, bool]]) -> None:
    """Filter's one pass (FreeIndex.first_fit_into) over the nodes' names, for one device:
    a node it answers gets the device whose allocation is pick's (and the allocator's);
    every other node, names it does not know among them ("" for a node without its
    object), is left to pick; and nothing it answered was left unanswered by pick."""
    inv, ids = _inventory(per_node)
    index = FreeIndex(inv, ())
    held: set[DeviceID] = set()
    prepared = prepare([claim("c", exactly("r", class_name))], {**CLASSES, **ERRING})
    shape = first_fit_shape(prepared)
    assert shape is not None and shape.count == 1
    names = [*NODES, "", "elsewhere"]
    for i, take, ask_pick in steps:
        if i < len(ids) and (ids[i] in held) != take:  # the tracker tells transitions only
            (held.add if take else held.discard)(ids[i])
            index.held_changed(ids[i], take)
        picked: dict[str, Any] = {}
        others = index.first_fit_into(names, picked, device_taints=device_taints,
                                      taints_version=0, shape=shape)
        assert sorted([*others, *(names.index(n) for n in picked)]) == list(range(len(names)))
        assert names.index("") in others and names.index("elsewhere") in others
        # the answers kept across held changes and picks are those the masks give now
        key = (shape.selected_key, device_taints, 0)
        assert set(picked) == {n for n in NODES if _masks_answer(index, key, n)}
        for name, dev in picked.items():
            want = index.pick(prepared, node(name), device_taints=device_taints, shape=shape)
            assert want is not None
            got = allocated_at(prepared, [dev], name, device_taints=device_taints, shape=shape)
            assert got.allocations == want.allocations
            out = allocate(prepared, node=node(name), inventory=inv, in_use=held,
                           device_taints=device_taints)
            assert isinstance(out, Allocated) and out.allocations == got.allocations
        if ask_pick:  # pick looks at devices, so first_fit_into may answer more next time
            for name in NODES:
                index.pick(prepared, node(name), device_taints=device_taints, shape=shape)


def _masks_answer(index: FreeIndex, key: tuple[str, bool, int], name: str) -> bool:
    """Whether the node's masks, read afresh, give first-fit's device at once: the lowest
    free candidate, with no free device below it never looked at."""
    entry = index._masks.get(key, {}).get(name)
    if entry is None:
        return False
    devices, cand, known, full = entry
    avail = ~index._held_mask[name] & full
    low = cand & avail
    low &= -low
    unknown = avail & ~known
    return bool(low) and (not unknown or (unknown & -unknown) > low)


def test_first_fit_into_answers_once_pick_looked() -> None:
    inv, ids = _inventory([[("a", False), ("a", False)], [("b", False)], []])
    index = FreeIndex(inv, ())
    prepared = prepare([claim("c", exactly("r", "a"))], CLASSES)
    shape = first_fit_shape(prepared)
    assert shape is not None
    picked: dict[str, Any] = {}
    # nothing looked at yet: every node is left to pick
    assert index.first_fit_into(list(NODES), picked, device_taints=True, taints_version=0,
                                shape=shape) == [0, 1, 2]
    for name in NODES:
        index.pick(prepared, node(name), device_taints=True, shape=shape)
    assert index.first_fit_into(list(NODES), picked, device_taints=True, taints_version=0,
                                shape=shape) == [1, 2]
    assert picked["n0"].id == ids[0]
    index.held_changed(ids[0], True)  # the first device taken: the second, once looked at
    picked.clear()
    others = index.first_fit_into(list(NODES), picked, device_taints=True, taints_version=0,
                                  shape=shape)
    if others[:1] == [0]:
        index.pick(prepared, node("n0"), device_taints=True, shape=shape)
        others = index.first_fit_into(list(NODES), picked, device_taints=True,
                                      taints_version=0, shape=shape)
    assert others == [1, 2] and picked["n0"].id == ids[1]


def test_pick_follows_taint_changes_by_version() -> None:
    inv, _ids = _inventory([[("a", False)], [], []])
    index = FreeIndex(inv, ())
    prepared = prepare([claim("c", exactly("r", "a"))], CLASSES)
    assert index.pick(prepared, node("n0"), device_taints=True, taints_version=1) is not None
    for pool in inv.pools.values():  # a DeviceTaintRule now taints the device
        for d in pool.devices:
            d.taints = (*d.taints, *inv_taint(d))
    assert index.pick(prepared, node("n0"), device_taints=True, taints_version=2) is None
    assert index.pick(prepared, node("n0"), device_taints=False, taints_version=2) is not None


def inv_taint(d: Any) -> tuple[Any, ...]:
    # the taint of a device tainted from the start: the inventory's own parsed form
    tainted, _ = _inventory([[("a", True)], [], []])
    return tuple(dv.taints for pool in tainted.pools.values() for dv in pool.devices)[0]
