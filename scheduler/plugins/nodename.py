"""NodeName: a pod that names a node in ``spec.nodeName`` fits only that node."""

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
from scheduler.objects.node import node_name
from scheduler.objects.pod import PodInfo
from scheduler.plugins import names
from scheduler.plugins.helper import validate_no_args

NAME = names.NODE_NAME

ERR_REASON = "node(s) didn't match the requested node name"
ERR_NODE_NOT_FOUND = "node not found"


def fits(pod: dict[str, Any], name: str) -> bool:
    wanted = (pod.get("spec") or {}).get("nodeName") or ""
    return not wanted or wanted == name


class NodeName(FilterPlugin, EnqueueExtensions):
    NAME = NAME

    def __init__(self, args: PluginArgs | None = None, handle: Handle | None = None) -> None:
        validate_no_args(NAME, args)
        del handle

    def sign(self, pod_info: PodInfo) -> Hashable:
        """The fields Filter reads of the pod (opportunistic batching)."""
        return str((pod_info.pod.get("spec") or {}).get("nodeName") or "")

    def filter(self, state: CycleState, pod_info: PodInfo, node_info: NodeInfo) -> Status | None:
        return self.filter_nodes(state, pod_info, [node_info])[0]

    def filter_nodes(
        self, state: CycleState, pod_info: PodInfo, nodes: list[NodeInfo]
    ) -> list[Status | None]:
        wanted = (pod_info.pod.get("spec") or {}).get("nodeName") or ""
        out: list[Status | None] = []
        for node_info in nodes:
            if node_info.node is None:
                out.append(Status(Code.ERROR, ERR_NODE_NOT_FOUND))
            elif wanted and wanted != node_info.name:
                out.append(Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON))
            else:
                out.append(None)
        return out

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            ClusterEventWithHint(
                ClusterEvent(EventResource.NODE, ActionType.ADD), self.is_schedulable_after_node_add
            )
        ]

    @staticmethod
    def is_schedulable_after_node_add(pod: dict[str, Any], old: Any, new: Any) -> QueueingHint:
        if not isinstance(new, dict) or not fits(pod, node_name(new)):
            return QueueingHint.SKIP
        return QueueingHint.QUEUE
