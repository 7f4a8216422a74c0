"""NodeUnschedulable: cordoned nodes (``spec.unschedulable``) take no new pods unless the pod
tolerates the ``node.kubernetes.io/unschedulable:NoSchedule`` taint."""

from __future__ import annotations

from collections.abc import Hashable

from typing import Any

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.events import (
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    EventResource,
    QueueingHint,
)
from scheduler.framework.interfaces import EnqueueExtensions, FilterPlugin, Handle, PluginArgs
from scheduler.framework.node_info import NodeInfo
from scheduler.framework.status import Code, Status
from scheduler.objects.node import node_is_unschedulable
from scheduler.objects.pod import PodInfo, pod_uid
from scheduler.objects.taints import NO_SCHEDULE, Taint, parse_tolerations, tolerates_all
from scheduler.plugins import names
from scheduler.plugins.helper import validate_no_args

NAME = names.NODE_UNSCHEDULABLE

ERR_REASON_UNKNOWN_CONDITION = "node(s) had unknown conditions"
ERR_REASON_UNSCHEDULABLE = "node(s) were unschedulable"

TAINT_NODE_UNSCHEDULABLE = "node.kubernetes.io/unschedulable"
UNSCHEDULABLE_TAINT = Taint(TAINT_NODE_UNSCHEDULABLE, "", NO_SCHEDULE)


class NodeUnschedulable(FilterPlugin, EnqueueExtensions):
    NAME = NAME

    def __init__(self, args: PluginArgs | None = None, handle: Handle | None = None) -> None:
        validate_no_args(NAME, args)
        del handle

    def sign(self, pod_info: PodInfo) -> Hashable:
        """The fields Filter reads of the pod (opportunistic batching)."""
        return tuple(pod_info.tolerations)

    def filter(self, state: CycleState, pod_info: PodInfo, node_info: NodeInfo) -> Status | None:
        return self.filter_nodes(state, pod_info, [node_info])[0]

    def filter_nodes(
        self, state: CycleState, pod_info: PodInfo, nodes: list[NodeInfo]
    ) -> list[Status | None]:
        tolerated: bool | None = None  # parsed only if some node is cordoned
        out: list[Status | None] = []
        for node_info in nodes:
            if not node_info.unschedulable:
                out.append(
                    None if node_info.node is not None
                    else Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON_UNKNOWN_CONDITION)
                )
                continue
            if tolerated is None:
                tolerated = tolerates_all(UNSCHEDULABLE_TAINT, pod_info.tolerations)
            out.append(
                None if tolerated
                else Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON_UNSCHEDULABLE)
            )
        return out

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            ClusterEventWithHint(
                ClusterEvent(EventResource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_TAINT),
                self.is_schedulable_after_node_change,
            ),
            ClusterEventWithHint(
                ClusterEvent(EventResource.UNSCHEDULED_POD, ActionType.UPDATE_POD_TOLERATION),
                self.is_schedulable_after_pod_toleration_change,
            ),
        ]

    @staticmethod
    def is_schedulable_after_node_change(pod: dict[str, Any], old: Any, new: Any) -> QueueingHint:
        if not isinstance(new, dict):
            return QueueingHint.QUEUE
        was_schedulable = isinstance(old, dict) and not node_is_unschedulable(old)
        if not was_schedulable and not node_is_unschedulable(new):
            return QueueingHint.QUEUE
        return QueueingHint.SKIP

    @staticmethod
    def is_schedulable_after_pod_toleration_change(
        pod: dict[str, Any], old: Any, new: Any
    ) -> QueueingHint:
        if isinstance(new, dict) and pod_uid(new) == pod_uid(pod):
            if tolerates_all(UNSCHEDULABLE_TAINT, parse_tolerations(new)):
                return QueueingHint.QUEUE
        return QueueingHint.SKIP
