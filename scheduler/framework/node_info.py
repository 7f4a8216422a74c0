"""NodeInfo: what the scheduler knows about one node, aggregated for fast Filter/Score.

The cache keeps one NodeInfo per node and updates it incrementally as pods are assumed, bound
and removed; each change takes a new value from a global generation counter, which is how the
snapshot finds the nodes it must copy at the start of a cycle.  ``plugin_generation`` is the
generation of the last change a plugin's answer can depend on: it moves with ``generation``
except when a pod is swapped for a version that reads alike (``reads_alike``: an assumed pod's
confirmation, a kubelet's status write), so results kept per node across cycles (the
snapshot's change log and what reads it) stay valid over such a swap.  Plugins read NodeInfo from the
snapshot and must treat it as read-only (preemption works on clones).

The snapshot refreshes its copy of a changed NodeInfo with ``sync_into``: the pod list is
not copied whole each time (40000 pods on SchedulingWhileGated's one node, where a pod is
assumed every cycle) but brought up to date by replaying the pod-list changes the cache's
NodeInfo logged since that copy was last synced (appends, in-place replacements, removals
by position), so a cycle's refresh costs O(pods changed), not O(pods on the node).

The cache's NodeInfos also find a pod's place in the list by its UID in O(log n): each pod
added takes a number from one increasing sequence, kept by UID and, in list order (so
sorted), beside the list; a bisection finds it however its position shifted.  A removal
or replacement used to scan for it, up to the whole list (SchedulingWhileGated deletes
bound pods deep in its node's 40000).  Copies and clones keep no such index and scan.
"""

from __future__ import annotations

import itertools
from bisect import bisect_left
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import compress
from operator import attrgetter, ne
from typing import Any

from scheduler.objects.pod import PodInfo
from scheduler.objects.resources import Resource
from scheduler.objects.node import node_allocatable
from scheduler.objects.taints import Taint, parse_taints

_generation = itertools.count(1)


def next_generation() -> int:
    return next(_generation)


# Numbers for the pods added to a NodeInfo: increasing, so a list's numbers are sorted.
_pod_numbers = itertools.count(1)


@dataclass(slots=True)
class ImageStateSummary:
    """An image present on a node: its size and on how many nodes it is (for ImageLocality)."""

    size: int
    num_nodes: int


DEFAULT_BIND_ALL_HOST_IP = "0.0.0.0"


class HostPortInfo:
    """Host ports in use on a node, keyed by IP, with 0.0.0.0 conflicting with every IP."""

    __slots__ = ("_ports",)

    def __init__(self) -> None:
        self._ports: dict[str, set[tuple[str, int]]] = {}

    def add(self, ip: str, protocol: str, port: int) -> None:
        if port <= 0:
            return
        self._ports.setdefault(ip or DEFAULT_BIND_ALL_HOST_IP, set()).add((protocol or "TCP", port))

    def remove(self, ip: str, protocol: str, port: int) -> None:
        if port <= 0:
            return
        ip = ip or DEFAULT_BIND_ALL_HOST_IP
        entries = self._ports.get(ip)
        if entries is None:
            return
        entries.discard((protocol or "TCP", port))
        if not entries:
            del self._ports[ip]

    def check_conflict(self, ip: str, protocol: str, port: int) -> bool:
        """True if (ip, protocol, port) collides with a port already in use."""
        if port <= 0:
            return False
        ip = ip or DEFAULT_BIND_ALL_HOST_IP
        key = (protocol or "TCP", port)
        if ip == DEFAULT_BIND_ALL_HOST_IP:
            return any(key in entries for entries in self._ports.values())
        for candidate in (ip, DEFAULT_BIND_ALL_HOST_IP):
            entries = self._ports.get(candidate)
            if entries is not None and key in entries:
                return True
        return False

    def __len__(self) -> int:
        return sum(len(v) for v in self._ports.values())

    def clone(self) -> HostPortInfo:
        copy = HostPortInfo.__new__(HostPortInfo)
        # Most nodes use no host port: skip the comprehension (a clone per snapshot update).
        copy._ports = ({ip: set(entries) for ip, entries in self._ports.items()}
                       if self._ports else {})
        return copy


