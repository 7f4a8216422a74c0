"""The per-cycle, read-only view of the cluster that plugins see.

A scheduling cycle must not observe the cache changing under it (an informer event arriving
while Filter runs on node 3000 of 5000 would make nodes disagree), so the cycle reads a
Snapshot: NodeInfo copies refreshed by ``Cache.update_snapshot`` at the start of each cycle.
The refresh is incremental: only NodeInfos whose generation moved since the last refresh are
copied, and the lists are rebuilt only when the set of nodes, or which nodes host pods with
(anti-)affinity, changed.  Snapshot implements the framework's ``NodeInfoLister``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from scheduler.framework.node_info import ImageStateSummary, NodeInfo

# Snapshot has a method named `list`, which shadows the builtin inside the class body.
_NodeInfos = list[NodeInfo]


class Snapshot:
    __slots__ = (
        "_have_pods_with_affinity",
        "_have_pods_with_required_anti_affinity",
        "generation",
        "image_generation",
        "image_states",
        "node_info_list",
        "node_info_map",
        "positions",
        "used_pvc_ref_counts",
    )

    def __init__(self) -> None:
        # Only nodes that exist (a deleted node still holding pods is not here).
        self.node_info_map: dict[str, NodeInfo] = {}
        # Zone-interleaved order (see NodeTree); the sampling in findNodesThatFit walks it.
        self.node_info_list: list[NodeInfo] = []
        # Node name -> index in node_info_list (keeps the affinity lists in list order).
        self.positions: dict[str, int] = {}
        self._have_pods_with_affinity: list[NodeInfo] = []
        self._have_pods_with_required_anti_affinity: list[NodeInfo] = []
        # namespace/claim -> number of pods (on snapshot nodes) using it; VolumeRestrictions.
        self.used_pvc_ref_counts: dict[str, int] = {}
        # The largest NodeInfo generation copied so far.
        self.generation = 0
        # One summary object per image, shared by every NodeInfo in this snapshot holding it,
        # so a change in how many nodes hold an image reaches all of them at once.
        self.image_states: dict[str, ImageStateSummary] = {}
        self.image_generation = 0

    @classmethod
    def from_objects(
        cls, nodes: Iterable[dict[str, Any]], pods: Iterable[dict[str, Any]] = ()
    ) -> Snapshot:
        """A snapshot of these nodes and the pods bound to them (tests, tools)."""
        from scheduler.cache.cache import Cache  # a snapshot is built by the cache
        from scheduler.objects.pod import PodInfo

        cache = Cache()
        for node in nodes:
            cache.add_node(node)
        for pod in pods:
            if (pod.get("spec") or {}).get("nodeName"):
                cache.add_pod(PodInfo.from_assigned_pod(pod)[0])
        snapshot = cls()
        cache.update_snapshot(snapshot)
        return snapshot

    # --- NodeInfoLister -------------------------------------------------------------------

    def list(self) -> _NodeInfos:
        return self.node_info_list

    def get(self, node_name: str) -> NodeInfo | None:
        return self.node_info_map.get(node_name)

    def have_pods_with_affinity(self) -> _NodeInfos:
        return self._have_pods_with_affinity

    def have_pods_with_required_anti_affinity(self) -> _NodeInfos:
        return self._have_pods_with_required_anti_affinity

    # --- extras ---------------------------------------------------------------------------

    def num_nodes(self) -> int:
        return len(self.node_info_list)

    def is_pvc_used_by_pods(self, key: str) -> bool:
        """Whether a pod on some node mounts PVC ``namespace/name`` (ReadWriteOncePod)."""
        return self.used_pvc_ref_counts.get(key, 0) > 0

    def __len__(self) -> int:
        return len(self.node_info_list)

    def __repr__(self) -> str:
        return f"Snapshot(nodes={len(self.node_info_list)}, generation={self.generation})"
