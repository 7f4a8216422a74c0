"""Coscheduling against a FakeHandle: args, QueueSort, PreFilter, Permit, PostFilter,
Unreserve, backoff and the events it registers."""

from __future__ import annotations

import functools
from typing import Any

import pytest

from scheduler.config.errors import ConfigError
from scheduler.framework import events as ev
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.events import QueueingHint
from scheduler.framework.status import Code, Status
from scheduler.objects.pod import PodInfo
from scheduler.plugins import names
from scheduler.plugins.coscheduling.core import POD_GROUP_LABEL, parse_pod_group
from scheduler.plugins.coscheduling.plugin import NAME, Coscheduling
from scheduler.plugins.registry import in_tree_registry
from tests.builders import make_node
from tests.fakes import FakeHandle

from .helpers import Cluster, member, pod_group, qpi


def _pre_filter(c: Cluster, pod: dict[str, Any]) -> tuple[Status | None, CycleState]:
    state = CycleState()
    result, status = c.plugin.pre_filter(state, PodInfo.from_pod(pod), [])
    assert result is None
    return status, state


# --- args and registration -----------------------------------------------------------------


def test_registered_under_its_upstream_name() -> None:
    assert NAME == names.COSCHEDULING == "Coscheduling"
    assert in_tree_registry().get(NAME) is Coscheduling


def test_args_defaults() -> None:
    plugin = Coscheduling({}, FakeHandle())
    assert plugin.permit_waiting_time_seconds == 60
    assert plugin.pod_group_backoff_seconds == 0
    assert plugin.pod_group_reject_percentage == 10


@pytest.mark.parametrize(
    ("args", "field"),
    [
        ({"permitWaitingTimeSeconds": -1}, "permitWaitingTimeSeconds"),
        ({"podGroupBackoffSeconds": -5}, "podGroupBackoffSeconds"),
        ({"podGroupRejectPercentage": 101}, "podGroupRejectPercentage"),
        ({"podGroupRejectPercentage": -1}, "podGroupRejectPercentage"),
        ({"permitWaitingTimeSeconds": "60"}, "permitWaitingTimeSeconds"),
        ({"permitWaitingTimeSeconds": True}, "permitWaitingTimeSeconds"),
        ({"bogus": 1}, "bogus"),
    ],
)
def test_args_rejected_naming_the_field(args: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigError) as exc:
        Coscheduling(args, FakeHandle())
    assert f"Coscheduling.args.{field}" in str(exc.value)


def test_args_of_older_releases_still_load() -> None:
    plugin = Coscheduling(
        {"kubeConfigPath": "/etc/kubernetes/scheduler.conf", "deniedPGExpirationTimeSeconds": 3,
         "permitWaitingTimeSeconds": 10, "podGroupRejectPercentage": 0},
        FakeHandle(),
    )
    assert plugin.permit_waiting_time_seconds == 10
    assert plugin.pod_group_reject_percentage == 0


# --- QueueSort -----------------------------------------------------------------------------


def test_less_priority_first() -> None:
    c = Cluster(groups=[pod_group("old", created="2020-01-01T00:00:00Z")])
    high = qpi(member("b", None, priority=10), ts=2000)
    low_old_group = qpi(member("a", "old", priority=0), ts=1)
    assert c.plugin.less(high, low_old_group)
    assert not c.plugin.less(low_old_group, high)


def test_less_orders_by_group_creation_then_keeps_siblings_together() -> None:
    c = Cluster(groups=[
        pod_group("alpha", created="2023-11-14T22:13:30Z"),  # clock 1010
        pod_group("beta", created="2023-11-14T22:13:25Z"),   # clock 1005
    ])
    queue = [
        qpi(member("a-1", "alpha"), ts=1001),
        qpi(member("b-1", "beta"), ts=1002),
        qpi(member("loner", None), ts=1007),   # entered the queue between the groups' times
        qpi(member("a-2", "alpha"), ts=1003),
        qpi(member("b-2", "beta"), ts=1004),
        qpi(member("early", None), ts=999),
        qpi(member("a-0", "alpha"), ts=1100),
    ]

    def cmp(x: Any, y: Any) -> int:
        return -1 if c.plugin.less(x, y) else (1 if c.plugin.less(y, x) else 0)

    order = [q.pod_info.name for q in sorted(queue, key=functools.cmp_to_key(cmp))]
    assert order == ["early", "b-1", "b-2", "loner", "a-0", "a-1", "a-2"]


