"""The per-cycle, read-only view of the cluster that plugins see.

A scheduling cycle must not observe the cache changing under it (an informer event arriving
while Filter runs on node 3000 of 5000 would make nodes disagree), so the cycle reads a
Snapshot: NodeInfo copies refreshed by ``Cache.update_snapshot`` at the start of each cycle.
The refresh is incremental: only NodeInfos whose generation moved since the last refresh are
copied, and the lists are rebuilt only when the set of nodes, or which nodes host pods with
(anti-)affinity, changed.  Snapshot implements the framework's ``NodeInfoLister``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from operator import attrgetter
from typing import Any

from scheduler.framework.node_info import ImageStateSummary, NodeInfo

# Snapshot has a method named `list`, which shadows the builtin inside the class body.
_NodeInfos = list[NodeInfo]
_Positions = list[int]
_Generations = list[int]

# Updates remembered by the change log.  A reader that last looked more updates ago than
# this is told "unknown" and recomputes; a cycle revisits a node window every
# nodes / nodes-examined cycles (10 at 5000 nodes), each cycle one update or none.
CHANGE_LOG_LENGTH = 256

_PLUGIN_GENERATION = attrgetter("plugin_generation")


class Snapshot:
    __slots__ = (
        "_have_pods_with_affinity",
        "_have_pods_with_required_anti_affinity",
        "_change_log",
        "_generations",
        "_generations_at",
        "change_serial",
        "generation",
        "image_generation",
        "image_states",
        "list_version",
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
        # Change log, so results kept per node position across cycles (opportunistic
        # batching) are checked in proportion to the nodes that changed, not to the nodes
        # examined: ``list_version`` moves when positions move (nodes added, removed or
        # reordered); ``change_serial`` counts the updates that changed some node in place,
        # and the log keeps, per such update, the positions it changed.
        self.list_version = 0
        self.change_serial = 0
        self._change_log: deque[tuple[int, list[int]]] = deque(maxlen=CHANGE_LOG_LENGTH)
        # generations() as of (list_version, change_serial): computed when first asked.
        self._generations: _Generations = []
        self._generations_at = (-1, -1)

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

    # --- change log -----------------------------------------------------------------------

    def record_changes(self, positions: _Positions) -> None:
        """Positions of ``node_info_list`` whose NodeInfo was updated in place (the cache)
        by a change a plugin can read (its ``plugin_generation`` moved)."""
        self.change_serial += 1
        self._change_log.append((self.change_serial, positions))

    def record_list_rebuilt(self) -> None:
        """``node_info_list`` was rebuilt: every position may hold another node now."""
        self.list_version += 1
        self.change_serial += 1
        self._change_log.clear()

    def changed_positions_since(self, serial: int) -> _Positions | None:
        """Positions changed in place after update ``serial`` (repeats possible); None when
        the log no longer reaches back that far or the list was rebuilt since."""
        if serial == self.change_serial:
            return []
        log = self._change_log
        if not log or log[0][0] > serial + 1:
            return None
        changed: _Positions = []
        for entry_serial, positions in reversed(log):
            if entry_serial <= serial:
                break
            changed.extend(positions)
        return changed

    def generations(self) -> _Generations:
        """The ``plugin_generation`` of each listed NodeInfo, in list order (read-only:
        shared by the readers of this update).  For readers the change log cannot serve
        (the list was rebuilt, or the log no longer reaches back): generations come from
        one global counter and every change a plugin can read takes a new one, so equal
        generations mean the same node, read alike since."""
        at = (self.list_version, self.change_serial)
        if self._generations_at != at:
            self._generations = list(map(_PLUGIN_GENERATION, self.node_info_list))
            self._generations_at = at
        return self._generations

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
