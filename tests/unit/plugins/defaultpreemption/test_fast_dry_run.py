"""The dry run's fast paths against the plain one, in the real Framework of the default
profile: the reprieve loop re-running only the Filter plugins that depend on the node's
pods (``FilterSteps.reprieve_filter``), the state not cloned when no PreFilter extension is
active, and victims chosen from resource sums on the snapshot's node itself
(``_select_victims_by_resources``).  The plain path is the plugin with a handle that does
not offer ``reprieve_filter``: every Filter plugin after every reprieve, on copies."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler.config.defaults import default_profile
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.status import Code, Status
from scheduler.objects.pod import PodInfo
from scheduler.plugins.defaultpreemption.evaluator import (
    candidate_summary,
    earliest_start_of_highest_priority,
)
from scheduler.plugins.defaultpreemption.plugin import POD_INDEPENDENT_FILTERS, DefaultPreemption
from scheduler.plugins.registry import IN_TREE
from scheduler.queue.nominator import Nominator
from tests.builders import NodeBuilder
from tests.fakes import DictListers, SnapshotLister, in_tree_framework, node_infos
from tests.unit.plugins.defaultpreemption.harness import pdb, pod

STARTS = (None, "2024-01-01T00:00:00Z", "2024-01-01T00:00:05Z", "2024-01-02T00:00:00Z")


class _PlainHandle:
    """The framework's handle without ``reprieve_filter``: the plugin's plain dry run."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        if name == "reprieve_filter":
            raise AttributeError(name)
        return getattr(self._inner, name)


class Cluster:
    def __init__(self, nodes: Sequence[dict[str, Any]], pods: Sequence[dict[str, Any]],
                 *, pdbs: Sequence[dict[str, Any]] = (),
                 nominated: Sequence[tuple[dict[str, Any], str]] = ()) -> None:
        for path in IN_TREE.values():
            pytest.importorskip(path.partition(":")[0])
        self.snapshot = SnapshotLister(node_infos(nodes, pods))
        self.nominator = Nominator()
        for p, node_name in nominated:
            self.nominator.add_nominated_pod(PodInfo.from_pod(p), node_name)
        self.fwk = in_tree_framework(default_profile("py-scheduler"), snapshot_provider=lambda: self.snapshot,
                                     listers=DictListers({"poddisruptionbudgets": list(pdbs)}),
                                     nominator=self.nominator)
        plugin = self.fwk.plugins["DefaultPreemption"]
        assert isinstance(plugin, DefaultPreemption)
        self.plugin = plugin
        self.plugin.dry_run = True  # offset 0: both runs walk the nodes alike
        self.fast_answers = 0
        by_resources = plugin._select_victims_by_resources

        def counted(*args: Any) -> Any:
            answer = by_resources(*args)
            self.fast_answers += answer is not None
            return answer

        plugin._select_victims_by_resources = counted  # type: ignore[method-assign]

    def candidates(self, preemptor: dict[str, Any], *, plain: bool) -> Any:
        """PreFilter and Filter on a fresh state as the cycle does, then the dry run; what
        it found, in a comparable form."""
        pod_info = PodInfo.from_pod(preemptor)
        state = CycleState()
        infos = self.snapshot.list()
        _, status, _ = self.fwk.run_pre_filter_plugins(state, pod_info, infos)
        if status is not None and not status.is_success():
            return ("prefilter", status.code, status.message())
        node_to_status = {}
        for info in infos:
            s = self.fwk.run_filter_plugins_with_nominated_pods(state, pod_info, info)
            if s is not None and not s.is_success():
                node_to_status[info.name] = s
        handle = self.plugin._handle
        if plain:
            self.plugin._handle = _PlainHandle(handle)  # type: ignore[assignment]
        try:
            candidates, early = self.plugin.find_candidates(state, pod_info, node_to_status)
        finally:
            self.plugin._handle = handle
        dry = self.plugin.last_dry_run
        statuses = sorted((name, s.code, s.message()) for name, s in
                          (dry.node_statuses if dry else {}).items())
        found = [(c.name, [v.key for v in c.victims], c.num_pdb_violations)
                 for c in candidates]
        said = None if early is None else (
            early[0], None if early[1] is None else (early[1].code, early[1].message()))
        return found, statuses, said


