"""PodTopologySpread PreFilter/Filter (cases modelled on upstream's filtering tests)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.status import Code, Status
from scheduler.objects.errors import ObjectError
from scheduler.objects.pod import PodInfo
from scheduler.plugins.podtopologyspread.filtering import (
    ERR_REASON_CONSTRAINTS_NOT_MATCH as SKEW,
    ERR_REASON_NODE_LABEL_NOT_MATCH as MISSING,
    PRE_FILTER_STATE_KEY,
    CriticalPaths,
    PreFilterState,
)
from tests.builders import PodBuilder, node_term
from tests.unit.plugins.podtopologyspread.helpers import (
    HOST,
    ZONE,
    four_nodes,
    make_plugin,
    node,
    run_filter,
)

OK = None
FOO = {"matchExpressions": [{"key": "foo", "operator": "Exists"}]}


def skew() -> Status:
    return Status(Code.UNSCHEDULABLE, SKEW)


def missing() -> Status:
    return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, MISSING)


def incoming(*, labels: dict[str, str] | None = None, ns: str = "default") -> PodBuilder:
    return PodBuilder("p", ns).labels(labels if labels is not None else {"foo": ""})


def on(node_name: str, name: str, ns: str = "default", **labels: str) -> PodBuilder:
    return PodBuilder(name, ns).labels(labels or {"foo": ""}).node(node_name)


def spread(a: int, b: int, x: int, y: int, **labels: str) -> list[dict[str, Any]]:
    """``a``/``b``/``x``/``y`` matching pods on node-a/b/x/y."""
    out = []
    for node_name, n in (("node-a", a), ("node-b", b), ("node-x", x), ("node-y", y)):
        for i in range(n):
            out.append(on(node_name, f"{node_name}-{i}", **labels).obj())
    return out


@dataclass
class Case:
    name: str
    pod: dict[str, Any]
    pods: list[dict[str, Any]]
    want: dict[str, Status | None]
    nodes: list[dict[str, Any]] | None = None


def want(a: Status | None, b: Status | None, x: Status | None, y: Status | None
         ) -> dict[str, Status | None]:
    return {"node-a": a, "node-b": b, "node-x": x, "node-y": y}


CASES = [
    Case(
        "no existing pods",
        incoming().topology_spread(1, ZONE, selector=FOO).obj(),
        [],
        want(OK, OK, OK, OK),
    ),
    Case(
        "no existing pods, incoming pod does not match itself",
        incoming(labels={"bar": ""}).topology_spread(1, ZONE, selector=FOO).obj(),
        [],
        want(OK, OK, OK, OK),
    ),
    Case(
        "pods of another namespace are not counted",
        incoming().topology_spread(1, ZONE, selector=FOO).obj(),
        [on("node-a", "o1", "other").obj(), on("node-b", "o2", "other").obj()],
        want(OK, OK, OK, OK),
    ),
    Case(
        "zones 3/3: every node fits",
        incoming().topology_spread(1, ZONE, selector=FOO).obj(),
        spread(2, 1, 1, 2),
        want(OK, OK, OK, OK),
    ),
    Case(
        "zones 1/2: only zone1 fits",
        incoming().topology_spread(1, ZONE, selector=FOO).obj(),
        spread(1, 0, 1, 1),
        want(OK, OK, skew(), skew()),
    ),
    Case(
        "nodes 2/1/0/3, hostname maxSkew 1: only node-x fits",
        incoming().topology_spread(1, HOST, selector=FOO).obj(),
        spread(2, 1, 0, 3),
        want(skew(), skew(), OK, skew()),
    ),
    Case(
        "nodes 2/1/0/3, maxSkew 2: node-b and node-x fit",
        incoming().topology_spread(2, HOST, selector=FOO).obj(),
        spread(2, 1, 0, 3),
        want(skew(), OK, OK, skew()),
    ),
    Case(
        "nodes 2/1/0/3, incoming pod does not match itself",
        incoming(labels={"bar": ""}).topology_spread(1, HOST, selector=FOO).obj(),
        spread(2, 1, 0, 3),
        want(skew(), OK, OK, skew()),
    ),
    Case(
        "non-matching pods are not counted",
        incoming().topology_spread(1, HOST, selector=FOO).obj(),
        spread(2, 1, 0, 3, bar="x"),
        want(OK, OK, OK, OK),
    ),
    Case(
        "terminating pods are not counted",
        incoming().topology_spread(1, HOST, selector=FOO).obj(),
        [on("node-a", "t1").deletion_timestamp().obj(), on("node-a", "t2").deletion_timestamp().obj()],
        want(OK, OK, OK, OK),
    ),
    Case(
        "nodeAffinity (Honor) leaves only node-a and node-y as domains: min is 2",
        incoming()
        .topology_spread(1, HOST, selector=FOO)
        .required_node_affinity([node_term(**{HOST: ["node-a", "node-y"]})])
        .obj(),
        spread(2, 1, 0, 3),
        want(OK, OK, OK, skew()),
    ),
    Case(
        "nodeAffinityPolicy Ignore counts every domain: min is 0",
        incoming()
        .topology_spread(1, HOST, selector=FOO, node_affinity_policy="Ignore")
        .required_node_affinity([node_term(**{HOST: ["node-a", "node-y"]})])
        .obj(),
        spread(2, 1, 0, 3),
        want(skew(), skew(), OK, skew()),
    ),
    Case(
        "nodeSelector is honored like nodeAffinity",
        incoming().topology_spread(1, ZONE, selector=FOO).node_selector({ZONE: "zone2"}).obj(),
        spread(0, 0, 2, 1),
        # Only zone2 is a domain: min 3, so zone1 (0 + 1 - 3) passes PTS.
        want(OK, OK, OK, OK),
    ),
    Case(
        "nodeTaintsPolicy Ignore (default) counts a tainted empty node",
        incoming().topology_spread(1, HOST, selector=FOO).obj(),
        spread(1, 1, 0, 1),
        want(skew(), skew(), OK, skew()),
        nodes=[node("node-a", "zone1"), node("node-b", "zone1"),
               {**node("node-x", "zone2"),
                "spec": {"taints": [{"key": "k", "effect": "NoSchedule"}]}},
               node("node-y", "zone2")],
    ),
    Case(
        "nodeTaintsPolicy Honor drops the tainted node's domain: min is 1",
        incoming().topology_spread(1, HOST, selector=FOO, node_taints_policy="Honor").obj(),
        spread(1, 1, 0, 1),
        want(OK, OK, OK, OK),
        nodes=[node("node-a", "zone1"), node("node-b", "zone1"),
               {**node("node-x", "zone2"),
                "spec": {"taints": [{"key": "k", "effect": "NoSchedule"}]}},
               node("node-y", "zone2")],
    ),
    Case(
        "nodeTaintsPolicy Honor keeps a tolerated tainted node",
        incoming()
        .topology_spread(1, HOST, selector=FOO, node_taints_policy="Honor")
        .toleration("k", "Exists")
        .obj(),
        spread(1, 1, 0, 1),
        want(skew(), skew(), OK, skew()),
        nodes=[node("node-a", "zone1"), node("node-b", "zone1"),
               {**node("node-x", "zone2"),
                "spec": {"taints": [{"key": "k", "effect": "NoSchedule"}]}},
               node("node-y", "zone2")],
    ),
    Case(
        "PreferNoSchedule taints never exclude a domain",
        incoming().topology_spread(1, HOST, selector=FOO, node_taints_policy="Honor").obj(),
        spread(1, 1, 0, 1),
        want(skew(), skew(), OK, skew()),
        nodes=[node("node-a", "zone1"), node("node-b", "zone1"),
               {**node("node-x", "zone2"),
                "spec": {"taints": [{"key": "k", "effect": "PreferNoSchedule"}]}},
               node("node-y", "zone2")],
    ),
    Case(
        "node missing the topology key is unresolvable",
        incoming().topology_spread(1, ZONE, selector=FOO).obj(),
        [],
        {"node-a": OK, "node-nozone": missing()},
        nodes=[node("node-a", "zone1"), node("node-nozone")],
    ),
    Case(
        "minDomains larger than the domains: global minimum is 0",
        incoming().topology_spread(1, ZONE, selector=FOO, min_domains=3).obj(),
        spread(1, 0, 1, 0),
        want(skew(), skew(), skew(), skew()),
    ),
    Case(
        "minDomains reached: normal skew",
        incoming().topology_spread(1, ZONE, selector=FOO, min_domains=2).obj(),
        spread(1, 0, 1, 0),
        want(OK, OK, OK, OK),
    ),
    Case(
        "minDomains counts only eligible domains",
        incoming().topology_spread(1, ZONE, selector=FOO, min_domains=3).obj(),
        [on("node-a", "a1").obj(), on("node-x", "x1").obj(), on("node-z", "z1").obj()],
        {"node-a": OK, "node-x": OK, "node-z": OK},
        nodes=[node("node-a", "zone1"), node("node-x", "zone2"), node("node-z", "zone3")],
    ),
    Case(
        "two constraints: zone 3/1 and hostname 2/1/0/1, only node-x fits",
        incoming()
        .topology_spread(1, ZONE, selector=FOO)
        .topology_spread(1, HOST, selector=FOO)
        .obj(),
        spread(2, 1, 0, 1),
        want(skew(), skew(), OK, skew()),
    ),
    Case(
        "two constraints: node without hostname label is unresolvable",
        incoming()
        .topology_spread(1, ZONE, selector=FOO)
        .topology_spread(1, "rack", selector=FOO)
        .obj(),
        [],
        want(missing(), missing(), missing(), missing()),
    ),
    Case(
        "ScheduleAnyway constraints are ignored by Filter",
        incoming().topology_spread(1, HOST, "ScheduleAnyway", selector=FOO).obj(),
        spread(5, 0, 0, 0),
        want(OK, OK, OK, OK),
    ),
    Case(
        "empty labelSelector counts no pods",
        incoming().topology_spread(1, HOST, selector={}).obj(),
        spread(3, 0, 0, 0),
        want(OK, OK, OK, OK),
    ),
    Case(
        "matchLabelKeys: only pods of the same revision count",
        incoming(labels={"foo": "", "rev": "2"})
        .topology_spread(1, HOST, selector=FOO, match_label_keys=["rev"])
        .obj(),
        [*spread(3, 0, 0, 0, foo="", rev="1"), on("node-b", "b-new", foo="", rev="2").obj()],
        want(OK, skew(), OK, OK),
    ),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_filter(case: Case) -> None:
    got = run_filter(case.pod, case.nodes or four_nodes(), case.pods)
    assert got == case.want


def test_prefilter_state() -> None:
    pod = (
        incoming()
        .topology_spread(1, ZONE, selector=FOO)
        .topology_spread(1, HOST, selector=FOO, min_domains=5)
        .obj()
    )
    plugin, infos = make_plugin(four_nodes(), spread(2, 1, 0, 3))
    state = CycleState()
    result, status = plugin.pre_filter(state, PodInfo.from_pod(pod), infos)
    assert (result, status) == (None, None)
    s = state.read(PRE_FILTER_STATE_KEY)
    assert isinstance(s, PreFilterState)
    assert s.counts == [{"zone1": 3, "zone2": 3},
                        {"node-a": 2, "node-b": 1, "node-x": 0, "node-y": 3}]
    assert s.domains == [2, 4]
    assert s.critical_paths[1].nums == [0, 1]
    assert s.critical_paths[1].values == ["node-x", "node-b"]
    assert s.min_match_num(0) == 3
    assert s.min_match_num(1) == 0  # 4 domains < minDomains 5


def test_prefilter_skips_without_hard_constraints() -> None:
    plugin, infos = make_plugin(four_nodes())
    pod = incoming().topology_spread(1, ZONE, "ScheduleAnyway", selector=FOO).obj()
    _, status = plugin.pre_filter(CycleState(), PodInfo.from_pod(pod), infos)
    assert status is not None and status.code == Code.SKIP


def test_malformed_constraint_is_rejected_when_the_pod_is_parsed() -> None:
    """The pod never reaches PreFilter: PodInfo parsing names the field (issue 12)."""
    pod = incoming().topology_spread(
        1, ZONE, selector={"matchExpressions": [{"key": "foo", "operator": "Nope"}]}).obj()
    with pytest.raises(ObjectError) as err:
        PodInfo.from_pod(pod)
    assert str(err.value).startswith("Pod default/p: spec.topologySpreadConstraints[0]"
                                     ".labelSelector.matchExpressions[0].operator"), err.value


def test_critical_paths_keep_minimum() -> None:
    paths = CriticalPaths()
    for value, num in (("a", 3), ("b", 1), ("c", 2), ("d", 5)):
        paths.update(value, num)
    assert (paths.values, paths.nums) == (["b", "c"], [1, 2])
    paths.update("b", 4)  # b grows past c: c becomes the minimum
    assert paths.nums[0] == 2 and paths.values[0] == "c"
    paths.update("d", 0)  # an unseen domain below the minimum
    assert (paths.values, paths.nums) == (["d", "c"], [0, 2])


def test_spreading_replicas_across_three_zones() -> None:
    """Scheduling 9 replicas one by one with zone maxSkew 1 ends 3/3/3."""
    nodes = [node(f"{z}-{i}", z) for z in ("zone1", "zone2", "zone3") for i in range(2)]
    placed: list[dict[str, Any]] = []
    for r in range(9):
        replica = (
            PodBuilder(f"web-{r}").labels(app="web")
            .topology_spread(1, ZONE, selector={"app": "web"}).obj()
        )
        got = run_filter(replica, nodes, placed)
        feasible = sorted(n for n, s in got.items() if s is None)
        zone_counts = {z: sum(1 for p in placed if p["spec"]["nodeName"].startswith(z))
                       for z in ("zone1", "zone2", "zone3")}
        least = min(zone_counts.values())
        # Exactly the nodes of the least loaded zones are feasible.
        assert feasible == sorted(
            n["metadata"]["name"] for n in nodes
            if zone_counts[n["metadata"]["labels"][ZONE]] == least
        )
        # Choose the last feasible node to make the spreading rely on the filter alone.
        replica["spec"]["nodeName"] = feasible[-1]
        placed.append(replica)
    final = sorted(p["spec"]["nodeName"].split("-")[0] for p in placed)
    assert final == ["zone1"] * 3 + ["zone2"] * 3 + ["zone3"] * 3
