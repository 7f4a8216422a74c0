"""Property: the allocator never gives a device to two claims, never uses a held device, honours
selectors and constraints, and finds an allocation exactly when a brute-force search does."""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler.dra.allocator import Allocated, allocate
from scheduler.dra.counters import Counters
from scheduler.dra.inventory import DeviceID, Inventory
from tests.unit.dra.builders import (
    DRIVER,
    claim,
    counter_slice,
    device,
    exactly,
    model_classes,
    node,
    resource_slice,
)

NODE = node("n1")
MODELS = ("a", "b")
CLASSES = model_classes()

devices_st = st.lists(st.tuples(st.sampled_from(MODELS), st.integers(0, 1)), min_size=0,
                      max_size=5)
request_st = st.tuples(st.sampled_from(sorted(CLASSES)), st.integers(1, 2))
claim_st = st.tuples(st.lists(request_st, min_size=1, max_size=2), st.booleans())


def build(devs: list[tuple[str, int]], claims_in: list[tuple[list[tuple[str, int]], bool]]
          ) -> tuple[Inventory, list[dict[str, Any]]]:
    sl = resource_slice("s", node="n1", devices=[
        device(f"d{i}", attrs={"model": m, "numa": z}) for i, (m, z) in enumerate(devs)])
    claims = []
    for ci, (reqs, match) in enumerate(claims_in):
        claims.append(claim(
            f"c{ci}", *[exactly(f"r{ri}", cls, count=n) for ri, (cls, n) in enumerate(reqs)],
            constraints=[{"matchAttribute": f"{DRIVER}/numa"}] if match else None))
    return Inventory([sl]), claims


def brute_force(devs: list[tuple[str, int]], claims_in: list[tuple[list[tuple[str, int]], bool]],
                held: set[int]) -> bool:
    """Whether some assignment of free devices satisfies every claim (the partitioned search
    with devices that consume no counter)."""
    return brute_force_partitioned([(m, z, 0) for m, z in devs], 0, claims_in, held)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(devs=devices_st, claims_in=st.lists(claim_st, min_size=1, max_size=3),
       held=st.sets(st.integers(0, 4), max_size=2))
def test_agrees_with_brute_force(devs: list[tuple[str, int]],
                                 claims_in: list[tuple[list[tuple[str, int]], bool]],
                                 held: set[int]) -> None:
    inv, claims = build(devs, claims_in)
    in_use: set[DeviceID] = {(DRIVER, "n1", f"d{i}") for i in held}
    out = allocate(claims, node=NODE, inventory=inv, classes=CLASSES, in_use=in_use)
    assert isinstance(out, Allocated) == brute_force(devs, claims_in, held)
    if not isinstance(out, Allocated):
        return
    seen: set[str] = set()
    for (reqs, match), alloc in zip(claims_in, out.allocations):
        names = [r["device"] for r in alloc["devices"]["results"]]
        assert len(names) == sum(n for _, n in reqs)
        for r in alloc["devices"]["results"]:
            i = int(r["device"][1:])
            cls = reqs[int(r["request"][1:])][0]
            assert cls == "any" or devs[i][0] == cls
            assert i not in held
        assert not seen & set(names), "a device went to two claims"
        seen |= set(names)
        if match:
            assert len({devs[int(d[1:])][1] for d in names}) == 1


@settings(max_examples=100, deadline=None)
@given(devs=devices_st, stream=st.lists(claim_st, min_size=1, max_size=6))
def test_pod_stream_never_double_allocates(devs: list[tuple[str, int]],
                                           stream: list[tuple[list[tuple[str, int]], bool]]
                                           ) -> None:
    # one pod (one claim) at a time, each allocation held for the next, as the assume cache does
    held: set[DeviceID] = set()
    for i, c in enumerate(stream):
        inv, claims = build(devs, [c])
        claims[0]["metadata"]["name"] = f"pod{i}"
        out = allocate(claims, node=NODE, inventory=inv, classes=CLASSES, in_use=held)
        if isinstance(out, Allocated):
            got = {(r["driver"], r["pool"], r["device"])
                   for r in out.allocations[0]["devices"]["results"]}
            assert not got & held
            held |= got


junk = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
        st.sampled_from(["name", "driver", "pool", "devices", "attributes", "capacity",
                         "nodeName", "allNodes", "int", "string", "value", "taints", "key",
                         "effect", "generation", "resourceSliceCount", "exactly", "requests",
                         "deviceClassName", "count", "allocationMode", "selectors", "cel",
                         "expression", "firstAvailable", "constraints", "matchAttribute",
                         "sharedCounters", "consumesCounters", "counterSet", "counters"]),
        inner, max_size=4),
    max_leaves=12)


@settings(max_examples=100, deadline=None)  # was 300 (4.3 s of the suite)
@given(slice_spec=junk, claim_spec=junk)
def test_malformed_objects_are_named_never_raised(slice_spec: Any, claim_spec: Any) -> None:
    from scheduler.dra.allocator import AllocationError, Unfit

    bad_slice = {"metadata": {"name": "bad"}, "spec": slice_spec}
    slices = [bad_slice, resource_slice("s", node="n1", devices=[device("d0")])]
    inv = Inventory(slices)
    assert all(p.startswith("ResourceSlice bad") for p in inv.problems)
    counters = Counters(slices, inv)  # malformed counters are named, never raised
    assert all("invalid" in p for p in counters.problems)
    bad_claim = {"metadata": {"name": "c", "namespace": "ns"}, "spec": {"devices": claim_spec}}
    try:
        out = allocate([bad_claim], node=NODE, inventory=inv, classes=CLASSES, in_use=set(),
                       counters=counters)
    except AllocationError as e:
        assert "ns/c" in str(e) or "DeviceClass" in str(e)
    else:
        assert isinstance(out, (Allocated, Unfit))


