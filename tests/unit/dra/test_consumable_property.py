"""Property (consumable capacity): the allocator shares a device with
``allowMultipleAllocations`` between requests exactly while what they consume, with what
other claims already consume, fits its capacity; it finds an allocation exactly when a
brute-force search over shared and whole devices does; and a stream of pods, each claim
counted by the claim tracker, never overdraws a device."""

from __future__ import annotations

import itertools
from fractions import Fraction
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler.dra import capacity as cap
from scheduler.dra.allocator import Allocated, allocate
from scheduler.dra.inventory import DeviceID, Inventory
from scheduler.plugins.dynamicresources.claims import ClaimTracker
from tests.unit.dra.builders import DRIVER, claim, exactly, gpu_class, node, resource_slice

NODE = node("n1")
CLASSES = {"gpu": gpu_class()}

# (shared, capacity, step or 0 for no policy, already consumed by other claims)
device_st = st.tuples(st.booleans(), st.integers(1, 6), st.sampled_from([0, 2]),
                      st.integers(0, 3))
# per claim, per request: the capacity asked (None: not asked)
claims_st = st.lists(st.lists(st.one_of(st.none(), st.integers(0, 5)), min_size=1,
                              max_size=2), min_size=1, max_size=3)

Dev = tuple[bool, int, int, int]


def slice_of(devs: list[Dev]) -> Inventory:
    out = []
    for i, (shared, total, step, _held) in enumerate(devs):
        entry: dict[str, Any] = {"value": str(total)}
        if shared and step and step <= total:
            entry["requestPolicy"] = {"default": str(step), "validRange": {
                "min": str(step), "max": str(total), "step": str(step)}}
        d: dict[str, Any] = {"name": f"d{i}", "capacity": {"bw": entry}}
        if shared:
            d["allowMultipleAllocations"] = True
        out.append(d)
    return Inventory([resource_slice("s", node="n1", devices=out)])


def claims_of(asks: list[list[int | None]]) -> list[dict[str, Any]]:
    out = []
    for ci, reqs in enumerate(asks):
        rs = []
        for ri, a in enumerate(reqs):
            r = exactly(f"r{ri}")
            if a is not None:
                r["exactly"]["capacity"] = {"requests": {"bw": str(a)}}
            rs.append(r)
        out.append(claim(f"c{ci}", *rs))
    return out


