"""A gang's preemption plan through the HTTP extenders' preempt verb (issue 22): the
extenders see the plan's victims per node with their PDB violations (as upstream's
ProcessPreemption receives a node's victims), may keep them, and a plan they cut short is
abandoned whole: nothing is preempted for part of a gang."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pytest

from scheduler.framework.status import Code, Status
from scheduler.framework.types import PostFilterResult
from scheduler.objects.pod import PodInfo
from scheduler.plugins.helper import POD_GROUP_LABEL
from tests.unit.plugins.defaultpreemption.harness import HIGH, LOW, Scenario, node, pdb, pod

Kept = dict[str, tuple[list[PodInfo], int]]


def _pg(name: str, min_member: int) -> dict[str, Any]:
    return {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"minMember": min_member}}


def _scenario() -> Scenario:
    """A gang of three 1-CPU members; n1 (2 CPU) and n2 (1 CPU) full of low-priority
    fillers (f1a, f1b on n1 protected by a PDB allowing one disruption), n3 full of a
    higher-priority pod: the plan takes n1 (two members) and n2."""
    members = [pod(f"m{i}", priority=HIGH, cpu="1", labels={POD_GROUP_LABEL: "g"})
               for i in range(3)]
    fillers = [pod("f1a", priority=LOW, cpu="1", node_name="n1", labels={"app": "a"}),
               pod("f1b", priority=LOW, cpu="1", node_name="n1", labels={"app": "a"}),
               pod("f2", priority=LOW, cpu="1", node_name="n2"),
               pod("f3", priority=HIGH + 1, cpu="1", node_name="n3")]
    s = Scenario(members[0], nodes=[node("n1", cpu="2"), node("n2"), node("n3")],
                 pods=[*fillers, *members], pdbs=[pdb("a", match={"app": "a"}, allowed=1)],
                 objects={"podgroups": [_pg("g", 3)]})
    s.handle.pre_filter_plugins = [s.fit]
    return s


def _names(victims: Mapping[str, tuple[list[PodInfo], int]]) -> dict[str, tuple[list[str], int]]:
    return {n: (sorted(v.name for v in pods), pdbs) for n, (pods, pdbs) in victims.items()}


def test_the_extenders_see_the_whole_plan_per_node() -> None:
    s = _scenario()
    offered = s.plugin.preemption_victims(s.state, s.pod_info, s.filter_statuses())
    assert offered is not None
    # Every node the plan evicts on, its victims and the PDB violations among them.
    assert _names(offered) == {"n1": (["f1a", "f1b"], 1), "n2": (["f2"], 0)}


def _keep_all(offered: Kept) -> Kept:
    return dict(offered)


def _drop_n2(offered: Kept) -> Kept:
    return {n: v for n, v in offered.items() if n != "n2"}


def _one_victim_less_on_n1(offered: Kept) -> Kept:
    pods, _ = offered["n1"]
    return {**offered, "n1": (pods[:1], 0)}


def _a_victim_of_its_own(offered: Kept) -> Kept:
    s = _scenario()
    f3 = next(p for p in s.info("n3").pods if p.name == "f3")
    return {**offered, "n3": ([f3], 0)} | {"n2": ([*offered["n2"][0], f3], 0)}


@pytest.mark.parametrize(
    ("narrow", "result", "message", "evicted"),
    [
        pytest.param(_keep_all, PostFilterResult("n1"), "", {"f1a", "f1b", "f2"},
                     id="kept-whole-plan-goes-ahead"),
        pytest.param(_drop_n2, PostFilterResult(""),
                     "PodGroup default/g: an extender dropped node(s) n2 from the gang's "
                     "preemption plan; nothing is preempted (never a part of a gang)", set(),
                     id="a-dropped-node-abandons-the-plan"),
        pytest.param(_one_victim_less_on_n1, PostFilterResult(""),
                     "PodGroup default/g: with the victims the extenders kept, member "
                     "default/m2 no longer fits node n1; nothing is preempted", set(),
                     id="too-few-victims-abandon-the-plan"),
        pytest.param(_a_victim_of_its_own, PostFilterResult(""),
                     "PodGroup default/g: an extender named victim(s) default/f3 on node n2 "
                     "outside the gang's preemption plan; nothing is preempted", set(),
                     id="a-victim-outside-the-plan-abandons-it"),
    ],
)
async def test_the_plan_as_the_extenders_leave_it(
    narrow: Callable[[Kept], Kept], result: PostFilterResult, message: str,
    evicted: set[str],
) -> None:
    s = _scenario()
    statuses = s.filter_statuses()
    offered = s.plugin.preemption_victims(s.state, s.pod_info, statuses)
    assert offered is not None
    s.plugin.narrow_preemption(s.state, narrow(offered))
    got, status = s.plugin.post_filter(s.state, s.pod_info, statuses)
    assert got == result
    if message:
        assert status is not None and status.code == Code.UNSCHEDULABLE
        assert status.message() == "preemption: " + message
        assert not s.plugin.is_pod_running_preemption("uid-m1")
    else:
        assert status == Status(Code.SUCCESS)
        assert s.plugin.is_pod_running_preemption("uid-m1")
        assert s.plugin.is_pod_running_preemption("uid-m2")
    await s.plugin.wait_idle()
    deleted = {path.rsplit("/", 1)[1] for method, path, *_ in s.handle.client.requests
               if method == "DELETE"}
    assert deleted == evicted


def test_an_extender_failure_preempts_nothing() -> None:
    s = _scenario()
    statuses = s.filter_statuses()
    assert s.plugin.preemption_victims(s.state, s.pod_info, statuses) is not None
    failure = Status(Code.ERROR, "extender x: preempt: boom")
    s.plugin.narrow_preemption(s.state, failure)
    result, status = s.plugin.post_filter(s.state, s.pod_info, statuses)
    assert result is None and status is not None and status.code == Code.ERROR
    assert status.message() == "preemption: extender x: preempt: boom"
    assert not s.plugin.tasks