# ---- partitionable devices: shared counters ---------------------------------------------------

# (model, numa, memory consumed from the one counter set)
part_devices_st = st.lists(st.tuples(st.sampled_from(MODELS), st.integers(0, 1),
                                     st.integers(0, 3)), min_size=0, max_size=5)


def build_partitioned(devs: list[tuple[str, int, int]], capacity: int,
                      claims_in: list[tuple[list[tuple[str, int]], bool]]
                      ) -> tuple[Inventory, Counters, list[dict[str, Any]]]:
    slices = [
        counter_slice("c", node="n1", pool="n1", **{"gpu-0": {"memory": f"{capacity}Gi"}}),
        resource_slice("s", node="n1", pool="n1", slice_count=2, devices=[
            device(f"d{i}", attrs={"model": m, "numa": z},
                   consumes={"gpu-0": {"memory": f"{mem}Gi"}} if mem else None)
            for i, (m, z, mem) in enumerate(devs)])]
    inv = Inventory(slices)
    _, claims = build([(m, z) for m, z, _ in devs], claims_in)
    return inv, Counters(slices, inv), claims


def brute_force_partitioned(devs: list[tuple[str, int, int]], capacity: int,
                            claims_in: list[tuple[list[tuple[str, int]], bool]],
                            held: set[int]) -> bool:
    slots = [(ci, cls, n) for ci, (reqs, _) in enumerate(claims_in) for cls, n in reqs]
    free = [i for i in range(len(devs)) if i not in held]
    base = sum(devs[i][2] for i in held if i < len(devs))

    def fits(i: int, cls: str) -> bool:
        return cls == "any" or devs[i][0] == cls

    def search(k: int, used: frozenset[int], numa: dict[int, int]) -> bool:
        if k == len(slots):
            return base + sum(devs[i][2] for i in used) <= capacity
        ci, cls, n = slots[k]
        for combo in itertools.combinations([i for i in free if i not in used and fits(i, cls)],
                                            n):
            want = numa.get(ci)
            zs = {devs[i][1] for i in combo}
            if claims_in[ci][1] and (len(zs) > 1 or (want is not None and want not in zs)):
                continue
            nz = dict(numa)
            if claims_in[ci][1]:
                nz[ci] = next(iter(zs))
            if search(k + 1, used | set(combo), nz):
                return True
        return False

    return search(0, frozenset(), {})


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(devs=part_devices_st, capacity=st.integers(0, 6),
       claims_in=st.lists(claim_st, min_size=1, max_size=3),
       held=st.sets(st.integers(0, 4), max_size=2))
def test_shared_counters_agree_with_brute_force(
        devs: list[tuple[str, int, int]], capacity: int,
        claims_in: list[tuple[list[tuple[str, int]], bool]], held: set[int]) -> None:
    # the devices held by other claims have taken their share of the counters (when that
    # share is more than the capacity, the published counters were already overdrawn: the
    # allocator must then refuse every counter-consuming device, as must the brute force)
    inv, counters, claims = build_partitioned(devs, capacity, claims_in)
    in_use: set[DeviceID] = {(DRIVER, "n1", f"d{i}") for i in held}
    out = allocate(claims, node=NODE, inventory=inv, classes=CLASSES, in_use=in_use,
                   counters=counters)
    held_ok = {i for i in held if i < len(devs)}
    base = sum(devs[i][2] for i in held_ok)
    if base > capacity:
        # overdrawn: only devices that consume nothing can go; compare with the brute force
        # over those alone
        keep = [i for i in range(len(devs)) if devs[i][2] == 0]
        if not isinstance(out, Allocated):
            return
        for alloc in out.allocations:
            for r in alloc["devices"]["results"]:
                assert int(r["device"][1:]) in keep
        return
    assert isinstance(out, Allocated) == brute_force_partitioned(devs, capacity, claims_in,
                                                                 held_ok)
    if not isinstance(out, Allocated):
        return
    got = [int(r["device"][1:]) for a in out.allocations for r in a["devices"]["results"]]
    assert len(got) == len(set(got)), "a device went to two claims"
    assert not set(got) & held_ok
    assert base + sum(devs[i][2] for i in got) <= capacity, "shared counters overdrawn"


@settings(max_examples=100, deadline=None)
@given(devs=part_devices_st, capacity=st.integers(0, 6),
       stream=st.lists(claim_st, min_size=1, max_size=6))
def test_pod_stream_never_overdraws_counters(devs: list[tuple[str, int, int]], capacity: int,
                                             stream: list[tuple[list[tuple[str, int]], bool]]
                                             ) -> None:
    held: set[DeviceID] = set()
    for i, c in enumerate(stream):
        inv, counters, claims = build_partitioned(devs, capacity, [c])
        claims[0]["metadata"]["name"] = f"pod{i}"
        out = allocate(claims, node=NODE, inventory=inv, classes=CLASSES, in_use=held,
                       counters=counters)
        if isinstance(out, Allocated):
            got = {(r["driver"], r["pool"], r["device"])
                   for r in out.allocations[0]["devices"]["results"]}
            assert not got & held
            held |= got
    assert sum(devs[int(d[2][1:])][2] for d in held) <= capacity
