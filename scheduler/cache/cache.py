"""The scheduler cache: nodes and the pods on them, aggregated per node, including assumed pods.

The informers tell us about pods bound to nodes; the scheduler itself knows earlier than the
informer that it just placed a pod, so it *assumes* the pod on its node before binding (the
binding runs asynchronously) and the next cycle already sees the node's resources taken.  The
informer's Add of the bound pod later confirms the assumption.  Pod states, as upstream::

    Initial --assume--> Assumed --add (informer)--> Added --update--> Added
                           |  \\--forget (bind failed)--> Initial      |
                           |                                         remove
                           \\--expire (optional TTL after binding)--> Initial

Every change to a NodeInfo takes a fresh generation number and moves the node to the "most
recently changed" end of an ordered dict, so ``update_snapshot`` walks only the nodes changed
since the previous snapshot.  Everything runs on one event loop: no locks.
"""

from __future__ import annotations

import asyncio
import bisect
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from operator import attrgetter
from typing import Any

import structlog

from scheduler.cache.node_tree import NodeTree
from scheduler.cache.snapshot import Snapshot
from scheduler.framework.node_info import (
    ImageStateSummary, NodeInfo, reads_alike, same_accounting)
from scheduler.metrics import SchedulerMetrics
from scheduler.objects.errors import ObjectError
from scheduler.objects.node import node_images, validate_node
from scheduler.objects.pod import PodInfo
from scheduler.objects.resources import Resource

log = structlog.get_logger(__name__)

__all__ = ["Cache", "CacheDump", "CacheError"]


class CacheError(Exception):
    """A call that does not fit the pod/node state machine; the cache is left unchanged."""

    def __init__(self, message: str, *, pod: str = "", node: str = "") -> None:
        super().__init__(message)
        self.pod = pod
        self.node = node


@dataclass(slots=True)
class _PodState:
    pod_info: PodInfo
    assumed: bool
    # Set by finish_binding; only then may an assumed pod expire.
    binding_finished: bool = False
    deadline: float | None = None


@dataclass(slots=True)
class _ImageState:
    size: int
    nodes: set[str]
    # Cache image generation of the last change (snapshot refreshes images newer than its own).
    generation: int


@dataclass(frozen=True, slots=True)
class CacheDump:
    """A debug view of the cache (``/debug`` endpoints, failing tests)."""

    # node name -> "namespace/name" of its pods (deleted nodes still holding pods included)
    nodes: dict[str, list[str]]
    # nodes removed from the cluster whose pods have not all been deleted yet
    deleted_nodes: list[str]
    assumed_pods: list[str]
    # image name -> (size in bytes, number of nodes holding it)
    images: dict[str, tuple[int, int]]


def object_meta(obj: Mapping[str, Any]) -> dict[str, Any]:
    """An object's metadata, or {} when it has none (or not a map)."""
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def pod_key(pod: Mapping[str, Any]) -> str:
    """namespace/name, as the cache, the queue and the comparer name a pod."""
    meta = object_meta(pod)
    return f"{meta.get('namespace') or ''}/{meta.get('name') or ''}"


def pod_node(pod: Mapping[str, Any]) -> str:
    """The node a pod is bound (or assumed) to; "" when none."""
    spec = pod.get("spec")
    return str(spec.get("nodeName") or "") if isinstance(spec, dict) else ""


# This module's own spellings (the comparer imports the public names above).
_meta, _describe_pod, _pod_node = object_meta, pod_key, pod_node


def _node_name(node: dict[str, Any]) -> str:
    name = _meta(node).get("name")
    if not isinstance(name, str) or not name:
        raise ObjectError.for_object(node, "metadata.name", "required", kind="Node")
    return name


