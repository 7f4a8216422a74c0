"""NodeDeclaredFeatures: PreFilter infers the pod's required features, Filter keeps the nodes
that declare all of them, and the hints requeue on declared-feature changes.  Rows follow
upstream's nodedeclaredfeatures_test.go (TestPreFilter, TestFilter, the hint tests)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from scheduler.config.features import FeatureGates
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.events import ActionType, QueueingHint, node_update_action
from scheduler.framework.node_info import NodeInfo
from scheduler.framework.status import Code, Status
from scheduler.objects.pod import POD_REASON_DEFERRED, POD_RESIZE_PENDING, PodInfo
from scheduler.plugins.nodedeclaredfeatures import (
    ERR_REASON_UNSATISFIED_REQUIREMENTS,
    FEATURES,
    PRE_FILTER_STATE_KEY,
    DeclaredFeature,
    NodeDeclaredFeatures,
    infer_for_scheduling,
)
from tests.builders import NodeBuilder, PodBuilder

A, B, C = "FeatureA", "FeatureB", "FeatureC"


def _feature(name: str, infer: bool) -> DeclaredFeature:
    return DeclaredFeature(name, lambda spec: infer)


def _node(*declared: str) -> NodeInfo:
    b = NodeBuilder("n1").capacity(cpu="4", memory="8Gi", pods=10)
    if declared:
        b.set("status.declaredFeatures", list(declared))
    return NodeInfo(b.obj())


def _plugin(*registry: DeclaredFeature, enabled: bool = True,
            resize_preemption: bool = False) -> NodeDeclaredFeatures:
    gates = FeatureGates()
    # The gates are locked (GA) or unimplemented (alpha) in the public set; a test reaches
    # past that to see the plugin's own switch.
    gates._values["NodeDeclaredFeatures"] = enabled
    gates._values["InPlacePodVerticalScalingSchedulerPreemption"] = resize_preemption
    return NodeDeclaredFeatures(None, None, registry=registry or FEATURES, gates=gates)


POD = PodBuilder("test-pod").uid("u1").obj()


@pytest.mark.parametrize(
    ("enabled", "registry", "skipped", "required"),
    [
        (False, (_feature(A, True), _feature(B, False)), True, None),
        (True, (_feature(A, True), _feature(B, False)), False, {A}),
        (True, (_feature(A, True), _feature(B, True)), False, {A, B}),
        (True, (_feature(A, False), _feature(B, False)), True, None),
    ],
    ids=["plugin disabled", "pod with feature requirements",
         "pod with multiple feature requirements", "pod with no requirements"],
)
def test_pre_filter(enabled: bool, registry: tuple[DeclaredFeature, ...], skipped: bool,
                    required: set[str] | None) -> None:
    state = CycleState()
    result, status = _plugin(*registry, enabled=enabled).pre_filter(
        state, PodInfo.from_pod(POD), [])
    assert result is None
    assert (status is not None and status.code is Code.SKIP) is skipped
    s = state.get(PRE_FILTER_STATE_KEY)
    assert (None if s is None else set(s.required)) == required


def test_pre_filter_skips_deferred_resize_when_resize_preemption_is_on() -> None:
    pod = PodInfo.from_pod(PodBuilder("p").condition(POD_RESIZE_PENDING,
                                                     reason=POD_REASON_DEFERRED).obj())
    plugin = _plugin(_feature(A, True), resize_preemption=True)
    _, status = plugin.pre_filter(CycleState(), pod, [])
    assert status is not None and status.code is Code.SKIP
    _, status = _plugin(_feature(A, True)).pre_filter(CycleState(), pod, [])
    assert status is None


UNRESOLVABLE = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON_UNSATISFIED_REQUIREMENTS)


@pytest.mark.parametrize(
    ("node", "required", "expected"),
    [
        (_node(A, B), {A}, None),
        (_node(B), {A}, UNRESOLVABLE),
        (_node(A, B, C), {A, C}, None),
        (_node(), {A}, UNRESOLVABLE),
        (_node(A), {A, B}, UNRESOLVABLE),
    ],
    ids=["node matches requirements", "node does not match requirements",
         "node with multiple features, pod requires subset", "node has no declared features",
         "node with some but not all required features"],
)
def test_filter(node: NodeInfo, required: set[str], expected: Status | None) -> None:
    plugin = _plugin(*(_feature(f, f in required) for f in (A, B, C)))
    state, pod = CycleState(), PodInfo.from_pod(POD)
    assert plugin.pre_filter(state, pod, [node]) == (None, None)
    got = plugin.filter(state, pod, node)
    assert (got.code, got.reasons) == (expected.code, expected.reasons) if expected else got is None


def test_filter_without_pre_filter_state_is_an_error() -> None:
    status = _plugin().filter(CycleState(), PodInfo.from_pod(POD), _node(A))
    assert status is not None and status.code is Code.ERROR


def test_disabled_plugin_filters_nothing_and_registers_no_events() -> None:
    plugin = _plugin(enabled=False)
    assert plugin.filter(CycleState(), PodInfo.from_pod(POD), _node()) is None
    assert plugin.events_to_register() == []


@pytest.mark.parametrize(
    ("spec", "required"),
    [
        ({}, set()),
        ({"containers": [{"name": "c", "restartPolicyRules": [
            {"action": "RestartAllContainers", "exitCodes": {"operator": "In", "values": [42]}}]}]},
         {"RestartAllContainersOnContainerExits"}),
        ({"initContainers": [{"name": "i", "restartPolicyRules": [
            {"action": "RestartAllContainers"}]}], "containers": [{"name": "c"}]},
         {"RestartAllContainersOnContainerExits"}),
        ({"containers": [{"name": "c", "restartPolicyRules": [{"action": "Restart"}]}]}, set()),
        ({"hostNetwork": True, "hostUsers": False}, {"UserNamespacesHostNetworkSupport"}),
        ({"hostNetwork": True}, set()),
        ({"hostUsers": False}, set()),
    ],
    ids=["none", "restart-all", "restart-all-init", "restart-one", "userns-hostnetwork",
         "hostnetwork-only", "userns-only"],
)
def test_registry_inference(spec: Mapping[str, Any], required: set[str]) -> None:
    assert infer_for_scheduling({"spec": spec}) == required


def test_a_pod_needing_a_feature_goes_only_where_it_is_declared() -> None:
    pod = PodInfo.from_pod(PodBuilder("p").set("spec.hostNetwork", True)
                           .set("spec.hostUsers", False).obj())
    plugin = _plugin()
    nodes = [_node(), _node("UserNamespacesHostNetworkSupport")]
    state = CycleState()
    assert plugin.pre_filter(state, pod, nodes) == (None, None)
    out = plugin.filter_nodes(state, pod, nodes)
    assert out[0] is not None and out[0].code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert out[1] is None


def _declared(*features: str) -> dict[str, Any]:
    return NodeBuilder("n1").set("status.declaredFeatures", list(features)).obj()


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        (None, _declared(A), QueueingHint.QUEUE),
        (NodeBuilder("n1").obj(), _declared(A), QueueingHint.QUEUE),
        (_declared(A), _declared(A), QueueingHint.SKIP),
    ],
    ids=["node add with feature", "features added", "features unchanged"],
)
def test_node_hint(old: Any, new: Any, expected: QueueingHint) -> None:
    assert _plugin().is_schedulable_after_node_change(POD, old, new) is expected


def test_declared_feature_change_is_its_own_node_event() -> None:
    action = node_update_action(NodeBuilder("n1").obj(), _declared(A))
    assert action & ActionType.UPDATE_NODE_DECLARED_FEATURE
    assert not node_update_action(_declared(A), _declared(A)) & (
        ActionType.UPDATE_NODE_DECLARED_FEATURE)


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        (POD, PodBuilder("test-pod").uid("u1").set("spec.hostNetwork", True)
         .set("spec.hostUsers", False).obj(), QueueingHint.QUEUE),
        (PodBuilder("test-pod").uid("u1").set("spec.hostNetwork", True)
         .set("spec.hostUsers", False).obj(), POD, QueueingHint.QUEUE),
        (POD, PodBuilder("test-pod").uid("u1").labels(foo="bar").obj(), QueueingHint.SKIP),
    ],
    ids=["update adds requirement", "update removes requirement", "no change in requirements"],
)
def test_target_pod_hint(old: Any, new: Any, expected: QueueingHint) -> None:
    assert _plugin().is_schedulable_after_target_pod_update(POD, old, new) is expected


def test_sign_is_the_required_set() -> None:
    plugin = _plugin()
    plain = PodInfo.from_pod(POD)
    needs = PodInfo.from_pod(PodBuilder("q").set("spec.hostNetwork", True)
                             .set("spec.hostUsers", False).obj())
    assert plugin.sign(plain) == ()
    assert plugin.sign(needs) == ("UserNamespacesHostNetworkSupport",)