def _node(i: int, cpu: str, pods: int, taint: bool) -> dict[str, Any]:
    b = NodeBuilder(f"n{i}").capacity(cpu=cpu, memory="4Gi", pods=pods)
    if taint:
        b.taint("dedicated", "x", "NoSchedule")
    return b.obj()


@st.composite
def clusters(draw: st.DrawFn) -> tuple[Cluster, dict[str, Any]]:
    n = draw(st.integers(1, 6))
    nodes = [_node(i, draw(st.sampled_from(["1", "2", "4"])),
                   draw(st.sampled_from([2, 3, 110])), draw(st.booleans()) and i % 3 == 2)
             for i in range(n)]
    pods = []
    for i in range(draw(st.integers(0, 5 * n))):
        pods.append(pod(
            f"p{i}", priority=draw(st.sampled_from([0, 5, 100, 1000])),
            cpu=draw(st.sampled_from(["100m", "300m", "500m", "900m"])),
            memory=draw(st.sampled_from(["100Mi", "1Gi"])),
            node_name=f"n{draw(st.integers(0, n - 1))}", start=draw(st.sampled_from(STARTS)),
            labels={"app": app} if (app := draw(st.sampled_from(["", "a", "b"]))) else None,
            port=draw(st.sampled_from([0, 0, 0, 8080]))))
    pdbs = [pdb(f"pdb-{app}", match={"app": app}, allowed=draw(st.integers(0, 2)))
            for app in draw(st.sets(st.sampled_from(["a", "b"])))]
    nominated = [
        (pod(f"nom{i}", priority=draw(st.sampled_from([5, 100, 1000])),
              cpu=draw(st.sampled_from(["300m", "1"])), memory="100Mi"),
         f"n{draw(st.integers(0, n - 1))}")
        for i in range(draw(st.integers(0, 2)))]
    preemptor = pod("preemptor", priority=draw(st.sampled_from([100, 1000])),
                     cpu=draw(st.sampled_from(["500m", "1", "2", "3"])),
                     memory=draw(st.sampled_from(["100Mi", "2Gi"])),
                     port=draw(st.sampled_from([0, 0, 0, 8080])),
                     tolerate=draw(st.booleans()))
    return Cluster(nodes, pods, pdbs=pdbs, nominated=nominated), preemptor


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters())
def test_fast_dry_run_finds_what_the_plain_one_finds(
    case: tuple[Cluster, dict[str, Any]],
) -> None:
    cluster, preemptor = case
    plain = cluster.candidates(preemptor, plain=True)
    assert cluster.fast_answers == 0
    assert cluster.candidates(preemptor, plain=False) == plain


def _low(i: int, node: str, **kw: Any) -> dict[str, Any]:
    return pod(f"low{i}", priority=0, cpu="900m", memory="100Mi", node_name=node,
                start=STARTS[1 + i % 3], **kw)


@pytest.mark.parametrize(
    ("case", "preemptor", "nominated", "fast", "victims"),
    [
        # a plain 3-CPU preemptor: PreemptionAsync's shape, answered from sums
        # (the oldest pod of each node is reprieved, the others go, oldest first)
        ("resources", pod("hi", priority=10, cpu="3", memory="100Mi"), (), 2,
         [("n0", ["default/low3", "default/low1", "default/low2"]),
          ("n1", ["default/low4", "default/low7", "default/low5"])]),
        # a node holding a nominated pod goes the plain way; the other is answered
        ("nominated", pod("hi", priority=10, cpu="3", memory="100Mi"),
         ((pod("nom", priority=10, cpu="1", memory="100Mi"), "n0"),), 1,
         [("n0", ["default/low0", "default/low3", "default/low1", "default/low2"]),
          ("n1", ["default/low4", "default/low7", "default/low5"])]),
        # a host port makes NodePorts depend on the node's pods: no sums
        ("host port", pod("hi", priority=10, cpu="3", memory="100Mi", port=8080), (), 0,
         [("n0", ["default/low3", "default/low1", "default/low2"]),
          ("n1", ["default/low4", "default/low7", "default/low5"])]),
    ],
)
def test_which_nodes_the_sums_answer(
    case: str, preemptor: dict[str, Any],
    nominated: Sequence[tuple[dict[str, Any], str]], fast: int,
    victims: list[tuple[str, list[str]]],
) -> None:
    nodes = [_node(0, "4", 110, False), _node(1, "4", 110, False)]
    pods = [_low(i, f"n{i // 4}") for i in range(8)]
    cluster = Cluster(nodes, pods, nominated=nominated)
    found, _, said = cluster.candidates(preemptor, plain=False)
    assert said is None
    assert [(name, keys) for name, keys, _ in found] == victims
    assert cluster.fast_answers == fast
    assert cluster.candidates(preemptor, plain=True)[0] == found