def model_use(dev: Dev, asked: int | None) -> int | None:
    """What a request consumes of a shared device, by the documented rules (None: refused)."""
    _shared, total, step, _held = dev
    if not (step and step <= total):
        return total if asked is None else asked
    if asked is None:
        return step
    v = max(asked, step)
    v = -(-v // step) * step
    return v if v <= total else None


def consumed_of(devs: list[Dev]) -> dict[DeviceID, dict[str, Fraction]]:
    return {(DRIVER, "n1", f"d{i}"): {"bw": Fraction(h)}
            for i, (shared, _t, _s, h) in enumerate(devs) if shared and h}


def brute_force(devs: list[Dev], asks: list[list[int | None]]) -> bool:
    requests = [a for reqs in asks for a in reqs]
    for choice in itertools.product(range(len(devs)), repeat=len(requests)):
        whole: set[int] = set()
        used = [d[3] if d[0] else 0 for d in devs]
        ok = True
        for i, a in zip(choice, requests):
            dev = devs[i]
            if dev[0]:
                u = model_use(dev, a)
                if u is None or used[i] + u > dev[1]:
                    ok = False
                    break
                used[i] += u
            else:
                if i in whole or (a is not None and dev[1] < a):
                    ok = False
                    break
                whole.add(i)
        if ok:
            return True
    return not requests


def check_never_overdrawn(devs: list[Dev], allocations: list[dict[str, Any]],
                          consumed: dict[DeviceID, dict[str, Fraction]]) -> None:
    used = {k: dict(v) for k, v in consumed.items()}
    whole: list[str] = []
    for alloc in allocations:
        for r in alloc["devices"]["results"]:
            i = int(r["device"][1:])
            if devs[i][0]:
                assert r["shareID"]
                cap.add(used.setdefault((DRIVER, "n1", r["device"]), {}),
                        {k: cap.quantity(v) or Fraction(0)
                         for k, v in r["consumedCapacity"].items()})
            else:
                assert "consumedCapacity" not in r
                whole.append(r["device"])
    assert len(whole) == len(set(whole)), whole
    for (_d, _p, name), use in used.items():
        assert use.get("bw", 0) <= devs[int(name[1:])][1], (name, use)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(devs=st.lists(device_st, min_size=0, max_size=3), asks=claims_st)
def test_agrees_with_brute_force(devs: list[Dev], asks: list[list[int | None]]) -> None:
    devs = [(s, t, st_, min(h, t)) for s, t, st_, h in devs]
    consumed = consumed_of(devs)
    out = allocate(claims_of(asks), node=NODE, inventory=slice_of(devs), classes=CLASSES,
                   in_use=set(), consumed=consumed)
    assert isinstance(out, Allocated) is brute_force(devs, asks), (devs, asks, out)
    if isinstance(out, Allocated):
        check_never_overdrawn(devs, out.allocations, consumed)


@settings(max_examples=100, deadline=None)
@given(devs=st.lists(device_st, min_size=1, max_size=3),
       stream=st.lists(st.lists(st.one_of(st.none(), st.integers(0, 4)), min_size=1,
                                max_size=2), min_size=1, max_size=6))
def test_pod_stream_never_overdraws(devs: list[Dev], stream: list[list[int | None]]) -> None:
    devs = [(s, t, st_, 0) for s, t, st_, _h in devs]
    inv = slice_of(devs)
    tracker = ClaimTracker()
    held: set[DeviceID] = set()
    allocations: list[dict[str, Any]] = []
    for pi, reqs in enumerate(stream):
        [c] = claims_of([reqs])
        c["metadata"]["name"] = f"pod{pi}"
        out = allocate([c], node=NODE, inventory=inv, classes=CLASSES,
                       in_use=held | set(tracker.held()), consumed=tracker.consumed())
        if isinstance(out, Allocated):
            [alloc] = out.allocations
            tracker.assume(f"default/pod{pi}", f"uid{pi}", alloc)
            allocations.append(alloc)
    check_never_overdrawn(devs, allocations, {})


junk = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.sampled_from(
        ["", "1", "-1Gi", "10Gi", "250m", "x", "1e3", "0"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
        st.sampled_from(["bw", "default", "validRange", "validValues", "min", "max", "step",
                         "value", "requests"]), inner, max_size=3),
    max_leaves=8)


@settings(max_examples=300, deadline=None)
@given(policy=junk, value=junk, requests=junk, multi=junk)
def test_malformed_capacity_is_named_never_raised(policy: Any, value: Any, requests: Any,
                                                  multi: Any) -> None:
    """Junk in a device's capacity policy or a request's capacity: the allocator answers (an
    allocation, Unfit, or an AllocationError naming the claim's field), never a traceback."""
    from scheduler.dra.allocator import AllocationError, Unfit

    d: dict[str, Any] = {"name": "d0", "allowMultipleAllocations": multi,
                         "capacity": {"bw": {"value": value, "requestPolicy": policy}}}
    inv = Inventory([resource_slice("s", node="n1", devices=[d])])
    r = exactly("r")
    r["exactly"]["capacity"] = requests
    try:
        out = allocate([claim("c", r)], node=NODE, inventory=inv, classes=CLASSES,
                       in_use=set(), consumed={(DRIVER, "n1", "d0"): {"bw": Fraction(1)}})
    except AllocationError as e:
        assert "ResourceClaim default/c: spec.devices.requests[0].exactly.capacity" in str(e)
        return
    assert isinstance(out, (Allocated, Unfit))
    if isinstance(out, Allocated):
        out.allocations  # the result builds
