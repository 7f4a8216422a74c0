"""PrioritySort: the default QueueSort plugin (higher ``spec.priority`` first, then the pod that
entered the queue earlier), so activeQ pops pods in the order kube-scheduler would."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from scheduler.framework.interfaces import Handle, PluginArgs, QueueSortPlugin
from scheduler.framework.types import QueuedPodInfo
from scheduler.plugins import names
from scheduler.plugins.helper import validate_no_args

NAME = names.PRIORITY_SORT


class PrioritySort(QueueSortPlugin):
    NAME = NAME

    def __init__(self, args: PluginArgs | None = None, handle: Handle | None = None) -> None:
        validate_no_args(NAME, args)
        del handle

    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        p1 = a.pod_info.priority
        p2 = b.pod_info.priority
        return p1 > p2 or (p1 == p2 and a.timestamp < b.timestamp)

    def sort_key(self) -> Callable[[QueuedPodInfo], tuple[Any, ...]]:
        return _key


def _key(qpi: QueuedPodInfo) -> tuple[Any, ...]:
    return (-qpi.pod_info.priority, qpi.timestamp)