class _OwnVictims(DefaultPreemption):
    """A subclass choosing victims its own way (as CapacityScheduling does with quotas)."""

    def select_victims_on_node(self, *args: Any) -> Any:
        return super().select_victims_on_node(*args)


def test_a_subclass_choosing_its_own_victims_is_not_answered_from_sums() -> None:
    cluster = Cluster([_node(0, "4", 110, False)], [_low(0, "n0")])
    pod_info = PodInfo.from_pod(pod("hi", priority=10, cpu="3", memory="100Mi"))
    state = CycleState()
    cluster.fwk.run_pre_filter_plugins(state, pod_info, cluster.snapshot.list())
    reprieve = cluster.fwk.reprieve_filter(state, leave_out=POD_INDEPENDENT_FILTERS)
    assert reprieve.dependent_names == ("NodeResourcesFit",)
    assert cluster.plugin._by_resources(reprieve, pod_info)
    own = _OwnVictims(None, cluster.plugin._handle)
    assert not own._by_resources(reprieve, pod_info)


def test_the_plan_after_the_pod_independent_plugins() -> None:
    cluster = Cluster([_node(0, "4", 110, False)], [_low(0, "n0")])
    pod_info = PodInfo.from_pod(pod("hi", priority=10, cpu="3", memory="100Mi"))
    state = CycleState()
    cluster.fwk.run_pre_filter_plugins(state, pod_info, cluster.snapshot.list())
    reprieve = cluster.fwk.reprieve_filter(state, leave_out=POD_INDEPENDENT_FILTERS)
    plan = [name for _, name, _ in cluster.fwk._filter_plan(state)]
    last = max(plan.index(name) for name in POD_INDEPENDENT_FILTERS if name in plan)
    assert reprieve.after_independent == frozenset(plan[last + 1:])
    assert "NodeResourcesFit" in reprieve.after_independent
    assert not reprieve.after_independent & POD_INDEPENDENT_FILTERS