# A pod-list change logged for the synced copy: (index, the pod put there) or (index, None)
# for the pod removed from there.
_PodChange = tuple[int, PodInfo | None]

# Changes logged at most between two syncs: a copy not synced for longer is taken whole
# (and the log of a NodeInfo whose copy is never synced again stops growing).
_POD_LOG_LIMIT = 1024


class NodeInfo:
    __slots__ = (
        "node",
        "pods",
        "pods_with_affinity",
        "pods_with_required_anti_affinity",
        "used_ports",
        "requested",
        "non_zero_requested",
        "allocatable",
        "image_states",
        "pvc_ref_counts",
        "generation",
        "plugin_generation",
        "name",
        "unschedulable",
        "_taints",
        "_pod_log",
        "_pod_log_base",
        "_pod_number",
        "_pod_numbers",
    )

    def __init__(self, node: dict[str, Any] | None = None) -> None:
        self.node: dict[str, Any] | None = None
        self.pods: list[PodInfo] = []
        self.pods_with_affinity: list[PodInfo] = []
        self.pods_with_required_anti_affinity: list[PodInfo] = []
        self.used_ports = HostPortInfo()
        self.requested = Resource()
        # Requests with the 100m/200Mi defaults for containers that request nothing (scoring).
        self.non_zero_requested = Resource()
        self.allocatable = Resource()
        self.image_states: dict[str, ImageStateSummary] = {}
        self.pvc_ref_counts: dict[str, int] = {}
        self.generation = self.plugin_generation = next_generation()
        # The node's name, kept as a plain attribute: it is read for every node in every cycle.
        self.name = ""
        # spec.unschedulable (cordoned), read by NodeUnschedulable for every node and cycle.
        self.unschedulable = False
        self._taints: list[Taint] | None = None
        # The pod-list changes since the copy synced at generation ``_pod_log_base``
        # (``sync_into``); None when no copy is followed (a new or cloned NodeInfo).
        self._pod_log: list[_PodChange] | None = None
        self._pod_log_base = 0
        # UID -> the number its pod took when added, and the numbers in list order (sorted):
        # bisect_left(_pod_numbers, number) is the pod's index.  None: a scan finds pods (a
        # copy, or the same UID added twice).
        self._pod_number: dict[str, int] | None = {}
        self._pod_numbers: list[int] = []
        if node is not None:
            self.set_node(node)

    def set_node(self, node: dict[str, Any]) -> None:
        self.node = node
        self.name = str(node["metadata"]["name"])
        self.allocatable = node_allocatable(node)
        spec = node.get("spec")
        self.unschedulable = isinstance(spec, dict) and bool(spec.get("unschedulable"))
        self._taints = None
        self.generation = self.plugin_generation = next_generation()

    def remove_node(self) -> None:
        self.node = None
        self.unschedulable = False
        self._taints = None
        self.generation = self.plugin_generation = next_generation()

    def taints(self) -> list[Taint]:
        """The node's parsed taints, parsed once per node object (Filter/Score read them)."""
        taints = self._taints
        if taints is None:
            taints = [] if self.node is None else parse_taints(self.node)
            self._taints = taints
        return taints

    def add_pod(self, pod_info: PodInfo) -> None:
        # Logged for the synced copy (see sync_into); past the limit, no longer (that copy
        # is taken whole at its next sync).  Inline: every assume and bound pod comes here.
        log = self._pod_log
        if log is not None:
            if len(log) < _POD_LOG_LIMIT:
                log.append((len(self.pods), pod_info))
            else:
                self._pod_log = None
        numbers = self._pod_number
        if numbers is not None:
            number = next(_pod_numbers)
            if numbers.setdefault(pod_info.uid, number) == number:
                self._pod_numbers.append(number)
            else:
                self._pod_number = None  # the same UID twice: scan from now on
        self.pods.append(pod_info)
        if pod_info.has_affinity:
            self.pods_with_affinity.append(pod_info)
        if pod_info.has_required_anti_affinity:
            self.pods_with_required_anti_affinity.append(pod_info)
        self._update(pod_info, sign=1)

    def remove_pod(self, pod: dict[str, Any]) -> bool:
        """Remove the pod with this pod's UID; False if it was not on the node."""
        uid = pod["metadata"].get("uid")
        pods = self.pods
        if not pods:
            return False
        numbers = self._pod_number
        if numbers is not None:
            number = numbers.pop(uid, None)
            if number is None:
                return False
            in_order = self._pod_numbers
            index = bisect_left(in_order, number)
            del in_order[index]
            candidate = pods[index]
        else:
            index = -1
            # The last pod first (one just assumed, then forgotten: one step, not one per
            # pod before it); else from the front.  A pod's UID is on a node once, so
            # either finds the same pod.  (A scan by map/compress in C measured slower
            # than this loop.)
            candidate = pods[index]
            if candidate.uid != uid:
                for index, candidate in enumerate(pods):
                    if candidate.uid == uid:
                        break
                else:
                    return False
        log = self._pod_log
        if log is not None:
            if len(log) < _POD_LOG_LIMIT:
                log.append((index, None))
            else:
                self._pod_log = None
        del pods[index]
        # Usually empty: skip rebuilding them (preemption removes pods per candidate).
        if self.pods_with_affinity:
            self.pods_with_affinity = [p for p in self.pods_with_affinity if p.uid != uid]
        if self.pods_with_required_anti_affinity:
            self.pods_with_required_anti_affinity = [
                p for p in self.pods_with_required_anti_affinity if p.uid != uid
            ]
        self._update(candidate, sign=-1)
        return True

    def replace_pod(self, pod_info: PodInfo, *, reads_alike: bool = False) -> bool:
        """Put ``pod_info`` in the place of the pod with its UID, when both account the
        same (``same_accounting``): nothing summed changes, only the pod object (a new
        generation, so snapshots take it; a new ``plugin_generation`` too unless the caller
        says the two versions read alike, ``reads_alike``).  False if no pod with its UID
        is on the node."""
        uid = pod_info.uid
        pods = self.pods
        numbers = self._pod_number
        if numbers is not None:
            number = numbers.get(uid)
            if number is None:
                return False
            index = bisect_left(self._pod_numbers, number)
        else:
            # From the end: the pod replaced is most often one just assumed (its binding's
            # confirmation), appended last.  A pod's UID is on a node once.
            for index in range(len(pods) - 1, -1, -1):
                if pods[index].uid == uid:
                    break
            else:
                return False
        log = self._pod_log
        if log is not None:
            if len(log) < _POD_LOG_LIMIT:
                log.append((index, pod_info))
            else:
                self._pod_log = None
        pods[index] = pod_info
        if self.pods_with_affinity:
            self.pods_with_affinity = [
                pod_info if p.uid == uid else p for p in self.pods_with_affinity]
        if self.pods_with_required_anti_affinity:
            self.pods_with_required_anti_affinity = [
                pod_info if p.uid == uid else p
                for p in self.pods_with_required_anti_affinity]
        self.generation = next_generation()
        if not reads_alike:
            self.plugin_generation = self.generation
        return True

    def _update(self, pod_info: PodInfo, *, sign: int) -> None:
        if sign > 0:
            self.requested.add(pod_info.requests)
        else:
            requested = self.requested
            requested.sub(pod_info.requests)
            if pod_info.requests.scalar_resources:
                # Resource.sub leaves an extended resource at 0; drop it, so a pod assumed
                # and forgotten leaves the NodeInfo exactly as it was (not {"gpu": 0}).
                scalars = requested.scalar_resources
                for name in pod_info.requests.scalar_resources:
                    if scalars.get(name) == 0:
                        del scalars[name]
        self.non_zero_requested.milli_cpu += sign * pod_info.non_zero_cpu
        self.non_zero_requested.memory += sign * pod_info.non_zero_memory
        for ip, protocol, port in pod_info.host_ports:
            if sign > 0:
                self.used_ports.add(ip, protocol, port)
            else:
                self.used_ports.remove(ip, protocol, port)
        for claim in pod_info.pvc_names:
            count = self.pvc_ref_counts.get(claim, 0) + sign
            if count > 0:
                self.pvc_ref_counts[claim] = count
            else:
                self.pvc_ref_counts.pop(claim, None)
        self.generation = self.plugin_generation = next_generation()

    def clone(self) -> NodeInfo:
        copy = NodeInfo.__new__(NodeInfo)
        self.copy_into(copy)
        return copy

    def copy_into(self, target: NodeInfo) -> None:
        """Make ``target`` what ``clone()`` returns, in place: the snapshot refreshes its
        NodeInfos this way, so every list holding one keeps pointing at it (and no
        intermediate copy is built)."""
        target.pods = list(self.pods)
        target.pods_with_affinity = list(self.pods_with_affinity)
        target.pods_with_required_anti_affinity = list(self.pods_with_required_anti_affinity)
        self._copy_rest_into(target)

    def sync_into(self, target: NodeInfo) -> None:
        """``copy_into``, for the one copy this NodeInfo follows (the snapshot's): when
        ``target`` was last synced from this NodeInfo and the pod-list changes since are
        logged, they are replayed on ``target``'s own list (which therefore changes in
        place) instead of copying every pod; then the logging restarts from here.  Another
        copy synced in between (a second snapshot) makes the next sync a whole copy."""
        self.sync_pods_into(target)
        self._copy_rest_into(target)

    def sync_pods_into(self, target: NodeInfo) -> None:
        """Only the pod lists of ``sync_into`` (the pods were swapped for versions that read
        alike: nothing else moved); ``target.generation`` becomes this one's."""
        log = self._pod_log
        if (log is not None and target.generation == self._pod_log_base
                and len(log) < len(self.pods)):
            pods = target.pods
            # (index, pod): the pod appended (index == len), or put in place of the one at
            # index; (index, None): the pod at index removed.  Replayed in order, the copy
            # passes through every state the cache's list passed through.
            for index, pod_info in log:
                if pod_info is None:
                    del pods[index]
                elif index == len(pods):
                    pods.append(pod_info)
                else:
                    pods[index] = pod_info
        else:
            target.pods = list(self.pods)
        # Usually empty, or short: copied whole.
        target.pods_with_affinity = list(self.pods_with_affinity)
        target.pods_with_required_anti_affinity = list(self.pods_with_required_anti_affinity)
        target.generation = self.generation
        self._pod_log = []
        self._pod_log_base = self.generation

    def _copy_rest_into(self, target: NodeInfo) -> None:
        """Everything of ``copy_into`` but the pod lists."""
        target.node = self.node
        target.used_ports = self.used_ports.clone()
        target.requested = self.requested.clone()
        target.non_zero_requested = self.non_zero_requested.clone()
        # Shared: a NodeInfo's allocatable is replaced (set_node, a ghost's), never changed
        # in place, by the cache, the snapshot or preemption's clones.
        target.allocatable = self.allocatable
        target.image_states = dict(self.image_states)
        target.pvc_ref_counts = dict(self.pvc_ref_counts)
        target.generation = self.generation
        target.plugin_generation = self.plugin_generation
        target.name = self.name
        target.unschedulable = self.unschedulable
        target._taints = self._taints
        # A copy follows no copy of its own (preemption's clones, the snapshot's NodeInfos)
        # and finds pods by scanning (removals are rare on copies; the index is O(pods)).
        target._pod_log = None
        target._pod_log_base = 0
        target._pod_number = None
        target._pod_numbers = []

    def __repr__(self) -> str:
        return f"NodeInfo({self.name!r}, pods={len(self.pods)}, requested={self.requested})"


