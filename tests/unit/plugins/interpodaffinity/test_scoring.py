"""InterPodAffinity PreScore/Score/NormalizeScore (cases modelled on upstream's scoring tests)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.status import Code
from scheduler.objects.pod import PodInfo
from tests.builders import NodeBuilder, PodBuilder
from tests.unit.plugins.interpodaffinity.helpers import (
    REGION,
    ZONE,
    make_plugin,
    namespace,
    run_score,
)


def nodes() -> list[dict[str, Any]]:
    return [
        NodeBuilder("n1").labels(region="r1", zone="z11").obj(),
        NodeBuilder("n2").labels(region="r1", zone="z12").obj(),
        NodeBuilder("n3").labels(region="r2", zone="z21").obj(),
    ]


def pod(name: str = "p", ns: str = "default", **labels: str) -> PodBuilder:
    b = PodBuilder(name, ns)
    if labels:
        b.labels(labels)
    return b


@dataclass
class Case:
    name: str
    pod: dict[str, Any]
    pods: list[dict[str, Any]]
    # None: PreScore skipped the plugin (every node gets 0 from it).
    want: dict[str, int] | None
    args: dict[str, Any] = field(default_factory=dict)
    namespaces: list[dict[str, Any]] = field(default_factory=list)
    nodes: list[dict[str, Any]] = field(default_factory=nodes)


CASES = [
    Case(
        "no affinity anywhere: skipped",
        pod(app="web").obj(),
        [pod("e", app="db").node("n1").obj()],
        None,
    ),
    Case(
        "preferred affinity: nodes in the matching pod's region score highest",
        pod().pod_affinity_preferred(5, {"app": "db"}, REGION).obj(),
        [pod("e", app="db").node("n1").obj(), pod("x", app="other").node("n3").obj()],
        {"n1": 100, "n2": 100, "n3": 0},
    ),
    Case(
        "preferred anti-affinity: the matching pod's region scores lowest",
        pod().pod_anti_affinity_preferred(5, {"app": "db"}, REGION).obj(),
        [pod("e", app="db").node("n1").obj()],
        {"n1": 0, "n2": 0, "n3": 100},
    ),
    Case(
        "affinity and anti-affinity weights combine per topology pair",
        pod()
        .pod_affinity_preferred(8, {"app": "db"}, ZONE)
        .pod_anti_affinity_preferred(2, {"app": "cache"}, REGION)
        .obj(),
        [pod("db", app="db").node("n1").obj(), pod("cache", app="cache").node("n2").obj()],
        # raw: n1 = 8 - 2, n2 = -2, n3 = 0 -> scaled over [-2, 6]
        {"n1": 100, "n2": 0, "n3": 25},
    ),
    Case(
        "several matching pods add up",
        pod().pod_affinity_preferred(3, {"app": "db"}, ZONE).obj(),
        [pod("a", app="db").node("n1").obj(), pod("b", app="db").node("n1").obj(),
         pod("c", app="db").node("n3").obj()],
        # raw: n1 = 6, n2 = 0, n3 = 3
        {"n1": 100, "n2": 0, "n3": 50},
    ),
    Case(
        "equal raw scores everywhere normalize to 0",
        pod().pod_affinity_preferred(1, {"app": "db"}, REGION).obj(),
        [pod("a", app="db").node("n1").obj(), pod("b", app="db").node("n3").obj()],
        {"n1": 0, "n2": 0, "n3": 0},
    ),
    Case(
        "symmetry: an existing pod's preferred affinity attracts the incoming pod",
        pod(app="web").obj(),
        [pod("e", app="cache").pod_affinity_preferred(4, {"app": "web"}, ZONE).node("n2").obj()],
        {"n1": 0, "n2": 100, "n3": 0},
    ),
    Case(
        "symmetry: an existing pod's preferred anti-affinity repels the incoming pod",
        pod(app="web").obj(),
        [pod("e", app="cache").pod_anti_affinity_preferred(3, {"app": "web"}, ZONE)
         .node("n1").obj()],
        {"n1": 0, "n2": 100, "n3": 100},
    ),
    Case(
        "hard affinity of an existing pod counts with hardPodAffinityWeight",
        pod(app="web").obj(),
        [pod("e", app="cache").pod_affinity_required({"app": "web"}, REGION).node("n3").obj()],
        {"n1": 0, "n2": 0, "n3": 100},
    ),
    Case(
        "hardPodAffinityWeight 0 ignores existing pods' required affinity",
        pod(app="web").obj(),
        [pod("e", app="cache").pod_affinity_required({"app": "web"}, REGION).node("n3").obj()],
        None,
        args={"hardPodAffinityWeight": 0},
    ),
    Case(
        "hardPodAffinityWeight scales against preferred weights",
        pod(app="web").pod_affinity_preferred(10, {"app": "db"}, ZONE).obj(),
        [pod("db", app="db").node("n1").obj(),
         pod("e", app="cache").pod_affinity_required({"app": "web"}, ZONE).node("n2").obj()],
        # raw: n1 = 10, n2 = 5 (hard weight), n3 = 0
        {"n1": 100, "n2": 50, "n3": 0},
        args={"hardPodAffinityWeight": 5},
    ),
    Case(
        "existing pods' required anti-affinity does not score",
        pod(app="web").obj(),
        [pod("e", app="cache").pod_anti_affinity_required({"app": "web"}, REGION)
         .node("n3").obj()],
        None,
    ),
    Case(
        "ignorePreferredTermsOfExistingPods skips pods without preferences",
        pod(app="web").obj(),
        [pod("e", app="cache").pod_affinity_preferred(4, {"app": "web"}, ZONE).node("n2").obj()],
        None,
        args={"ignorePreferredTermsOfExistingPods": True},
    ),
    Case(
        "ignorePreferredTermsOfExistingPods still counts them when the pod has preferences",
        pod(app="web").pod_affinity_preferred(10, {"app": "db"}, ZONE).obj(),
        [pod("db", app="db").node("n1").obj(),
         pod("e", app="cache").pod_affinity_preferred(5, {"app": "web"}, ZONE).node("n2").obj()],
        {"n1": 100, "n2": 50, "n3": 0},
        args={"ignorePreferredTermsOfExistingPods": True},
    ),
    Case(
        "preferred term with namespaceSelector",
        pod().pod_affinity_preferred(1, {"app": "db"}, REGION,
                                     namespace_selector={"matchLabels": {"team": "a"}}).obj(),
        [pod("a", "team-a", app="db").node("n3").obj(),
         pod("b", "team-b", app="db").node("n1").obj()],
        {"n1": 0, "n2": 0, "n3": 100},
        namespaces=[namespace("team-a", team="a"), namespace("team-b", team="b")],
    ),
    Case(
        "existing pod's preferred term with namespaceSelector matching the incoming namespace",
        pod("p", "team-a", app="web").obj(),
        [pod("e", "default", app="x")
         .pod_affinity_preferred(7, {"app": "web"}, ZONE,
                                 namespace_selector={"matchLabels": {"team": "a"}})
         .node("n3").obj()],
        {"n1": 0, "n2": 0, "n3": 100},
        namespaces=[namespace("team-a", team="a")],
    ),
    Case(
        "preferred affinity ignores pods of other namespaces by default",
        pod().pod_affinity_preferred(5, {"app": "db"}, REGION).obj(),
        [pod("e", "other", app="db").node("n1").obj()],
        None,
    ),
    Case(
        "pods on nodes without the topology key contribute nothing",
        pod().pod_affinity_preferred(5, {"app": "db"}, "rack").obj(),
        [pod("e", app="db").node("n1").obj()],
        None,
    ),
    Case(
        "a node without labels still gets a score (zero-based)",
        pod().pod_affinity_preferred(5, {"app": "db"}, REGION).obj(),
        [pod("e", app="db").node("n1").obj()],
        {"n1": 100, "n2": 100, "n3": 0, "bare": 0},
        nodes=[*nodes(), {"metadata": {"name": "bare"}, "spec": {}, "status": {}}],
    ),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_preferred_affinity(case: Case) -> None:
    got = run_score(case.pod, case.nodes, case.pods, namespaces=case.namespaces, args=case.args)
    assert got == case.want


def test_prescore_skips_without_nodes() -> None:
    plugin, _ = make_plugin(nodes())
    status = plugin.pre_score(CycleState(), PodInfo.from_pod(pod().obj()), [])
    assert status is not None and status.code == Code.SKIP


def test_raw_scores_before_normalization() -> None:
    existing = [pod("db", app="db").node("n1").obj(), pod("c", app="cache").node("n3").obj()]
    incoming = (
        pod()
        .pod_affinity_preferred(4, {"app": "db"}, REGION)
        .pod_anti_affinity_preferred(6, {"app": "cache"}, ZONE)
        .obj()
    )
    plugin, infos = make_plugin(nodes(), existing)
    state = CycleState()
    pi = PodInfo.from_pod(incoming)
    assert plugin.pre_score(state, pi, infos) is None
    raw = {ni.name: plugin.score(state, pi, ni)[0] for ni in infos}
    assert raw == {"n1": 4, "n2": 4, "n3": -6}


def test_score_without_prescore_state_is_an_error() -> None:
    plugin, infos = make_plugin(nodes())
    _, status = plugin.score(CycleState(), PodInfo.from_pod(pod().obj()), infos[0])
    assert status is not None and status.code == Code.ERROR
