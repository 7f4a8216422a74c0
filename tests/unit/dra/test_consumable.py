"""Consumable capacity (DRAConsumableCapacity, DRAFractionalCapacityRange), table-driven: the
request policy's rounding, sharing one device between claims and requests while the sum fits,
the gate off, the floor on a device that is not shared, and the claim tracker's accounting."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest

from scheduler.dra import capacity as cap
from scheduler.dra.allocator import Allocated, AllocationError, Unfit, allocate
from scheduler.dra.inventory import DeviceID, Inventory
from scheduler.plugins.dynamicresources.claims import ClaimTracker
from tests.unit.dra.builders import DRIVER, claim, exactly, gpu_class, node, resource_slice

N1 = node("n1")
CLASSES = {"gpu": gpu_class()}
GI = 1024 ** 3
SHARED: DeviceID = (DRIVER, "n1", "nic0")


def shared_device(name: str = "nic0", *, multi: bool = True,
                  **caps: dict[str, Any]) -> dict[str, Any]:
    """A device with capacities ``name -> {"value": ..., "requestPolicy": ...}``."""
    out: dict[str, Any] = {"name": name, "capacity": caps}
    if multi:
        out["allowMultipleAllocations"] = True
    return out


def inventory(*devices: dict[str, Any]) -> Inventory:
    return Inventory([resource_slice("n1-devs", node="n1", devices=list(devices))])


def asking(name: str, *, count: int = 1, **requests: str) -> dict[str, Any]:
    r = exactly(name, count=count)
    if requests:
        r["exactly"]["capacity"] = {"requests": dict(requests)}
    return r


BW = {"value": "100Gi"}
BW_RANGE = {"value": "100Gi", "requestPolicy": {
    "default": "10Gi", "validRange": {"min": "10Gi", "max": "50Gi", "step": "5Gi"}}}
BW_VALUES = {"value": "100Gi", "requestPolicy": {
    "default": "10Gi", "validValues": ["10Gi", "25Gi", "50Gi"]}}
FRACTION = {"value": "4", "requestPolicy": {
    "default": "500m", "validRange": {"min": "250m", "max": "2", "step": "250m"}}}


@pytest.mark.parametrize(("entry", "asked", "fractional", "want"), [
    # no policy: as asked; not asked: the whole capacity
    (BW, "30Gi", True, 30 * GI),
    (BW, None, True, 100 * GI),
    # a range: up to min, rounded up to min + n*step, refused above max
    (BW_RANGE, "1Gi", True, 10 * GI),
    (BW_RANGE, "11Gi", True, 15 * GI),
    (BW_RANGE, "15Gi", True, 15 * GI),
    (BW_RANGE, "50Gi", True, 50 * GI),
    (BW_RANGE, "51Gi", True, None),
    (BW_RANGE, None, True, 10 * GI),
    # valid values: the smallest not below the request, refused above all
    (BW_VALUES, "11Gi", True, 25 * GI),
    (BW_VALUES, "50Gi", True, 50 * GI),
    (BW_VALUES, "60Gi", True, None),
    (BW_VALUES, None, True, 10 * GI),
    # a fractional range: thousandths with DRAFractionalCapacityRange, integers without
    (FRACTION, "300m", True, Fraction(1, 2)),
    (FRACTION, "1100m", True, Fraction(5, 4)),
    (FRACTION, "300m", False, 1),
    (FRACTION, "2500m", True, None),
    # a negative default (malformed) is never a credit
    ({"value": "10", "requestPolicy": {"default": "-1"}}, None, True, None),
])
def test_what_a_request_consumes(entry: dict[str, Any], asked: str | None, fractional: bool,
                                 want: int | Fraction | None) -> None:
    got = cap.consumption(capacity={"bw": entry}, driver=DRIVER,
                          asked={} if asked is None else {"bw": cap.quantity(asked) or 0},
                          fractional=fractional)
    if want is None:
        assert isinstance(got, str) and "bw" in got
    else:
        assert got == {"bw": Fraction(want)}


def test_a_capacity_the_device_lacks_cannot_be_consumed() -> None:
    got = cap.consumption(capacity={"bw": BW}, driver=DRIVER, asked={"sm": Fraction(1)},
                          fractional=True)
    assert got == "has no capacity sm"


def results(out: Allocated | Unfit) -> list[list[dict[str, Any]]]:
    assert isinstance(out, Allocated), out
    return [a["devices"]["results"] for a in out.allocations]


@pytest.mark.parametrize(("claims", "consumed", "want"), [
    # two claims share one device while the sum fits
    ([claim("a", asking("r", bw="40Gi")), claim("b", asking("r", bw="60Gi"))], {},
     [[("nic0", {"bw": "40Gi"})], [("nic0", {"bw": "60Gi"})]]),
    # two requests of one claim share it too
    ([claim("a", asking("r1", bw="10Gi"), asking("r2", bw="20Gi"))], {},
     [[("nic0", {"bw": "10Gi"}), ("nic0", {"bw": "20Gi"})]]),
    # what other claims consume counts
    ([claim("a", asking("r", bw="40Gi"))], {SHARED: {"bw": Fraction(60 * GI)}},
     [[("nic0", {"bw": "40Gi"})]]),
    # not asked: the whole capacity
    ([claim("a", asking("r"))], {}, [[("nic0", {"bw": "100Gi"})]]),
])
def test_a_shared_device_serves_several_requests(
        claims: list[dict[str, Any]], consumed: dict[DeviceID, dict[str, Fraction]],
        want: list[list[tuple[str, dict[str, str]]]]) -> None:
    out = allocate(claims, node=N1, inventory=inventory(shared_device(bw=BW)), classes=CLASSES,
                   in_use=set(), consumed=consumed)
    got = results(out)
    assert [[(r["device"], r["consumedCapacity"]) for r in rs] for rs in got] == want
    share_ids = [r["shareID"] for rs in got for r in rs]
    assert len(set(share_ids)) == len(share_ids)  # one share per result


@pytest.mark.parametrize(("claims", "consumed", "why"), [
    # the sum would pass the capacity
    ([claim("a", asking("r", bw="40Gi")), claim("b", asking("r", bw="61Gi"))], {},
     "do not satisfy"),
    ([claim("a", asking("r", bw="41Gi"))], {SHARED: {"bw": Fraction(60 * GI)}},
     "capacity used up"),
    # the whole capacity when not asked, and someone holds a part
    ([claim("a", asking("r"))], {SHARED: {"bw": Fraction(1)}}, "capacity used up"),
    # one request's devices are distinct: count 2 cannot take the device twice
    ([claim("a", asking("r", count=2, bw="1Gi"))], {}, "only 1 match"),
    # a capacity the device has not
    ([claim("a", asking("r", sm="1"))], {}, "no device of class gpu matches"),
])
def test_a_shared_device_is_never_overdrawn(
        claims: list[dict[str, Any]], consumed: dict[DeviceID, dict[str, Fraction]],
        why: str) -> None:
    out = allocate(claims, node=N1, inventory=inventory(shared_device(bw=BW)), classes=CLASSES,
                   in_use=set(), consumed=consumed)
    assert isinstance(out, Unfit)
    assert any(why in d for d in out.details), out.details


def test_policy_rounding_is_what_the_result_consumes() -> None:
    out = allocate([claim("a", asking("r", bw="11Gi"))], node=N1,
                   inventory=inventory(shared_device(bw=BW_RANGE)), classes=CLASSES,
                   in_use=set())
    assert results(out)[0][0]["consumedCapacity"] == {"bw": "15Gi"}


@pytest.mark.parametrize(("multi", "asked", "fits"), [
    # not shared: a capacity request is a floor on the device's capacity
    (False, "100Gi", True),
    (False, "101Gi", False),
])
def test_a_capacity_request_is_a_floor_on_a_device_not_shared(multi: bool, asked: str,
                                                              fits: bool) -> None:
    out = allocate([claim("a", asking("r", bw=asked))], node=N1,
                   inventory=inventory(shared_device(multi=multi, bw=BW)), classes=CLASSES,
                   in_use=set())
    assert isinstance(out, Allocated) is fits
    if fits:
        assert "consumedCapacity" not in results(out)[0][0]


@pytest.mark.parametrize(("consumable", "want"), [
    (True, [["nic0"], ["nic0"]]),
    # gate off: the flag and the capacity requests are not read; one claim, one device
    (False, [["nic0"], ["nic1"]]),
])
def test_the_gate_off_allocates_devices_whole(consumable: bool,
                                              want: list[list[str]]) -> None:
    inv = inventory(shared_device("nic0", bw=BW), shared_device("nic1", bw=BW))
    out = allocate([claim("a", asking("r", bw="1Gi")), claim("b", asking("r", bw="1Gi"))],
                   node=N1, inventory=inv, classes=CLASSES, in_use=set(),
                   consumable=consumable)
    got = results(out)
    assert [[r["device"] for r in rs] for rs in got] == want
    assert all(("consumedCapacity" in r) is consumable for rs in got for r in rs)


def test_a_device_held_whole_is_not_shared() -> None:
    out = allocate([claim("a", asking("r", bw="1Gi"))], node=N1,
                   inventory=inventory(shared_device(bw=BW)), classes=CLASSES,
                   in_use={SHARED})
    assert isinstance(out, Unfit)


@pytest.mark.parametrize("bad", ["lots", "-1Gi", 1.5j])
def test_a_malformed_capacity_request_names_the_field(bad: Any) -> None:
    c = claim("a", exactly("r"))
    c["spec"]["devices"]["requests"][0]["exactly"]["capacity"] = {"requests": {"bw": bad}}
    with pytest.raises(AllocationError, match=r"ResourceClaim default/a: "
                       r"spec\.devices\.requests\[0\]\.exactly\.capacity\.requests\[bw\]"):
        allocate([c], node=N1, inventory=inventory(shared_device(bw=BW)), classes=CLASSES,
                 in_use=set())


def share(device: str, bw: str) -> dict[str, Any]:
    return {"devices": {"results": [
        {"request": "r", "driver": DRIVER, "pool": "n1", "device": device,
         "consumedCapacity": {"bw": bw}, "shareID": f"share-{device}-{bw}"}]}}


def test_the_tracker_counts_consumed_capacity_until_deallocated() -> None:
    t = ClaimTracker()
    a = claim("a", asking("r"), allocation=share("nic0", "40Gi"))
    t.claim_added(a)
    t.assume("default/b", "pod-b", share("nic0", "30Gi"))
    assert t.consumed() == {SHARED: {"bw": Fraction(70 * GI)}}
    assert SHARED not in t.held()  # shares do not hold the device whole
    # b's allocation shows in the informer: counted once, not twice
    b = claim("b", asking("r"), allocation=share("nic0", "30Gi"))
    t.claim_added(b)
    assert t.consumed() == {SHARED: {"bw": Fraction(70 * GI)}}
    # a deallocated, b deleted: nothing consumed
    t.claim_updated(a, claim("a", asking("r")))
    t.claim_deleted(b)
    assert t.consumed() == {}


def test_the_tracker_scan_counts_consumed_capacity() -> None:
    t = ClaimTracker()
    t.assume("default/b", "pod-b", share("nic0", "30Gi"))
    held = t.in_use([claim("a", asking("r"), allocation=share("nic0", "40Gi")),
                     claim("b", asking("r"))])
    assert held == set()
    assert t.consumed() == {SHARED: {"bw": Fraction(70 * GI)}}
    t.forget("default/b", "pod-b")
    t.in_use([claim("a", asking("r"), allocation=share("nic0", "40Gi"))])
    assert t.consumed() == {SHARED: {"bw": Fraction(40 * GI)}}


@pytest.mark.parametrize(("value", "like", "want"), [
    (Fraction(15 * GI), "100Gi", "15Gi"),
    (Fraction(1, 2), "4", "500m"),
    (Fraction(3000), "4k", "3k"),
    (Fraction(0), "1", "0"),
])
def test_consumed_quantities_are_canonical(value: Fraction, like: str, want: str) -> None:
    assert cap.format_quantity(value, like) == want


def test_preemption_counts_the_shares_victims_free() -> None:
    from scheduler.framework.cycle_state import CycleState
    from scheduler.framework.status import Code
    from scheduler.objects.pod import PodInfo
    from scheduler.plugins.dynamicresources.plugin import DynamicResources
    from tests.builders import make_node, make_pod
    from tests.fakes import FakeHandle, node_infos

    def pod_with(name: str, claim_name: str) -> dict[str, Any]:
        pod = make_pod(name)
        pod["metadata"]["uid"] = f"uid-{name}"
        pod["spec"]["resourceClaims"] = [{"name": "nic", "resourceClaimName": claim_name}]
        return pod

    victim = pod_with("victim", "held")
    victim["spec"]["nodeName"] = "n1"
    held = claim("held", asking("r", bw="60Gi"), allocation=share("nic0", "60Gi"),
                 reserved_for=[{"resource": "pods", "name": "victim", "uid": "uid-victim"}])
    handle = FakeHandle(node_infos([make_node("n1")]), objects={
        "resourceclaims": [held, claim("c", asking("r", bw="50Gi"))],
        "resourceslices": [resource_slice("n1-devs", node="n1",
                                          devices=[shared_device(bw=BW)])],
        "deviceclasses": [gpu_class()]})
    p = DynamicResources(None, handle)  # type: ignore[arg-type]
    pod = pod_with("p", "c")
    info, vinfo = PodInfo.from_pod(pod), PodInfo.from_pod(victim)
    state = CycleState()
    _, st = p.pre_filter(state, info, handle.snapshot().list())
    assert st is None, st
    n1 = handle.snapshot().get("n1")
    assert n1 is not None
    refused = p.filter(state, info, n1)  # 60Gi + 50Gi > 100Gi
    assert refused is not None and refused.code == Code.UNSCHEDULABLE
    what_if = state.clone()
    p.remove_pod(what_if, info, vinfo, n1)
    assert p.filter(what_if, info, n1) is None  # the victim's 60Gi freed
    assert p.filter(state, info, n1) is not None  # the original state is untouched
    p.add_pod(what_if, info, vinfo, n1)
    assert p.filter(what_if, info, n1) is not None


@pytest.mark.parametrize(("expression", "fits"), [
    # selectors see the device's whole capacity, whatever its shares consume
    ('device.capacity["gpu.example.com"].bw.compareTo(quantity("100Gi")) == 0', True),
    ('device.capacity["gpu.example.com"].bw.compareTo(quantity("40Gi")) <= 0', False),
])
def test_selectors_see_the_full_capacity(expression: str, fits: bool) -> None:
    r = asking("r", bw="10Gi")
    r["exactly"]["selectors"] = [{"cel": {"expression": expression}}]
    out = allocate([claim("a", r)], node=N1, inventory=inventory(shared_device(bw=BW)),
                   classes=CLASSES, in_use=set(), consumed={SHARED: {"bw": Fraction(60 * GI)}})
    assert isinstance(out, Allocated) is fits