def test_less_same_creation_time_groups_stay_contiguous_by_name() -> None:
    created = "2023-11-14T22:13:20Z"
    c = Cluster(groups=[pod_group("x", created=created), pod_group("y", created=created)])
    pods = [qpi(member(f"{g}-{i}", g), ts=i) for i in range(3) for g in ("y", "x")]

    def cmp(a: Any, b: Any) -> int:
        return -1 if c.plugin.less(a, b) else (1 if c.plugin.less(b, a) else 0)

    order = [q.pod_info.name for q in sorted(pods, key=functools.cmp_to_key(cmp))]
    assert order == ["x-0", "x-1", "x-2", "y-0", "y-1", "y-2"]


def test_less_missing_group_falls_back_to_initial_attempt() -> None:
    c = Cluster(groups=[])
    first = qpi(member("p1", "ghost"), ts=50, initial=5)
    second = qpi(member("p2", None), ts=10, initial=10)
    assert c.plugin.less(first, second)
    assert not c.plugin.less(second, first)


# --- PreFilter -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "groups", "pods", "pod", "code", "message"),
    [
        ("no label", [], [], member("p", None), None, ""),
        ("group missing", [], [member("p", "g")], member("p", "g"),
         Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "PodGroup default/g not found"),
        ("group in other namespace", [pod_group("g", 1, namespace="other")],
         [member("p", "g")], member("p", "g"),
         Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "PodGroup default/g not found"),
        ("not enough siblings", [pod_group("web", 3)],
         [member("web-0", "web"), member("web-1", "web")], member("web-1", "web"),
         Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
         "pre-filter pod web-1 cannot find enough sibling pods, current pods number: 2, "
         "minMember of group: 3"),
        ("enough siblings", [pod_group("g", 3)],
         [member("p0"), member("p1"), member("p2")], member("p0"), None, ""),
        ("finished siblings do not count", [pod_group("g", 3)],
         [member("p0"), member("p1"), member("p2", phase="Succeeded", node="n1")],
         member("p0"), Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
         "current pods number: 2, minMember of group: 3"),
        ("siblings of other namespaces do not count", [pod_group("g", 2)],
         [member("p0"), member("p1", namespace="other")], member("p0"),
         Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "current pods number: 1, minMember of group: 2"),
        ("invalid minMember", [pod_group("g", "three")], [member("p0")], member("p0"),
         Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "PodGroup default/g: spec.minMember"),
        ("minResources fit", [pod_group("g", 2, min_resources={"cpu": "6"})],
         [member("p0"), member("p1")], member("p0"), None, ""),
        ("minResources do not fit", [pod_group("g", 2, min_resources={"cpu": "10",
                                                                      "memory": "1Gi"})],
         [member("p0"), member("p1")], member("p0"), Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
         "PodGroup default/g does not fit the cluster's free resources: "
         "cpu (needs 10, free 8)"),
        ("minResources count other pods as used",
         [pod_group("g", 1, min_resources={"cpu": "5"})],
         [member("p0"), member("busy", None, node="n1", cpu="3500m")], member("p0"),
         Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "cpu (needs 5, free 4500m)"),
        ("minResources count the group's own pods as free",
         [pod_group("g", 2, min_resources={"cpu": "8"})],
         [member("p0"), member("p1", node="n1", cpu="4")], member("p0"), None, ""),
        ("no minResources: no capacity check", [pod_group("g", 1)],
         [member("p0"), member("busy", None, node="n1", cpu="4"),
          member("busy2", None, node="n2", cpu="4")], member("p0"), None, ""),
        ("room for minMember pods", [pod_group("g", 3, min_resources={"cpu": "1"})],
         [member("p0"), member("p1"), member("p2")], member("p0"),
         Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "pods (needs 3, free 2)"),
    ],
)
def test_pre_filter(name: str, groups: list[dict[str, Any]], pods: list[dict[str, Any]],
                    pod: dict[str, Any], code: Code | None, message: str) -> None:
    nodes = [make_node("n1", cpu="4"), make_node("n2", cpu="4")]
    if name == "room for minMember pods":
        nodes = [make_node("n1", cpu="4", pods=1), make_node("n2", cpu="4", pods=1)]
    c = Cluster(nodes=nodes, groups=groups, pods=pods)
    status, state = _pre_filter(c, pod)
    if code is None:
        assert status is None, status
        assert state.get("Coscheduling/preFilterRejected") is None
    else:
        assert status is not None and status.code == code
        assert message in status.message(), status.message()
        assert state.get("Coscheduling/preFilterRejected") is not None


