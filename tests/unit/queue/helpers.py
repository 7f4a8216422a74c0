"""A scheduling queue wired with PrioritySort-like ordering, a scheduling-gates PreEnqueue and a
small table of registered events, driven by a fake clock."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from prometheus_client import CollectorRegistry

from scheduler.framework.events import (
    ActionType,
    ClusterEvent,
    EventResource,
    QueueingHint,
)
from scheduler.framework.status import Code, Status
from scheduler.framework.types import QueuedPodInfo
from scheduler.metrics import SchedulerMetrics
from scheduler.objects.pod import PodInfo, scheduler_name
from scheduler.queue import HintEntry, SchedulingQueue

PROFILE = "default-scheduler"
GATES = "SchedulingGates"
FIT = "NodeResourcesFit"
AFFINITY = "NodeAffinity"
INTERPOD = "InterPodAffinity"
GANG = "Coscheduling"

NODE_ADD = ClusterEvent(EventResource.NODE, ActionType.ADD, "NodeAdd")
NODE_LABEL = ClusterEvent(EventResource.NODE, ActionType.UPDATE_NODE_LABEL, "NodeUpdate")
NODE_TAINT = ClusterEvent(EventResource.NODE, ActionType.UPDATE_NODE_TAINT, "NodeUpdate")
POD_DELETE = ClusterEvent(EventResource.POD, ActionType.DELETE, "AssignedPodDelete")
PVC_ADD = ClusterEvent(EventResource.PERSISTENT_VOLUME_CLAIM, ActionType.ADD, "PvcAdd")
GROUP_ADD = ClusterEvent(EventResource.POD_GROUP, ActionType.ADD, "PodGroupAdd")


class Clock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def priority_less(a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
    if a.pod_info.priority != b.pod_info.priority:
        return a.pod_info.priority > b.pod_info.priority
    return a.timestamp < b.timestamp


def label_hint(pod: dict[str, Any], old: Any, new: Any) -> QueueingHint:
    """NodeAffinity-like: Queue only when the node now has label ready=true."""
    labels = (new or {}).get("metadata", {}).get("labels") or {}
    return QueueingHint.QUEUE if labels.get("ready") == "true" else QueueingHint.SKIP


def raising_hint(pod: dict[str, Any], old: Any, new: Any) -> QueueingHint:
    raise RuntimeError("hint bug")


def peer_hint(pod: dict[str, Any], old: Any, new: Any) -> QueueingHint:
    """InterPodAffinity-like: Queue when the added pod has app=peer."""
    labels = (new or {}).get("metadata", {}).get("labels") or {}
    return QueueingHint.QUEUE if labels.get("app") == "peer" else QueueingHint.SKIP


DEFAULT_HINTS: list[HintEntry] = [
    (NODE_ADD, FIT, None),
    (POD_DELETE, FIT, None),
    (ClusterEvent(EventResource.UNSCHEDULED_POD, ActionType.UPDATE_POD_SCALE_DOWN), FIT, None),
    (NODE_ADD, AFFINITY, None),
    (NODE_LABEL, AFFINITY, label_hint),
    (NODE_TAINT, "Raising", raising_hint),
    (ClusterEvent(EventResource.POD, ActionType.ADD), INTERPOD, peer_hint),
    (
        ClusterEvent(
            EventResource.UNSCHEDULED_POD, ActionType.UPDATE_POD_SCHEDULING_GATES_ELIMINATED
        ),
        GATES,
        None,
    ),
    (GROUP_ADD, GANG, None),
]


class PreEnqueue:
    """SchedulingGates, plus a gang gate toggled by the test (``groups_ready``)."""

    def __init__(self) -> None:
        self.calls = 0
        self.groups_ready = False

    def __call__(self, info: PodInfo) -> Status | None:
        self.calls += 1
        if (info.pod.get("spec") or {}).get("schedulingGates"):
            return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "gated", plugin=GATES)
        if info.labels.get("gang") and not self.groups_ready:
            return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "no PodGroup", plugin=GANG)
        return None


def make_queue(
    *,
    clock: Clock | None = None,
    hints: Sequence[HintEntry] | None = None,
    pre_enqueue: PreEnqueue | None = None,
    metrics: SchedulerMetrics | None = None,
    **kw: Any,
) -> SchedulingQueue:
    return SchedulingQueue(
        less=priority_less,
        pre_enqueue=pre_enqueue or PreEnqueue(),
        hints={PROFILE: list(DEFAULT_HINTS if hints is None else hints)},
        profile_of=scheduler_name,
        clock=clock or Clock(),
        metrics=metrics,
        **kw,
    )


def new_metrics() -> SchedulerMetrics:
    return SchedulerMetrics(CollectorRegistry())


def sample(metrics: SchedulerMetrics, name: str, **labels: str) -> float:
    value = metrics.registry.get_sample_value(name, labels)
    return 0.0 if value is None else value


def names(pods: list[dict[str, Any]]) -> list[str]:
    return [p["metadata"]["name"] for p in pods]


def fail(
    queue: SchedulingQueue,
    qpi: QueuedPodInfo,
    *plugins: str,
    pending: Sequence[str] = (),
    cycle: int | None = None,
) -> None:
    """What schedule_one does when a pod does not fit."""
    qpi.unschedulable_plugins = set(plugins)
    qpi.pending_plugins = set(pending)
    queue.add_unschedulable_if_not_present(
        qpi, queue.scheduling_cycle() if cycle is None else cycle
    )


def pop(queue: SchedulingQueue) -> QueuedPodInfo:
    qpi = queue.pop_nowait()
    assert qpi is not None, "activeQ is empty"
    return qpi
