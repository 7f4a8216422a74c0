"""DefaultPreemption building blocks: args, candidate counts, PDB accounting, the dry run,
victim selection on one node and the choice among candidate nodes."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.config.errors import ConfigError
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.node_info import NodeInfo
from scheduler.framework.status import Code, Status
from scheduler.objects.pod import PodInfo
from scheduler.plugins import names
from scheduler.plugins.defaultpreemption.evaluator import (
    Candidate,
    candidate_summary,
    compile_pdbs,
    dry_run_preemption,
    filter_pods_with_pdb_violation,
    parse_rfc3339,
    pick_one_node_for_preemption,
    top_start,
)
from scheduler.plugins.defaultpreemption.plugin import (
    NAME,
    DefaultPreemption,
    parse_args,
)
from scheduler.plugins.registry import in_tree_registry
from tests.fakes import FakeHandle
from tests.unit.plugins.defaultpreemption.harness import (
    HIGH,
    LOW,
    MID,
    VERY_HIGH,
    Scenario,
    node,
    pdb,
    pod,
)

# --- registration and args -------------------------------------------------------------------


def test_name_and_registry() -> None:
    assert NAME == names.DEFAULT_PREEMPTION == DefaultPreemption.NAME
    assert in_tree_registry().get(names.DEFAULT_PREEMPTION) is DefaultPreemption
    assert DefaultPreemption({}, FakeHandle()).name == NAME


@pytest.mark.parametrize(
    ("args", "want"),
    [
        pytest.param({}, (10, 100), id="defaults"),
        pytest.param(None, (10, 100), id="none-is-defaults"),
        pytest.param({"minCandidateNodesPercentage": 0, "minCandidateNodesAbsolute": 5},
                     (0, 5), id="percentage-zero"),
        pytest.param({"minCandidateNodesPercentage": 100, "minCandidateNodesAbsolute": 0},
                     (100, 0), id="absolute-zero"),
        pytest.param({"apiVersion": "kubescheduler.config.k8s.io/v1",
                      "kind": "DefaultPreemptionArgs", "minCandidateNodesPercentage": 50},
                     (50, 100), id="type-meta-ignored"),
    ],
)
def test_args_valid(args: Any, want: tuple[int, int]) -> None:
    assert parse_args(args) == want
    plugin = DefaultPreemption(args, FakeHandle())
    assert (plugin.min_candidate_nodes_percentage, plugin.min_candidate_nodes_absolute) == want


@pytest.mark.parametrize(
    ("args", "want_errors"),
    [
        pytest.param({"minCandidateNodesPercentage": -1}, [
            ("DefaultPreemption.args.minCandidateNodesPercentage",
             "invalid value -1: not in valid range [0, 100]")], id="percentage-negative"),
        pytest.param({"minCandidateNodesPercentage": 101}, [
            ("DefaultPreemption.args.minCandidateNodesPercentage",
             "invalid value 101: not in valid range [0, 100]")], id="percentage-over-100"),
        pytest.param({"minCandidateNodesAbsolute": -1}, [
            ("DefaultPreemption.args.minCandidateNodesAbsolute",
             "invalid value -1: not in valid range [0, inf)")], id="absolute-negative"),
        pytest.param({"minCandidateNodesPercentage": 0, "minCandidateNodesAbsolute": 0}, [
            ("DefaultPreemption.args.minCandidateNodesPercentage",
             "invalid value 0: cannot be zero at the same time as minCandidateNodesAbsolute"),
            ("DefaultPreemption.args.minCandidateNodesAbsolute",
             "invalid value 0: cannot be zero at the same time as minCandidateNodesPercentage"),
        ], id="both-zero"),
        pytest.param({"minCandidateNodesPercentage": "10"}, [
            ("DefaultPreemption.args.minCandidateNodesPercentage",
             "must be an integer, got '10'")], id="not-an-int"),
        pytest.param({"minCandidateNodesAbsolute": True}, [
            ("DefaultPreemption.args.minCandidateNodesAbsolute",
             "must be an integer, got True")], id="bool-is-not-an-int"),
        pytest.param({"minCandidateNodes": 3}, [
            ("DefaultPreemption.args.minCandidateNodes", "unknown field")], id="unknown-field"),
    ],
)
def test_args_invalid(args: dict[str, Any], want_errors: list[tuple[str, str]]) -> None:
    with pytest.raises(ConfigError) as info:
        DefaultPreemption(args, FakeHandle())
    assert info.value.errors == want_errors


def test_args_not_a_mapping() -> None:
    with pytest.raises(ConfigError, match="DefaultPreemption.args: must be an object"):
        DefaultPreemption([1], FakeHandle())  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("percentage", "absolute", "num_nodes", "want"),
    [
        (5, 1, 10, 1),  # 5% of 10 is 0: the absolute minimum wins
        (50, 0, 10, 5),
        (10, 100, 1000, 100),
        (10, 100, 10_000, 1000),
        (0, 5, 3, 3),  # never more than there are nodes
        (100, 0, 7, 7),
        (10, 100, 1, 1),
    ],
)
def test_calculate_num_candidates(percentage: int, absolute: int, num_nodes: int,
                                  want: int) -> None:
    plugin = DefaultPreemption({"minCandidateNodesPercentage": percentage,
                                "minCandidateNodesAbsolute": absolute}, FakeHandle())
    assert plugin.calculate_num_candidates(num_nodes) == want
    offset, count = plugin.get_offset_and_num_candidates(num_nodes)
    assert 0 <= offset < num_nodes and count == want


# --- PDB accounting --------------------------------------------------------------------------


def _infos(*pods: dict[str, Any]) -> list[PodInfo]:
    return [PodInfo.from_pod(p) for p in pods]


@pytest.mark.parametrize(
    ("pdbs", "pods", "want_violating"),
    [
        pytest.param([pdb("b", match={"app": "a"}, allowed=0)],
                     [pod("p1", labels={"app": "a"}), pod("p2", labels={"app": "b"})],
                     ["p1"], id="budget-zero-violates"),
        pytest.param([pdb("b", match={"app": "a"}, allowed=1)],
                     [pod("p1", labels={"app": "a"}), pod("p2", labels={"app": "a"})],
                     ["p2"], id="budget-spent-in-order"),
        pytest.param([pdb("b", match={"app": "a"}, allowed=0, disrupted=["p1"])],
                     [pod("p1", labels={"app": "a"}), pod("p2", labels={"app": "a"})],
                     ["p2"], id="already-disrupted-costs-nothing"),
        pytest.param([pdb("b", match={"app": "a"}, allowed=0, namespace="other")],
                     [pod("p1", labels={"app": "a"})], [], id="other-namespace"),
        pytest.param([pdb("b", match=None, selector={}, allowed=0)],
                     [pod("p1", labels={"app": "a"})], [], id="empty-selector-selects-nothing"),
        pytest.param([pdb("b", match=None, allowed=0)],
                     [pod("p1", labels={"app": "a"})], [], id="no-selector-selects-nothing"),
        pytest.param([pdb("b", match=None, allowed=0, selector={"matchExpressions": [
                         {"key": "app", "operator": "Bogus"}]})],
                     [pod("p1", labels={"app": "a"})], [], id="invalid-selector-ignored"),
        pytest.param([pdb("b", match=None, allowed=0, selector={"matchExpressions": [
                         {"key": "app", "operator": "Exists"}]})],
                     [pod("p1"), pod("p2", labels={"app": "x"})], ["p2"],
                     id="unlabelled-pod-never-matches"),
        pytest.param([pdb("b1", match={"app": "a"}, allowed=5),
                      pdb("b2", match={"tier": "web"}, allowed=0)],
                     [pod("p1", labels={"app": "a", "tier": "web"})], ["p1"],
                     id="any-violated-pdb-counts"),
    ],
)
def test_filter_pods_with_pdb_violation(pdbs: list[dict[str, Any]], pods: list[dict[str, Any]],
                                        want_violating: list[str]) -> None:
    infos = _infos(*pods)
    violating, non_violating = filter_pods_with_pdb_violation(infos, compile_pdbs(pdbs))
    assert [p.name for p in violating] == want_violating
    assert [p.name for p in non_violating] == [p.name for p in infos if p.name not in want_violating]


def test_compile_pdbs_tolerates_bad_counts() -> None:
    raw = pdb("b", match={"app": "a"})
    raw["status"]["disruptionsAllowed"] = "lots"
    (compiled,) = compile_pdbs([raw])
    assert compiled.disruptions_allowed == 0 and compiled.selector is not None


# --- picking one node ------------------------------------------------------------------------


def _cand(name: str, *victims: tuple[int, str | None], violations: int = 0) -> Candidate:
    pods = [pod(f"{name}-v{i}", priority=prio, start=start)
            for i, (prio, start) in enumerate(victims)]
    return Candidate(name, _infos(*pods), violations)


T0, T1, T2 = "2024-01-01T00:00:00Z", "2024-01-01T00:00:01Z", "2024-01-01T00:00:02Z"


@pytest.mark.parametrize(
    ("candidates", "want"),
    [
        pytest.param([_cand("a", (LOW, T0), violations=1), _cand("b", (HIGH, T0))], "b",
                     id="fewest-pdb-violations-first"),
        pytest.param([_cand("a", (MID, T0)), _cand("b", (LOW, T0), (LOW, T0))], "b",
                     id="lowest-highest-priority"),
        pytest.param([_cand("a", (MID, T0), (LOW, T0)), _cand("b", (MID, T0))], "b",
                     id="smallest-priority-sum"),
        pytest.param([_cand("a", (-100, T0), (-100, T0)), _cand("b", (-100, T0))], "b",
                     id="negative-priorities-do-not-reward-more-victims"),
        pytest.param([_cand("a", (MID, T0), (LOW, T1)), _cand("b", (MID, T1), (LOW, T0))], "b",
                     id="latest-start-of-highest-priority-victims"),
        pytest.param([_cand("a", (MID, T2), (MID, T0)), _cand("b", (MID, T1), (MID, T1))], "b",
                     id="earliest-among-equal-top-priority-counts"),
        pytest.param([_cand("a", (LOW, None)), _cand("b", (LOW, T0))], "a",
                     id="not-started-counts-as-newest"),
        pytest.param([_cand("a", (LOW, T0)), _cand("b", (LOW, T0))], "a", id="tie-first"),
        pytest.param([_cand("only", (VERY_HIGH, T0), violations=3)], "only", id="single"),
    ],
)
def test_pick_one_node_for_preemption(candidates: list[Candidate], want: str) -> None:
    best = pick_one_node_for_preemption(candidates, now=2e9)
    assert best is not None and best.name == want


def test_pick_one_node_without_candidates() -> None:
    assert pick_one_node_for_preemption([], now=0) is None


def _pick_criterion_by_criterion(candidates: list[Candidate], now: float) -> Candidate:
    """The pick as written down: each criterion over the candidates the ones before left
    tied (the reference for the pick's one-pass summary)."""
    def start(v: PodInfo) -> float:
        value = (v.pod.get("status") or {}).get("startTime")
        return now if value is None else parse_rfc3339(value)

    def latest_start(c: Candidate) -> float:
        if not c.victims:
            return -math.inf
        top = max(v.priority for v in c.victims)
        return min(start(v) for v in c.victims if v.priority == top)

    criteria = (
        lambda c: -c.num_pdb_violations,
        lambda c: -max((v.priority for v in c.victims), default=0),
        lambda c: -sum(v.priority + 2**31 for v in c.victims),
        lambda c: -len(c.victims),
        latest_start,
    )
    remaining = list(candidates)
    for criterion in criteria:
        best = max(map(criterion, remaining))
        remaining = [c for c in remaining if criterion(c) == best]
    return remaining[0]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(
    st.lists(st.tuples(st.sampled_from([-100, LOW, MID]), st.sampled_from([None, T0, T1, T2])),
             max_size=3),
    st.integers(0, 2)), min_size=1, max_size=6))
