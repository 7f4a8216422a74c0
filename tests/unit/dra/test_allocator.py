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


SIMPLE_UNFIT = [
    ("every device in use", claim("c", exactly("r")),
     {(DRIVER, "n1", "g0"), (DRIVER, "n1", "g1"), (DRIVER, "n1", "g2")},
     "needs 1, 3 match, 0 free"),
    ("too few match", claim("c", exactly("r", "big", count=3)), set(), "only 2 match"),
    ("none match", claim("c", exactly("r", selectors=('device.attributes["numa"] == 7',))),
     set(), "no device of class gpu matches"),
]


@pytest.mark.parametrize(("name", "claim_obj", "in_use", "reason"), SIMPLE_UNFIT,
                         ids=[c[0] for c in SIMPLE_UNFIT])
def test_a_one_request_claim_that_does_not_fit_says_why_only_when_asked(
        name: str, claim_obj: dict[str, Any], in_use: set[DeviceID], reason: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    import scheduler.dra.allocator as allocator

    searched: list[str] = []
    search = allocator._search_all

    def counted(*args: Any, **kw: Any) -> Any:
        searched.append("search")
        return search(*args, **kw)

    monkeypatch.setattr(allocator, "_search_all", counted)
    out = allocate([claim_obj], node=N1, inventory=Inventory([SLICE]), classes=CLASSES,
                   in_use=in_use)
    assert isinstance(out, Unfit) and not out.timed_out
    assert searched == []  # Filter's answer costs no search
    assert any(reason in d for d in out.details), out.details
    assert searched == ["search"]  # the general path's own words, once
    assert out.details == out.details and searched == ["search"]


def test_a_cel_error_on_a_device_in_use_is_raised_as_by_the_search() -> None:
    # the class fails at runtime on every device; every device is held: still the error
    held = {(DRIVER, "n1", "g0"), (DRIVER, "n1", "g1"), (DRIVER, "n1", "g2")}
    with pytest.raises(AllocationError, match="device gpu.example.com/n1/g0: CEL runtime"):
        allocate([claim("c", exactly("r", "runtime"))], node=N1, inventory=Inventory([SLICE]),
                 classes=CLASSES, in_use=held)


def test_selector_results_are_cached_per_device_for_the_whole_request() -> None:
    inv = Inventory([SLICE])
    c = claim("c", exactly("r", "big"))
    first = allocate([c], node=N1, inventory=inv, classes=CLASSES, in_use=set())
    assert results(first) == [[("r", "g0")]]
    g0 = inv.devices_for_node(N1)[0]
    joint = [k for k in g0.selected if k.startswith("\x00")]
    assert len(joint) == 1 and g0.selected[joint[0]] is True
    g0.selected[joint[0]] = False  # the cached joint answer is what is read next time
    assert results(allocate([c], node=N1, inventory=inv, classes=CLASSES,
                            in_use=set())) == [[("r", "g1")]]


def _outcome(out: Any) -> Any:
    return results(out) if isinstance(out, Allocated) else ("unfit", out.details)


@pytest.mark.parametrize("held_ids", [
    set(), {(DRIVER, "n1", "g0")}, {(DRIVER, "n1", "g0"), (DRIVER, "n1", "g1")},
    {(DRIVER, "n1", "g0"), (DRIVER, "n1", "g1"), (DRIVER, "n1", "g2")},
    {(DRIVER, "n1", "g0"), (DRIVER, "n1", "g1"), (DRIVER, "n1", "g2"), (DRIVER, "n9", "zz")},
])
@pytest.mark.parametrize("claim_obj", [claim("c", exactly("r")), claim("c", exactly("r", "big")),
                                       claim("c", exactly("r", count=2))])
def test_the_held_count_shortcut_answers_as_the_allocator(
        held_ids: set[DeviceID], claim_obj: dict[str, Any]) -> None:
    shared = device("shared", capacity={"memory": "40Gi"}, attrs={"numa": 0})
    for slices in ([SLICE], [SLICE, resource_slice("z", pool="z", all_nodes=True,
                                                   devices=[shared])]):
        inv = Inventory(slices)
        plain = allocate([claim_obj], node=N1, inventory=inv, classes=CLASSES, in_use=held_ids)
        held = inv.held_by_node(held_ids)
        # twice: the second call may take the shortcut (the node's selectors are checked)
        for _ in range(2):
            out = allocate([claim_obj], node=N1, inventory=inv, classes=CLASSES,
                           in_use=held_ids, held=held)
            assert _outcome(out) == _outcome(plain)


def test_held_counts_only_the_inventorys_own_node_local_devices() -> None:
    inv = Inventory([SLICE, resource_slice("z", pool="z", all_nodes=True,
                                           devices=[device("shared")])])
    held = inv.held_by_node({(DRIVER, "n1", "g0"), (DRIVER, "n1", "gone"),
                             (DRIVER, "z", "shared")})
    assert held == {"n1": 1}
    assert not inv.all_held("n1", {"n1": 3})  # the all-nodes device may still be free
    only_local = Inventory([SLICE])
    assert only_local.all_held("n1", {"n1": 3}) and not only_local.all_held("n1", {"n1": 2})


def test_the_shortcut_is_not_taken_before_the_selectors_ran_without_error() -> None:
    held_ids = {(DRIVER, "n1", "g0"), (DRIVER, "n1", "g1"), (DRIVER, "n1", "g2")}
    inv = Inventory([SLICE])
    for _ in range(2):  # a CEL error is never remembered as checked
        with pytest.raises(AllocationError, match="CEL runtime"):
            allocate([claim("c", exactly("r", "runtime"))], node=N1, inventory=inv,
                     classes=CLASSES, in_use=held_ids, held=inv.held_by_node(held_ids))


def test_a_node_whose_devices_are_all_held_is_not_walked(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import scheduler.dra.allocator as allocator

    held_ids = {(DRIVER, "n1", "g0"), (DRIVER, "n1", "g1"), (DRIVER, "n1", "g2")}
    inv = Inventory([SLICE])
    held = inv.held_by_node(held_ids)
    c = [claim("c", exactly("r"))]
    first = allocate(c, node=N1, inventory=inv, classes=CLASSES, in_use=held_ids, held=held)
    walked: list[str] = []
    fast = allocator._fast_path

    def counted(*args: Any, **kw: Any) -> Any:
        walked.append("walk")
        return fast(*args, **kw)

    monkeypatch.setattr(allocator, "_fast_path", counted)
    again = allocate(c, node=N1, inventory=inv, classes=CLASSES, in_use=held_ids, held=held)
    assert walked == []
    assert isinstance(again, Unfit) and again.details == first.details
    allocate(c, node=N1, inventory=inv, classes=CLASSES, in_use=held_ids, held={"n1": 2})
    assert walked == ["walk"]  # a free device: the node is looked at


def test_deadline_reports_timeout_on_the_injected_clock() -> None:
    # the same hopeless search with an ample step budget: the clock runs past the deadline
    many = resource_slice("m", node="n1", devices=[device(f"d{i}") for i in range(7)])
    c = claim("c", exactly("x", count=3), exactly("y", count=3), exactly("z", count=2))
    ticks = iter(range(1_000_000))
    out = allocate([c], node=N1, inventory=Inventory([many]), classes=CLASSES, in_use=set(),
                   deadline=5.0, clock=lambda: float(next(ticks)))
    assert isinstance(out, Unfit) and out.timed_out
    assert out.details == ["timed out trying to allocate devices"]
    # no deadline: the search runs to its end and says why it failed
    out = allocate([c], node=N1, inventory=Inventory([many]), classes=CLASSES, in_use=set())
    assert isinstance(out, Unfit) and not out.timed_out