class Cache:
    def __init__(
        self,
        *,
        assumed_pod_ttl: float = 0.0,
        clock: Callable[[], float] = time.monotonic,
        metrics: SchedulerMetrics | None = None,
    ) -> None:
        # 0 = assumed pods never expire (upstream's durationToExpireAssumedPod default): a
        # binding that finished is confirmed by the informer, however late it is.
        self._ttl = assumed_pod_ttl
        self._clock = clock
        # Always a metrics object (a private one when none is given): no None checks.
        self._metrics = metrics if metrics is not None else SchedulerMetrics()
        # Node name -> NodeInfo, least recently changed first.  Holds deleted nodes that still
        # have pods (node=None) and nodes known only from their pods (not yet added).
        self._nodes: OrderedDict[str, NodeInfo] = OrderedDict()
        self._pods: dict[str, _PodState] = {}  # by pod UID
        self._assumed: set[str] = set()
        self._tree = NodeTree()
        self._images: dict[str, _ImageState] = {}
        self._image_generation = 0
        self._image_removal_generation = 0

    # --- pods -----------------------------------------------------------------------------

    @staticmethod
    def _key(pod: dict[str, Any]) -> str:
        uid = _meta(pod).get("uid")
        if not uid:
            raise CacheError(
                f"pod {_describe_pod(pod)} has no metadata.uid", pod=_describe_pod(pod)
            )
        return str(uid)

    def _add_to_node(self, pod_info: PodInfo, node_name: str) -> None:
        info = self._nodes.get(node_name)
        if info is None:
            info = NodeInfo()
            self._nodes[node_name] = info
        info.add_pod(pod_info)
        self._nodes.move_to_end(node_name)

    def _remove_from_node(self, pod_info: PodInfo) -> None:
        node_name = _pod_node(pod_info.pod)
        info = self._nodes.get(node_name)
        if info is None or not info.remove_pod(pod_info.pod):
            # Cannot happen while the state machine holds; never worth crashing for.
            log.error("pod missing from its node in the cache", pod=pod_info.key, node=node_name)
            return
        if pod_info.host_ports:
            self._restore_shared_ports(info, pod_info)
        if not info.pods and info.node is None:
            del self._nodes[node_name]
        else:
            self._nodes.move_to_end(node_name)

    def _replace_on_node(self, held: PodInfo, pod_info: PodInfo) -> bool:
        """The confirmation of an assumed pod, or an update (the kubelet's status), that
        changes nothing the node sums: the new version takes the held one's place (the node
        moves to the changed end, so the snapshot takes it) without taking the sums apart
        and putting them back; when the two versions read alike for every plugin
        (``reads_alike``) the node's ``plugin_generation`` stays, so what is kept per node
        across cycles stays valid.  False (nothing done) when the sums would change."""
        if not same_accounting(held, pod_info):
            return False
        node_name = _pod_node(pod_info.pod)
        info = self._nodes.get(node_name)
        if info is None or not info.replace_pod(
                pod_info, reads_alike=reads_alike(held, pod_info)):
            return False
        self._nodes.move_to_end(node_name)
        return True

    @staticmethod
    def _restore_shared_ports(info: NodeInfo, removed: PodInfo) -> None:
        # HostPortInfo is a set, not a ref count: removing one of two pods holding the same
        # hostPort (possible for pods bound by someone else) drops the port for both.
        for entry in removed.host_ports:
            if any(entry in other.host_ports for other in info.pods):
                info.used_ports.add(*entry)

    def assume_pod(self, pod_info: PodInfo) -> None:
        """Account the pod (``spec.nodeName`` set on its copy) on its node before binding."""
        pod = pod_info.pod
        key = self._key(pod)
        node_name = _pod_node(pod)
        state = self._pods.get(key)
        if state is not None:
            what = "assumed" if state.assumed else "added"
            raise CacheError(
                f"pod {pod_info.key} is already {what} in the cache "
                f"(on node {_pod_node(state.pod_info.pod)!r}), so it cannot be assumed",
                pod=pod_info.key,
                node=node_name,
            )
        if not node_name:
            raise CacheError(
                f"pod {pod_info.key} has no spec.nodeName, so it cannot be assumed",
                pod=pod_info.key,
            )
        self._add_to_node(pod_info, node_name)
        self._pods[key] = _PodState(pod_info, assumed=True)
        self._assumed.add(key)

    def finish_binding(self, pod: dict[str, Any], *, now: float | None = None) -> None:
        """The binding of an assumed pod was sent; start its expiry clock (if a TTL is set)."""
        state = self._pods.get(self._key(pod))
        if state is None or not state.assumed:
            return
        state.binding_finished = True
        if self._ttl > 0:
            state.deadline = (self._clock() if now is None else now) + self._ttl

    def forget_pod(self, pod: dict[str, Any]) -> None:
        """Undo ``assume_pod`` (binding failed or was abandoned)."""
        key = self._key(pod)
        name = _describe_pod(pod)
        state = self._pods.get(key)
        if state is None:
            raise CacheError(f"pod {name} is not in the cache, so it cannot be forgotten", pod=name)
        assumed_on = _pod_node(state.pod_info.pod)
        node_name = _pod_node(pod)
        if not state.assumed:
            # The informer confirmed the pod (add_pod replaced the assumed copy, on whatever
            # node it was bound to): the cache already holds the truth; nothing to undo.
            raise CacheError(
                f"pod {name} is not assumed (the informer confirmed it bound to node "
                f"{assumed_on!r}"
                + (f", not {node_name!r} as assumed" if node_name and node_name != assumed_on
                   else "")
                + "), so it cannot be forgotten; the cache keeps the bound pod",
                pod=name,
                node=assumed_on,
            )
        # An empty nodeName is accepted: callers may pass the pod as it was before assume.
        if node_name and node_name != assumed_on:
            raise CacheError(
                f"pod {name} was assumed on node {assumed_on!r} but forget names {node_name!r}",
                pod=name,
                node=node_name,
            )
        self._remove_from_node(state.pod_info)
        del self._pods[key]
        self._assumed.discard(key)

    def add_pod(self, pod_info: PodInfo) -> None:
        """The informer saw a bound pod: confirm an assumed pod or add a new one."""
        pod = pod_info.pod
        key = self._key(pod)
        node_name = _pod_node(pod)
        if not node_name:
            raise CacheError(f"pod {pod_info.key} has no spec.nodeName", pod=pod_info.key)
        state = self._pods.get(key)
        if state is not None and not state.assumed:
            raise CacheError(
                f"pod {pod_info.key} was already added to the cache", pod=pod_info.key,
                node=node_name,
            )
        if state is not None:
            assumed_on = _pod_node(state.pod_info.pod)
            if assumed_on != node_name:
                # Another scheduler (or a race) bound it elsewhere: the informer is the truth.
                log.info(
                    "pod was added to a different node than it was assumed on",
                    pod=pod_info.key,
                    assumed_node=assumed_on,
                    node=node_name,
                )
            self._assumed.discard(key)
            if assumed_on == node_name and self._replace_on_node(state.pod_info, pod_info):
                self._pods[key] = _PodState(pod_info, assumed=False)
                return
            self._remove_from_node(state.pod_info)
        self._add_to_node(pod_info, node_name)
        self._pods[key] = _PodState(pod_info, assumed=False)

    def update_pod(self, old: dict[str, Any], new_info: PodInfo) -> None:
        """A bound pod changed (labels, resized requests, phase ...)."""
        key = self._key(old)
        name = _describe_pod(old)
        state = self._pods.get(key)
        if state is None:
            raise CacheError(f"pod {name} is not in the cache, so it cannot be updated", pod=name)
        if state.assumed:
            # An assumed pod gets an Add (confirming it) before any Update.
            raise CacheError(f"assumed pod {name} cannot be updated before it is added", pod=name)
        new_node = _pod_node(new_info.pod)
        if not new_node:
            raise CacheError(f"pod {name}: update has no spec.nodeName", pod=name)
        cached_node = _pod_node(state.pod_info.pod)
        if new_node != cached_node:
            # nodeName is immutable once set; upstream exits here.  We follow the informer.
            log.error(
                "pod updated on a different node than it was added to; following the update",
                pod=name,
                cached_node=cached_node,
                node=new_node,
            )
        # Remove what the cache holds (not `old`): that is what was added to the node.
        if new_node != cached_node or not self._replace_on_node(state.pod_info, new_info):
            self._remove_from_node(state.pod_info)
            self._add_to_node(new_info, new_node)
        state.pod_info = new_info

    def remove_pod(self, pod: dict[str, Any]) -> None:
        """A bound (or assumed) pod was deleted."""
        key = self._key(pod)
        name = _describe_pod(pod)
        state = self._pods.get(key)
        if state is None:
            raise CacheError(f"pod {name} is not in the cache, so it cannot be removed", pod=name)
        cached_node = _pod_node(state.pod_info.pod)
        node_name = _pod_node(pod)
        if node_name and node_name != cached_node:
            log.error(
                "pod removed from a different node than the cache holds it on",
                pod=name,
                cached_node=cached_node,
                node=node_name,
            )
        self._remove_from_node(state.pod_info)
        del self._pods[key]
        self._assumed.discard(key)

    def is_assumed_pod(self, pod: dict[str, Any]) -> bool:
        return self._key(pod) in self._assumed

    def assumed_pod_info(self, uid: str) -> PodInfo | None:
        """The PodInfo of the assumed pod of this uid, None when no pod of it is assumed
        (``is_assumed_pod`` and ``get_pod_info`` in one lookup, for the informer's
        confirmation of every bound pod)."""
        if uid not in self._assumed:
            return None
        state = self._pods.get(uid)
        return None if state is None else state.pod_info

    def get_pod(self, pod: dict[str, Any]) -> dict[str, Any] | None:
        """The cached version of the pod (possibly on a deleted node), or None."""
        state = self._pods.get(self._key(pod))
        return None if state is None else state.pod_info.pod

    def get_pod_info(self, pod: dict[str, Any]) -> PodInfo | None:
        state = self._pods.get(self._key(pod))
        return None if state is None else state.pod_info

    def cleanup_assumed_pods(self, now: float | None = None) -> list[dict[str, Any]]:
        """Expire assumed pods whose binding finished more than the TTL ago; returns them."""
        if self._ttl <= 0 or not self._assumed:
            return []
        now = self._clock() if now is None else now
        expired: list[dict[str, Any]] = []
        for key in list(self._assumed):
            state = self._pods[key]
            if not state.binding_finished or state.deadline is None or now <= state.deadline:
                continue
            log.warning("assumed pod expired before the informer confirmed it",
                        pod=state.pod_info.key, node=_pod_node(state.pod_info.pod))
            self._remove_from_node(state.pod_info)
            del self._pods[key]
            self._assumed.discard(key)
            expired.append(state.pod_info.pod)
        return expired

    # --- nodes ----------------------------------------------------------------------------

    def add_node(self, node: dict[str, Any]) -> NodeInfo:
        """Add (or replace) a node; returns a copy of its NodeInfo (for the queue's pre-check)."""
        return self._set_node(None, node)

    def update_node(self, old: dict[str, Any], new: dict[str, Any]) -> NodeInfo:
        return self._set_node(old, new)

    def _set_node(self, old: dict[str, Any] | None, node: dict[str, Any]) -> NodeInfo:
        # Validate first: a malformed node raises ObjectError here, naming the field, and
        # leaves the cache untouched (everything below cannot fail on a valid node).
        validate_node(node)
        name = _node_name(node)
        images = node_images(node)
        info = self._nodes.get(name)
        if info is None:
            info = NodeInfo()
            self._nodes[name] = info
        previous = info.node
        if previous is not None:
            self._remove_node_images(previous)
            self._tree.update_node(previous, node)
        else:
            if old is not None:
                self._tree.remove_node(old)  # tolerate a stale tree entry
            self._tree.add_node(node)
        self._add_node_images(name, images, info)
        info.set_node(node)
        self._nodes.move_to_end(name)
        return info.clone()

    def remove_node(self, node: dict[str, Any]) -> None:
        """Remove a node.  Its pods stay (as a node-less NodeInfo) until their own deletes."""
        name = _node_name(node)
        info = self._nodes.get(name)
        if info is None or info.node is None:
            raise CacheError(f"node {name} is not in the cache, so it cannot be removed", node=name)
        stored = info.node
        self._remove_node_images(stored)
        if not self._tree.remove_node(stored):
            log.error("node missing from the node tree", node=name)
        info.remove_node()
        # A ghost keeps only its pods: nothing schedulable is left of the node.
        info.allocatable = Resource()
        info.image_states = {}
        if info.pods:
            self._nodes.move_to_end(name)
        else:
            del self._nodes[name]

    def get_node_info(self, name: str) -> NodeInfo | None:
        """A copy of the cached NodeInfo (tests, debugging)."""
        info = self._nodes.get(name)
        return None if info is None else info.clone()

    # --- images ---------------------------------------------------------------------------

    def _bump_images(self) -> int:
        self._image_generation += 1
        return self._image_generation

    def _add_node_images(
        self, node_name: str, images: list[tuple[list[str], int]], info: NodeInfo
    ) -> None:
        summaries: dict[str, ImageStateSummary] = {}
        for names, size in images:
            for image in names:
                if image in summaries:
                    continue
                state = self._images.get(image)
                if state is None:
                    state = _ImageState(size, {node_name}, self._bump_images())
                    self._images[image] = state
                elif node_name not in state.nodes:
                    state.nodes.add(node_name)
                    state.generation = self._bump_images()
                summaries[image] = ImageStateSummary(state.size, len(state.nodes))
        info.image_states = summaries

    def _remove_node_images(self, node: dict[str, Any]) -> None:
        name = _node_name(node)
        for names, _size in node_images(node):
            for image in names:
                state = self._images.get(image)
                if state is None or name not in state.nodes:
                    continue
                state.nodes.discard(name)
                if state.nodes:
                    state.generation = self._bump_images()
                else:
                    del self._images[image]
                    self._image_removal_generation = self._bump_images()

    def _refresh_snapshot_images(self, snapshot: Snapshot) -> None:
        seen = snapshot.image_generation
        for image, state in self._images.items():
            if state.generation <= seen:
                continue
            summary = snapshot.image_states.get(image)
            if summary is None:
                snapshot.image_states[image] = ImageStateSummary(state.size, len(state.nodes))
            else:
                # In place: every snapshot NodeInfo holding the image shares this object.
                summary.size = state.size
                summary.num_nodes = len(state.nodes)
        if self._image_removal_generation > seen:
            for image in [i for i in snapshot.image_states if i not in self._images]:
                del snapshot.image_states[image]
        snapshot.image_generation = self._image_generation

    def _snapshot_images(self, snapshot: Snapshot, info: NodeInfo) -> dict[str, ImageStateSummary]:
        """The snapshot's shared summaries of the images on ``info``'s node."""
        if not info.image_states:
            return {}
        return {i: self._snapshot_image(snapshot, i) for i in info.image_states}

    def _snapshot_image(self, snapshot: Snapshot, image: str) -> ImageStateSummary:
        summary = snapshot.image_states.get(image)
        if summary is None:
            state = self._images[image]
            summary = ImageStateSummary(state.size, len(state.nodes))
            snapshot.image_states[image] = summary
        return summary

    # --- snapshot -------------------------------------------------------------------------

    def update_snapshot(self, snapshot: Snapshot) -> None:
        """Bring ``snapshot`` up to date, copying only NodeInfos changed since its last update."""
        if self._image_generation > snapshot.image_generation:
            self._refresh_snapshot_images(snapshot)

        seen = snapshot.generation
        update_all = False
        affinity_changed: list[NodeInfo] = []
        pvc = snapshot.used_pvc_ref_counts
        node_map = snapshot.node_info_map
        positions = snapshot.positions
        changed: list[int] = []
        for info in reversed(self._nodes.values()):
            if info.generation <= seen:
                break  # everything older was copied by a previous update
            if info.node is None:
                continue  # deleted node still holding pods: not schedulable, not listed
            name = info.name
            existing = node_map.get(name)
            if existing is None:
                update_all = True
                existing = node_map[name] = NodeInfo.__new__(NodeInfo)
                info.copy_into(existing)
                existing.image_states = self._snapshot_images(snapshot, info)
                continue
            if existing.plugin_generation == info.plugin_generation:
                # Since the last copy only pods were swapped for versions that read alike
                # (confirmations): the sums, ports, PVCs, images and node are the copy's
                # already; only the pod objects are new (preemption reads them): the swaps
                # are replayed on the copy's pod list.  Nothing logged in the snapshot.
                info.sync_pods_into(existing)
                continue
            if bool(existing.pods_with_affinity) != bool(info.pods_with_affinity) or bool(
                existing.pods_with_required_anti_affinity
            ) != bool(info.pods_with_required_anti_affinity):
                affinity_changed.append(existing)
            if info._taints is None and existing.node is info.node:
                # The node object is the one the snapshot's copy parsed the taints of (the
                # plugins call taints() on the copies): keep the parse, so that copying a
                # node after its pods changed does not drop it.
                info._taints = existing._taints
            if existing.pvc_ref_counts or info.pvc_ref_counts:
                _apply_pvc(pvc, existing.pvc_ref_counts, -1)
                _apply_pvc(pvc, info.pvc_ref_counts, 1)
            # Into the existing object: the snapshot's lists keep pointing at it; its pod
            # list is brought up to date by the changes logged since its last sync.
            info.sync_into(existing)
            existing.image_states = self._snapshot_images(snapshot, info)
            position = positions.get(name)
            if position is not None:
                changed.append(position)
        if self._nodes:
            snapshot.generation = next(reversed(self._nodes.values())).generation

        if len(node_map) > self._tree.num_nodes:
            self._drop_gone_nodes(node_map)
            update_all = True

        if update_all:
            self._rebuild_snapshot_lists(snapshot, update_all=True)
        elif changed:
            snapshot.record_changes(changed)
        if not update_all and affinity_changed:
            _update_affinity_lists(snapshot, affinity_changed)
        if len(snapshot.node_info_list) != self._tree.num_nodes:
            log.error(
                "snapshot inconsistent with the node tree; rebuilding it",
                listed=len(snapshot.node_info_list),
                tree=self._tree.num_nodes,
                mapped=len(node_map),
                cached=len(self._nodes),
            )
            for name in [n for n in node_map if self._is_gone(n)]:
                del node_map[name]
            self._rebuild_snapshot_lists(snapshot, update_all=True)

    def _is_gone(self, name: str) -> bool:
        info = self._nodes.get(name)
        return info is None or info.node is None

    def _drop_gone_nodes(self, node_map: dict[str, NodeInfo]) -> None:
        """Delete from the snapshot's map the nodes removed from the cache: those the cache
        no longer holds by a set difference (C), then, only if the map still holds more
        than the tree (a removed node kept as a ghost for its pods), a scan of every name."""
        for name in node_map.keys() - self._nodes.keys():
            del node_map[name]
        if len(node_map) > self._tree.num_nodes:
            for name in [n for n in node_map if self._is_gone(n)]:
                del node_map[name]

    def _rebuild_snapshot_lists(self, snapshot: Snapshot, *, update_all: bool) -> None:
        """The snapshot's node list in the tree's order, its positions, PVC counts and
        (anti-)affinity lists, from its map.  Done on every node added or removed (a node
        churned every second at 5000 nodes), so in C loops: ``map``, ``zip``, ``filter``."""
        if update_all:
            node_map = snapshot.node_info_map
            names = self._tree.list()
            try:
                ordered = list(map(node_map.__getitem__, names))
            except KeyError:
                ordered = []
                for name in names:
                    info = node_map.get(name)
                    if info is None:
                        log.error("node in the node tree but not in the snapshot", node=name)
                        continue
                    ordered.append(info)
                names = [info.name for info in ordered]
            snapshot.node_info_list = ordered
            snapshot.positions = dict(zip(names, range(len(names))))
            snapshot.record_list_rebuilt()
            pvc: dict[str, int] = {}
            for info in filter(_HAS_PVC, ordered):
                _apply_pvc(pvc, info.pvc_ref_counts, 1)
            snapshot.used_pvc_ref_counts = pvc
        nodes = snapshot.node_info_list
        snapshot._have_pods_with_affinity = list(filter(_HAS_AFFINITY, nodes))
        snapshot._have_pods_with_required_anti_affinity = list(
            filter(_HAS_REQUIRED_ANTI_AFFINITY, nodes))

    # --- counts, debugging, metrics ---------------------------------------------------------

    def node_count(self) -> int:
        """NodeInfos held, including deleted nodes that still have pods (as upstream)."""
        return len(self._nodes)

    def pod_count(self) -> int:
        return sum(len(info.pods) for info in self._nodes.values())

    def assumed_pod_count(self) -> int:
        return len(self._assumed)

    def node_infos(self) -> list[tuple[str, NodeInfo]]:
        """The cache's own NodeInfos (deleted nodes still holding pods included), read-only:
        for the cache comparer, which must see the totals as they are, not a copy's."""
        return list(self._nodes.items())

    def pod_states(self) -> list[tuple[PodInfo, bool]]:
        """Every pod the cache holds, and whether it is assumed (the cache comparer)."""
        return [(state.pod_info, state.assumed) for state in self._pods.values()]

    def dump(self) -> CacheDump:
        assumed = sorted(self._pods[k].pod_info.key for k in self._assumed)
        return CacheDump(
            nodes={name: [p.key for p in info.pods] for name, info in self._nodes.items()},
            deleted_nodes=[name for name, info in self._nodes.items() if info.node is None],
            assumed_pods=assumed,
            images={i: (s.size, len(s.nodes)) for i, s in self._images.items()},
        )

    def update_metrics(self) -> None:
        gauge = self._metrics.cache_size
        gauge.labels(type="assumed_pods").set(len(self._assumed))
        gauge.labels(type="pods").set(len(self._pods))
        gauge.labels(type="nodes").set(len(self._nodes))

    async def run(
        self,
        *,
        interval: float = 1.0,
        iterations: int | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        """Expire assumed pods (when a TTL is set) and export cache sizes every ``interval``."""
        done = 0
        while iterations is None or done < iterations:
            self.cleanup_assumed_pods()
            self.update_metrics()
            done += 1
            await sleep(interval)


_HAS_PVC = attrgetter("pvc_ref_counts")
_HAS_AFFINITY = attrgetter("pods_with_affinity")
_HAS_REQUIRED_ANTI_AFFINITY = attrgetter("pods_with_required_anti_affinity")


def _update_affinity_lists(snapshot: Snapshot, changed: list[NodeInfo]) -> None:
    """Add or drop the nodes whose (anti-)affinity pods came or went, keeping node-list
    order: a scan of every node per change made a cycle cost O(cluster) whenever a pod with
    affinity landed on a node that had none (every cycle, for a spread-out workload)."""
    positions = snapshot.positions

    def position(i: NodeInfo) -> int:
        return positions[i.name]

    for attr, flag in (("_have_pods_with_affinity", "pods_with_affinity"),
                       ("_have_pods_with_required_anti_affinity",
                        "pods_with_required_anti_affinity")):
        current: list[NodeInfo] = getattr(snapshot, attr)
        updated = current
        for info in changed:
            # the list is in node-list order: where the node is, or would be, by bisection
            # (a scan per change cost O(listed nodes), thousands in an anti-affinity workload)
            at = bisect.bisect_left(updated, positions[info.name], key=position)
            listed = at < len(updated) and updated[at] is info
            if bool(getattr(info, flag)) == listed:
                continue
            if updated is current:
                updated = list(current)  # a new list: a plugin may hold the old one
            if listed:
                del updated[at]
            else:
                updated.insert(at, info)
        setattr(snapshot, attr, updated)


def _apply_pvc(counts: dict[str, int], delta: dict[str, int], sign: int) -> None:
    for claim, n in delta.items():
        value = counts.get(claim, 0) + sign * n
        if value > 0:
            counts[claim] = value
        else:
            counts.pop(claim, None)
