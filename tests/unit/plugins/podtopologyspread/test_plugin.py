"""PodTopologySpread args validation, constraint parsing and queueing hints."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.config.errors import ConfigError
from scheduler.framework.events import ActionType, EventResource, QueueingHint
from scheduler.objects.errors import ObjectError
from scheduler.plugins.podtopologyspread import PodTopologySpread
from scheduler.plugins.podtopologyspread.common import Constraint
from tests.builders import NodeBuilder, PodBuilder
from tests.fakes import FakeHandle
from tests.unit.plugins.podtopologyspread.helpers import HOST, ZONE

Q, S = QueueingHint.QUEUE, QueueingHint.SKIP


def plugin(args: dict[str, Any] | None = None, **objects: list[dict[str, Any]]
           ) -> PodTopologySpread:
    return PodTopologySpread(args or {}, FakeHandle(objects=objects))


# --- args ----------------------------------------------------------------------------------------


def test_default_args_are_system_defaulting() -> None:
    p = plugin()
    assert p.defaulting_type == "System"
    assert [(c["topologyKey"], c["maxSkew"]) for c in p.default_constraints] == [
        (HOST, 3), (ZONE, 5)]


def test_list_defaulting() -> None:
    constraints = [{"maxSkew": 2, "topologyKey": "rack", "whenUnsatisfiable": "ScheduleAnyway"}]
    p = plugin({"defaultConstraints": constraints})
    assert p.defaulting_type == "List"
    assert list(p.default_constraints) == constraints


def test_list_defaulting_without_constraints_disables_defaults() -> None:
    p = plugin({"defaultingType": "List"})
    assert p.default_constraints == ()


@pytest.mark.parametrize(
    "args, fragment",
    [
        ({"defaultingType": "Magic"}, "defaultingType"),
        ({"defaultingType": "System", "defaultConstraints": [
            {"maxSkew": 1, "topologyKey": "rack", "whenUnsatisfiable": "DoNotSchedule"}]},
         "defaultingType"),
        ({"defaultConstraints": [
            {"maxSkew": 0, "topologyKey": "rack", "whenUnsatisfiable": "DoNotSchedule"}]},
         "defaultConstraints[0].maxSkew"),
        ({"defaultConstraints": [
            {"maxSkew": 1, "topologyKey": "", "whenUnsatisfiable": "DoNotSchedule"}]},
         "defaultConstraints[0].topologyKey"),
        ({"defaultConstraints": [
            {"maxSkew": 1, "topologyKey": "bad key!", "whenUnsatisfiable": "DoNotSchedule"}]},
         "defaultConstraints[0].topologyKey"),
        ({"defaultConstraints": [{"maxSkew": 1, "topologyKey": "rack"}]},
         "defaultConstraints[0].whenUnsatisfiable"),
        ({"defaultConstraints": [
            {"maxSkew": 1, "topologyKey": "rack", "whenUnsatisfiable": "Sometimes"}]},
         "defaultConstraints[0].whenUnsatisfiable"),
        ({"defaultConstraints": [
            {"maxSkew": 1, "topologyKey": "rack", "whenUnsatisfiable": "DoNotSchedule",
             "labelSelector": {"matchLabels": {"a": "b"}}}]},
         "defaultConstraints[0].labelSelector"),
        ({"defaultConstraints": [
            {"maxSkew": 1, "topologyKey": "rack", "whenUnsatisfiable": "DoNotSchedule"},
            {"maxSkew": 2, "topologyKey": "rack", "whenUnsatisfiable": "DoNotSchedule"}]},
         "defaultConstraints[1]"),
        ({"unknownField": 1}, "unknownField"),
    ],
)
def test_invalid_args(args: dict[str, Any], fragment: str) -> None:
    with pytest.raises(ConfigError) as exc:
        plugin(args)
    assert f"PodTopologySpread.args.{fragment}" in str(exc.value)


def test_same_key_with_different_actions_is_allowed() -> None:
    plugin({"defaultConstraints": [
        {"maxSkew": 1, "topologyKey": "rack", "whenUnsatisfiable": "DoNotSchedule"},
        {"maxSkew": 1, "topologyKey": "rack", "whenUnsatisfiable": "ScheduleAnyway"}]})


# --- constraints ---------------------------------------------------------------------------------


def test_constraint_defaults_and_policies() -> None:
    pod = (
        PodBuilder("p").labels(app="web", rev="7")
        .topology_spread(2, ZONE, selector={"app": "web"}, match_label_keys=["rev", "absent"])
        .topology_spread(1, HOST, selector={"app": "web"}, min_domains=3,
                         node_affinity_policy="Ignore", node_taints_policy="Honor")
        .obj()
    )
    first, second = plugin().constraints_for(pod, "DoNotSchedule")
    assert (first.max_skew, first.min_domains, first.node_affinity_policy,
            first.node_taints_policy) == (2, 1, "Honor", "Ignore")
    assert first.selector.matches({"app": "web", "rev": "7"})
    assert not first.selector.matches({"app": "web", "rev": "6"})
    assert second == Constraint(1, HOST, second.selector, 3, "Ignore", "Honor")
    assert plugin().constraints_for(pod, "ScheduleAnyway") == []


def test_malformed_constraint_names_pod_and_field() -> None:
    pod = PodBuilder("p").topology_spread(1, ZONE, selector={"app": "web"}).obj()
    pod["spec"]["topologySpreadConstraints"][0]["nodeTaintsPolicy"] = "Sometimes"
    with pytest.raises(ObjectError) as exc:
        plugin().constraints_for(pod, "DoNotSchedule")
    assert "Pod default/p" in str(exc.value)
    assert "nodeTaintsPolicy" in str(exc.value)


# --- events --------------------------------------------------------------------------------------


def test_events_to_register() -> None:
    events = {e.event.resource: e for e in plugin().events_to_register()}
    assert events[EventResource.POD].event.action_type == (
        ActionType.ADD | ActionType.UPDATE_POD_LABEL | ActionType.DELETE)
    node_actions = events[EventResource.NODE].event.action_type
    for action in (ActionType.ADD, ActionType.DELETE, ActionType.UPDATE_NODE_LABEL,
                   ActionType.UPDATE_NODE_TAINT):
        assert node_actions & action
    assert all(e.hint is not None for e in events.values())


def waiting(**kw: Any) -> dict[str, Any]:
    return PodBuilder("w").labels(app="web").topology_spread(
        1, ZONE, selector={"app": "web"}, **kw).obj()


def assigned(name: str, ns: str = "default", **labels: str) -> dict[str, Any]:
    return PodBuilder(name, ns).labels(labels).node("n1").obj()


@pytest.mark.parametrize(
    "old, new, want",
    [
        (None, assigned("e", app="web"), Q),
        (None, assigned("e", app="db"), S),
        (None, assigned("e", "other", app="web"), S),
        (None, PodBuilder("e").labels(app="web").obj(), S),  # unassigned
        (assigned("e", app="web"), None, Q),
        (assigned("e", app="db"), None, S),
        (assigned("e", app="db"), assigned("e", app="web"), Q),
        (assigned("e", app="web"), assigned("e", app="web", x="y"), S),
        (assigned("e", app="web"), assigned("e", app="web"), S),
    ],
)
def test_pod_change_hint(old: Any, new: Any, want: QueueingHint) -> None:
    assert plugin().is_schedulable_after_pod_change(waiting(), old, new) == want


def node(**labels: str) -> dict[str, Any]:
    return NodeBuilder("n").labels(labels).obj()


def tainted(**labels: str) -> dict[str, Any]:
    return NodeBuilder("n").labels(labels).taint("k").obj()


@pytest.mark.parametrize(
    "old, new, want",
    [
        (None, node(**{ZONE: "z1"}), Q),
        (None, node(), S),
        (node(**{ZONE: "z1"}), None, Q),
        (node(), None, S),
        (node(), node(**{ZONE: "z1"}), Q),
        (node(**{ZONE: "z1"}), node(), Q),
        (node(**{ZONE: "z1"}), node(**{ZONE: "z2"}), Q),
        (node(**{ZONE: "z1"}), node(**{ZONE: "z1"}, other="x"), S),
        (node(**{ZONE: "z1"}), tainted(**{ZONE: "z1"}), Q),
        (node(), tainted(), S),
    ],
)
def test_node_change_hint(old: Any, new: Any, want: QueueingHint) -> None:
    assert plugin().is_schedulable_after_node_change(waiting(), old, new) == want


def test_own_toleration_change_hint() -> None:
    honor = waiting(node_taints_policy="Honor")
    updated = PodBuilder("w").labels(app="web").topology_spread(
        1, ZONE, selector={"app": "web"}, node_taints_policy="Honor").toleration("k").obj()
    assert plugin().is_schedulable_after_own_toleration_change(honor, honor, updated) == Q
    other = PodBuilder("x").topology_spread(1, ZONE, selector={"a": "b"}).obj()
    assert plugin().is_schedulable_after_own_toleration_change(honor, other, other) == S
    assert plugin().is_schedulable_after_own_toleration_change(waiting(), waiting(),
                                                               waiting()) == S
