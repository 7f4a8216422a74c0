"""The structured allocator, table-driven: modes, subrequests, constraints, sharing, taints,
pools, and errors that name the object and field."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.dra.allocator import Allocated, AllocationError, Unfit, allocate
from scheduler.dra.inventory import DeviceID, Inventory
from tests.unit.dra.builders import (
    DRIVER,
    claim,
    device,
    device_class,
    exactly,
    first_available,
    gpu_class,
    node,
    resource_slice,
)

N1 = node("n1", zone="a")
CLASSES = {c["metadata"]["name"]: c for c in (
    gpu_class(),
    device_class("big", f'device.driver == "{DRIVER}"',
                 f'device.capacity["{DRIVER}"].memory.compareTo(quantity("20Gi")) >= 0'),
    device_class("small", f'device.driver == "{DRIVER}"',
                 f'device.capacity["{DRIVER}"].memory.compareTo(quantity("20Gi")) < 0'),
    device_class("broken", "device.driver =="),
    device_class("runtime", 'device.attributes["nope.io"].x == 1'),
    device_class("cfg", f'device.driver == "{DRIVER}"',
                 config=[{"opaque": {"driver": DRIVER, "parameters": {"a": 1}}}]),
)}


def gpus(node_name: str, *specs: tuple[str, str, str], **kw: Any) -> dict[str, Any]:
    """A slice of ``(name, memory, numa)`` devices."""
    return resource_slice(f"{node_name}-gpus", node=node_name, devices=[
        device(n, capacity={"memory": m}, attrs={"numa": int(z)}) for n, m, z in specs], **kw)


SLICE = gpus("n1", ("g0", "40Gi", "0"), ("g1", "40Gi", "1"), ("g2", "10Gi", "0"))


def results(out: Any) -> list[list[tuple[str, str]]]:
    assert isinstance(out, Allocated), out
    return [[(r["request"], r["device"]) for r in a["devices"]["results"]]
            for a in out.allocations]


OK_CASES: list[tuple[str, list[dict[str, Any]], list[dict[str, Any]], set[DeviceID],
                     list[list[tuple[str, str]]]]] = [
    ("one device", [claim("c", exactly("r"))], [SLICE], set(), [[("r", "g0")]]),
    ("in-use skipped", [claim("c", exactly("r"))], [SLICE], {(DRIVER, "n1", "g0")},
     [[("r", "g1")]]),
    ("count 2", [claim("c", exactly("r", count=2))], [SLICE], set(),
     [[("r", "g0"), ("r", "g1")]]),
    ("class with quantity selector", [claim("c", exactly("r", "small"))], [SLICE], set(),
     [[("r", "g2")]]),
    ("request selector", [claim("c", exactly(
        "r", selectors=(f'device.attributes["{DRIVER}"].numa == 1',)))], [SLICE], set(),
     [[("r", "g1")]]),
    ("all mode", [claim("c", exactly("r", "big", all_devices=True))], [SLICE], set(),
     [[("r", "g0"), ("r", "g1")]]),
    ("two claims never share", [claim("a", exactly("r")), claim("b", exactly("r"))], [SLICE],
     set(), [[("r", "g0")], [("r", "g1")]]),
    ("matchAttribute backtracks", [claim(
        "c", exactly("x", "small"), exactly("y", "big"),
        constraints=[{"matchAttribute": f"{DRIVER}/numa"}])], [SLICE], set(),
     [[("x", "g2"), ("y", "g0")]]),
    ("distinctAttribute", [claim(
        "c", exactly("x"), exactly("y"),
        constraints=[{"distinctAttribute": f"{DRIVER}/numa"}])], [SLICE], set(),
     [[("x", "g0"), ("y", "g1")]]),
    ("firstAvailable falls back", [claim("c", first_available(
        "r", ("two-big", "big", 3), ("one-small", "small", 1)))], [SLICE], set(),
     [[("r/one-small", "g2")]]),
    ("adminAccess uses an allocated device", [claim("c", exactly("r", admin=True))], [SLICE],
     {(DRIVER, "n1", "g0"), (DRIVER, "n1", "g1"), (DRIVER, "n1", "g2")}, [[("r", "g0")]]),
    ("tolerated taint", [claim("c", exactly("r", tolerations=[
        {"key": "broken", "operator": "Exists"}]))],
     [resource_slice("s", node="n1", devices=[device("t0", taints=[
         {"key": "broken", "effect": "NoSchedule"}])])], set(), [[("r", "t0")]]),
    ("slice for all nodes", [claim("c", exactly("r"))],
     [resource_slice("net", all_nodes=True, pool="net", devices=[device("shared0")])], set(),
     [[("r", "shared0")]]),
    ("older pool generation ignored", [claim("c", exactly("r"))],
     [gpus("n1", ("old", "40Gi", "0"), generation=1),
      resource_slice("n1-new", node="n1", pool="n1", generation=2,
                     devices=[device("new")])], set(), [[("r", "new")]]),
]


@pytest.mark.parametrize(("name", "claims", "slices", "in_use", "want"), OK_CASES,
                         ids=[c[0] for c in OK_CASES])
def test_allocates(name: str, claims: list[dict[str, Any]], slices: list[dict[str, Any]],
                   in_use: set[DeviceID], want: list[list[tuple[str, str]]]) -> None:
    out = allocate(claims, node=N1, inventory=Inventory(slices), classes=CLASSES,
                   in_use=in_use)
    assert results(out) == want


UNFIT_CASES: list[tuple[str, list[dict[str, Any]], list[dict[str, Any]], set[DeviceID], str]] = [
    ("no slice on the node", [claim("c", exactly("r"))],
     [gpus("n2", ("g0", "40Gi", "0"))], set(), "no device of class gpu matches"),
    ("all taken", [claim("c", exactly("r"))], [SLICE],
     {(DRIVER, "n1", d) for d in ("g0", "g1", "g2")}, "needs 1, 3 match, 0 free"),
    ("count too high", [claim("c", exactly("r", count=4))], [SLICE], set(), "needs 4, only 3 match on this node"),
    ("all mode with one allocated", [claim("c", exactly("r", "big", all_devices=True))],
     [SLICE], {(DRIVER, "n1", "g1")}, "1 of them allocated"),
    ("untolerated taint", [claim("c", exactly("r"))],
     [resource_slice("s", node="n1", devices=[device("t0", taints=[
         {"key": "broken", "effect": "NoExecute"}])])], set(), "untolerated taints"),
    ("constraint unsatisfiable", [claim(
        "c", exactly("x", "small"), exactly("y", "big"),
        constraints=[{"matchAttribute": f"{DRIVER}/numa"}])], [SLICE],
     {(DRIVER, "n1", "g0")}, "constraints"),
    ("claims together exceed the node", [claim("a", exactly("r", count=2)),
                                         claim("b", exactly("r", count=2))], [SLICE], set(),
     "need the same device"),
    ("all mode on an incomplete pool", [claim("c", exactly("r", all_devices=True))],
     [gpus("n1", ("g0", "40Gi", "0"), slice_count=2)], set(), "currently being updated"),
]


@pytest.mark.parametrize(("name", "claims", "slices", "in_use", "reason"), UNFIT_CASES,
                         ids=[c[0] for c in UNFIT_CASES])
def test_unfit(name: str, claims: list[dict[str, Any]], slices: list[dict[str, Any]],
               in_use: set[DeviceID], reason: str) -> None:
    out = allocate(claims, node=N1, inventory=Inventory(slices), classes=CLASSES,
                   in_use=in_use)
    assert isinstance(out, Unfit), out
    assert any(reason in d for d in out.details), out.details


@pytest.mark.parametrize(("claim_obj", "message"), [
    (claim("c", exactly("r", "missing")),
     "ResourceClaim default/c: spec.devices.requests[0].exactly: device class missing "
     "does not exist"),
    (claim("c", exactly("r", "broken")), "DeviceClass broken: spec.selectors[0].cel.expression: "
     "CEL compile error"),
    (claim("c", exactly("r", selectors=("1 +",))),
     "ResourceClaim default/c: spec.devices.requests[0].exactly.selectors[0].cel.expression"),
    (claim("c", exactly("r", "runtime")),
     "DeviceClass runtime: spec.selectors[0]: device gpu.example.com/n1/g0: CEL runtime error"),
    (claim("c", {"name": "r"}), "exactly one of exactly, firstAvailable is required"),
    (claim("c", exactly("r", count=0)), "requests[0].exactly.count: must be a positive integer"),
])
def test_errors_name_object_and_field(claim_obj: dict[str, Any], message: str) -> None:
    with pytest.raises(AllocationError) as info:
        allocate([claim_obj], node=N1, inventory=Inventory([SLICE]), classes=CLASSES,
                 in_use=set())
    assert message in str(info.value)


def test_allocation_as_the_scheduler_writes_it() -> None:
    out = allocate([claim("c", exactly("r", "cfg"), config=[
        {"requests": ["r"], "opaque": {"driver": DRIVER, "parameters": {"b": 2}}}])],
        node=N1, inventory=Inventory([SLICE]), classes=CLASSES, in_use=set())
    assert isinstance(out, Allocated)
    assert out.allocations == [{
        "devices": {
            "results": [{"request": "r", "driver": DRIVER, "pool": "n1", "device": "g0"}],
            "config": [
                {"source": "FromClass", "requests": ["r"],
                 "opaque": {"driver": DRIVER, "parameters": {"a": 1}}},
                {"source": "FromClaim", "requests": ["r"],
                 "opaque": {"driver": DRIVER, "parameters": {"b": 2}}},
            ],
        },
        "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]},
    }]


def test_malformed_slice_is_reported_and_skipped() -> None:
    bad = resource_slice("bad", node="n1", devices=[device("x")])
    bad["spec"]["pool"]["generation"] = "one"
    inv = Inventory([bad, SLICE])
    assert inv.problems == ["ResourceSlice bad: spec.pool.generation: must be an integer"]
    assert len(inv.devices_for_node(N1)) == 3


def test_slice_node_selector() -> None:
    sel = {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "zone", "operator": "In", "values": ["a"]}]}]}
    inv = Inventory([resource_slice("z", pool="z", node_selector=sel, devices=[device("d")])])
    out = allocate([claim("c", exactly("r"))], node=N1, inventory=inv, classes=CLASSES,
                   in_use=set())
    assert isinstance(out, Allocated) and out.allocations[0]["nodeSelector"] == sel
    assert not inv.devices_for_node(node("n2", zone="b"))


def test_step_budget_reports_timeout() -> None:
    # 3 + 3 + 2 devices out of 7: each request alone fits, together they never do
    many = resource_slice("m", node="n1", devices=[device(f"d{i}") for i in range(7)])
    c = claim("c", exactly("x", count=3), exactly("y", count=3), exactly("z", count=2))
    out = allocate([c], node=N1, inventory=Inventory([many]), classes=CLASSES, in_use=set(),
                   step_budget=50)
    assert isinstance(out, Unfit) and out.timed_out


@pytest.mark.parametrize("gate", [True, False])
def test_device_taints_follow_their_gate(gate: bool) -> None:
    # DRADeviceTaints off: a device's taints are ignored (and no tolerations are written)
    slices = [resource_slice("s", node="n1", devices=[device("t0", taints=[
        {"key": "broken", "value": "yes", "effect": "NoSchedule"}])])]
    for tolerate in (False, True):
        tol = [{"key": "broken", "operator": "Exists"}] if tolerate else None
        out = allocate([claim("c", exactly("r", tolerations=tol))], node=N1,
                       inventory=Inventory(slices), classes=CLASSES, in_use=set(),
                       device_taints=gate)
        assert isinstance(out, Allocated) is (tolerate or not gate)
        if isinstance(out, Allocated):
            result = out.allocations[0]["devices"]["results"][0]
            assert ("tolerations" in result) is gate