def test_pre_filter_counts_assigned_siblings_from_the_snapshot() -> None:
    # The pod lister here only holds unscheduled pods; assigned members come from the snapshot.
    pods = [member("p0"), member("p1", node="n1"), member("p2", node="n2")]
    c = Cluster(groups=[pod_group("g", 3)], pods=pods, list_assigned=False)
    assert _pre_filter(c, member("p0"))[0] is None


def test_pre_filter_remembers_admission_until_group_changes() -> None:
    pods = [member("p0"), member("p1")]
    c = Cluster(groups=[pod_group("g", 2)], pods=pods)
    assert _pre_filter(c, pods[0])[0] is None
    assert c.plugin.manager.is_admitted("default/g")
    # A sibling vanished, but the admission is remembered: the next member is cheap.
    c.pods = pods[:1]
    c.refresh()
    assert _pre_filter(c, pods[0])[0] is None
    # The PodGroup changed (new resourceVersion): checked again.
    c.set_groups(pod_group("g", 2, rv="2"))
    status = _pre_filter(c, pods[0])[0]
    assert status is not None and "current pods number: 1" in status.message()


def test_pre_filter_admission_expires_with_the_permit_timeout() -> None:
    pods = [member("p0"), member("p1")]
    c = Cluster(groups=[pod_group("g", 2, timeout=30)], pods=pods)
    assert _pre_filter(c, pods[0])[0] is None
    c.pods = pods[:1]
    c.refresh()
    c.advance(31)
    assert _pre_filter(c, pods[0])[0] is not None


def test_pre_filter_denial_is_reused_only_while_the_cluster_is_unchanged(
        monkeypatch: pytest.MonkeyPatch) -> None:
    pods = [member("p0"), member("p1"), member("busy", None, node="n1", cpu="4")]
    c = Cluster(groups=[pod_group("g", 2, min_resources={"cpu": "6"})], pods=pods)
    calls: list[str] = []
    real = c.plugin.manager.resource_gaps

    def counting(info: Any) -> str:
        calls.append(info.name)
        return real(info)

    monkeypatch.setattr(c.plugin.manager, "resource_gaps", counting)
    first = _pre_filter(c, pods[0])[0]
    second = _pre_filter(c, pods[1])[0]
    assert first is not None and second is not None
    assert first.message() == second.message()
    assert calls == ["g"]  # the sibling was denied from memory
    # The busy pod goes away: a new snapshot generation, so the group is checked again.
    c.pods = pods[:2]
    c.refresh()
    assert _pre_filter(c, pods[0])[0] is None
    assert calls == ["g", "g"]


# --- Permit --------------------------------------------------------------------------------


def test_permit_without_group_allows() -> None:
    c = Cluster()
    status, timeout = c.plugin.permit(CycleState(), PodInfo.from_pod(member("p", None)), "n1")
    assert status is None and timeout == 0


def test_permit_group_missing_rejects() -> None:
    c = Cluster(groups=[])
    status, _ = c.plugin.permit(CycleState(), PodInfo.from_pod(member("p")), "n1")
    assert status is not None and status.code == Code.UNSCHEDULABLE
    assert status.message() == "PodGroup default/g not found"


@pytest.mark.parametrize(
    ("args", "group_timeout", "expected"),
    [({}, None, 60.0), ({"permitWaitingTimeSeconds": 5}, None, 5.0),
     ({"permitWaitingTimeSeconds": 5}, 12, 12.0)],
)
def test_permit_waits_with_the_group_or_default_timeout(
        args: dict[str, Any], group_timeout: int | None, expected: float) -> None:
    pods = [member("p0"), member("p1"), member("p2")]
    c = Cluster(groups=[pod_group("g", 3, timeout=group_timeout)], pods=pods, args=args)
    status, timeout = c.plugin.permit(CycleState(), PodInfo.from_pod(pods[0]), "n1")
    assert status is not None and status.code == Code.WAIT
    assert timeout == expected


