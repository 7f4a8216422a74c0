"""Gang-aware preemption (issue 22, upstream KEP-5710): a gang member that fits only after
preemption plans for every member its PodGroup still needs, across nodes, before anything
is evicted; nothing is evicted when the whole gang would not fit even then."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from scheduler.framework.status import Code, Status
from scheduler.framework.types import PostFilterResult
from scheduler.objects.pod import PodInfo
from scheduler.plugins.defaultpreemption.evaluator import compile_pdbs
from scheduler.plugins.defaultpreemption.gang import spend_pdbs
from scheduler.plugins.helper import POD_GROUP_LABEL
from tests.unit.plugins.defaultpreemption.harness import (
    HIGH,
    LOW,
    MID,
    Scenario,
    node,
    pdb,
    pod,
)


def _pg(name: str, min_member: int) -> dict[str, Any]:
    return {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"minMember": min_member}}


def _member(name: str, group: str = "g", *, cpu: str = "1", priority: int = HIGH,
            node_name: str = "") -> dict[str, Any]:
    return pod(name, priority=priority, cpu=cpu, labels={POD_GROUP_LABEL: group},
               node_name=node_name)


def _filler(name: str, node_name: str, *, priority: int = LOW, cpu: str = "1",
            labels: Mapping[str, str] | None = None) -> dict[str, Any]:
    return pod(name, priority=priority, cpu=cpu, node_name=node_name, labels=labels)


def _scenario(members: Sequence[dict[str, Any]], *, nodes: Sequence[dict[str, Any]],
              pods: Sequence[dict[str, Any]], groups: Sequence[dict[str, Any]],
              pdbs: Sequence[dict[str, Any]] = ()) -> Scenario:
    s = Scenario(members[0], nodes=nodes, pods=[*pods, *members], pdbs=pdbs,
                 objects={"podgroups": groups})
    s.handle.pre_filter_plugins = [s.fit]
    return s


def _plan(s: Scenario) -> tuple[dict[str, str], list[str], int, Status | None]:
    """(member -> node, victims, PDB violations, status) from a dry run."""
    s.plugin.dry_run = True
    result, status = s.post_filter()
    dry = s.plugin.last_dry_run
    if dry is None or dry.gang_plan is None:
        return {}, [], 0, status
    plan = dry.gang_plan
    assert result == PostFilterResult(plan.node_of(s.pod_info.uid))
    return ({p.member.name: p.node for p in plan.placements},
            sorted(v.name for v in plan.victims), plan.num_pdb_violations, status)


NODES4 = [node(f"n{i}") for i in range(1, 5)]
FILLERS4 = [_filler(f"f{i}", f"n{i}") for i in range(1, 5)]
GANG4 = [_member(f"m{i}") for i in range(4)]


def _case(name: str, *, members: Sequence[dict[str, Any]], nodes: Sequence[dict[str, Any]],
          pods: Sequence[dict[str, Any]], groups: Sequence[dict[str, Any]],
          pdbs: Sequence[dict[str, Any]] = (), placements: Mapping[str, str] | None,
          victims: Sequence[str] = (), violations: int = 0, message: str = "") -> Any:
    return pytest.param(members, nodes, pods, groups, pdbs, placements, list(victims),
                        violations, message, id=name)


CASES = [
    _case("gang-of-4-takes-a-node-each",
          members=GANG4, nodes=NODES4, pods=FILLERS4, groups=[_pg("g", 4)],
          placements={"m0": "n1", "m1": "n2", "m2": "n3", "m3": "n4"},
          victims=["f1", "f2", "f3", "f4"]),
    _case("higher-priority-pods-stay",
          members=GANG4[:3], nodes=NODES4,
          pods=[_filler("f1", "n1", priority=HIGH + 1), *FILLERS4[1:]], groups=[_pg("g", 3)],
          placements={"m0": "n2", "m1": "n3", "m2": "n4"}, victims=["f2", "f3", "f4"]),
    _case("lowest-priority-victims-first",
          members=GANG4[:2], nodes=NODES4,
          pods=[_filler("f1", "n1", priority=MID), _filler("f2", "n2", priority=MID),
                *FILLERS4[2:]], groups=[_pg("g", 2)],
          placements={"m0": "n3", "m1": "n4"}, victims=["f3", "f4"]),
    _case("tainted-node-leaves-the-gang-short-nothing-preempted",
          members=GANG4, nodes=[*NODES4[:3], node("n4", taint=("dedicated", "x"))],
          pods=FILLERS4, groups=[_pg("g", 4)], placements=None,
          message="PodGroup default/g does not fit even after preemption: member "
                  "default/m3 finds no node (3 of 4 member(s) placed)"),
    _case("pdb-budget-spent-across-the-plan",
          members=GANG4[:3], nodes=[*NODES4, node("n5")],
          pods=[_filler(f"f{i}", f"n{i}", labels={"app": "a"}) for i in range(1, 5)]
          + [_filler("f5", "n5")],
          pdbs=[pdb("a", match={"app": "a"}, allowed=2)], groups=[_pg("g", 3)],
          placements={"m0": "n1", "m1": "n2", "m2": "n5"}, victims=["f1", "f2", "f5"]),
    _case("pdb-violations-counted-for-the-whole-plan",
          members=GANG4, nodes=NODES4,
          pods=[_filler(f"f{i}", f"n{i}", labels={"app": "a"}) for i in range(1, 5)],
          pdbs=[pdb("a", match={"app": "a"}, allowed=1)], groups=[_pg("g", 4)],
          placements={"m0": "n1", "m1": "n2", "m2": "n3", "m3": "n4"},
          victims=["f1", "f2", "f3", "f4"], violations=3),
    _case("a-victims-gang-goes-whole-and-frees-room",
          members=GANG4[:2], nodes=NODES4[:3],
          pods=[_member("old-0", "old", priority=LOW, node_name="n1"),
                _member("old-1", "old", priority=LOW, node_name="n2"),
                _filler("f3", "n3")],
          groups=[_pg("g", 2), _pg("old", 2)],
          placements={"m0": "n1", "m1": "n2"}, victims=["old-0", "old-1"]),
    _case("mixed-sizes-largest-first",
          members=[_member("small-0"), _member("big", cpu="2"), _member("small-1")],
          nodes=[node("n1"), node("n2", cpu="2"), node("n3")],
          pods=[_filler("f1", "n1"), _filler("f2", "n2", cpu="2"), _filler("f3", "n3")],
          groups=[_pg("g", 3)],
          placements={"small-0": "n1", "big": "n2", "small-1": "n3"},
          victims=["f1", "f2", "f3"]),
    _case("two-small-members-share-a-big-node",
          members=[_member("a"), _member("b")], nodes=[node("n1", cpu="2"), node("n2")],
          pods=[_filler("f1", "n1", cpu="2", priority=LOW), _filler("f2", "n2", priority=MID)],
          groups=[_pg("g", 2)], placements={"a": "n1", "b": "n1"}, victims=["f1"]),
]


@pytest.mark.parametrize(
    ("members", "nodes", "pods", "groups", "pdbs", "placements", "victims", "violations",
     "message"), CASES)
def test_gang_plan(members: Sequence[dict[str, Any]], nodes: Sequence[dict[str, Any]],
                   pods: Sequence[dict[str, Any]], groups: Sequence[dict[str, Any]],
                   pdbs: Sequence[dict[str, Any]], placements: Mapping[str, str] | None,
                   victims: list[str], violations: int, message: str) -> None:
    s = _scenario(members, nodes=nodes, pods=pods, groups=groups, pdbs=pdbs)
    got_placements, got_victims, got_violations, status = _plan(s)
    if placements is None:
        assert got_placements == {}
        assert status is not None and status.code == Code.UNSCHEDULABLE
        assert status.message() == "preemption: " + message
        return
    assert status == Status(Code.SUCCESS)
    assert got_placements == placements
    assert got_victims == victims
    assert got_violations == violations


def test_a_gang_that_cannot_complete_preempts_nothing() -> None:
    # minMember 4 but only three members exist: no victim can help.
    s = _scenario(GANG4[:3], nodes=NODES4, pods=FILLERS4, groups=[_pg("g", 4)])
    result, status = s.post_filter()
    assert result is None
    assert status is not None and status.message() == (
        "preemption: Preemption is not helpful for scheduling: PodGroup default/g needs 4 "
        "more member(s), 3 pending")
    assert not s.plugin.tasks and s.handle.client.requests == []


def test_bound_members_are_not_placed_again() -> None:
    # Two of four members run already: the plan places the two pending ones only.
    members = [_member("m2"), _member("m3")]
    bound = [_member("m0", node_name="n1"), _member("m1", node_name="n2")]
    s = _scenario(members, nodes=NODES4, pods=[*bound, *FILLERS4[2:]], groups=[_pg("g", 4)])
    placements, victims, _, _ = _plan(s)
    assert placements == {"m2": "n3", "m3": "n4"}
    assert victims == ["f3", "f4"]


def test_spend_pdbs_counts_each_pod_once_per_budget() -> None:
    pdbs = compile_pdbs([pdb("a", match={"app": "a"}, allowed=1)])
    pods = [PodInfo.from_pod(pod(f"p{i}", labels={"app": "a"})) for i in range(3)]
    left, violating = spend_pdbs(pdbs, pods)
    assert (left[0].disruptions_allowed, violating) == (-2, 2)


async def test_the_plan_is_carried_out_for_every_member() -> None:
    s = _scenario(GANG4[:2], nodes=NODES4[:2], pods=FILLERS4[:2], groups=[_pg("g", 2)])
    result, status = s.post_filter()
    assert (result, status) == (PostFilterResult("n1"), Status(Code.SUCCESS))
    # Both members are held back while the victims go, the sibling nominated in memory.
    assert s.plugin.is_pod_running_preemption("uid-m0")
    assert s.plugin.is_pod_running_preemption("uid-m1")
    assert [p.name for p in s.handle.nominator.nominated_pods_for_node("n2")] == ["m1"]
    (task,) = s.plugin.tasks
    assert task.get_name() == "preemption:default/m0@gang"
    await s.plugin.wait_idle()
    calls = [(method, path) for method, path, *_ in s.handle.client.requests]
    # The sibling's nomination is written before any victim is touched.
    assert calls[0] == ("PATCH", "/api/v1/namespaces/default/pods/m1/status")
    assert s.handle.client.requests[0][2] == {"status": {"nominatedNodeName": "n2"}}
    assert {c for c in calls if c[0] == "DELETE"} == {
        ("DELETE", "/api/v1/namespaces/default/pods/f1"),
        ("DELETE", "/api/v1/namespaces/default/pods/f2")}
    messages = sorted(e["message"] for e in s.handle.event_recorder.events)
    assert messages == ["Preempted by pod uid-m0 on node n1", "Preempted by pod uid-m0 on node n2"]


async def test_a_sibling_does_not_plan_again_while_the_plan_runs() -> None:
    s = _scenario(GANG4[:2], nodes=NODES4[:2], pods=FILLERS4[:2], groups=[_pg("g", 2)])
    s.post_filter()
    result, status = s.attempt(GANG4[1])
    assert result is None
    assert status is not None and status.message() == (
        "preemption: waiting for the preemption for this pod to be finished")
    await s.plugin.wait_idle()
