"""NodePorts: a pod asking for a host port cannot land where that port is already taken.

PreFilter collects the pod's wanted host ports (containers plus restartable init containers)
and Skips pods that want none, so the common pod costs nothing per node.  Filter checks them
against ``NodeInfo.used_ports``, where hostIP 0.0.0.0 collides with every address.  The
rejection is Unschedulable (not Unresolvable): preempting the pod holding the port frees it.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from typing import Any

from scheduler.framework.cycle_state import CycleState, read_state
from scheduler.framework.events import (
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    EventResource,
    KeyedHint,
    QueueingHint,
)
from scheduler.framework.interfaces import (
    EnqueueExtensions,
    FilterPlugin,
    Handle,
    PreFilterPlugin,
)
from scheduler.framework.node_info import HostPortInfo, NodeInfo
from scheduler.framework.status import SKIP, Code, Status
from scheduler.framework.types import PreFilterResult
from scheduler.objects.pod import PodInfo, pod_host_ports
from scheduler.plugins import names
from scheduler.plugins.helper import validate_no_args

NAME = names.NODE_PORTS

PRE_FILTER_STATE_KEY = "PreFilter" + NAME

ERR_REASON = "node(s) didn't have free ports for the requested pod ports"

HostPort = tuple[str, str, int]  # (hostIP, protocol, hostPort)


class _PreFilterState:
    """The pod's wanted host ports; not affected by other pods, so clones share it."""

    __slots__ = ("ports",)

    def __init__(self, ports: tuple[HostPort, ...]) -> None:
        self.ports = ports

    def clone(self) -> _PreFilterState:
        return self


def fits_ports(want: Iterable[HostPort], in_use: HostPortInfo) -> bool:
    """True when none of ``want`` conflicts with ``in_use``."""
    for ip, protocol, port in want:
        if in_use.check_conflict(ip, protocol, port):
            return False
    return True


def fits(pod_info: PodInfo, node_info: NodeInfo) -> bool:
    """Whether the pod's host ports are free on the node (for callers outside a cycle)."""
    return fits_ports(pod_info.host_ports, node_info.used_ports)


def _as_pod(obj: Any) -> dict[str, Any]:
    if not isinstance(obj, dict):
        raise TypeError(f"{NAME}: expected a Pod object, got {type(obj).__name__}")
    return obj


def _port_keys(ports: Iterable[tuple[str, str, int]]) -> list[Hashable]:
    """(protocol, port) of each host port: two ports can only conflict when these are equal
    (HostPortInfo.check_conflict; the IPs then decide)."""
    return [(protocol or "TCP", port) for _ip, protocol, port in ports if port > 0]


def _deleted_pod_keys(old: Any, new: Any) -> list[Hashable] | None:
    """The ports a deleted pod frees: only pods wanting one of them can be helped (the hint
    answers Skip for every other pod); none when it held no node (nor a nomination)."""
    del new
    if not isinstance(old, dict):
        return None  # not a pod: the hint decides (it raises, and the pod is queued)
    deleted = old
    spec = deleted.get("spec") or {}
    status = deleted.get("status") or {}
    if not spec.get("nodeName") and not status.get("nominatedNodeName"):
        return []
    return _port_keys(pod_host_ports(deleted))


def _wanted_port_keys(pod: dict[str, Any]) -> list[Hashable]:
    return _port_keys(pod_host_ports(pod))


class NodePorts(PreFilterPlugin, FilterPlugin, EnqueueExtensions):
    NAME = NAME

    def __init__(self, args: Mapping[str, Any], handle: Handle) -> None:
        validate_no_args(NAME, args)
        self._handle = handle

    # --- enqueue ------------------------------------------------------------------------------

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            # Container ports are immutable, so only an assigned pod going away frees a port.
            # Keyed by (protocol, port): a deleted pod asks only the waiting pods that want
            # one of its ports (every pod NodePorts rejected, before).
            ClusterEventWithHint(
                ClusterEvent(EventResource.POD, ActionType.DELETE, "AssignedPod/Delete"),
                KeyedHint(self.is_schedulable_after_pod_deleted,
                          event_keys=_deleted_pod_keys, pod_keys=_wanted_port_keys),
            ),
            # A new node has every port free; no hint needed (always Queue).
            ClusterEventWithHint(ClusterEvent(EventResource.NODE, ActionType.ADD, "Node/Add")),
        ]

    def is_schedulable_after_pod_deleted(
        self, pod: dict[str, Any], old: Any, new: Any
    ) -> QueueingHint:
        """Queue only if the deleted pod held (or was nominated for) a port this pod wants."""
        deleted = _as_pod(old)
        spec = deleted.get("spec") or {}
        status = deleted.get("status") or {}
        if not spec.get("nodeName") and not status.get("nominatedNodeName"):
            return QueueingHint.SKIP
        released = pod_host_ports(deleted)
        if not released:
            return QueueingHint.SKIP
        freed = HostPortInfo()
        for ip, protocol, port in released:
            freed.add(ip, protocol, port)
        if fits_ports(pod_host_ports(pod), freed):
            return QueueingHint.SKIP
        return QueueingHint.QUEUE

    # --- filter -------------------------------------------------------------------------------

    def pre_filter(
        self, state: CycleState, pod_info: PodInfo, nodes: list[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status | None]:
        if not pod_info.host_ports:
            return None, SKIP
        state.write(PRE_FILTER_STATE_KEY, _PreFilterState(tuple(pod_info.host_ports)))
        return None, None

    def sign(self, pod_info: PodInfo) -> Hashable:
        """The fields Filter reads of the pod (opportunistic batching)."""
        return tuple(pod_info.host_ports)

    def filter(self, state: CycleState, pod_info: PodInfo, node_info: NodeInfo) -> Status | None:
        s = read_state(state, PRE_FILTER_STATE_KEY, _PreFilterState)
        if isinstance(s, Status):
            return s
        if not fits_ports(s.ports, node_info.used_ports):
            return Status(Code.UNSCHEDULABLE, ERR_REASON)
        return None
