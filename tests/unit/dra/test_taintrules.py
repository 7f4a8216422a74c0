"""DeviceTaintRules (DRADeviceTaintRules): which devices a rule selects, the taints the
allocator then sees through DynamicResources, the gate, malformed rules, and the queueing
hint that requeues pods when a rule stops tainting devices."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.config import features
from scheduler.dra.inventory import DeviceTaint, Inventory
from scheduler.dra.taintrules import TaintRules, parse_rule
from scheduler.framework.events import QueueingHint
from scheduler.objects.errors import ObjectError
from scheduler.plugins.dynamicresources.plugin import DynamicResources, _after_taint_rule_change
from tests.builders import dra_taint_rule, make_node, make_pod
from tests.fakes import FakeHandle, node_infos
from tests.unit.dra.builders import DRIVER, claim, device, exactly, gpu_class, resource_slice
from tests.unit.plugins.dynamicresources.test_plugin import filter_all, pod_with

NODES = [make_node("n1"), make_node("n2")]
SLICES = [
    resource_slice("n1-gpus", node="n1", devices=[device("g0"), device("g1", taints=[
        {"key": "driver-says", "effect": "NoSchedule"}])]),
    resource_slice("n2-gpus", node="n2", devices=[device("g0")]),
    resource_slice("n2-nics", node="n2", driver="nic.example.com", devices=[device("g0")]),
]
ALL = {(DRIVER, "n1", "g0"), (DRIVER, "n1", "g1"), (DRIVER, "n2", "g0"), ("nic.example.com", "n2", "g0")}


def _rule(name: str = "r", **kw: Any) -> dict[str, Any]:
    out = dra_taint_rule(name, **kw)
    out["metadata"]["resourceVersion"] = "1"
    return out


SELECTS = [
    ("no selector: nothing", _rule(selector=False), set()),
    ("empty selector: everything", _rule(), ALL),
    ("driver", _rule(driver=DRIVER), {(DRIVER, "n1", "g0"), (DRIVER, "n1", "g1"), (DRIVER, "n2", "g0")}),
    ("pool", _rule(pool="n2"), {(DRIVER, "n2", "g0"), ("nic.example.com", "n2", "g0")}),
    ("device across pools", _rule(device="g0"),
     {(DRIVER, "n1", "g0"), (DRIVER, "n2", "g0"), ("nic.example.com", "n2", "g0")}),
    ("all three", _rule(driver=DRIVER, pool="n1", device="g0"), {(DRIVER, "n1", "g0")}),
    ("no such driver", _rule(driver="fpga.example.com"), set()),
]


@pytest.mark.parametrize(("rule", "want"), [c[1:] for c in SELECTS], ids=[c[0] for c in SELECTS])
def test_a_rule_taints_the_devices_its_selector_matches(rule: dict[str, Any], want: set[Any]) -> None:
    inv = Inventory(SLICES)
    rules = TaintRules()
    rules.rule_added(rule)
    rules.apply(inv)
    added = DeviceTaint("example.com/unhealthy", "", "NoSchedule")
    devices = {d.id: d for p in inv.pools.values() for d in p.devices}
    assert {i for i, d in devices.items() if added in d.taints} == want
    # the driver's own taint stays first; deleting the rule leaves only the slice's taints
    assert devices[(DRIVER, "n1", "g1")].taints[0] == DeviceTaint("driver-says", "", "NoSchedule")
    rules.rule_deleted(rule)
    rules.apply(inv)
    assert [d.id for d in devices.values() if d.taints] == [(DRIVER, "n1", "g1")]


def test_version_changes_only_when_a_rule_does() -> None:
    rules = TaintRules()
    r = _rule(driver=DRIVER)
    rules.rule_added(r)
    v = rules.version
    rules.rule_added(r)  # a resync
    rules.rule_updated(r, {**r, "metadata": {"name": "r", "resourceVersion": "2", "labels": {"a": "b"}}})
    assert rules.version == v  # same rule, new resourceVersion: nothing to re-apply
    rules.rule_updated(r, _rule(driver=DRIVER, effect="NoExecute"))
    assert rules.version == v + 1
    rules.replace([])
    assert rules.version == v + 2 and rules.rules == []


@pytest.mark.parametrize(("obj", "field"), [
    ({"metadata": {"name": "x"}}, "spec"),
    ({"metadata": {"name": "x"}, "spec": {"deviceSelector": {}}}, "spec.taint"),
    ({"metadata": {"name": "x"}, "spec": {"taint": {"effect": "NoSchedule"}}}, "spec.taint.key"),
    ({"metadata": {"name": "x"}, "spec": {"taint": {"key": "k"}}}, "spec.taint.effect"),
    ({"metadata": {"name": "x"}, "spec": {"deviceSelector": [], "taint": {"key": "k", "effect": "None"}}},
     "spec.deviceSelector"),
    ({"metadata": {"name": "x"}, "spec": {"deviceSelector": {"pool": 3},
                                          "taint": {"key": "k", "effect": "None"}}},
     "spec.deviceSelector.pool"),
])
def test_a_malformed_rule_is_named_and_ignored(obj: dict[str, Any], field: str) -> None:
    with pytest.raises(ObjectError) as e:
        parse_rule(obj)
    assert e.value.field == field and "DeviceTaintRule" in str(e.value) and "x" in str(e.value)
    rules = TaintRules()
    rules.rule_added(_rule("good", device="g0"))
    rules.rule_added(obj)
    assert [r.name for r in rules.rules] == ["good"]
    assert len(rules.new_problems) == 1 and field in rules.new_problems[0]


def _plugin(rules: list[dict[str, Any]], claims: list[dict[str, Any]]) -> tuple[DynamicResources, FakeHandle]:
    handle = FakeHandle(node_infos(NODES), objects={
        "resourceclaims": claims, "resourceslices": SLICES, "deviceclasses": [gpu_class()],
        "devicetaintrules": rules})
    return DynamicResources(None, handle), handle  # type: ignore[arg-type]


TOLERATE = [{"key": "example.com/unhealthy", "operator": "Exists", "effect": "NoSchedule"}]
FITS = [
    ("no rule", [], None, {"n1", "n2"}),
    ("NoSchedule on n2's gpu", [_rule(driver=DRIVER, pool="n2")], None, {"n1"}),
    ("NoExecute on every gpu", [_rule(driver=DRIVER, effect="NoExecute")], None, set()),
    ("effect None taints nothing", [_rule(driver=DRIVER, effect="None")], None, {"n1", "n2"}),
    ("tolerated", [_rule(driver=DRIVER)], TOLERATE, {"n1", "n2"}),
    ("no selector", [_rule(selector=False)], None, {"n1", "n2"}),
]


@pytest.mark.parametrize(("rules", "tolerations", "fits"), [c[1:] for c in FITS], ids=[c[0] for c in FITS])
def test_untolerated_rule_taints_keep_devices_from_allocation(
        rules: list[dict[str, Any]], tolerations: list[dict[str, Any]] | None, fits: set[str]) -> None:
    p, handle = _plugin(rules, [claim("c", exactly("r", tolerations=tolerations))])
    _, statuses = filter_all(p, pod_with("p", "c"), handle)
    assert {n for n, st in statuses.items() if st is None or st.is_success()} == fits
    for n, st in statuses.items():
        if n not in fits:
            assert st is not None and "cannot allocate all claims" in st.message()


def test_a_deleted_rule_frees_its_devices_on_the_next_cycle() -> None:
    rule = _rule(driver=DRIVER)
    p, handle = _plugin([rule], [claim("c", exactly("r"))])
    _, before = filter_all(p, pod_with("p", "c"), handle)
    assert all(st is not None and not st.is_success() for st in before.values())
    handle.listers.objects["devicetaintrules"] = []
    _, after = filter_all(p, pod_with("p", "c"), handle)
    assert {n for n, st in after.items() if st is None} == {"n1", "n2"}


def test_with_the_gate_off_rules_are_ignored() -> None:
    features.DEFAULT.set_from_map({"DRADeviceTaintRules": False})
    try:
        p, handle = _plugin([_rule(driver=DRIVER)], [claim("c", exactly("r"))])
    finally:
        features.DEFAULT.reset()
    _, statuses = filter_all(p, pod_with("p", "c"), handle)
    assert {n for n, st in statuses.items() if st is None} == {"n1", "n2"}


NO_SCHED = _rule(driver=DRIVER)
HINTS = [
    ("a new rule only takes devices", None, NO_SCHED, QueueingHint.SKIP),
    ("a tainting rule deleted", NO_SCHED, None, QueueingHint.QUEUE),
    ("a rule of effect None deleted", _rule(effect="None"), None, QueueingHint.SKIP),
    ("NoSchedule -> None", NO_SCHED, _rule(driver=DRIVER, effect="None"), QueueingHint.QUEUE),
    ("None -> NoSchedule", _rule(driver=DRIVER, effect="None"), NO_SCHED, QueueingHint.SKIP),
    ("selector narrowed", NO_SCHED, _rule(driver=DRIVER, pool="n1"), QueueingHint.QUEUE),
    ("metadata only", NO_SCHED, {**NO_SCHED, "metadata": {"name": "r", "labels": {"a": "b"}}},
     QueueingHint.SKIP),
    ("a rule without selector deleted", _rule(selector=False), None, QueueingHint.SKIP),
    ("became malformed", NO_SCHED, {"metadata": {"name": "r"}, "spec": {}}, QueueingHint.QUEUE),
]


@pytest.mark.parametrize(("old", "new", "want"), [c[1:] for c in HINTS], ids=[c[0] for c in HINTS])
def test_queueing_hint_requeues_when_a_rule_stops_tainting(old: Any, new: Any, want: QueueingHint) -> None:
    assert _after_taint_rule_change(make_pod("p"), old, new) is want


def test_plugin_registers_the_rule_events() -> None:
    p, _ = _plugin([], [])
    resources = {e.event.resource for e in p.events_to_register()}
    assert "resource.k8s.io/DeviceTaintRule" in {str(r.value) for r in resources}
