"""DefaultPreemption inside the real Framework of the default profile: the runtime's own
nominated-pod filtering, PreFilter extensions of every default plugin, and the FailedScheduling
message the scheduler composes from the PostFilter status."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from scheduler.config.defaults import default_profile
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.status import Code, Status
from scheduler.framework.types import Diagnosis, FitError, PostFilterResult
from scheduler.objects.pod import PodInfo
from scheduler.plugins.defaultpreemption.plugin import DefaultPreemption
from scheduler.plugins.registry import IN_TREE
from scheduler.queue.nominator import Nominator
from tests.fakes import (
    DictListers,
    FakeApiClient,
    FakeEventRecorder,
    FakeResponse,
    SnapshotLister,
    in_tree_framework,
    node_infos,
)
from tests.unit.plugins.defaultpreemption.harness import HIGH, LOW, MID, node, pod


class Cluster:
    def __init__(self, nodes: Sequence[dict[str, Any]], pods: Sequence[dict[str, Any]]) -> None:
        for path in IN_TREE.values():
            pytest.importorskip(path.partition(":")[0])
        self.snapshot = SnapshotLister(node_infos(nodes, pods))
        self.client = FakeApiClient()
        self.recorder = FakeEventRecorder()
        self.nominator = Nominator()
        self.activated: list[dict[str, Any]] = []
        self.fwk = in_tree_framework(
            default_profile("py-scheduler"),
            snapshot_provider=lambda: self.snapshot,
            listers=DictListers({}),
            nominator=self.nominator,
            client=self.client,
            event_recorder=self.recorder,
            activate=self.activated.extend,
        )
        plugin = self.fwk.plugins["DefaultPreemption"]
        assert isinstance(plugin, DefaultPreemption)
        self.plugin = plugin

    def schedule(self, preemptor: dict[str, Any]) -> tuple[Any, Status | None, str]:
        """Filter every node, then PostFilter, as the scheduling cycle does; also the
        FailedScheduling message the cycle would report."""
        pod_info = PodInfo.from_pod(preemptor)
        state = CycleState()
        infos = self.snapshot.list()
        _, status, _ = self.fwk.run_pre_filter_plugins(state, pod_info, infos)
        assert status is None or status.is_success()
        diagnosis = Diagnosis()
        for info in infos:
            s = self.fwk.run_filter_plugins_with_nominated_pods(state, pod_info, info)
            if s is not None and not s.is_success():
                diagnosis.node_to_status[info.name] = s
        result, post = self.fwk.run_post_filter_plugins(state, pod_info, diagnosis.node_to_status)
        if post is not None and not post.is_success():
            diagnosis.post_filter_msg = post.message()
        message = str(FitError(pod_key=pod_info.key, num_all_nodes=len(infos),
                               diagnosis=diagnosis))
        return result, post, message


async def test_preempts_through_the_default_profile() -> None:
    cluster = Cluster(
        [node("n1"), node("n2")],
        [pod("a", priority=MID, cpu="800m", node_name="n1"),
         pod("b", priority=LOW, cpu="800m", node_name="n2")],
    )
    result, status, _ = cluster.schedule(pod("p", priority=HIGH, cpu="500m"))
    assert result == PostFilterResult("n2")
    assert status is not None and status.code == Code.SUCCESS
    await cluster.plugin.wait_idle()
    assert [(m, p) for m, p, _ in cluster.client.requests] == [
        ("PATCH", "/api/v1/namespaces/default/pods/b/status"),
        ("DELETE", "/api/v1/namespaces/default/pods/b"),
    ]
    assert cluster.recorder.events[0]["message"] == "Preempted by pod uid-p on node n2"
    # the victim's deletion moves the preemptor, as any pod: nothing is activated
    assert cluster.activated == []


async def test_a_failed_deletion_activates_the_preemptor_through_the_framework() -> None:
    """The Framework's activate hook is the one the plugin calls when an API call fails
    (the preemptor may have no event left to wait for)."""
    cluster = Cluster([node("n1")], [pod("b", priority=LOW, cpu="800m", node_name="n1")])
    cluster.client.responses = {("DELETE", "/api/v1/namespaces/default/pods/b"): [
        FakeResponse(500, {"message": "etcd down"})]}
    result, _, _ = cluster.schedule(pod("p", priority=HIGH, cpu="500m"))
    assert result == PostFilterResult("n1")
    await cluster.plugin.wait_idle()
    assert [p["metadata"]["name"] for p in cluster.activated] == ["p"]
    assert cluster.recorder.events == []


async def test_room_made_for_a_nominated_pod_is_kept() -> None:
    cluster = Cluster(
        [node("n1"), node("n2")],
        # a started last, so n1 is the preferred node for both preemptors...
        [pod("a", priority=LOW, cpu="800m", node_name="n1", start="2024-01-01T00:05:00Z"),
         pod("b", priority=LOW, cpu="800m", node_name="n2", start="2024-01-01T00:00:00Z")],
    )
    first = pod("p", priority=HIGH, cpu="500m")
    result, _, _ = cluster.schedule(first)
    await cluster.plugin.wait_idle()
    chosen = result.nominated_node_name
    assert chosen == "n1"
    # The scheduler nominates the preemptor; the victim is still in the snapshot.
    cluster.nominator.add_nominated_pod(PodInfo.from_pod(first), chosen)
    cluster.plugin._marked_victims.clear()  # as if the mark had expired

    second = pod("q", priority=MID, cpu="600m")  # fits beside p only if p is ignored
    result, status, _ = cluster.schedule(second)
    await cluster.plugin.wait_idle()
    assert status is not None and status.code == Code.SUCCESS
    # ...but n1's room is held for p, which outranks q.
    assert result.nominated_node_name == "n2"


def test_failed_scheduling_message_matches_upstream() -> None:
    cluster = Cluster(
        [node("n1"), node("n2")],
        [pod("a", priority=HIGH, cpu="800m", node_name="n1"),
         pod("b", priority=HIGH, cpu="800m", node_name="n2")],
    )
    result, status, message = cluster.schedule(pod("p", priority=HIGH, cpu="500m"))
    # The plugin answers PostFilterResult("") (clear a stale nomination); the runtime keeps
    # only non-empty nominations today.
    assert result is None or result == PostFilterResult("")
    assert status is not None and status.code == Code.UNSCHEDULABLE
    assert status.plugin == "DefaultPreemption"
    # The PostFilter message is appended as is (kube-scheduler >= 1.30): one final period.
    assert message == (
        "0/2 nodes are available: 2 Insufficient cpu. preemption: 0/2 nodes are available: "
        "2 No preemption victims found for incoming pod.")


def test_preemption_policy_never_through_the_framework() -> None:
    cluster = Cluster([node("n1")], [pod("a", priority=LOW, cpu="800m", node_name="n1")])
    result, status, message = cluster.schedule(
        pod("p", priority=HIGH, cpu="500m", policy="Never"))
    assert result is None and status is not None and status.code == Code.UNSCHEDULABLE
    assert message == ("0/1 nodes are available: 1 Insufficient cpu. "
                       "preemption: not eligible due to preemptionPolicy=Never.")
    assert cluster.client.requests == []
