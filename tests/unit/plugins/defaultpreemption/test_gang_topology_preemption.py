"""Preemption for a gang whose PodGroup requires one topology domain (issue 22): the plan
stays within one domain (all members at once), the domain chosen is the one whose plan
disturbs least as upstream judges nodes (fewest PDB violations, then the lowest-priority,
fewest victims), and nothing is preempted when no domain holds the gang even after
preemption, although the cluster as a whole would."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from scheduler.framework.status import Code, Status
from scheduler.framework.types import PostFilterResult
from scheduler.plugins.helper import (
    GANG_TOPOLOGY_STATE_KEY,
    POD_GROUP_LABEL,
    RequiredGangTopology,
)
from tests.builders import NodeBuilder
from tests.unit.plugins.defaultpreemption.harness import HIGH, LOW, MID, Scenario, pdb, pod

RACK = "example.com/rack"


def _node(name: str) -> dict[str, Any]:
    """A 1-CPU node in rack ``name[0]`` (a-0 is in rack a)."""
    return NodeBuilder(name).capacity(cpu="1", memory="1Gi", pods=110).labels(
        {RACK: name[0]}).obj()


def _pg(name: str, min_member: int) -> dict[str, Any]:
    return {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "default",
                         "annotations": {"kube-py-scheduler.io/required-topology": RACK}},
            "spec": {"minMember": min_member}}


def _member(name: str, *, node_name: str = "") -> dict[str, Any]:
    return pod(name, priority=HIGH, cpu="1", labels={POD_GROUP_LABEL: "g"}, node_name=node_name)


def _filler(node_name: str, priority: int, labels: Mapping[str, str] | None = None
            ) -> dict[str, Any]:
    return pod(f"f-{node_name}", priority=priority, cpu="1", node_name=node_name,
               labels=labels)


def _topology(nodes: Sequence[str], *, rejected: bool = True) -> RequiredGangTopology:
    domains: dict[str, set[str]] = {}
    for name in nodes:
        domains.setdefault(name[0], set()).add(name)
    return RequiredGangTopology(RACK, {v: frozenset(n) for v, n in domains.items()},
                                rejected=rejected)


def _scenario(nodes: Sequence[str], fillers: Mapping[str, int], *, members: int = 2,
              bound: Mapping[str, str] | None = None, protected: Sequence[str] = (),
              topology: RequiredGangTopology | None = None) -> Scenario:
    """A gang of ``members`` (minMember) with ``bound`` members already on a node, the rest
    pending; one filler per node of ``fillers`` (node -> priority); the cycle state as
    Coscheduling's PreFilter leaves it (the domains of ``nodes``, or ``topology``)."""
    bound = bound or {}
    gang = [_member(f"m{i}", node_name=bound.get(f"m{i}", "")) for i in range(members)]
    pending = [m for m in gang if not m["spec"].get("nodeName")]
    fill = [_filler(n, p, {"app": "p"} if n in protected else None)
            for n, p in fillers.items()]
    s = Scenario(pending[0], nodes=[_node(n) for n in nodes], pods=[*fill, *gang],
                 pdbs=[pdb("p", match={"app": "p"}, allowed=0)] if protected else (),
                 objects={"podgroups": [_pg("g", members)]})
    s.state.write(GANG_TOPOLOGY_STATE_KEY,
                  topology if topology is not None else _topology(nodes))
    return s


def _prefilter_rejected(s: Scenario) -> dict[str, Status]:
    """What the cycle hands PostFilter when PreFilter turned the pod down: every node."""
    return {i.name: Status(Code.UNSCHEDULABLE, "no rack fits") for i in s.infos}


def _dry_run(s: Scenario, statuses: Mapping[str, Status] | None = None
             ) -> tuple[dict[str, str], list[str], Status | None]:
    s.plugin.dry_run = True
    result, status = s.post_filter(_prefilter_rejected(s) if statuses is None else statuses)
    dry = s.plugin.last_dry_run
    if dry is None or dry.gang_plan is None:
        return {}, [], status
    plan = dry.gang_plan
    assert result == PostFilterResult(plan.node_of(s.pod_info.uid))
    return ({p.member.name: p.node for p in plan.placements},
            sorted(v.name for v in plan.victims), status)


RACKS = ["a-0", "a-1", "b-0", "b-1"]


