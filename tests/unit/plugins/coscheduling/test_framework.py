"""Coscheduling inside the real Framework: profile wiring, Permit Wait with real WaitingPods
and their timers, allowing a complete gang, timeouts, and Unreserve releasing the gang."""

from __future__ import annotations

import asyncio
from typing import Any

from scheduler.config.types import PluginRef, Plugins, PluginSet, Profile
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.status import Code
from scheduler.objects.pod import PodInfo
from scheduler.plugins.coscheduling.plugin import Coscheduling
from tests.builders import make_node
from tests.fakes import DictListers, FakeNominator, SnapshotLister, in_tree_framework, node_infos

from .helpers import member, pod_group


class _Env:
    def __init__(self, *, pods: list[dict[str, Any]], groups: list[dict[str, Any]],
                 args: dict[str, Any] | None = None) -> None:
        self.snapshot = SnapshotLister(node_infos([make_node("n1"), make_node("n2")]))
        self.listers = DictListers({"podgroups": groups, "pods": pods})
        self.activated: list[dict[str, Any]] = []
        refs = [PluginRef("Coscheduling"), PluginRef("DefaultBinder")]
        profile = Profile(
            scheduler_name="gang",
            plugins=Plugins(multi_point=PluginSet(enabled=refs, disabled=[PluginRef("*")])),
            plugin_config={"Coscheduling": dict(args or {})},
        )
        self.fw = in_tree_framework(profile, snapshot_provider=lambda: self.snapshot,
                                    listers=self.listers, nominator=FakeNominator(),
                                    activate=self.activated.extend)

    def permit(self, pod: dict[str, Any]) -> Any:
        return self.fw.run_permit_plugins(CycleState(), PodInfo.from_pod(pod), "n1")


def test_profile_enables_coscheduling_at_every_point() -> None:
    env = _Env(pods=[], groups=[])
    plugins = env.fw.list_plugins()
    for point in ("queueSort", "preFilter", "postFilter", "reserve", "permit"):
        assert "Coscheduling" in plugins[point], point
    assert isinstance(env.fw.get_plugin("Coscheduling"), Coscheduling)
    labels = {event.label for event, plugin, _ in env.fw.events_to_register()
              if plugin == "Coscheduling"}
    assert {"PodGroupAdd", "PodGroupUpdate"} <= labels


def test_bad_args_fail_the_profile() -> None:
    try:
        _Env(pods=[], groups=[], args={"podGroupRejectPercentage": 150})
    except ValueError as exc:
        assert "podGroupRejectPercentage" in str(exc)
    else:
        raise AssertionError("invalid args were accepted")


async def test_gang_waits_then_is_allowed_together() -> None:
    pods = [member(f"p{i}") for i in range(3)]
    env = _Env(pods=pods, groups=[pod_group("g", 3)])
    for pod in pods[:2]:
        status = env.permit(pod)
        assert status is not None and status.code == Code.WAIT
    assert len(env.fw.waiting_pods) == 2
    # The first member activated its pending siblings.
    assert {p["metadata"]["name"] for p in env.activated} == {"p1", "p2"}
    assert env.permit(pods[2]) is None
    outcomes = await asyncio.wait_for(
        asyncio.gather(*(env.fw.wait_on_permit(PodInfo.from_pod(p)) for p in pods[:2])), 1)
    assert outcomes == [None, None]


async def test_gang_times_out_at_permit() -> None:
    pods = [member(f"p{i}") for i in range(2)]
    env = _Env(pods=pods, groups=[pod_group("g", 2)], args={"permitWaitingTimeSeconds": 0})
    status = env.permit(pods[0])
    assert status is not None and status.code == Code.WAIT
    outcome = await asyncio.wait_for(env.fw.wait_on_permit(PodInfo.from_pod(pods[0])), 1)
    assert outcome is not None and outcome.code == Code.UNSCHEDULABLE
    assert outcome.message() == "rejected due to timeout after waiting 0s at plugin Coscheduling"
    assert len(env.fw.waiting_pods) == 0


async def test_unreserve_releases_the_whole_gang() -> None:
    pods = [member(f"p{i}") for i in range(4)]
    env = _Env(pods=pods, groups=[pod_group("g", 4)])
    for pod in pods[:3]:
        assert env.permit(pod) is not None
    # One waiting member fails (timeout, deletion ...): its Unreserve rejects the others.
    env.fw.run_reserve_plugins_unreserve(CycleState(), PodInfo.from_pod(pods[0]), "n1")
    outcomes = await asyncio.wait_for(
        asyncio.gather(*(env.fw.wait_on_permit(PodInfo.from_pod(p)) for p in pods[1:3])), 1)
    for outcome in outcomes:
        assert outcome is not None and outcome.code == Code.UNSCHEDULABLE
        assert outcome.plugin == "Coscheduling"
        assert "rejected in Unreserve: member p0 of PodGroup default/g" in outcome.message()


def test_pre_filter_through_the_framework_reports_the_shortfall() -> None:
    pods = [member("web-0", "web"), member("web-1", "web")]
    env = _Env(pods=pods, groups=[pod_group("web", 3)])
    _, status, rejectors = env.fw.run_pre_filter_plugins(
        CycleState(), PodInfo.from_pod(pods[1]), env.snapshot.list())
    assert status is not None and status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert status.plugin == "Coscheduling"
    assert rejectors == {"Coscheduling"}
    assert status.message() == ("pre-filter pod web-1 cannot find enough sibling pods, "
                                "current pods number: 2, minMember of group: 3")
