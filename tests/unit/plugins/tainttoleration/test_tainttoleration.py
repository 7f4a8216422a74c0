"""TaintToleration: Filter on NoSchedule/NoExecute, Score on PreferNoSchedule, queueing hints."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.config.errors import ConfigError
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.events import (
    ActionType,
    ClusterEvent,
    EventResource,
    QueueingHint,
)
from scheduler.framework.status import Code, Status
from scheduler.framework.types import MAX_NODE_SCORE, NodeScore
from scheduler.objects.pod import PodInfo
from scheduler.plugins import names
from scheduler.plugins.registry import in_tree_registry
from scheduler.plugins.tainttoleration import (
    ERR_REASON_NOT_MATCH,
    NAME,
    TaintToleration,
)
from tests.builders import NodeBuilder, PodBuilder
from tests.fakes import FakeHandle, node_infos

Tol = dict[str, Any]


def _pod(*tolerations: Tol, uid: str = "uid-p") -> dict[str, Any]:
    b = PodBuilder("p").container().uid(uid)
    for t in tolerations:
        b.toleration(**t)
    return b.obj()


def _node(name: str, *taints: tuple[str, str, str]) -> dict[str, Any]:
    b = NodeBuilder(name)
    for key, value, effect in taints:
        b.taint(key, value, effect)
    return b.obj()


def _plugin(infos: Any = ()) -> TaintToleration:
    return TaintToleration({}, FakeHandle(infos))


def test_name_and_registry() -> None:
    assert NAME == names.TAINT_TOLERATION == TaintToleration.NAME == _plugin().name
    assert in_tree_registry().get(names.TAINT_TOLERATION) is TaintToleration


def test_unknown_args_rejected() -> None:
    with pytest.raises(ConfigError, match="TaintToleration.args.foo"):
        TaintToleration({"foo": 1}, FakeHandle())


def test_reason_constant_matches_upstream() -> None:
    assert ERR_REASON_NOT_MATCH == "node(s) had taints that the pod didn't tolerate"


def _unres(msg: str) -> Status:
    return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, msg)


FILTER_CASES: list[tuple[str, list[Tol], list[tuple[str, str, str]], Status | None]] = [
    (
        "no tolerations vs NoSchedule taint",
        [],
        [("dedicated", "team-a", "NoSchedule")],
        _unres("node(s) had untolerated taint {dedicated: team-a}"),
    ),
    (
        "equal toleration with same key/value/effect",
        [{"key": "dedicated", "value": "team-a", "effect": "NoSchedule"}],
        [("dedicated", "team-a", "NoSchedule")],
        None,
    ),
    (
        "equal toleration with different value",
        [{"key": "dedicated", "operator": "Equal", "value": "team-b", "effect": "NoSchedule"}],
        [("dedicated", "team-a", "NoSchedule")],
        _unres("node(s) had untolerated taint {dedicated: team-a}"),
    ),
    (
        "exists toleration ignores the value",
        [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
        [("gpu", "a100", "NoSchedule")],
        None,
    ),
    (
        "several taints all tolerated",
        [
            {"key": "dedicated", "operator": "Equal", "value": "team-b", "effect": "NoSchedule"},
            {"key": "gpu", "operator": "Exists", "effect": "NoSchedule"},
        ],
        [("dedicated", "team-b", "NoSchedule"), ("gpu", "x", "NoSchedule")],
        None,
    ),
    (
        "first untolerated taint is reported",
        [{"key": "a", "operator": "Exists"}],
        [("a", "1", "NoSchedule"), ("b", "2", "NoExecute"), ("c", "3", "NoSchedule")],
        _unres("node(s) had untolerated taint {b: 2}"),
    ),
    (
        "matching key/value but other effect",
        [{"key": "foo", "operator": "Equal", "value": "bar", "effect": "PreferNoSchedule"}],
        [("foo", "bar", "NoSchedule")],
        _unres("node(s) had untolerated taint {foo: bar}"),
    ),
    (
        "empty toleration effect tolerates NoSchedule",
        [{"key": "foo", "operator": "Equal", "value": "bar"}],
        [("foo", "bar", "NoSchedule")],
        None,
    ),
    (
        "PreferNoSchedule taint never filters",
        [{"key": "dedicated", "operator": "Equal", "value": "x", "effect": "NoSchedule"}],
        [("dedicated", "team-a", "PreferNoSchedule")],
        None,
    ),
    ("PreferNoSchedule taint, no tolerations", [], [("k", "v", "PreferNoSchedule")], None),
    (
        "NoExecute taint filters",
        [],
        [("node.kubernetes.io/unreachable", "", "NoExecute")],
        _unres("node(s) had untolerated taint {node.kubernetes.io/unreachable: }"),
    ),
    (
        "NoExecute tolerated with tolerationSeconds",
        [{"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute",
          "toleration_seconds": 300}],
        [("node.kubernetes.io/unreachable", "", "NoExecute")],
        None,
    ),
    (
        "empty key with Exists tolerates everything",
        [{"operator": "Exists"}],
        [("a", "1", "NoSchedule"), ("b", "", "NoExecute")],
        None,
    ),
    ("untainted node", [], [], None),
]


@pytest.mark.parametrize(
    ("tolerations", "taints", "want"),
    [c[1:] for c in FILTER_CASES],
    ids=[c[0] for c in FILTER_CASES],
)
def test_filter(tolerations: list[Tol], taints: list[tuple[str, str, str]],
                want: Status | None) -> None:
    [info] = node_infos([_node("n1", *taints)])
    got = _plugin().filter(CycleState(), PodInfo.from_pod(_pod(*tolerations)), info)
    assert got == want


def test_filter_malformed_taint_is_an_error_naming_the_node() -> None:
    node = _node("bad")
    node["spec"]["taints"] = [{"key": "k", "effect": "Sometimes"}]
    [info] = node_infos([node])
    got = _plugin().filter(CycleState(), PodInfo.from_pod(_pod()), info)
    assert got is not None and got.code == Code.ERROR
    assert "bad" in got.message() and "spec.taints[0].effect" in got.message()


SCORE_CASES: list[tuple[str, list[Tol], dict[str, list[tuple[str, str, str]]], dict[str, int]]] = [
    (
        "tolerated taint beats intolerable one",
        [{"key": "foo", "operator": "Equal", "value": "bar", "effect": "PreferNoSchedule"}],
        {"a": [("foo", "bar", "PreferNoSchedule")], "b": [("foo", "baz", "PreferNoSchedule")]},
        {"a": MAX_NODE_SCORE, "b": 0},
    ),
    (
        "number of tolerated taints does not matter",
        [
            {"key": "arch", "operator": "Equal", "value": "arm64", "effect": "PreferNoSchedule"},
            {"key": "disk", "operator": "Equal", "value": "ssd", "effect": "PreferNoSchedule"},
        ],
        {
            "a": [],
            "b": [("arch", "arm64", "PreferNoSchedule")],
            "c": [("arch", "arm64", "PreferNoSchedule"), ("disk", "ssd", "PreferNoSchedule")],
        },
        {"a": MAX_NODE_SCORE, "b": MAX_NODE_SCORE, "c": MAX_NODE_SCORE},
    ),
    (
        "more intolerable taints, lower score",
        [{"key": "foo", "operator": "Equal", "value": "bar", "effect": "PreferNoSchedule"}],
        {
            "a": [],
            "b": [("arch", "arm64", "PreferNoSchedule")],
            "c": [("arch", "arm64", "PreferNoSchedule"), ("disk", "ssd", "PreferNoSchedule")],
        },
        {"a": MAX_NODE_SCORE, "b": 50, "c": 0},
    ),
    (
        "only PreferNoSchedule taints and tolerations count",
        [
            {"key": "arch", "operator": "Equal", "value": "arm64", "effect": "NoSchedule"},
            {"key": "disk", "operator": "Equal", "value": "ssd", "effect": "NoSchedule"},
        ],
        {
            "a": [],
            "b": [("arch", "arm64", "NoSchedule")],
            "c": [("arch", "arm64", "PreferNoSchedule"), ("disk", "ssd", "PreferNoSchedule")],
        },
        {"a": MAX_NODE_SCORE, "b": MAX_NODE_SCORE, "c": 0},
    ),
    (
        "no tolerations prefers the untainted node",
        [],
        {"a": [], "b": [("arch", "arm64", "PreferNoSchedule")]},
        {"a": MAX_NODE_SCORE, "b": 0},
    ),
    (
        "toleration without effect tolerates PreferNoSchedule",
        [{"key": "arch", "operator": "Exists"}],
        {"a": [("arch", "arm64", "PreferNoSchedule")], "b": [("x", "", "PreferNoSchedule")]},
        {"a": MAX_NODE_SCORE, "b": 0},
    ),
    (
        "no intolerable taints anywhere: everyone gets the max",
        [],
        {"a": [], "b": [("k", "v", "NoSchedule")]},
        {"a": MAX_NODE_SCORE, "b": MAX_NODE_SCORE},
    ),
]


@pytest.mark.parametrize(
    ("tolerations", "taints", "want"),
    [c[1:] for c in SCORE_CASES],
    ids=[c[0] for c in SCORE_CASES],
)
def test_score(tolerations: list[Tol], taints: dict[str, list[tuple[str, str, str]]],
               want: dict[str, int]) -> None:
    infos = node_infos([_node(n, *t) for n, t in taints.items()])
    plugin = _plugin(infos)
    pod_info = PodInfo.from_pod(_pod(*tolerations))
    state = CycleState()
    assert plugin.pre_score(state, pod_info, infos) is None
    scores = []
    for info in infos:
        raw, status = plugin.score(state, pod_info, info)
        assert status is None
        scores.append(NodeScore(info.name, raw))
    ext = plugin.score_extensions()
    assert ext is not None
    assert ext.normalize_score(state, pod_info, scores) is None
    assert {s.name: s.score for s in scores} == want


def test_raw_score_counts_intolerable_prefer_no_schedule_taints() -> None:
    infos = node_infos([_node("a", ("x", "1", "PreferNoSchedule"), ("y", "2", "PreferNoSchedule"),
                              ("z", "3", "NoSchedule"))])
    plugin, state = _plugin(infos), CycleState()
    pod_info = PodInfo.from_pod(_pod({"key": "y", "operator": "Exists"}))
    plugin.pre_score(state, pod_info, infos)
    assert plugin.score(state, pod_info, infos[0]) == (1, None)


def test_score_without_pre_score_is_an_error() -> None:
    infos = node_infos([_node("a")])
    score, status = _plugin(infos).score(CycleState(), PodInfo.from_pod(_pod()), infos[0])
    assert score == 0 and status is not None and status.code == Code.ERROR


def test_pre_score_state_survives_clone() -> None:
    infos = node_infos([_node("a", ("x", "1", "PreferNoSchedule"))])
    plugin, state = _plugin(infos), CycleState()
    pod_info = PodInfo.from_pod(_pod())
    plugin.pre_score(state, pod_info, infos)
    assert plugin.score(state.clone(), pod_info, infos[0]) == (1, None)


# --- events and hints ---------------------------------------------------------------------


def test_events_to_register() -> None:
    registered = _plugin().events_to_register()
    node_events = [e for e in registered if e.event.resource is EventResource.NODE]
    pod_events = [e for e in registered if e.event.resource is EventResource.UNSCHEDULED_POD]
    assert len(registered) == 2 and len(node_events) == 1 and len(pod_events) == 1
    assert node_events[0].event.action_type == ActionType.ADD | ActionType.UPDATE_NODE_TAINT
    assert pod_events[0].event.action_type == ActionType.UPDATE_POD_TOLERATION
    assert all(e.hint is not None for e in registered)
    # Label-only node updates cannot change the outcome of this plugin.
    label_update = ClusterEvent(EventResource.NODE, ActionType.UPDATE_NODE_LABEL)
    assert not node_events[0].event.matches(label_update)
    assert node_events[0].event.matches(
        ClusterEvent(EventResource.NODE, ActionType.UPDATE_NODE_TAINT | ActionType.UPDATE_NODE_LABEL)
    )


_TOL_B = {"key": "dedicated", "operator": "Equal", "value": "b", "effect": "NoSchedule"}

NODE_HINT_CASES: list[tuple[str, Any, Any, QueueingHint]] = [
    ("added node with untolerated taint", None,
     _node("n", ("dedicated", "a", "NoSchedule")), QueueingHint.SKIP),
    ("added node with tolerated taint", None,
     _node("n", ("dedicated", "b", "NoSchedule")), QueueingHint.QUEUE),
    ("added untainted node", None, _node("n"), QueueingHint.QUEUE),
    ("update adds another untolerated taint",
     _node("n", ("dedicated", "a", "NoSchedule")),
     _node("n", ("dedicated", "a", "NoSchedule"), ("dedicated", "c", "NoSchedule")),
     QueueingHint.SKIP),
    ("update replaces untolerated taint with tolerated one",
     _node("n", ("dedicated", "a", "NoSchedule")),
     _node("n", ("dedicated", "b", "NoSchedule")), QueueingHint.QUEUE),
    ("update removes the untolerated taint",
     _node("n", ("dedicated", "a", "NoExecute")), _node("n"), QueueingHint.QUEUE),
    ("node was already fine", _node("n"), _node("n", ("x", "", "PreferNoSchedule")),
     QueueingHint.SKIP),
    ("only a PreferNoSchedule taint remains",
     _node("n", ("dedicated", "a", "NoSchedule")),
     _node("n", ("dedicated", "a", "PreferNoSchedule")), QueueingHint.QUEUE),
]


@pytest.mark.parametrize(
    ("old", "new", "want"), [c[1:] for c in NODE_HINT_CASES], ids=[c[0] for c in NODE_HINT_CASES]
)
def test_node_change_hint(old: Any, new: Any, want: QueueingHint) -> None:
    assert _plugin().is_schedulable_after_node_change(_pod(_TOL_B), old, new) == want


@pytest.mark.parametrize(("old", "new"), [(None, "not-a-node"), ("not-a-node", _node("n"))])
def test_node_change_hint_wrong_object_raises(old: Any, new: Any) -> None:
    # The queue treats a raising hint as Queue.
    with pytest.raises(TypeError):
        _plugin().is_schedulable_after_node_change(_pod(), old, new)


def test_node_hint_is_the_registered_one() -> None:
    plugin = _plugin()
    [node_event] = [e for e in plugin.events_to_register()
                    if e.event.resource is EventResource.NODE]
    assert node_event.hint is not None
    assert node_event.hint(_pod(_TOL_B), None, _node("n", ("dedicated", "b", "NoSchedule"))) \
        == QueueingHint.QUEUE


POD_HINT_CASES: list[tuple[str, str, str, QueueingHint]] = [
    ("update of another pod", "uid-waiting", "uid-other", QueueingHint.SKIP),
    ("update of the waiting pod itself", "uid-waiting", "uid-waiting", QueueingHint.QUEUE),
]


@pytest.mark.parametrize(
    ("waiting_uid", "updated_uid", "want"),
    [c[1:] for c in POD_HINT_CASES],
    ids=[c[0] for c in POD_HINT_CASES],
)
def test_pod_toleration_hint(waiting_uid: str, updated_uid: str, want: QueueingHint) -> None:
    waiting = _pod(uid=waiting_uid)
    old = _pod(uid=updated_uid)
    new = _pod({"key": "foo", "operator": "Exists", "effect": "NoSchedule"}, uid=updated_uid)
    assert _plugin().is_schedulable_after_pod_toleration_change(waiting, old, new) == want


@pytest.mark.parametrize(("old", "new"), [(None, "not-a-pod"), ("not-a-pod", _pod())])
def test_pod_toleration_hint_wrong_object_raises(old: Any, new: Any) -> None:
    with pytest.raises(TypeError):
        _plugin().is_schedulable_after_pod_toleration_change(_pod(), old, new)
