"""ClaimTracker's incremental count of held devices equals a full recount, whatever the order
of claim events and Reserve/Unreserve; the plugin follows the claim informer's events."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.dra.inventory import DeviceID, device_ids_of
from scheduler.framework.status import Code
from scheduler.objects.pod import PodInfo
from scheduler.plugins.dynamicresources.claims import ClaimTracker, allocation_of
from scheduler.plugins.dynamicresources.plugin import (
    REASON_CANNOT_ALLOCATE,
    DynamicResources,
)
from tests.builders import make_node
from tests.fakes import DictListers, FakeHandle, WatchingListers, node_infos
from tests.unit.dra.builders import DRIVER, claim, device, exactly, gpu_class, resource_slice
from tests.unit.plugins.dynamicresources.test_plugin import NODES, SLICES, filter_all, pod_with

CLAIMS = ("a", "b", "c")
DEVICES = ("g0", "g1", "g2")
UIDS = ("u1", "u2")


def allocation(*devices: str, admin: bool = False) -> dict[str, Any]:
    results = [{"request": "r", "driver": DRIVER, "pool": "n1", "device": d} for d in devices]
    if admin:
        for r in results:
            r["adminAccess"] = True
    return {"devices": {"results": results}}


alloc_st = st.one_of(
    st.none(),
    st.builds(lambda ds, admin: allocation(*ds, admin=admin),
              st.lists(st.sampled_from(DEVICES), max_size=2, unique=True), st.booleans()))
op_st = st.one_of(
    st.tuples(st.just("put"), st.sampled_from(CLAIMS), alloc_st),
    st.tuples(st.just("delete"), st.sampled_from(CLAIMS), st.none()),
    st.tuples(st.just("assume"), st.sampled_from(CLAIMS), st.sampled_from(UIDS),
              st.lists(st.sampled_from(DEVICES), min_size=1, max_size=2, unique=True)),
    st.tuples(st.just("forget"), st.sampled_from(CLAIMS), st.sampled_from(UIDS)),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(op_st, max_size=40))
def test_incremental_held_devices_equal_a_full_recount(ops: list[tuple[Any, ...]]) -> None:
    tracker = ClaimTracker()
    store: dict[str, dict[str, Any]] = {}
    flight: dict[str, tuple[str, dict[str, Any]]] = {}  # the model of the assume cache
    version = 0
    for op in ops:
        key = f"default/{op[1]}"
        if op[0] == "put":
            version += 1
            new = claim(op[1], exactly("r"), allocation=op[2])
            new["metadata"]["resourceVersion"] = str(version)
            old = store.get(key)
            store[key] = new
            if old is None:
                tracker.claim_added(new)
            else:
                tracker.claim_updated(old, new)
            if op[2] is not None:
                flight.pop(key, None)
        elif op[0] == "delete":
            if key in store:
                tracker.claim_deleted(store.pop(key))
                flight.pop(key, None)
        elif op[0] == "assume":
            # Reserve assumes only for a claim the informer has, unallocated, not in flight.
            if key in store and allocation_of(store[key]) is None and key not in flight:
                alloc = allocation(*op[3])
                tracker.assume(key, op[2], alloc)
                flight[key] = (op[2], alloc)
        else:
            tracker.forget(key, op[2])
            if key in flight and flight[key][0] == op[2]:
                del flight[key]
        want: set[DeviceID] = set()
        for c in store.values():
            want.update(device_ids_of(allocation_of(c)))
        for _uid, alloc in flight.values():
            want.update(device_ids_of(alloc))
        assert set(tracker.held()) == want
        assert {k for k in CLAIMS if tracker.in_flight(f"default/{k}") is not None} == \
            {k.split("/")[1] for k in flight}
        # the scan over the same claims and assume cache agrees
        scan = ClaimTracker()
        for k, (uid, alloc) in flight.items():
            scan.assume(k, uid, alloc)
        assert scan.in_use(list(store.values())) == want


def watching_plugin(claims: list[dict[str, Any]]) -> tuple[DynamicResources, FakeHandle,
                                                           WatchingListers]:
    handle = FakeHandle(node_infos(NODES))
    listers = WatchingListers({"resourceclaims": claims, "resourceslices": SLICES,
                               "deviceclasses": [gpu_class()]})
    handle._listers = listers
    return DynamicResources(None, handle), handle, listers  # type: ignore[arg-type]


def test_plugin_follows_the_informers_from_its_construction() -> None:
    """As upstream's DRA manager: the claims and slices the informers list reach the
    tracker before any pod is scheduled, not replayed by the first pod's PreFilter."""
    held = claim("held", exactly("r"), allocation=allocation("g0"))
    p, _handle, listers = watching_plugin([held])
    assert len(listers.handlers["resourceclaims"]) == 1
    assert len(listers.handlers["resourceslices"]) == 1
    assert set(p.tracker.held()) == {(DRIVER, "n1", "g0")}
    assert p.follows_claim_events
    # listers that deliver no events are listed on first use, as before
    handle = FakeHandle(node_infos(NODES))
    handle._listers = DictListers({"resourceclaims": [held], "resourceslices": SLICES,
                                   "deviceclasses": [gpu_class()]})
    assert not DynamicResources(None, handle).follows_claim_events  # type: ignore[arg-type]


