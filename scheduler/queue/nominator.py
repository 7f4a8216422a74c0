"""Pods nominated to nodes: preemptors waiting for their victims to leave.

When preemption evicts pods on node N for pod P, P is not bound yet: it goes back to the queue
with ``status.nominatedNodeName = N``.  Until P is scheduled, every other pod's Filter on N must
account for P as if it were there (``RunFilterPluginsWithNominatedPods``), or a lower-priority
pod would take the room just freed.  The nominator keeps node -> nominated pods for that.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

from scheduler.objects.pod import PodInfo

__all__ = ["Nominator", "nominated_node_name"]


def nominated_node_name(pod: dict[str, Any]) -> str:
    status = pod.get("status")
    return str((status or {}).get("nominatedNodeName") or "") if isinstance(status, dict) else ""


def _uid(pod: dict[str, Any]) -> str:
    meta = pod.get("metadata") or {}
    # Fall back to namespace/name for uid-less pods (tests); the API always sets a uid.
    return str(meta.get("uid") or f"{meta.get('namespace') or ''}/{meta.get('name') or ''}")


class Nominator:
    """Implements the framework's ``PodNominator`` (``nominated_pods_for_node``)."""

    def __init__(
        self, *, pod_lookup: Callable[[dict[str, Any]], dict[str, Any] | None] | None = None
    ) -> None:
        # Optional informer lookup: a pod that is gone or already bound is not nominated.
        self._pod_lookup = pod_lookup
        # node -> {uid: PodInfo}, in nomination order
        self._by_node: dict[str, dict[str, PodInfo]] = {}
        self._node_of: dict[str, str] = {}

    def add_nominated_pod(self, pod_info: PodInfo, node_name: str | None = None) -> None:
        """Nominate the pod to ``node_name`` (preemption), or to its status' nominatedNodeName
        when ``node_name`` is None.  An empty node name clears the nomination."""
        pod = pod_info.pod
        self.delete_nominated_pod_if_exists(pod)
        node = nominated_node_name(pod) if node_name is None else node_name
        if not node:
            return
        if self._pod_lookup is not None:
            current = self._pod_lookup(pod)
            if current is None or (current.get("spec") or {}).get("nodeName"):
                return
        uid = _uid(pod)
        self._node_of[uid] = node
        self._by_node.setdefault(node, {})[uid] = pod_info

    def delete_nominated_pod_if_exists(self, pod: dict[str, Any]) -> None:
        uid = _uid(pod)
        node = self._node_of.pop(uid, None)
        if node is None:
            return
        pods = self._by_node.get(node)
        if pods is not None:
            pods.pop(uid, None)
            if not pods:
                del self._by_node[node]

    def update_nominated_pod(self, old: dict[str, Any], new_info: PodInfo) -> None:
        """Refresh the pod's PodInfo, keeping a nomination made in memory by preemption when
        the update carries none (the status write may not have arrived yet)."""
        keep: str | None = None
        if not nominated_node_name(old) and not nominated_node_name(new_info.pod):
            keep = self._node_of.get(_uid(old))
        self.delete_nominated_pod_if_exists(old)
        self.add_nominated_pod(new_info, keep)

    def has_nominated_pods(self) -> bool:
        """Cheap check for the scheduling cycle's fast path (no nominated pods → plain Filter)."""
        return bool(self._node_of)

    def nominated_node_names(self) -> Collection[str]:
        """The nodes some pod is nominated to (lets the cycle batch-filter all others)."""
        return self._by_node.keys()

    def nominated_pods_for_node(self, node_name: str) -> list[PodInfo]:
        pods = self._by_node.get(node_name)
        return list(pods.values()) if pods else []

    def nominated_node_for(self, pod: dict[str, Any]) -> str | None:
        return self._node_of.get(_uid(pod))

    def __len__(self) -> int:
        return len(self._node_of)