def test_pick_is_the_criteria_applied_in_turn(
    drawn: list[tuple[list[tuple[int, str | None]], int]],
) -> None:
    candidates = [_cand(f"c{i}", *victims, violations=violations)
                  for i, (victims, violations) in enumerate(drawn)]
    best = pick_one_node_for_preemption(candidates, now=2e9)
    assert best is _pick_criterion_by_criterion(candidates, 2e9)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(
    st.lists(st.tuples(st.sampled_from([-100, LOW, MID]), st.sampled_from([None, T0, T1, T2])),
             min_size=1, max_size=3),
    st.integers(0, 2), st.booleans()), min_size=1, max_size=6),
    st.sampled_from([1.0, 1704067201.0, 1704067201.5, 2e9]))
def test_pick_from_what_the_dry_run_knew_is_the_pick(
    drawn: list[tuple[list[tuple[int, str | None]], int, bool]], now: float,
) -> None:
    """``known_starts`` (``top_start``'s now-free pairs) and ``known_summaries``
    (``candidate_summary``), given for some candidates, pick what reading the victims
    picks, at any ``now`` (before, between and after the start times)."""
    candidates = [_cand(f"c{i}", *victims, violations=violations)
                  for i, (victims, violations, _) in enumerate(drawn)]
    known = [c for c, (_, _, is_known) in zip(candidates, drawn) if is_known]
    best = pick_one_node_for_preemption(
        candidates, now=now,
        known_starts={c.name: top_start(c.victims) for c in known},
        known_summaries={c.name: candidate_summary(c.victims, c.num_pdb_violations)
                         for c in known})
    assert best is _pick_criterion_by_criterion(candidates, now)