@pytest.mark.parametrize("change", ["finalizer", "reserved", "deleting"])
def test_an_update_keeping_the_devices_leaves_the_index_alone(change: str) -> None:
    """A claim update that keeps its devices (finalizer, reservedFor, deletionTimestamp)
    changes no held device: the index hears nothing (it heard a let-go and a take before),
    and only a change of the claim's single user is told to it."""
    tracker = ClaimTracker()
    told: list[tuple[Any, ...]] = []
    tracker.on_held = lambda d, held: told.append(("held", d, held))
    tracker.on_reserved = lambda devs, delta: told.append(("reserved", devs, delta))
    c = claim("a", exactly("r"), allocation=allocation("g0"))
    c["status"]["reservedFor"] = [{"resource": "pods", "name": "p", "uid": "u1"}]
    tracker.claim_added(c)
    g0 = (DRIVER, "n1", "g0")
    assert told == [("held", g0, True), ("reserved", (g0,), 1)]
    told.clear()
    new = copy.deepcopy(c)
    if change == "finalizer":
        new["metadata"]["finalizers"] = ["resource.kubernetes.io/delete-protection"]
    elif change == "deleting":
        new["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    else:  # a second user: no longer a claim of one pod alone
        new["status"]["reservedFor"].append({"resource": "pods", "name": "q", "uid": "u2"})
    tracker.claim_updated(c, new)
    assert told == ([("reserved", (g0,), -1)] if change == "reserved" else [])
    assert set(tracker.held()) == {g0}
    tracker.claim_deleted(new)
    assert set(tracker.held()) == set() and ("held", g0, False) in told


def test_plugin_follows_claim_events_instead_of_scanning() -> None:
    held = claim("held", exactly("r"), allocation=allocation("g0"))
    p, handle, listers = watching_plugin([held, claim("mine", exactly("r"))])
    pod = pod_with("p", "mine")
    _, by_node = filter_all(p, pod, handle)
    assert len(listers.handlers["resourceclaims"]) == 1  # subscribed once, when made
    st_ = by_node["n1"]
    assert st_ is not None and st_.code == Code.UNSCHEDULABLE
    assert st_.message() == REASON_CANNOT_ALLOCATE
    # The holder is deallocated: the event frees the device, no listing needed.
    freed = copy.deepcopy(held)
    del freed["status"]
    freed["metadata"]["resourceVersion"] = "2"
    listers.put("resourceclaims", freed)
    state, by_node = filter_all(p, pod, handle)
    assert by_node["n1"] is None
    assert len(listers.handlers["resourceclaims"]) == 1
    # Reserved for this pod: a second pod cannot get the same device until it is unreserved.
    info = PodInfo.from_pod(pod)
    assert p.reserve(state, info, "n1") is None
    other = pod_with("q", "held")
    _, by_node = filter_all(p, other, handle)
    assert by_node["n1"] is not None
    p.unreserve(state, info, "n1")
    _, by_node = filter_all(p, other, handle)
    assert by_node["n1"] is None
    # The holder is deleted while allocated: its device is free again.
    listers.put("resourceclaims", held)
    _, by_node = filter_all(p, pod, handle)
    assert by_node["n1"] is not None
    listers.delete("resourceclaims", held)
    _, by_node = filter_all(p, pod, handle)
    assert by_node["n1"] is None


def test_plugin_follows_slice_events_instead_of_listing_them() -> None:
    p, handle, listers = watching_plugin([claim("mine", exactly("r"))])
    pod = pod_with("p", "mine")
    _, by_node = filter_all(p, pod, handle)
    assert by_node["n1"] is None
    assert by_node["n2"] is not None and by_node["n2"].code == Code.UNSCHEDULABLE
    # A driver publishes devices on n2: the event makes them usable.
    listers.put("resourceslices", resource_slice("n2-gpus", node="n2", devices=[device("g0")]))
    _, by_node = filter_all(p, pod, handle)
    assert by_node["n2"] is None
    # n1's slice goes away: its device with it.
    listers.delete("resourceslices", SLICES[0])
    _, by_node = filter_all(p, pod, handle)
    assert by_node["n1"] is not None and by_node["n2"] is None
    assert len(listers.handlers["resourceslices"]) == 1  # subscribed once, when made
    assert "resourceslices" not in listers.listed  # never walked per pod


def test_shared_counters_follow_the_watched_slices() -> None:
    p, _handle, listers = watching_plugin([])
    first = p.counters()
    assert p.counters() is first  # nothing changed: nothing rebuilt
    listers.put("resourceslices", resource_slice("n2-gpus", node="n2", devices=[device("g0")]))
    assert p.counters() is not first


@pytest.mark.parametrize("nodes", [1, 5])
def test_full_nodes_are_told_by_the_free_device_index(nodes: int) -> None:
    from scheduler.plugins.dynamicresources.plugin import STATE_KEY

    names = [f"m{i}" for i in range(nodes)]
    holders = []
    for i, name in enumerate(names):
        c = claim(f"h{i}", exactly("r"))
        c["status"] = {"allocation": {"devices": {"results": [
            {"request": "r", "driver": DRIVER, "pool": name, "device": "g0"}]}}}
        holders.append(c)
    handle = FakeHandle(node_infos([make_node(n) for n in names]))
    handle._listers = WatchingListers({
        "resourceclaims": [*holders, claim("mine", exactly("r"))],
        "resourceslices": [resource_slice(f"{n}-gpus", node=n, devices=[device("g0")])
                           for n in names],
        "deviceclasses": [gpu_class()]})
    p = DynamicResources(None, handle)  # type: ignore[arg-type]
    for _ in range(2):
        state, by_node = filter_all(p, pod_with("p", "mine"), handle)
        assert all(s is not None and s.message() == REASON_CANNOT_ALLOCATE
                   for s in by_node.values())
        index = state.read(STATE_KEY).index
        assert index is not None and not any(index.may_fit(n) for n in names)
    assert "needs 1, 1 match, 0 free" in p.node_details(state, names[-1])[0]
    # a holder deleted: its node has a free device again, and the pod fits there
    handle._listers.delete("resourceclaims", holders[0])
    state, by_node = filter_all(p, pod_with("p", "mine"), handle)
    assert by_node[names[0]] is None
    assert all(by_node[n] is not None for n in names[1:])
