"""PodTopologySpread PreScore/Score/NormalizeScore, including system default constraints."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.status import Code
from scheduler.objects.pod import PodInfo
from tests.builders import PodBuilder, node_term
from tests.unit.plugins.podtopologyspread.helpers import (
    HOST,
    ZONE,
    four_nodes,
    make_plugin,
    node,
    run_score,
)

FOO = {"matchExpressions": [{"key": "foo", "operator": "Exists"}]}
ANY = "ScheduleAnyway"


def incoming(**labels: str) -> PodBuilder:
    return PodBuilder("p").labels(labels or {"foo": ""})


def spread(a: int, b: int, x: int, y: int, **labels: str) -> list[dict[str, Any]]:
    out = []
    for node_name, n in (("node-a", a), ("node-b", b), ("node-x", x), ("node-y", y)):
        for i in range(n):
            out.append(PodBuilder(f"{node_name}-{i}").labels(labels or {"foo": ""})
                       .node(node_name).obj())
    return out


@dataclass
class Case:
    name: str
    pod: dict[str, Any]
    pods: list[dict[str, Any]]
    want: dict[str, int] | None
    nodes: list[dict[str, Any]] = field(default_factory=four_nodes)
    candidates: list[str] | None = None
    objects: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    args: dict[str, Any] = field(default_factory=dict)


CASES = [
    Case(
        "no ScheduleAnyway constraint: skipped",
        incoming().topology_spread(1, HOST, selector=FOO).obj(),
        spread(1, 0, 0, 0),
        None,
    ),
    Case(
        "hostname, no existing pods: all nodes score 100",
        incoming().topology_spread(1, HOST, ANY, selector=FOO).obj(),
        [],
        {"node-a": 100, "node-b": 100, "node-x": 100, "node-y": 100},
    ),
    Case(
        "hostname, pods 2/1/0/3",
        incoming().topology_spread(1, HOST, ANY, selector=FOO).obj(),
        spread(2, 1, 0, 3),
        # weight log(6): raw 4, 2, 0, 5 -> 100 * (5 + 0 - raw) / 5
        {"node-a": 20, "node-b": 60, "node-x": 100, "node-y": 0},
    ),
    Case(
        "zone, pods 2/1 by zone",
        incoming().topology_spread(1, ZONE, ANY, selector=FOO).obj(),
        spread(1, 1, 1, 0),
        # weight log(4): raw 3, 3, 1, 1 -> 100 * (3 + 1 - raw) / 3
        {"node-a": 33, "node-b": 33, "node-x": 100, "node-y": 100},
    ),
    Case(
        "maxSkew 2 adds one to every raw score",
        incoming().topology_spread(2, ZONE, ANY, selector=FOO).obj(),
        spread(1, 1, 1, 0),
        # raw round(2 log 4 + 1) = 4, round(log 4 + 1) = 2
        {"node-a": 50, "node-b": 50, "node-x": 100, "node-y": 100},
    ),
    Case(
        "only candidate nodes define domains; pods elsewhere in the domain still count",
        incoming().topology_spread(1, HOST, ANY, selector=FOO)
        .topology_spread(1, ZONE, ANY, selector=FOO).obj(),
        spread(0, 3, 1, 0),
        # hostname weight log(3 + 2), zone weight log(2 + 2); zone1 = 3 (node-b), zone2 = 1
        # raw a = 3 log4 = 4.16 -> 4, x = log5 + log4 = 3.0 -> 3, y = log4 -> 1
        {"node-a": 25, "node-x": 50, "node-y": 100},
        candidates=["node-a", "node-x", "node-y"],
    ),
    Case(
        "node missing a key of an explicit constraint is ignored (scores 0)",
        incoming().topology_spread(1, ZONE, ANY, selector=FOO).obj(),
        spread(1, 0, 0, 0),
        {"node-a": 0, "node-x": 100, "bare": 0},
        nodes=[node("node-a", "zone1"), node("node-x", "zone2"), node("bare")],
    ),
    Case(
        "nodeAffinity Honor: pods on nodes the pod cannot use are not counted",
        incoming().topology_spread(1, ZONE, ANY, selector=FOO)
        .required_node_affinity([node_term(**{HOST: ["node-a", "node-x"]})]).obj(),
        spread(0, 3, 1, 0),
        # zone1 counts only node-a (0 pods), zone2 only node-x (1 pod): raw a = 0, x = 1
        {"node-a": 100, "node-x": 0},
        candidates=["node-a", "node-x"],
    ),
    Case(
        "nodeAffinityPolicy Ignore counts them",
        incoming().topology_spread(1, ZONE, ANY, selector=FOO, node_affinity_policy="Ignore")
        .required_node_affinity([node_term(**{HOST: ["node-a", "node-x"]})]).obj(),
        spread(0, 3, 1, 0),
        # raw a = round(3 log 4) = 4, x = round(log 4) = 1 -> 100 * (4 + 1 - raw) / 4
        {"node-a": 25, "node-x": 100},
        candidates=["node-a", "node-x"],
    ),
    Case(
        "pods in other namespaces are not counted",
        incoming().topology_spread(1, HOST, ANY, selector=FOO).obj(),
        [PodBuilder("o", "other").labels(foo="").node("node-a").obj()],
        {"node-a": 100, "node-b": 100, "node-x": 100, "node-y": 100},
    ),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_score(case: Case) -> None:
    got = run_score(case.pod, case.nodes, case.pods, candidates=case.candidates,
                    objects=case.objects, args=case.args)
    assert got == case.want


# --- system defaults --------------------------------------------------------------------------


def replicaset(name: str = "rs", **match: str) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"selector": {"matchLabels": match or {"app": "web"}}}}


def owned_pod(name: str, node_name: str | None = None) -> dict[str, Any]:
    b = PodBuilder(name).labels(app="web").owner("ReplicaSet", "rs")
    if node_name:
        b.node(node_name)
    return b.obj()


def test_system_defaults_for_replicaset_pods() -> None:
    nodes = [node("node-a", "zone1"), node("node-b", "zone1"), node("node-x", "zone2")]
    pods = [owned_pod("w1", "node-a"), owned_pod("w2", "node-a"), owned_pod("w3", "node-x")]
    got = run_score(owned_pod("new"), nodes, pods, objects={"replicasets": [replicaset()]})
    # hostname maxSkew 3 weight log(5), zone maxSkew 5 weight log(4):
    # raw a = 2 log5 + 2 + 2 log4 + 4 = 12, b = 2 + 2 log4 + 4 = 9, x = log5 + 2 + log4 + 4 = 9
    assert got == {"node-a": 75, "node-b": 100, "node-x": 100}


def test_system_defaults_count_nodes_without_zone_as_a_domain() -> None:
    nodes = [node("node-a", "zone1"), node("node-b")]
    got = run_score(owned_pod("new"), nodes, [owned_pod("w1", "node-a")],
                    objects={"replicasets": [replicaset()]})
    # Not ignored: zone weight is log(2 + 2) because node-b adds an "" domain.
    # raw a = log4 + 2 + log4 + 4 = 8.77 -> 9, b = 2 -> 100 * (9 + 2 - raw) / 9
    assert got == {"node-a": 22, "node-b": 100}


def test_system_defaults_need_an_owner_or_service() -> None:
    nodes = [node("node-a", "zone1")]
    assert run_score(PodBuilder("lonely").labels(app="web").obj(), nodes) is None
    # Owned, but the ReplicaSet is not in the lister: nothing to spread against.
    assert run_score(owned_pod("new"), nodes, [owned_pod("w1", "node-a")]) is None


def test_system_defaults_from_service_selector() -> None:
    nodes = [node("node-a", "zone1"), node("node-b", "zone1")]
    svc = {"apiVersion": "v1", "kind": "Service",
           "metadata": {"name": "svc", "namespace": "default"},
           "spec": {"selector": {"app": "web"}}}
    pods = [PodBuilder("w1").labels(app="web").node("node-a").obj()]
    got = run_score(PodBuilder("new").labels(app="web").obj(), nodes, pods,
                    objects={"services": [svc]})
    assert got is not None and got["node-b"] > got["node-a"]


def test_system_defaults_from_replication_controller() -> None:
    nodes = [node("node-a", "zone1"), node("node-b", "zone1")]
    rc = {"apiVersion": "v1", "kind": "ReplicationController",
          "metadata": {"name": "rc", "namespace": "default"},
          "spec": {"selector": {"app": "web"}}}

    def rc_pod(name: str, node_name: str | None = None) -> dict[str, Any]:
        b = PodBuilder(name).labels(app="web").set(
            "metadata.ownerReferences",
            [{"apiVersion": "v1", "kind": "ReplicationController", "name": "rc",
              "uid": "rc-uid", "controller": True}])
        return b.node(node_name).obj() if node_name else b.obj()

    got = run_score(rc_pod("new"), nodes, [rc_pod("w1", "node-a")],
                    objects={"replicationcontrollers": [rc]})
    assert got is not None and got["node-b"] > got["node-a"]


def test_system_defaults_from_statefulset() -> None:
    nodes = [node("node-a", "zone1"), node("node-b", "zone1")]
    ss = {"apiVersion": "apps/v1", "kind": "StatefulSet",
          "metadata": {"name": "db", "namespace": "default"},
          "spec": {"selector": {"matchLabels": {"app": "db"}}}}

    def ss_pod(name: str, node_name: str | None = None) -> dict[str, Any]:
        b = PodBuilder(name).labels(app="db").owner("StatefulSet", "db")
        return b.node(node_name).obj() if node_name else b.obj()

    got = run_score(ss_pod("new"), nodes, [ss_pod("db-0", "node-a")],
                    objects={"statefulsets": [ss]})
    assert got is not None and got["node-b"] > got["node-a"]


def test_list_defaulting_with_hard_default_constraint_filters() -> None:
    args = {"defaultingType": "List", "defaultConstraints": [
        {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule"}]}
    nodes = [node("node-a", "zone1"), node("node-x", "zone2")]
    plugin, infos = make_plugin(nodes, [owned_pod("w1", "node-a")], args=args,
                                objects={"replicasets": [replicaset()]})
    state = CycleState()
    pi = PodInfo.from_pod(owned_pod("new"))
    _, status = plugin.pre_filter(state, pi, infos)
    assert status is None
    assert plugin.filter(state, pi, infos[0]) is not None
    assert plugin.filter(state, pi, infos[1]) is None


def test_prescore_skips_without_candidates() -> None:
    plugin, _ = make_plugin(four_nodes())
    pod = incoming().topology_spread(1, HOST, ANY, selector=FOO).obj()
    status = plugin.pre_score(CycleState(), PodInfo.from_pod(pod), [])
    assert status is not None and status.code == Code.SKIP