def test_permit_wait_activates_pending_siblings_only() -> None:
    pods = [member("p0"), member("p1"), member("p2"), member("p3", node="n1"),
            member("other", "h"), member("p4", phase="Failed")]
    c = Cluster(groups=[pod_group("g", 5), pod_group("h", 1)], pods=pods)
    c.park(pods[1])
    status, _ = c.plugin.permit(CycleState(), PodInfo.from_pod(pods[0]), "n1")
    assert status is not None and status.is_wait()
    assert [p["metadata"]["name"] for p in c.handle.activated] == ["p2"]


@pytest.mark.parametrize(
    ("bound", "waiting", "min_member", "allowed"),
    [
        (0, 2, 3, True),    # two waiting + this one
        (1, 1, 3, True),    # one bound, one waiting, this one
        (0, 1, 3, False),
        (2, 0, 3, True),
        (0, 0, 1, True),
    ],
)
def test_permit_counts_bound_waiting_and_self(bound: int, waiting: int, min_member: int,
                                              allowed: bool) -> None:
    bound_pods = [member(f"b{i}", node="n1") for i in range(bound)]
    waiting_pods = [member(f"w{i}") for i in range(waiting)]
    me = member("me")
    stranger = member("s0", "other")
    c = Cluster(groups=[pod_group("g", min_member), pod_group("other", 5)],
                pods=[*bound_pods, *waiting_pods, me, stranger], waiting=[*waiting_pods, stranger])
    status, timeout = c.plugin.permit(CycleState(), PodInfo.from_pod(me), "n1")
    parked = c.handle.waiting
    if allowed:
        assert status is None and timeout == 0
        for p in waiting_pods:
            assert parked[p["metadata"]["uid"]].allowed_by == ["Coscheduling"]
    else:
        assert status is not None and status.is_wait()
        for p in waiting_pods:
            assert parked[p["metadata"]["uid"]].allowed_by == []
    # Another group's waiting pod is never touched.
    assert parked[stranger["metadata"]["uid"]].allowed_by == []
    assert parked[stranger["metadata"]["uid"]].rejected is None


# --- PostFilter ----------------------------------------------------------------------------


def test_post_filter_rejects_waiting_siblings() -> None:
    pods = [member("p0"), member("p1"), member("p2"), member("x", "other")]
    c = Cluster(groups=[pod_group("g", 3), pod_group("other", 2)], pods=pods,
                waiting=[pods[0], pods[1], pods[3]])
    c.plugin.manager.pre_filter(PodInfo.from_pod(pods[2]))
    assert c.plugin.manager.is_admitted("default/g")
    result, status = c.plugin.post_filter(CycleState(), PodInfo.from_pod(pods[2]), {})
    assert result is None
    assert status == Status(
        Code.UNSCHEDULABLE,
        "PodGroup default/g gets rejected due to Pod p2 is unschedulable even after PostFilter")
    parked = c.handle.waiting
    for p in pods[:2]:
        rejected = parked[p["metadata"]["uid"]].rejected
        assert rejected is not None and rejected[0] == "Coscheduling"
        # scheduler-plugins' Coscheduling.PostFilter wording for the waiting siblings.
        assert rejected[1] == "optimistic rejection in PostFilter"
    assert parked[pods[3]["metadata"]["uid"]].rejected is None
    assert not c.plugin.manager.is_admitted("default/g")


@pytest.mark.parametrize(
    ("min_member", "assigned", "percentage", "rejects"),
    [
        (3, 3, 10, False),    # the gang is complete already
        (20, 18, 10, False),  # 10% missing: keep waiting for the rest
        (20, 17, 10, True),   # 15% missing
        (20, 19, 0, True),    # percentage 0: always reject
        (4, 2, 50, False),
        (4, 1, 50, True),
    ],
)
def test_post_filter_reject_threshold(min_member: int, assigned: int, percentage: int,
                                      rejects: bool) -> None:
    waiting = [member(f"w{i}") for i in range(assigned)]
    failing = member("f")
    c = Cluster(groups=[pod_group("g", min_member)], pods=[*waiting, failing], waiting=waiting,
                args={"podGroupRejectPercentage": percentage})
    _, status = c.plugin.post_filter(CycleState(), PodInfo.from_pod(failing), {})
    assert status is not None and status.code == Code.UNSCHEDULABLE
    rejected = [wp.rejected is not None for wp in c.handle.waiting.values()]
    assert rejected == [rejects] * assigned
    assert bool(status.reasons) == rejects