def same_accounting(a: PodInfo, b: PodInfo) -> bool:
    """Whether a NodeInfo holding ``a`` sums exactly what it would holding ``b`` instead
    (requests, non-zero requests, host ports, PVCs, the (anti-)affinity lists), for two
    versions of one pod."""
    return (a.uid == b.uid
            and (a.requests is b.requests or a.requests == b.requests)
            and a.non_zero_cpu == b.non_zero_cpu and a.non_zero_memory == b.non_zero_memory
            and (a.host_ports is b.host_ports or a.host_ports == b.host_ports)
            and a.pvc_names == b.pvc_names
            and a.has_affinity == b.has_affinity
            and a.has_required_anti_affinity == b.has_required_anti_affinity)


# What no plugin reads of a pod held by a NodeInfo: every other metadata and status field
# is compared (a field not listed here, known or new, makes two versions differ).  The
# kubelet's container reports are read only for the requests a resize reported, which
# ``same_accounting`` compares; the binding adds a condition.  Set to None over a copy of
# each version, so the comparison is one dict comparison (C) per part.
_UNREAD_METADATA = dict.fromkeys(("resourceVersion", "managedFields", "generation"))
_UNREAD_STATUS = dict.fromkeys((
    "conditions", "containerStatuses", "initContainerStatuses", "ephemeralContainerStatuses",
    "startTime", "podIP", "podIPs", "hostIP", "hostIPs", "qosClass", "message", "reason",
    "observedGeneration"))


