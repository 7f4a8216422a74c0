"""DefaultPreemption.post_filter: which node is nominated, or why preemption cannot help."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from scheduler.framework.events import ASSIGNED_POD_DELETE, QueueingHint
from scheduler.framework.status import Code, Status
from scheduler.framework.types import PostFilterResult
from tests.builders import PodBuilder
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

UNSCHED = Status(Code.UNSCHEDULABLE)
UNRESOLVABLE = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE)
T0, T1 = "2024-01-01T00:00:00Z", "2024-01-01T00:05:00Z"


def _case(name: str, *, preemptor: dict[str, Any], nodes: list[dict[str, Any]],
          pods: list[dict[str, Any]] = (),  # type: ignore[assignment]
          pdbs: list[dict[str, Any]] = (),  # type: ignore[assignment]
          statuses: Mapping[str, Status] | None = None,
          nominated: Mapping[str, list[dict[str, Any]]] | None = None,
          want_node: str | None, want_message: str = "") -> Any:
    return pytest.param(preemptor, nodes, list(pods), list(pdbs), statuses, nominated,
                        want_node, want_message, id=name)


CASES = [
    _case("higher-priority-preempts",
          preemptor=pod("p", priority=HIGH), nodes=[node("n1", pods=1)],
          pods=[pod("a", node_name="n1")], want_node="n1"),
    _case("tied-priority-cannot-preempt",
          preemptor=pod("p"), nodes=[node("n1", pods=1)], pods=[pod("a", node_name="n1")],
          want_node="",
          want_message="preemption: 0/1 nodes are available: "
                       "1 No preemption victims found for incoming pod."),
    _case("unresolvable-node-status-respected",
          preemptor=pod("p", priority=HIGH), nodes=[node("n1", pods=1)],
          pods=[pod("a", node_name="n1")], statuses={"n1": UNRESOLVABLE}, want_node="",
          want_message="preemption: 0/1 nodes are available: "
                       "1 Preemption is not helpful for scheduling."),
    _case("absent-node-status-is-unresolvable",
          preemptor=pod("p", priority=HIGH), nodes=[node("n1", pods=1)],
          pods=[pod("a", node_name="n1")], statuses={}, want_node="",
          want_message="preemption: 0/1 nodes are available: "
                       "1 Preemption is not helpful for scheduling."),
    _case("only-node-with-lower-priority-pods",
          preemptor=pod("p", priority=MID), nodes=[node("n1", pods=1), node("n2", pods=1)],
          pods=[pod("a", priority=HIGH, node_name="n1"), pod("b", priority=LOW, node_name="n2")],
          want_node="n2"),
    _case("not-enough-room-after-removing-all-lower-priority",
          preemptor=pod("p", priority=HIGH, cpu="2"),
          nodes=[node("n1", cpu="2"), node("n2", cpu="2")],
          pods=[pod("a", cpu="1", node_name="n1"), pod("b", cpu="1", node_name="n2"),
                pod("ha", priority=HIGH, cpu="500m", node_name="n1"),
                pod("hb", priority=HIGH, cpu="500m", node_name="n2")], want_node="",
          want_message="preemption: 0/2 nodes are available: 2 Insufficient cpu."),
    # More than a node's allocatable: Filter's status is UnschedulableAndUnresolvable, so no
    # dry run is tried there (upstream's Unresolvable InsufficientResource).
    _case("larger-than-every-node-not-helpful",
          preemptor=pod("p", priority=HIGH, cpu="2"), nodes=[node("n1"), node("n2")],
          pods=[pod("a", node_name="n1"), pod("b", node_name="n2")], want_node="",
          want_message="preemption: 0/2 nodes are available: "
                       "2 Preemption is not helpful for scheduling."),
    _case("mixed-reasons",
          preemptor=pod("p", priority=HIGH, cpu="2"),
          nodes=[node("n1", pods=1, cpu="4"), node("n2", cpu="2"), node("n3", pods=1, cpu="4")],
          pods=[pod("a", priority=HIGH, node_name="n1"), pod("b", cpu="1", node_name="n2"),
                pod("hb", priority=HIGH, cpu="500m", node_name="n2"),
                pod("c", priority=HIGH, node_name="n3")],
          want_node="",
          want_message="preemption: 0/3 nodes are available: 1 Insufficient cpu, "
                       "2 No preemption victims found for incoming pod."),
    _case("tainted-node-not-helpful",
          preemptor=pod("p", priority=HIGH),
          nodes=[node("n1", pods=1, taint=("dedicated", "x")), node("n2", pods=1)],
          pods=[pod("a", node_name="n1"), pod("b", priority=VERY_HIGH, node_name="n2")],
          want_node="",
          want_message="preemption: 0/2 nodes are available: "
                       "1 No preemption victims found for incoming pod, "
                       "1 Preemption is not helpful for scheduling."),
    _case("tainted-node-skipped-for-a-preemptable-one",
          preemptor=pod("p", priority=HIGH),
          nodes=[node("n1", pods=1, taint=("dedicated", "x")), node("n2", pods=1)],
          pods=[pod("a", node_name="n1"), pod("b", priority=MID, node_name="n2")],
          want_node="n2"),
    _case("minimize-highest-victim-priority",
          preemptor=pod("p", priority=VERY_HIGH, cpu="500m"),
          nodes=[node("n1"), node("n2"), node("n3")],
          pods=[pod("a1", priority=HIGH, cpu="600m", node_name="n1"),
                pod("b1", priority=MID, cpu="300m", node_name="n2"),
                pod("b2", priority=MID, cpu="300m", node_name="n2"),
                pod("c1", priority=HIGH, cpu="600m", node_name="n3"),
                pod("c2", priority=LOW, cpu="300m", node_name="n3")],
          want_node="n2"),
    _case("minimize-number-of-victims",
          preemptor=pod("p", priority=HIGH, cpu="600m"),
          nodes=[node("n1"), node("n2")],
          pods=[pod("a1", priority=MID, cpu="300m", node_name="n1"),
                pod("a2", priority=MID, cpu="300m", node_name="n1"),
                pod("a3", priority=MID, cpu="300m", node_name="n1"),
                pod("b1", priority=MID, cpu="700m", node_name="n2"),
                pod("b2", priority=MID, cpu="200m", node_name="n2")],
          want_node="n2"),
    _case("latest-started-victims",
          preemptor=pod("p", priority=HIGH),
          nodes=[node("n1", pods=1), node("n2", pods=1)],
          pods=[pod("a", priority=LOW, node_name="n1", start=T0),
                pod("b", priority=LOW, node_name="n2", start=T1)],
          want_node="n2"),
    _case("pdb-respected-when-another-node-is-possible",
          preemptor=pod("p", priority=HIGH),
          nodes=[node("n1", pods=1), node("n2", pods=1)],
          pods=[pod("a", priority=LOW, node_name="n1", labels={"app": "db"}),
                pod("b", priority=MID, node_name="n2")],
          pdbs=[pdb("db", match={"app": "db"}, allowed=0)],
          want_node="n2"),
    _case("pdb-violated-when-no-other-node",
          preemptor=pod("p", priority=HIGH),
          nodes=[node("n1", pods=1), node("n2", pods=1)],
          pods=[pod("a", priority=LOW, node_name="n1", labels={"app": "db"}),
                pod("b", priority=VERY_HIGH, node_name="n2")],
          pdbs=[pdb("db", match={"app": "db"}, allowed=0)],
          want_node="n1"),
    _case("pdb-with-budget-left-is-not-violated",
          preemptor=pod("p", priority=HIGH),
          nodes=[node("n1", pods=1), node("n2", pods=1)],
          pods=[pod("a", priority=LOW, node_name="n1", labels={"app": "db"}),
                pod("b", priority=MID, node_name="n2")],
          pdbs=[pdb("db", match={"app": "db"}, allowed=1)],
          want_node="n1"),
    _case("nominated-pod-keeps-its-room",
          preemptor=pod("p", priority=MID),
          # Without the nominated pod n1 would win (its victim started later).
          nodes=[node("n1", pods=1), node("n2", pods=1)],
          pods=[pod("a", priority=LOW, node_name="n1"), pod("b", priority=LOW, node_name="n2",
                                                            start=T0)],
          nominated={"n1": [pod("waiting", priority=HIGH, nominated="n1")]},
          want_node="n2"),
    _case("lower-priority-nominated-pod-ignored",
          preemptor=pod("p", priority=MID),
          nodes=[node("n1", pods=1), node("n2", pods=1)],
          pods=[pod("a", priority=LOW, node_name="n1"), pod("b", priority=MID, node_name="n2")],
          nominated={"n1": [pod("waiting", priority=LOW, nominated="n1")]},
          want_node="n1"),
    _case("nominated-pods-leave-no-room-anywhere",
          preemptor=pod("p", priority=MID),
          nodes=[node("n1", pods=1)],
          pods=[pod("a", priority=LOW, node_name="n1")],
          nominated={"n1": [pod("waiting", priority=HIGH, nominated="n1")]},
          want_node="",
          want_message="preemption: 0/1 nodes are available: 1 Too many pods."),
    # PodLevelResources: the victim's pod-level 800m (not its container's 10m) is what
    # removing it frees, so it is a victim; counted by its containers it would be reprieved.
    _case("pod-level-requests-of-victims",
          preemptor=pod("p", priority=HIGH, cpu="500m"), nodes=[node("n1")],
          pods=[PodBuilder("a").uid("uid-a").priority(LOW).node("n1").req(cpu="10m")
                .pod_resources(requests={"cpu": "800m"}).obj()],
          want_node="n1"),
]


@pytest.mark.parametrize(
    ("preemptor", "nodes", "pods", "pdbs", "statuses", "nominated", "want_node", "want_message"),
    CASES,
)
async def test_post_filter(preemptor: dict[str, Any], nodes: list[dict[str, Any]],
                           pods: list[dict[str, Any]], pdbs: list[dict[str, Any]],
                           statuses: Mapping[str, Status] | None,
                           nominated: Mapping[str, list[dict[str, Any]]] | None,
                           want_node: str | None, want_message: str) -> None:
    s = Scenario(preemptor, nodes=nodes, pods=pods, pdbs=pdbs, nominated=nominated)
    result, status = s.post_filter(statuses)
    await s.plugin.wait_idle()
    if want_message:
        assert status is not None and status.code == Code.UNSCHEDULABLE
        assert status.message() == want_message
        assert result == PostFilterResult(nominated_node_name="")
        assert s.handle.client.requests == []
    else:
        assert status == Status(Code.SUCCESS)
        assert result == PostFilterResult(nominated_node_name=want_node or "")
        deleted = {path for method, path, _ in s.handle.client.requests if method == "DELETE"}
        assert deleted and all("/pods/" in p for p in deleted)
    assert s.plugin.attempts == 1


async def test_random_offset_is_seeded_and_candidates_bounded() -> None:
    # Ten identical nodes, one candidate wanted: the chosen node follows the random offset.
    nodes = [node(f"n{i}", pods=1) for i in range(10)]
    pods = [pod(f"v{i}", node_name=f"n{i}") for i in range(10)]
    args = {"minCandidateNodesPercentage": 0, "minCandidateNodesAbsolute": 1}
    chosen = set()
    for seed in range(8):
        s = Scenario(pod("p", priority=HIGH), nodes=nodes, pods=pods, args=args, seed=seed)
        result, _ = s.post_filter()
        await s.plugin.wait_idle()
        chosen.add(result.nominated_node_name)
        again = Scenario(pod("p", priority=HIGH), nodes=nodes, pods=pods, args=args, seed=seed)
        result2, _ = again.post_filter()
        await again.plugin.wait_idle()
        assert result2.nominated_node_name == result.nominated_node_name
    assert len(chosen) > 1


# --- eligibility -----------------------------------------------------------------------------


def test_preemption_policy_never() -> None:
    s = Scenario(pod("p", priority=HIGH, policy="Never"), nodes=[node("n1", pods=1)],
                 pods=[pod("a", node_name="n1")])
    result, status = s.post_filter()
    assert result is None
    assert status == Status(Code.UNSCHEDULABLE,
                            "preemption: not eligible due to preemptionPolicy=Never.",
                            plugin="DefaultPreemption")


@pytest.mark.parametrize(
    ("victim", "nominated_status", "want_eligible"),
    [
        pytest.param(pod("a", node_name="n1", deleting=True, preempted=True), UNSCHED, False,
                     id="terminating-victim-wait"),
        pytest.param(pod("a", node_name="n1", deleting=True, preempted=True), UNRESOLVABLE,
                     True, id="nominated-node-unresolvable-preempt-again"),
        pytest.param(pod("a", node_name="n1", deleting=True), UNSCHED, True,
                     id="terminating-but-not-by-preemption"),
        pytest.param(pod("a", node_name="n1", preempted=True), UNSCHED, True,
                     id="condition-without-deletion"),
        pytest.param(pod("a", priority=VERY_HIGH, node_name="n1", deleting=True,
                         preempted=True), UNSCHED, True, id="terminating-pod-not-lower-priority"),
    ],
)
def test_eligibility_with_nominated_node(victim: dict[str, Any], nominated_status: Status,
                                         want_eligible: bool) -> None:
    s = Scenario(pod("p", priority=HIGH, nominated="n1"), nodes=[node("n1", pods=1)],
                 pods=[victim])
    eligible, reason = s.plugin.pod_eligible_to_preempt_others(
        s.pod_info, {"n1": nominated_status})
    assert eligible is want_eligible
    assert reason == ("" if want_eligible else
                      "not eligible due to a terminating pod on the nominated node.")


def test_not_eligible_status_message() -> None:
    s = Scenario(pod("p", priority=HIGH, nominated="n1"), nodes=[node("n1", pods=1)],
                 pods=[pod("a", node_name="n1", deleting=True, preempted=True)])
    result, status = s.post_filter()
    assert result is None and status is not None
    assert status.message() == (
        "preemption: not eligible due to a terminating pod on the nominated node.")


def test_no_nodes_is_an_error() -> None:
    s = Scenario(pod("p", priority=HIGH), nodes=[])
    result, status = s.post_filter({})
    assert result is None and status is not None and status.code == Code.ERROR
    assert status.message() == "preemption: no nodes available"


def test_pre_filter_extension_error_surfaces_when_no_candidate() -> None:
    class Broken:
        name = "Broken"

        def pre_filter_extensions(self) -> Any:
            return self

        def remove_pod(self, *args: Any) -> Status:
            return Status(Code.ERROR, "state corrupted")

        def add_pod(self, *args: Any) -> None:
            return None

    s = Scenario(pod("p", priority=HIGH), nodes=[node("n1", pods=1)],
                 pods=[pod("a", node_name="n1")])
    s.handle.pre_filter_plugins.append(Broken())
    result, status = s.post_filter()
    assert result is None
    assert status == Status(Code.ERROR, "preemption: state corrupted", plugin="DefaultPreemption")


# --- events ----------------------------------------------------------------------------------


async def test_events_and_hint() -> None:
    """upstream DefaultPreemption.EventsToRegister / isPodSchedulableAfterAssignedPodDeletion:
    an assigned pod's deletion may let a held-back preemptor in, but whether it fits then is
    for the plugins that rejected it to say: the hint always answers Skip."""
    s = Scenario(pod("p", priority=HIGH), nodes=[node("n1", pods=1)],
                 pods=[pod("a", node_name="n1")])
    (registered,) = s.plugin.events_to_register()
    assert registered.event == ASSIGNED_POD_DELETE and registered.hint is not None
    victim, bystander = pod("a", node_name="n1"), pod("z", node_name="n9")
    preemptor = s.pod_info.pod
    assert registered.hint(preemptor, victim, None) is QueueingHint.SKIP
    s.post_filter()
    assert registered.hint(preemptor, victim, None) is QueueingHint.SKIP
    assert registered.hint(preemptor, bystander, None) is QueueingHint.SKIP
    await s.plugin.wait_idle()