def test_post_filter_after_own_pre_filter_rejection_adds_no_message() -> None:
    pods = [member("p0"), member("p1")]
    c = Cluster(groups=[pod_group("g", 3)], pods=pods, waiting=[pods[0]])
    status, state = _pre_filter(c, pods[1])
    assert status is not None
    _, post = c.plugin.post_filter(state, PodInfo.from_pod(pods[1]), {})
    assert post == Status(Code.UNSCHEDULABLE)
    # The gang cannot complete: the parked sibling is released at once.
    assert c.handle.waiting[pods[0]["metadata"]["uid"]].rejected is not None


def test_post_filter_without_group_is_quiet() -> None:
    c = Cluster()
    _, status = c.plugin.post_filter(CycleState(), PodInfo.from_pod(member("p", None)), {})
    assert status == Status(Code.UNSCHEDULABLE)


# --- backoff -------------------------------------------------------------------------------


def test_post_filter_backs_off_the_group_and_backoff_expires() -> None:
    pods = [member("p0"), member("p1"), member("p2")]
    c = Cluster(groups=[pod_group("g", 3)], pods=pods, args={"podGroupBackoffSeconds": 20})
    c.plugin.post_filter(CycleState(), PodInfo.from_pod(pods[0]), {})
    status = _pre_filter(c, pods[1])[0]
    assert status is not None and status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert status.message() == "PodGroup default/g failed recently, backing off for 20s more"
    # Members denied during the backoff must not renew it.
    c.advance(15)
    c.plugin.post_filter(CycleState(), PodInfo.from_pod(pods[1]), {})
    status = _pre_filter(c, pods[1])[0]
    assert status is not None and "backing off for 5s more" in status.message()
    c.advance(5)
    assert _pre_filter(c, pods[1])[0] is None


def test_no_backoff_when_disabled_or_when_pods_are_missing() -> None:
    pods = [member("p0"), member("p1"), member("p2")]
    c = Cluster(groups=[pod_group("g", 3)], pods=pods)  # podGroupBackoffSeconds 0
    c.plugin.post_filter(CycleState(), PodInfo.from_pod(pods[0]), {})
    assert _pre_filter(c, pods[0])[0] is None

    c = Cluster(groups=[pod_group("g", 4)], pods=pods, args={"podGroupBackoffSeconds": 20})
    c.plugin.post_filter(CycleState(), PodInfo.from_pod(pods[0]), {})
    assert c.plugin.manager.backoff_remaining("default/g") == 0


# --- Unreserve -----------------------------------------------------------------------------


def test_unreserve_rejects_waiting_siblings_and_backs_off() -> None:
    pods = [member("p0"), member("p1"), member("p2"), member("x", "other")]
    c = Cluster(groups=[pod_group("g", 4), pod_group("other", 2)], pods=pods,
                waiting=[pods[0], pods[1], pods[2], pods[3]],
                args={"podGroupBackoffSeconds": 10})
    c.plugin.unreserve(CycleState(), PodInfo.from_pod(pods[2]), "n1")
    parked = c.handle.waiting
    for p in pods[:2]:
        rejected = parked[p["metadata"]["uid"]].rejected
        assert rejected is not None
        assert rejected == ("Coscheduling",
                            "rejected in Unreserve: member p2 of PodGroup default/g was rejected")
    assert parked[pods[2]["metadata"]["uid"]].rejected is None  # itself: already failing
    assert parked[pods[3]["metadata"]["uid"]].rejected is None
    assert c.plugin.manager.backoff_remaining("default/g") == 10


def test_unreserve_without_group_does_nothing() -> None:
    other = member("x", "other")
    c = Cluster(groups=[pod_group("other", 2)], pods=[other], waiting=[other])
    c.plugin.unreserve(CycleState(), PodInfo.from_pod(member("p", None)), "n1")
    c.plugin.unreserve(CycleState(), PodInfo.from_pod(member("q", "ghost")), "n1")
    assert all(wp.rejected is None for wp in c.handle.waiting.values())