# --- dry run ---------------------------------------------------------------------------------


def _recording_select(outcomes: dict[str, tuple[int, int]], visited: list[str]) -> Any:
    """A select function: node -> (number of victims, violations); 0 victims = no fit."""

    def select(state: CycleState, pod_info: PodInfo, node_info: NodeInfo,
               pdbs: Any) -> tuple[list[PodInfo], int, Status | None]:
        visited.append(node_info.name)
        count, violations = outcomes[node_info.name]
        if count == 0:
            return [], 0, Status(Code.UNSCHEDULABLE, "Insufficient cpu")
        return _infos(*(pod(f"v{i}") for i in range(count))), violations, None

    return select


@pytest.mark.parametrize(
    ("outcomes", "offset", "num", "want_visited", "want_candidates"),
    [
        pytest.param({"n1": (1, 0), "n2": (1, 0), "n3": (1, 0), "n4": (1, 0)}, 2, 2,
                     ["n3", "n4"], ["n3", "n4"], id="starts-at-offset-stops-at-count"),
        pytest.param({"n1": (1, 0), "n2": (1, 0), "n3": (1, 0)}, 2, 2,
                     ["n3", "n1"], ["n3", "n1"], id="wraps-around"),
        pytest.param({"n1": (1, 1), "n2": (1, 1), "n3": (1, 0)}, 0, 1,
                     ["n1", "n2", "n3"], ["n3", "n1"],
                     id="keeps-looking-for-a-pdb-respecting-candidate"),
        pytest.param({"n1": (0, 0), "n2": (0, 0)}, 1, 5, ["n2", "n1"], [],
                     id="no-candidates"),
    ],
)
def test_dry_run_preemption(outcomes: dict[str, tuple[int, int]], offset: int, num: int,
                            want_visited: list[str], want_candidates: list[str]) -> None:
    infos = [NodeInfo(node(n)) for n in outcomes]
    visited: list[str] = []
    candidates, statuses, errors = dry_run_preemption(
        _recording_select(outcomes, visited), CycleState(), PodInfo.from_pod(pod("p")),
        infos, [], offset=offset, num_candidates=num,
    )
    assert visited == want_visited
    assert [c.name for c in candidates] == want_candidates
    assert set(statuses) == {n for n in visited if outcomes[n][0] == 0}
    assert errors == []


