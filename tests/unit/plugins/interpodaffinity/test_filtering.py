"""InterPodAffinity PreFilter/Filter, table-driven (cases modelled on upstream's filtering tests)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.status import Code, Status
from scheduler.objects.errors import ObjectError
from scheduler.objects.pod import PodInfo
from scheduler.plugins.interpodaffinity.filtering import (
    ERR_REASON_AFFINITY_RULES_NOT_MATCH as AFF,
    ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH as ANTI,
    ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH as EXISTING,
    PRE_FILTER_STATE_KEY,
    PreFilterState,
)
from tests.builders import NodeBuilder, PodBuilder
from tests.unit.plugins.interpodaffinity.helpers import (
    HOST,
    REGION,
    ZONE,
    make_plugin,
    namespace,
    run_filter,
)

OK = None


def aff_fail() -> Status:
    return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, AFF)


def anti_fail() -> Status:
    return Status(Code.UNSCHEDULABLE, ANTI)


def existing_fail() -> Status:
    return Status(Code.UNSCHEDULABLE, EXISTING)


def node(name: str, **labels: str) -> dict[str, Any]:
    return NodeBuilder(name).labels(labels).obj()


def pod(name: str = "p", ns: str = "default", **labels: str) -> PodBuilder:
    b = PodBuilder(name, ns)
    if labels:
        b.labels(labels)
    return b


SEL_IN_DB = {"matchExpressions": [{"key": "app", "operator": "In", "values": ["db", "cache"]}]}


@dataclass
class Case:
    name: str
    pod: dict[str, Any]
    pods: list[dict[str, Any]]
    want: dict[str, Status | None]
    nodes: list[dict[str, Any]] = field(
        default_factory=lambda: [node("n1", zone="z1", region="r1")]
    )
    namespaces: list[dict[str, Any]] = field(default_factory=list)


SINGLE_NODE_CASES = [
    Case(
        "no affinity, no existing pods",
        pod().obj(),
        [],
        {"n1": OK},
    ),
    Case(
        "required affinity (In) matches an existing pod on the node",
        pod().pod_affinity_required(SEL_IN_DB, REGION).obj(),
        [pod("e", app="db").node("n1").obj()],
        {"n1": OK},
    ),
    Case(
        "required affinity with NotIn and Exists operators ANDed, all match",
        pod()
        .pod_affinity_required(
            {"matchExpressions": [
                {"key": "app", "operator": "NotIn", "values": ["web"]},
                {"key": "tier", "operator": "Exists"},
            ]},
            REGION,
        )
        .obj(),
        [pod("e", app="db", tier="back").node("n1").obj()],
        {"n1": OK},
    ),
    Case(
        "matchExpressions are ANDed: one requirement fails",
        pod()
        .pod_affinity_required(
            {"matchExpressions": [
                {"key": "app", "operator": "In", "values": ["db"]},
                {"key": "tier", "operator": "DoesNotExist"},
            ]},
            REGION,
        )
        .obj(),
        [pod("e", app="db", tier="back").node("n1").obj()],
        {"n1": aff_fail()},
    ),
    Case(
        "affinity does not match a pod in another namespace",
        pod().pod_affinity_required({"app": "db"}, REGION).obj(),
        [pod("e", "other", app="db").node("n1").obj()],
        {"n1": aff_fail()},
    ),
    Case(
        "affinity listing the other namespace matches",
        pod().pod_affinity_required({"app": "db"}, REGION, namespaces=["other"]).obj(),
        [pod("e", "other", app="db").node("n1").obj()],
        {"n1": OK},
    ),
    Case(
        "affinity selector does not match the existing pod",
        pod().pod_affinity_required({"app": "web"}, REGION).obj(),
        [pod("e", app="db").node("n1").obj()],
        {"n1": aff_fail()},
    ),
    Case(
        "several required affinity terms must all be satisfied by one pod",
        pod()
        .pod_affinity_required({"app": "db"}, REGION)
        .pod_affinity_required({"tier": "back"}, ZONE)
        .obj(),
        [pod("e1", app="db").node("n1").obj(), pod("e2", tier="back").node("n1").obj()],
        {"n1": aff_fail()},
    ),
    Case(
        "several required affinity terms satisfied by the same pod",
        pod()
        .pod_affinity_required({"app": "db"}, REGION)
        .pod_affinity_required({"tier": "back"}, ZONE)
        .obj(),
        [pod("e", app="db", tier="back").node("n1").obj()],
        {"n1": OK},
    ),
    Case(
        "affinity and anti-affinity both satisfied",
        pod()
        .pod_affinity_required({"app": "db"}, REGION)
        .pod_anti_affinity_required({"app": "web"}, REGION)
        .obj(),
        [pod("e", app="db").node("n1").obj()],
        {"n1": OK},
    ),
    Case(
        "affinity satisfied but anti-affinity violated",
        pod()
        .pod_affinity_required({"app": "db"}, REGION)
        .pod_anti_affinity_required({"app": "db"}, ZONE)
        .obj(),
        [pod("e", app="db").node("n1").obj()],
        {"n1": anti_fail()},
    ),
    Case(
        "affinity and anti-affinity satisfied, but the existing pod's anti-affinity rejects",
        pod(app="web")
        .pod_affinity_required({"app": "db"}, REGION)
        .pod_anti_affinity_required({"app": "cache"}, REGION)
        .obj(),
        [pod("e", app="db").pod_anti_affinity_required({"app": "web"}, ZONE).node("n1").obj()],
        {"n1": existing_fail()},
    ),
    Case(
        "existing pod's anti-affinity respected when the incoming pod has no affinity",
        pod(app="web").obj(),
        [pod("e", app="db").pod_anti_affinity_required({"app": "web"}, ZONE).node("n1").obj()],
        {"n1": existing_fail()},
    ),
    Case(
        "existing pod's anti-affinity does not select the incoming pod",
        pod(app="web").obj(),
        [pod("e", app="db").pod_anti_affinity_required({"app": "api"}, ZONE).node("n1").obj()],
        {"n1": OK},
    ),
    Case(
        "existing pod's anti-affinity with a topology key the node lacks",
        pod(app="web").obj(),
        [pod("e", app="db").pod_anti_affinity_required({"app": "web"}, "rack").node("n1").obj()],
        {"n1": OK},
    ),
    Case(
        "incoming anti-affinity matches nothing but existing pod's anti-affinity matches it",
        pod(app="web").pod_anti_affinity_required({"app": "cache"}, REGION).obj(),
        [pod("e", app="db").pod_anti_affinity_required({"app": "web"}, REGION).node("n1").obj()],
        {"n1": existing_fail()},
    ),
    Case(
        "incoming anti-affinity takes precedence in the reported reason",
        pod(app="web").pod_anti_affinity_required({"app": "db"}, REGION).obj(),
        [pod("e", app="db").pod_anti_affinity_required({"app": "web"}, REGION).node("n1").obj()],
        {"n1": anti_fail()},
    ),
    Case(
        "existing pod's anti-affinity in another namespace only applies to its namespace",
        pod(app="web").obj(),
        [pod("e", "other", app="db").pod_anti_affinity_required({"app": "web"}, ZONE)
         .node("n1").obj()],
        {"n1": OK},
    ),
    Case(
        "node without the affinity topology key fails even if pods match",
        pod().pod_affinity_required({"app": "db"}, "rack").obj(),
        [pod("e", app="db").node("n1").obj()],
        {"n1": aff_fail()},
    ),
    Case(
        "empty labelSelector selects every pod of the namespace",
        pod().pod_affinity_required({}, REGION).obj(),
        [pod("e", app="anything").node("n1").obj()],
        {"n1": OK},
    ),
    Case(
        "nil labelSelector selects nothing",
        pod().pod_affinity_required(None, REGION).obj(),
        [pod("e", app="db").node("n1").obj()],
        {"n1": aff_fail()},
    ),
    Case(
        "namespaceSelector selects the existing pod's namespace",
        pod()
        .pod_affinity_required({"app": "db"}, REGION, namespace_selector={"matchLabels": {"team": "a"}})
        .obj(),
        [pod("e", "team-a", app="db").node("n1").obj()],
        {"n1": OK},
        namespaces=[namespace("team-a", team="a"), namespace("team-b", team="b")],
    ),
    Case(
        "namespaceSelector does not select the existing pod's namespace",
        pod()
        .pod_affinity_required({"app": "db"}, REGION, namespace_selector={"matchLabels": {"team": "a"}})
        .obj(),
        [pod("e", "team-b", app="db").node("n1").obj()],
        {"n1": aff_fail()},
        namespaces=[namespace("team-a", team="a"), namespace("team-b", team="b")],
    ),
    Case(
        "empty namespaceSelector selects every namespace",
        pod().pod_affinity_required({"app": "db"}, REGION, namespace_selector={}).obj(),
        [pod("e", "anywhere", app="db").node("n1").obj()],
        {"n1": OK},
    ),
    Case(
        "namespaces and namespaceSelector are ORed",
        pod()
        .pod_affinity_required({"app": "db"}, REGION, namespaces=["listed"],
                               namespace_selector={"matchLabels": {"team": "a"}})
        .obj(),
        [pod("e", "listed", app="db").node("n1").obj()],
        {"n1": OK},
        namespaces=[namespace("listed"), namespace("team-a", team="a")],
    ),
    Case(
        "existing pod's anti-affinity namespaceSelector matches the incoming pod's namespace",
        pod("p", "team-a", app="web").obj(),
        [pod("e", "default", app="db")
         .pod_anti_affinity_required({"app": "web"}, ZONE,
                                     namespace_selector={"matchLabels": {"team": "a"}})
         .node("n1").obj()],
        {"n1": existing_fail()},
        namespaces=[namespace("team-a", team="a"), namespace("default")],
    ),
    Case(
        "existing pod's anti-affinity namespaceSelector does not match the incoming namespace",
        pod("p", "team-b", app="web").obj(),
        [pod("e", "default", app="db")
         .pod_anti_affinity_required({"app": "web"}, ZONE,
                                     namespace_selector={"matchLabels": {"team": "a"}})
         .node("n1").obj()],
        {"n1": OK},
        namespaces=[namespace("team-b", team="b"), namespace("default")],
    ),
    Case(
        "matchLabelKeys restricts affinity to pods sharing the incoming pod's label value",
        pod(app="db", rev="2").pod_affinity_required({"app": "db"}, REGION,
                                                     match_label_keys=["rev"]).obj(),
        [pod("e", app="db", rev="1").node("n1").obj()],
        # No pod matches app=db,rev=2 anywhere, but the pod matches itself: first of its group.
        {"n1": OK},
    ),
    Case(
        "matchLabelKeys: other revision exists, pod not matching itself is rejected",
        pod(rev="2").pod_affinity_required({"app": "db"}, REGION, match_label_keys=["rev"]).obj(),
        [pod("e", app="db", rev="1").node("n1").obj()],
        {"n1": aff_fail()},
    ),
    Case(
        "mismatchLabelKeys: anti-affinity only against other tenants",
        pod(app="db", tenant="t1")
        .pod_anti_affinity_required({"app": "db"}, REGION, mismatch_label_keys=["tenant"])
        .obj(),
        [pod("e", app="db", tenant="t1").node("n1").obj()],
        {"n1": OK},
    ),
    Case(
        "mismatchLabelKeys: a pod of another tenant blocks",
        pod(app="db", tenant="t1")
        .pod_anti_affinity_required({"app": "db"}, REGION, mismatch_label_keys=["tenant"])
        .obj(),
        [pod("e", app="db", tenant="t2").node("n1").obj()],
        {"n1": anti_fail()},
    ),
    Case(
        "terminating pods still count (upstream does not skip them)",
        pod().pod_affinity_required({"app": "db"}, REGION).obj(),
        [pod("e", app="db").deletion_timestamp().node("n1").obj()],
        {"n1": OK},
    ),
]


@pytest.mark.parametrize("case", SINGLE_NODE_CASES, ids=lambda c: c.name)
def test_required_affinity_single_node(case: Case) -> None:
    got = run_filter(case.pod, case.nodes, case.pods, namespaces=case.namespaces)
    assert got == case.want


def three_nodes() -> list[dict[str, Any]]:
    return [
        node("n1", region="r1", zone="z11"),
        node("n2", region="r1", zone="z12"),
        node("n3", region="r2", zone="z21"),
    ]


MULTI_NODE_CASES = [
    Case(
        "nodes sharing the topology value of a matching pod all pass",
        pod().pod_affinity_required({"app": "db"}, REGION).obj(),
        [pod("e", app="db").node("n1").obj()],
        {"n1": OK, "n2": OK, "n3": aff_fail()},
        nodes=three_nodes(),
    ),
    Case(
        "first pod of a self-affine group may go anywhere with the topology key",
        pod(app="web").pod_affinity_required({"app": "web"}, ZONE).obj(),
        [],
        {"n1": OK, "n2": OK, "n3": OK, "n4": aff_fail()},
        nodes=[*three_nodes(), node("n4")],
    ),
    Case(
        "self-affine pod follows the first member once it exists",
        pod(app="web").pod_affinity_required({"app": "web"}, ZONE).obj(),
        [pod("e", app="web").node("n2").obj()],
        {"n1": aff_fail(), "n2": OK, "n3": aff_fail()},
        nodes=three_nodes(),
    ),
    Case(
        "a pod that does not match its own terms gets no first-pod exception",
        pod(app="api").pod_affinity_required({"app": "web"}, ZONE).obj(),
        [],
        {"n1": aff_fail(), "n2": aff_fail(), "n3": aff_fail()},
        nodes=three_nodes(),
    ),
    Case(
        "anti-affinity by region excludes every node of the region",
        pod().pod_anti_affinity_required({"app": "db"}, REGION).obj(),
        [pod("e", app="db").node("n1").obj()],
        {"n1": anti_fail(), "n2": anti_fail(), "n3": OK},
        nodes=three_nodes(),
    ),
    Case(
        "existing pod's anti-affinity by region excludes its whole region",
        pod(app="web").obj(),
        [pod("e", app="db").pod_anti_affinity_required({"app": "web"}, REGION).node("n2").obj()],
        {"n1": existing_fail(), "n2": existing_fail(), "n3": OK},
        nodes=three_nodes(),
    ),
    Case(
        "affinity by region and anti-affinity by zone",
        pod(app="web")
        .pod_affinity_required({"app": "db"}, REGION)
        .pod_anti_affinity_required({"app": "web"}, ZONE)
        .obj(),
        [pod("db", app="db").node("n1").obj(), pod("w", app="web").node("n1").obj()],
        {"n1": anti_fail(), "n2": OK, "n3": aff_fail()},
        nodes=three_nodes(),
    ),
    Case(
        "node lacking the anti-affinity topology key accepts the pod",
        pod().pod_anti_affinity_required({"app": "db"}, "rack").obj(),
        [pod("e", app="db").node("n1").obj()],
        {"n1": OK, "n2": OK, "n3": OK},
        nodes=three_nodes(),
    ),
    Case(
        "hostname anti-affinity: one per node",
        pod(app="web").pod_anti_affinity_required({"app": "web"}, HOST).obj(),
        [pod("w1", app="web").pod_anti_affinity_required({"app": "web"}, HOST).node("n1").obj(),
         pod("w3", app="web").pod_anti_affinity_required({"app": "web"}, HOST).node("n3").obj()],
        {"n1": anti_fail(), "n2": OK, "n3": anti_fail()},
        nodes=three_nodes(),
    ),
]


@pytest.mark.parametrize("case", MULTI_NODE_CASES, ids=lambda c: c.name)
def test_required_affinity_multiple_nodes(case: Case) -> None:
    got = run_filter(case.pod, case.nodes, case.pods, namespaces=case.namespaces)
    assert got == case.want


def test_anti_affinity_replicas_one_per_node_until_full() -> None:
    nodes = [node(f"n{i}", zone=f"z{i % 2}") for i in range(4)]
    placed: list[dict[str, Any]] = []
    for i in range(5):
        replica = (
            pod(f"web-{i}", app="web").pod_anti_affinity_required({"app": "web"}, HOST).obj()
        )
        got = run_filter(replica, nodes, placed)
        feasible = sorted(n for n, s in got.items() if s is None)
        if i < 4:
            assert len(feasible) == 4 - i
            replica["spec"]["nodeName"] = feasible[0]
            placed.append(replica)
        else:
            assert feasible == []
            assert set(got.values()) == {anti_fail()}
    assert sorted(p["spec"]["nodeName"] for p in placed) == ["n0", "n1", "n2", "n3"]


def test_prefilter_skips_when_nothing_to_check() -> None:
    plugin, infos = make_plugin([node("n1")], [pod("e", app="db").node("n1").obj()])
    state = CycleState()
    result, status = plugin.pre_filter(state, PodInfo.from_pod(pod(app="web").obj()), infos)
    assert result is None
    assert status is not None and status.code == Code.SKIP


def test_unparsable_terms_are_rejected_when_the_pod_is_parsed() -> None:
    """The pod never reaches PreFilter: PodInfo parsing names the field (issue 12)."""
    bad = pod().pod_affinity_required(
        {"matchExpressions": [{"key": "app", "operator": "Bogus", "values": ["x"]}]}, ZONE
    ).obj()
    with pytest.raises(ObjectError) as err:
        PodInfo.from_pod(bad)
    assert str(err.value).startswith(
        "Pod default/p: spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution"
        "[0].labelSelector.matchExpressions[0].operator: 'Bogus'"), str(err.value)


def test_existing_pod_with_unparsable_terms_is_ignored() -> None:
    broken = pod("e", app="db").pod_anti_affinity_required(
        {"matchExpressions": [{"key": "app", "operator": "Bogus", "values": ["x"]}]}, ZONE
    ).node("n1").obj()
    assert run_filter(pod(app="web").obj(), [node("n1", zone="z")], [broken]) == {"n1": OK}


def test_filter_without_prefilter_state_is_an_error() -> None:
    plugin, infos = make_plugin([node("n1")])
    status = plugin.filter(CycleState(), PodInfo.from_pod(pod().obj()), infos[0])
    assert status is not None and status.code == Code.ERROR


def test_prefilter_counts() -> None:
    nodes = three_nodes()
    pods = [
        pod("db", app="db").node("n1").obj(),
        pod("db2", app="db").node("n3").obj(),
        pod("guard", app="guard").pod_anti_affinity_required({"app": "web"}, ZONE)
        .node("n2").obj(),
    ]
    incoming = (
        pod(app="web")
        .pod_affinity_required({"app": "db"}, REGION)
        .pod_anti_affinity_required({"app": "db"}, ZONE)
        .obj()
    )
    plugin, infos = make_plugin(nodes, pods)
    state = CycleState()
    plugin.pre_filter(state, PodInfo.from_pod(incoming), infos)
    s = state.read(PRE_FILTER_STATE_KEY)
    assert isinstance(s, PreFilterState)
    assert s.affinity_counts.as_pairs() == {(REGION, "r1"): 1, (REGION, "r2"): 1}
    assert s.anti_affinity_counts.as_pairs() == {(ZONE, "z11"): 1, (ZONE, "z21"): 1}
    assert s.existing_anti_affinity_counts.as_pairs() == {(ZONE, "z12"): 1}


@pytest.mark.parametrize(
    ("existing", "skipped", "counted"),
    [
        # No node holds a pod with required anti-affinity: Skip without counting anything.
        ([pod("e", app="db").node("n1").obj()], True, False),
        # One does, but its term does not select the pod: counted, empty, Skip.
        ([pod("g", app="guard").pod_anti_affinity_required({"app": "db"}, ZONE)
          .node("n1").obj()], True, True),
        # One does and its term selects the pod: counted, Filter has work.
        ([pod("g", app="guard").pod_anti_affinity_required({"app": "web"}, ZONE)
          .node("n1").obj()], False, True),
    ],
)
def test_prefilter_skips_a_pod_without_terms_before_counting(
    existing: list[dict[str, Any]], skipped: bool, counted: bool,
) -> None:
    """Upstream's Skip for a pod without required terms when no existing pod has required
    anti-affinity, answered from the snapshot's list of such nodes (empty) without a count;
    the state is written all the same, as the counting path writes it."""
    plugin, infos = make_plugin([node("n1", zone="z1"), node("n2", zone="z2")], existing,
                                namespaces=[namespace("default", team="a")])
    asked: list[int] = []
    count = plugin._existing_anti_affinity_counts

    def spy(*args: Any) -> Any:
        asked.append(1)
        return count(*args)

    plugin._existing_anti_affinity_counts = spy  # type: ignore[method-assign]
    state = CycleState()
    result, status = plugin.pre_filter(state, PodInfo.from_pod(pod(app="web").obj()), infos)
    assert result is None
    assert (status is not None and status.code == Code.SKIP) is skipped
    assert bool(asked) is counted
    s = state.read(PRE_FILTER_STATE_KEY)
    assert isinstance(s, PreFilterState)
    assert s.required_affinity == () and s.required_anti_affinity == ()
    assert s.namespace_labels == {"team": "a"}
    assert not s.affinity_counts and not s.anti_affinity_counts
    assert bool(s.existing_anti_affinity_counts) is not skipped