def test_reserve_is_a_no_op() -> None:
    c = Cluster(groups=[pod_group("g", 2)])
    assert c.plugin.reserve(CycleState(), PodInfo.from_pod(member("p")), "n1") is None


# --- events --------------------------------------------------------------------------------


def test_events_to_register() -> None:
    c = Cluster()
    registered = {e.event.label: e for e in c.plugin.events_to_register()}
    assert set(registered) >= {"PodGroupAdd", "PodGroupUpdate", "UnschedulablePodAdd",
                               "AssignedPodDelete", "NodeAdd", "NodeAllocatableChange"}
    node_update = ev.ClusterEvent(ev.EventResource.NODE, ev.ActionType.UPDATE_NODE_ALLOCATABLE)
    assert registered["NodeAllocatableChange"].event.matches(node_update)
    # A node's labels decide its topology domain (required/preferred-topology).
    label_update = ev.ClusterEvent(ev.EventResource.NODE, ev.ActionType.UPDATE_NODE_LABEL)
    assert registered["NodeLabelChange"].event.matches(label_update)
    taint_update = ev.ClusterEvent(ev.EventResource.NODE, ev.ActionType.UPDATE_NODE_TAINT)
    assert not any(e.event.matches(taint_update) for e in registered.values())


@pytest.mark.parametrize(
    ("label", "obj", "expected"),
    [
        ("PodGroupAdd", pod_group("g"), QueueingHint.QUEUE),
        ("PodGroupAdd", pod_group("h"), QueueingHint.SKIP),
        ("PodGroupUpdate", pod_group("g", namespace="other"), QueueingHint.SKIP),
        ("UnschedulablePodAdd", member("sibling"), QueueingHint.QUEUE),
        ("UnschedulablePodAdd", member("stranger", "h"), QueueingHint.SKIP),
        ("UnschedulablePodAdd", member("nogroup", None), QueueingHint.SKIP),
        ("UnschedulablePodAdd", member("elsewhere", namespace="other"), QueueingHint.SKIP),
    ],
)
def test_queueing_hints(label: str, obj: dict[str, Any], expected: QueueingHint) -> None:
    c = Cluster()
    hint = {e.event.label: e.hint for e in c.plugin.events_to_register()}[label]
    assert hint is not None
    assert hint(member("waiting"), None, obj) == expected


@pytest.mark.parametrize(
    ("waiting", "deleted", "expected"),
    [
        # The gang's own member released (its rollback, or the gang taken down): no help.
        (member("waiting"), member("sibling", node="n1"), QueueingHint.SKIP),
        # Another gang's or a plain pod's place freed: it may fit the gang now.
        (member("waiting"), member("other", "h", node="n1"), QueueingHint.QUEUE),
        (member("waiting"), member("plain", None, node="n1"), QueueingHint.QUEUE),
        (member("waiting"), member("sibling", namespace="other", node="n1"),
         QueueingHint.QUEUE),
        # A pod outside any gang waits on freed capacity as before.
        (member("alone", None), member("sibling", node="n1"), QueueingHint.QUEUE),
    ],
)
def test_assigned_pod_delete_hint_skips_the_gangs_own_members(
    waiting: dict[str, Any], deleted: dict[str, Any], expected: QueueingHint
) -> None:
    c = Cluster()
    hint = {e.event.label: e.hint for e in c.plugin.events_to_register()}["AssignedPodDelete"]
    assert hint is not None
    assert hint(waiting, deleted, None) == expected


def test_parse_pod_group_reads_the_crd_fields() -> None:
    info = parse_pod_group(pod_group("g", 4, min_resources={"cpu": "2", "memory": "2Gi"},
                                     timeout=30))
    assert (info.full_name, info.min_member, info.schedule_timeout_seconds) == ("default/g", 4, 30)
    assert info.min_resources == {"cpu": 2000, "memory": 2 << 30}
    assert info.created == 1_700_000_000.0
    assert POD_GROUP_LABEL == "scheduling.x-k8s.io/pod-group"


def test_parse_pod_group_bad_quantity_names_the_field() -> None:
    with pytest.raises(ValueError, match=r"PodGroup default/g: spec.minResources.cpu"):
        parse_pod_group(pod_group("g", 1, min_resources={"cpu": "lots"}))