@pytest.mark.parametrize(
    ("rejected_by", "runs_independent"),
    [
        # Fit comes after every pod-independent plugin: they passed in the cycle's Filter
        ("NodeResourcesFit", False),
        # no plugin named, or one not after them all: run them once on the node
        ("", True),
        ("TaintToleration", True),
        (None, True),  # no status recorded for the node
    ],
)
def test_the_pod_independent_plugins_run_only_when_the_cycle_did_not_pass_them(
    rejected_by: str | None, runs_independent: bool,
) -> None:
    cluster = Cluster([_node(0, "4", 110, False)], [_low(i, "n0") for i in range(4)])
    pod_info = PodInfo.from_pod(pod("hi", priority=10, cpu="3", memory="100Mi"))
    state = CycleState()
    cluster.fwk.run_pre_filter_plugins(state, pod_info, cluster.snapshot.list())
    reprieve = cluster.fwk.reprieve_filter(state, leave_out=POD_INDEPENDENT_FILTERS)
    calls: list[str] = []

    def independent(*args: Any) -> Any:
        calls.append("independent")
        return reprieve.independent(*args)

    plugin = cluster.plugin
    plugin._reprieve = type(reprieve)(
        dependent=reprieve.dependent, independent=independent,
        dependent_names=reprieve.dependent_names, extensions=reprieve.extensions,
        nominated_nodes=reprieve.nominated_nodes, after_independent=reprieve.after_independent)
    if rejected_by is not None:
        plugin._rejected = {"n0": Status(Code.UNSCHEDULABLE, "x", plugin=rejected_by)}
    node = cluster.snapshot.get("n0")
    assert node is not None
    answer = plugin._select_victims_by_resources(state, pod_info, node, [])
    assert answer is not None
    assert [v.key for v in answer[0]] == ["default/low3", "default/low1", "default/low2"]
    assert calls == (["independent"] if runs_independent else [])


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters())
def test_start_times_the_dry_run_knows_are_the_picks(
    case: tuple[Cluster, dict[str, Any]],
) -> None:
    """Each start time the by-resources dry run records for the pick is the one the pick
    would read from the candidate's victims (the earliest among the highest-priority ones,
    a victim that has not started counting as starting at the pick's ``now``)."""
    cluster, preemptor = case
    cluster.candidates(preemptor, plain=False)
    dry = cluster.plugin.last_dry_run
    known = cluster.plugin._top_starts
    assert set(known) <= {c.name for c in (dry.candidates if dry else [])}
    for candidate in dry.candidates if dry else []:
        if candidate.name in known:
            now = time.time()
            earliest, unstarted = known[candidate.name]
            assert (min(earliest, now) if unstarted else earliest) == (
                earliest_start_of_highest_priority(candidate.victims, now))
            assert cluster.plugin._summaries[candidate.name] == candidate_summary(
                candidate.victims, candidate.num_pdb_violations)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters(), st.data())
def test_answers_kept_across_attempts_are_what_a_fresh_dry_run_finds(
    case: tuple[Cluster, dict[str, Any]], data: st.DataObject,
) -> None:
    """The by-resources answers kept per node (``_from_sums``) serve a later attempt only
    as the plain dry run would answer it: the same preemptor again, another preemptor, and
    after a node changed (a pod added, its generation moved)."""
    cluster, preemptor = case
    cluster.candidates(preemptor, plain=False)
    assert cluster.candidates(preemptor, plain=False) == cluster.candidates(preemptor, plain=True)
    other = pod("other", priority=data.draw(st.sampled_from([5, 100, 1000])),
                cpu=data.draw(st.sampled_from(["500m", "1", "3"])), memory="100Mi")
    assert cluster.candidates(other, plain=False) == cluster.candidates(other, plain=True)
    node = cluster.snapshot.list()[data.draw(st.integers(0, len(cluster.snapshot.list()) - 1))]
    node.add_pod(PodInfo.from_pod(pod(
        "joined", priority=data.draw(st.sampled_from([0, 5])), cpu="300m", memory="100Mi",
        node_name=node.name, start=data.draw(st.sampled_from(STARTS)))))
    assert cluster.candidates(preemptor, plain=False) == cluster.candidates(preemptor, plain=True)


@pytest.mark.parametrize(
    ("starts", "kept"),
    [
        # started in the past, or not started (each sorts as starting now): the order of
        # the node's pods is the same at any later now
        ((STARTS[1], STARTS[2], STARTS[3], STARTS[1]), True),
        ((None, None, STARTS[2], None), True),
        # one started "after now" (a clock ahead): it sorts after the ones not started
        # until now passes it, so the answer is not kept
        ((None, "2999-01-01T00:00:00Z", STARTS[2], None), False),
    ],
)
def test_an_answer_is_kept_only_while_the_order_cannot_move_with_now(
    starts: tuple[str | None, ...], kept: bool,
) -> None:
    pods = [pod(f"low{i}", priority=0, cpu="900m", memory="100Mi", node_name="n0", start=s)
            for i, s in enumerate(starts)]
    cluster = Cluster([_node(0, "4", 110, False)], pods)
    preemptor = pod("hi", priority=10, cpu="3", memory="100Mi")
    found = cluster.candidates(preemptor, plain=False)
    assert ("n0" in cluster.plugin._from_sums) is kept
    assert cluster.candidates(preemptor, plain=False) == found
    assert cluster.candidates(preemptor, plain=True) == found