def reads_alike(a: PodInfo, b: PodInfo) -> bool:
    """Whether every Filter, Score and PreFilter reads a NodeInfo holding ``b`` as it reads
    one holding ``a``, for two versions of one pod (both held by the cache, so with
    metadata): they account the same (``same_accounting``), and their specs and their
    metadata and status but for the fields no plugin reads are equal.  The confirmation
    of an assumed pod (the binding set spec.nodeName, which the assumed copy has too, and
    the PodScheduled condition) reads alike; so does a kubelet's status write that moves
    no phase.  (Preemption reads the start time, but from the snapshot, which takes every
    new version.)"""
    if not same_accounting(a, b):
        return False
    pa, pb = a.pod, b.pod
    if pa is pb:
        return True
    if pa.get("spec") != pb.get("spec"):
        return False
    if {**pa["metadata"], **_UNREAD_METADATA} != {**pb["metadata"], **_UNREAD_METADATA}:
        return False
    sa, sb = pa.get("status") or {}, pb.get("status") or {}
    if type(sa) is not dict or type(sb) is not dict:  # malformed: alike only if equal
        return bool(sa == sb)
    return sa is sb or {**sa, **_UNREAD_STATUS} == {**sb, **_UNREAD_STATUS}


_NAME = attrgetter("name")
_PLUGIN_GENERATION = attrgetter("plugin_generation")


def changed_nodes(
    node_infos: Sequence[NodeInfo], known: Mapping[str, int]
) -> tuple[list[str], list[int]]:
    """The names of ``node_infos`` and the indexes of those whose ``plugin_generation`` is
    not the one ``known`` maps their name to (new or changed nodes).

    Found with ``map`` and one list comparison (C loops): results kept per node across
    cycles are checked every cycle, and a Python loop over every node would make each
    cycle cost O(cluster) before anything changed.
    """
    names = list(map(_NAME, node_infos))
    generations = list(map(_PLUGIN_GENERATION, node_infos))
    kept = list(map(known.get, names))
    if kept == generations:
        return names, []
    return names, list(compress(range(len(kept)), map(ne, kept, generations)))
