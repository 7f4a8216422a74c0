"""PreFilter narrows the nodes to those where the claims may fit (a free device, or one a
preemption could free) when they are few; Filter rejects a full node without the allocator."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.framework.cycle_state import CycleState
from scheduler.objects.pod import PodInfo
from scheduler.plugins.dynamicresources.plugin import (
    NARROW_BELOW,
    STATE_KEY,
    DynamicResources,
)
from tests.builders import make_node
from tests.fakes import FakeHandle, WatchingListers, node_infos
from tests.unit.dra.builders import DRIVER, claim, device, exactly, gpu_class, resource_slice
from tests.unit.plugins.dynamicresources.test_plugin import pod_with


def _holder(i: int, node: str, reserved_for: str | None) -> dict[str, Any]:
    c = claim(f"h{i}", exactly("r"))
    c["status"] = {"allocation": {"devices": {"results": [
        {"request": "r", "driver": DRIVER, "pool": node, "device": "g0"}]}}}
    if reserved_for is not None:
        c["status"]["reservedFor"] = [{"resource": "pods", "name": reserved_for,
                                       "uid": f"uid-{reserved_for}"}]
    return c


def _plugin(nodes: int, free: set[int], reserved: set[int], extra: list[dict[str, Any]]
            ) -> tuple[DynamicResources, FakeHandle, list[str]]:
    names = [f"m{i}" for i in range(nodes)]
    holders = [_holder(i, n, f"p{i}" if i in reserved else None)
               for i, n in enumerate(names) if i not in free]
    handle = FakeHandle(node_infos([make_node(n) for n in names]))
    handle._listers = WatchingListers({
        "resourceclaims": [*holders, *extra],
        "resourceslices": [resource_slice(f"{n}-gpus", node=n, devices=[device("g0")])
                           for n in names],
        "deviceclasses": [gpu_class()]})
    return DynamicResources(None, handle), handle, names  # type: ignore[arg-type]


def _allocations(p: DynamicResources, data: Any, names: list[str]) -> dict[str, Any]:
    """Node -> the allocations Filter found there (what Reserve would hold)."""
    out = {}
    for n in names:
        alloc = p._allocation_on(data, n)
        if alloc is not None:
            out[n] = alloc.allocations
    return out


@pytest.mark.parametrize(("nodes", "free", "reserved", "requests", "want"), [
    # two free nodes of ten: only they are filtered
    (10, {2, 7}, set(), [exactly("r")], {"m2", "m7"}),
    # a device held by a claim reserved for one pod: preemption may free it, kept
    (10, {2}, {5}, [exactly("r")], {"m2", "m5"}),
    # no free node: no narrowing (every node says why itself)
    (10, set(), set(), [exactly("r")], None),
    # every node free: nothing to narrow
    (4, {0, 1, 2, 3}, set(), [exactly("r")], None),
    # an All request and an adminAccess one need no free device: no narrowing
    (10, {2}, set(), [exactly("r", all_devices=True)], None),
    (10, {2}, set(), [exactly("r", admin=True)], None),
    # as many candidates as upstream's minimum of feasible nodes to find: no narrowing
    (NARROW_BELOW + 1, set(range(NARROW_BELOW)), set(), [exactly("r")], None),
])
def test_prefilter_narrows_to_nodes_where_the_claims_may_fit(
        nodes: int, free: set[int], reserved: set[int], requests: list[dict[str, Any]],
        want: set[str] | None) -> None:
    p, handle, _names = _plugin(nodes, free, reserved, [claim("mine", *requests)])
    result, status = p.pre_filter(CycleState(), PodInfo.from_pod(pod_with("p", "mine")),
                                  handle.snapshot().list())
    assert status is None
    got = None if result is None or result.all_nodes() else result.node_names
    assert got == want
    assert result is None or result.all_nodes() or result.shortcut


def test_candidates_follow_claim_events() -> None:
    p, handle, names = _plugin(6, {1}, set(), [claim("mine", exactly("r"))])
    listers = handle._listers

    def narrowed() -> set[str] | None:
        result, _ = p.pre_filter(CycleState(), PodInfo.from_pod(pod_with("p", "mine")),
                                 handle.snapshot().list())
        return None if result is None else result.node_names

    assert narrowed() == {"m1"}
    listers.delete("resourceclaims", _holder(3, "m3", None))  # m3's device freed
    assert narrowed() == {"m1", "m3"}
    listers.put("resourceclaims", _holder(1, "m1", "q"))  # m1 taken by a claim reserved for one pod
    assert narrowed() == {"m1", "m3"}
    listers.put("resourceclaims", _holder(1, "m1", None))  # ... then reserved for nobody: not freeable
    assert narrowed() == {"m3"}


@pytest.mark.parametrize("requests", [
    [exactly("r")],  # Filter's first-fit shortcut and score_nodes' one answer
    [exactly("r", all_devices=True)],  # the allocator and the per-node scores
])
def test_filter_and_scores_with_the_index_match_node_by_node(
        requests: list[dict[str, Any]]) -> None:
    """With the index watching claims, Filter's answers and allocations and score_nodes'
    scores are what the plain allocator and per-node Score give."""
    p, handle, names = _plugin(6, {1, 3, 4}, set(), [claim("mine", *requests)])
    plain, plain_handle, _ = _plugin(6, {1, 3, 4}, set(), [claim("mine", *requests)])
    info = PodInfo.from_pod(pod_with("p", "mine"))
    nodes = handle.snapshot().list()
    state, plain_state = CycleState(), CycleState()
    p.pre_filter(state, info, nodes)
    plain.pre_filter(plain_state, info, plain_handle.snapshot().list())
    plain_state.read(STATE_KEY).index = None  # the plain path: no index shortcuts
    got = [p.filter(state, info, ni) for ni in nodes]
    want = [plain.filter(plain_state, info, ni) for ni in plain_handle.snapshot().list()]
    assert [s is None for s in got] == [s is None for s in want]
    ours, theirs = state.read(STATE_KEY), plain_state.read(STATE_KEY)
    assert ours.first_fit is not None or requests[0]["exactly"].get("allocationMode")
    assert _allocations(p, ours, names) == _allocations(plain, theirs, names)
    scores, _ = p.score_nodes(state, info, nodes)
    assert scores == [p.score(state, info, ni)[0] for ni in nodes]


@pytest.mark.parametrize(("nodes", "free", "requests"), [
    (6, {1, 3, 4}, [exactly("r")]),  # the index answers every node (full ones rejected)
    (6, set(), [exactly("r")]),  # every node full
    (5, {0, 1, 2, 3, 4}, [exactly("r")]),  # every node free
    (6, {1, 3, 4}, [exactly("r", count=2)]),  # more than the node has: the allocator says why
    (6, {1, 3, 4}, [exactly("r", all_devices=True)]),  # not the first-fit shape: node by node
])
def test_filter_nodes_answers_what_filter_answers_node_by_node(
        nodes: int, free: set[int], requests: list[dict[str, Any]]) -> None:
    """``filter_nodes`` (one pass of the index over all nodes) gives each node the status,
    allocation and explanation that ``filter`` gives it alone."""
    p, handle, names = _plugin(nodes, free, set(), [claim("mine", *requests)])
    one, one_handle, _ = _plugin(nodes, free, set(), [claim("mine", *requests)])
    info = PodInfo.from_pod(pod_with("p", "mine"))
    state, one_state = CycleState(), CycleState()
    p.pre_filter(state, info, handle.snapshot().list())
    one.pre_filter(one_state, info, one_handle.snapshot().list())
    got = p.filter_nodes(state, info, handle.snapshot().list())
    want = [one.filter(one_state, info, ni) for ni in one_handle.snapshot().list()]

    def view(s: Any) -> Any:
        return None if s is None else (s.code, s.reasons)
    assert [view(s) for s in got] == [view(s) for s in want]
    assert len({id(s) for s in got if s is not None}) == sum(s is not None for s in got)
    ours, theirs = state.read(STATE_KEY), one_state.read(STATE_KEY)
    assert _allocations(p, ours, names) == _allocations(one, theirs, names)
    assert set(ours.details) == set(theirs.details)
    for n in ours.details:
        a, b = ours.details[n], theirs.details[n]
        assert (a if isinstance(a, list) else a.details) == (
            b if isinstance(b, list) else b.details)


def _ext_plugin(held: dict[str, int]) -> tuple[DynamicResources, FakeHandle, list[str]]:
    """Nodes m0..m4 with two devices each through DRA, a class backing ``example.com/gpu``;
    ``held``: node -> how many of its devices claims of no pod hold."""
    from tests.unit.plugins.dynamicresources.test_extended import gpu_class as ext_class

    names = [f"m{i}" for i in range(5)]
    holders = []
    for node, count in held.items():
        for d in range(count):
            c = claim(f"h-{node}-{d}", exactly("r"))
            c["status"] = {"allocation": {"devices": {"results": [
                {"request": "r", "driver": DRIVER, "pool": node, "device": f"g{d}"}]}}}
            holders.append(c)
    handle = FakeHandle(node_infos([make_node(n) for n in names]))
    handle._listers = WatchingListers({
        "resourceclaims": holders,
        "resourceslices": [resource_slice(f"{n}-gpus", node=n, devices=[device("g0"),
                                                                         device("g1")])
                           for n in names],
        "deviceclasses": [ext_class()]})
    return DynamicResources(None, handle), handle, names  # type: ignore[arg-type]


@pytest.mark.parametrize(("count", "held"), [
    (1, {}),  # every node free: first-fit's g0 everywhere
    (1, {"m0": 2, "m1": 1, "m3": 2}),  # full nodes rejected, m1 gets g1
    (2, {"m1": 1, "m2": 2}),  # two devices: only nodes with both free
    (3, {}),  # more than a node has: the allocator says why
])
def test_extended_resource_pods_take_the_index_first_fit_as_the_allocator_would(
        count: int, held: dict[str, int]) -> None:
    """A pod whose extended resource a DeviceClass backs gets, with the free-device index,
    the statuses, allocations and explanations the allocator gives without it."""
    from tests.unit.plugins.dynamicresources.test_extended import gpu_pod

    p, handle, names = _ext_plugin(held)
    plain, plain_handle, _ = _ext_plugin(held)
    info = PodInfo.from_pod(gpu_pod("p", count=count))
    state, plain_state = CycleState(), CycleState()
    p.pre_filter(state, info, handle.snapshot().list())
    plain.pre_filter(plain_state, info, plain_handle.snapshot().list())
    ours, theirs = state.read(STATE_KEY), plain_state.read(STATE_KEY)
    assert ours.ext is not None and ours.ext.index is not None
    theirs.ext.index = None  # the plain path: the allocator on every node
    got = [p.filter(state, info, ni) for ni in handle.snapshot().list()]
    want = [plain.filter(plain_state, info, ni) for ni in plain_handle.snapshot().list()]
    assert [None if s is None else (s.code, s.reasons) for s in got] == [
        None if s is None else (s.code, s.reasons) for s in want]
    assert _allocations(p, ours, names) == _allocations(plain, theirs, names)
    assert ours.ext.by_node == theirs.ext.by_node
    assert set(ours.details) == set(theirs.details)
    for n in ours.details:
        a, b = ours.details[n], theirs.details[n]
        assert (a if isinstance(a, list) else a.details) == (
            b if isinstance(b, list) else b.details)
    if count == 1 and held:  # Reserve holds the special claim's picked device
        assert p.reserve(state, info, "m1") is None
        assert p.tracker.in_flight(ours.ext.key) == theirs.by_node["m1"].allocations[0]