@pytest.mark.parametrize(
    ("nodes", "fillers", "protected", "placements", "victims"),
    [
        pytest.param(RACKS, {"a-0": MID, "a-1": MID, "b-0": LOW, "b-1": LOW}, (),
                     {"m0": "b-0", "m1": "b-1"}, ["f-b-0", "f-b-1"],
                     id="the-rack-with-the-lowest-priority-victims"),
        pytest.param(RACKS, {"a-0": LOW, "a-1": LOW, "b-0": MID, "b-1": MID},
                     ("a-0", "a-1"), {"m0": "b-0", "m1": "b-1"}, ["f-b-0", "f-b-1"],
                     id="pdb-violations-first-then-priority"),
        pytest.param(RACKS, {"a-1": LOW, "b-0": LOW, "b-1": LOW}, (),
                     {"m0": "a-0", "m1": "a-1"}, ["f-a-1"],
                     id="free-room-in-a-rack-means-fewer-victims"),
        pytest.param([*RACKS, "c-0", "c-1", "c-2"],
                     {"a-0": LOW, "a-1": HIGH + 1, "b-0": HIGH + 1, "b-1": LOW,
                      "c-0": LOW, "c-1": LOW, "c-2": LOW}, (),
                     {"m0": "c-0", "m1": "c-1"}, ["f-c-0", "f-c-1"],
                     id="only-one-rack-can-hold-the-gang"),
    ],
)
def test_the_plan_stays_in_the_domain_that_disturbs_least(
    nodes: list[str], fillers: dict[str, int], protected: tuple[str, ...],
    placements: dict[str, str], victims: list[str],
) -> None:
    s = _scenario(nodes, fillers, protected=protected)
    got_placements, got_victims, status = _dry_run(s)
    assert status == Status(Code.SUCCESS)
    assert got_placements == placements
    assert got_victims == victims


def test_no_domain_holds_the_gang_nothing_is_preempted() -> None:
    # Two lower-priority fillers, one per rack: the cluster has room for the gang of two
    # after preemption, but no rack has: nothing is evicted, the message names each rack.
    fillers = {"a-0": LOW, "a-1": HIGH + 1, "b-0": HIGH + 1, "b-1": LOW}
    s = _scenario(RACKS, fillers)
    result, status = s.post_filter(_prefilter_rejected(s))
    assert result == PostFilterResult(nominated_node_name="")
    assert status is not None and status.code == Code.UNSCHEDULABLE
    assert status.message() == (
        f"preemption: PodGroup default/g requires its members in one {RACK} domain: no "
        f"domain holds them even after preemption ({RACK}=a: member default/m1 finds no "
        f"node (1 of 2 member(s) placed); {RACK}=b: member default/m1 finds no node "
        "(1 of 2 member(s) placed))")
    assert not s.plugin.tasks and s.handle.client.requests == []
    # Without the constraint the same gang would preempt across the racks.
    s = _scenario(RACKS, fillers)
    s.state.delete(GANG_TOPOLOGY_STATE_KEY)
    placements, victims, _ = _dry_run(s)
    assert placements == {"m0": "a-0", "m1": "b-1"} and victims == ["f-a-0", "f-b-1"]


async def test_the_plan_is_carried_out_in_one_rack() -> None:
    s = _scenario(RACKS, {"a-0": MID, "a-1": MID, "b-0": LOW, "b-1": LOW})
    result, status = s.post_filter(_prefilter_rejected(s))
    assert (result, status) == (PostFilterResult("b-0"), Status(Code.SUCCESS))
    assert s.plugin.is_pod_running_preemption("uid-m0")
    assert s.plugin.is_pod_running_preemption("uid-m1")
    assert [p.name for p in s.handle.nominator.nominated_pods_for_node("b-1")] == ["m1"]
    await s.plugin.wait_idle()
    assert {path for method, path, *_ in s.handle.client.requests if method == "DELETE"} == {
        "/api/v1/namespaces/default/pods/f-b-0", "/api/v1/namespaces/default/pods/f-b-1"}


def test_the_last_member_preempts_in_its_gangs_domain() -> None:
    # m0 runs on a-0: the last member goes to rack a (a MID victim), not to rack b, where
    # the victim's priority is lower.
    nodes = RACKS
    s = _scenario(nodes, {"a-1": MID, "b-0": LOW, "b-1": LOW}, bound={"m0": "a-0"},
                  topology=RequiredGangTopology(RACK, {"a": frozenset({"a-0", "a-1"})},
                                                rejected=True))
    s.plugin.dry_run = True
    result, status = s.post_filter(_prefilter_rejected(s))
    assert (result, status) == (PostFilterResult("a-1"), Status(Code.SUCCESS))