def test_dry_run_works_on_copies_and_reports_errors() -> None:
    infos = [NodeInfo(node("n1")), NodeInfo(node("n2"))]
    infos[0].add_pod(PodInfo.from_pod(pod("keep", node_name="n1")))

    def select(state: CycleState, pod_info: PodInfo, node_info: NodeInfo,
               pdbs: Any) -> tuple[list[PodInfo], int, Status | None]:
        state.write("scribble", 1)
        if node_info.name == "n1":
            node_info.remove_pod(node_info.pods[0].pod)
            return [], 0, None  # success without victims is a bug
        raise RuntimeError("boom")

    state = CycleState()
    candidates, statuses, errors = dry_run_preemption(
        select, state, PodInfo.from_pod(pod("p")), infos, [], offset=0, num_candidates=2)
    assert candidates == []
    assert statuses["n1"].code == Code.ERROR
    assert statuses["n1"].message() == "expected at least one victim pod on node 'n1'"
    assert statuses["n2"].code == Code.ERROR and statuses["n2"].message() == "boom"
    assert len(errors) == 2
    assert len(infos[0].pods) == 1 and state.get("scribble") is None


# --- victims on one node ---------------------------------------------------------------------


def _select(s: Scenario, node_name: str) -> tuple[list[str], int, Status | None]:
    pdbs = compile_pdbs(s.handle.listers.list("poddisruptionbudgets"))
    victims, violations, status = s.plugin.select_victims_on_node(
        s.state.clone(), s.pod_info, s.info(node_name).clone(), pdbs)
    return [v.name for v in victims], violations, status


@pytest.mark.parametrize(
    ("preemptor", "pods", "pdbs", "want_victims", "want_violations"),
    [
        pytest.param(
            pod("p", priority=HIGH, cpu="500m"),
            [pod("a", priority=LOW, cpu="500m", node_name="n1"),
             pod("b", priority=MID, cpu="500m", node_name="n1")],
            [], ["a"], 0, id="lowest-priority-goes-first"),
        pytest.param(
            pod("p", priority=HIGH, cpu="600m"),
            [pod("a", priority=LOW, cpu="300m", node_name="n1"),
             pod("b", priority=LOW, cpu="300m", node_name="n1"),
             pod("c", priority=MID, cpu="400m", node_name="n1")],
            [], ["a", "b"], 0, id="higher-priority-reprieved-first"),
        pytest.param(
            pod("p", priority=HIGH, cpu="500m"),
            [pod("old", priority=LOW, cpu="500m", node_name="n1", start=T0),
             pod("new", priority=LOW, cpu="500m", node_name="n1", start=T1)],
            [], ["new"], 0, id="equal-priority-longest-running-reprieved"),
        pytest.param(
            pod("p", priority=HIGH, cpu="500m"),
            [pod("guarded", priority=LOW, cpu="500m", node_name="n1", labels={"app": "db"}),
             pod("free", priority=LOW, cpu="500m", node_name="n1")],
            [pdb("db", match={"app": "db"}, allowed=0)], ["free"], 0,
            id="pdb-protected-reprieved-first"),
        pytest.param(
            pod("p", priority=HIGH, cpu="1"),
            [pod("guarded", priority=LOW, cpu="500m", node_name="n1", labels={"app": "db"}),
             pod("free", priority=MID, cpu="500m", node_name="n1")],
            [pdb("db", match={"app": "db"}, allowed=0)], ["free", "guarded"], 1,
            id="pdb-violated-when-unavoidable-victims-sorted-by-importance"),
        pytest.param(
            pod("p", priority=HIGH, cpu="100m"),
            [pod("a", priority=LOW, cpu="100m", node_name="n1"),
             pod("big", priority=LOW, cpu="850m", node_name="n1")],
            [], ["big"], 0, id="only-what-is-needed"),
    ],
)
def test_select_victims_on_node(preemptor: dict[str, Any], pods: list[dict[str, Any]],
                                pdbs: list[dict[str, Any]], want_victims: list[str],
                                want_violations: int) -> None:
    s = Scenario(preemptor, nodes=[node("n1", cpu="1")], pods=pods, pdbs=pdbs)
    victims, violations, status = _select(s, "n1")
    assert status is None
    assert victims == want_victims
    assert violations == want_violations
    # The snapshot itself is untouched.
    assert sorted(p.name for p in s.info("n1").pods) == sorted(p["metadata"]["name"] for p in pods)


def test_select_victims_no_lower_priority_pods() -> None:
    s = Scenario(pod("p", priority=MID), nodes=[node("n1", pods=1)],
                 pods=[pod("a", priority=MID, node_name="n1")])
    assert _select(s, "n1") == ([], 0, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                                              "No preemption victims found for incoming pod"))


def test_select_victims_not_enough_room_even_without_victims() -> None:
    # The pod would fit the empty node, but a pod it may not preempt keeps the room.
    s = Scenario(pod("p", priority=HIGH, cpu="2"), nodes=[node("n1", cpu="2")],
                 pods=[pod("a", priority=LOW, cpu="500m", node_name="n1"),
                       pod("b", priority=HIGH, cpu="500m", node_name="n1")])
    victims, _, status = _select(s, "n1")
    assert victims == [] and status is not None
    assert status.code == Code.UNSCHEDULABLE and status.reasons == ["Insufficient cpu"]


def test_select_victims_larger_than_the_node() -> None:
    # More than the node's allocatable: Filter says so whatever leaves (upstream's
    # Unresolvable InsufficientResource), and preemption does not count the node.
    s = Scenario(pod("p", priority=HIGH, cpu="2"), nodes=[node("n1", cpu="1")],
                 pods=[pod("a", priority=LOW, cpu="500m", node_name="n1")])
    victims, _, status = _select(s, "n1")
    assert victims == [] and status is not None
    assert status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert status.reasons == ["Insufficient cpu"]


def test_select_victims_pre_filter_extension_error() -> None:
    class Broken:
        name = "Broken"

        def pre_filter_extensions(self) -> Any:
            return self

        def remove_pod(self, *args: Any) -> Status:
            return Status(Code.UNSCHEDULABLE, "cannot remove")

        def add_pod(self, *args: Any) -> None:
            return None

    s = Scenario(pod("p", priority=HIGH), nodes=[node("n1", pods=1)],
                 pods=[pod("a", priority=LOW, node_name="n1")])
    s.handle.pre_filter_plugins.append(Broken())
    victims, _, status = _select(s, "n1")
    assert victims == [] and status == Status(Code.ERROR, "cannot remove")
