"""PodGroupManager: the gang bookkeeping behind the Coscheduling plugin.

The plugin answers per pod, but every answer is about the pod's group: does the PodGroup
exist, are there enough members, does the cluster have room for the whole gang, how many
members already hold a place (bound, assumed or waiting at Permit).  This module keeps those
questions in one place, together with the short-lived memories that make them cheap and
stable under load:

* admissions: a group that passed PreFilter is remembered (until its Permit timeout, or
  until its PodGroup changes or the gang is rejected) so its other members skip the sibling
  count and the cluster-capacity sum;
* denials: a group whose ``minResources`` did not fit is remembered for as long as the
  cluster is unchanged (same snapshot generation), so siblings are denied without redoing
  the sum, and never denied from a stale answer once something was freed;
* backoff: a rejected gang stays out of PreFilter for ``podGroupBackoffSeconds``.

Everything runs on the scheduler's event loop; there are no locks.
"""

from __future__ import annotations

import asyncio
import enum
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from scheduler.framework.interfaces import Handle, NodeInfoLister
from scheduler.framework.node_info import NodeInfo
from scheduler.framework.status import Status, unresolvable
from scheduler.framework.types import QueuedPodInfo
from scheduler.objects.errors import ObjectError
from scheduler.objects.pod import PodInfo
from scheduler.objects.quantity import QuantityError
from scheduler.objects.resources import CPU, PODS, Resource
from scheduler.plugins.coscheduling.topology import TopologyConstraint, parse_topology
from scheduler.plugins.helper import POD_GROUP_LABEL as POD_GROUP_LABEL
from scheduler.plugins.helper import parse_rfc3339
from scheduler.plugins.node_memo import NodeChanges

# The label naming a pod's PodGroup (same namespace), as scheduler-plugins spells it.
POD_GROUP_KIND = "PodGroup"
PODGROUPS = "podgroups"
PODS_RESOURCE = "pods"
# The informer index of pods by ``namespace/group`` (see ``ObjectLister.by_index``).
MEMBERS_INDEX = "coscheduling/pod-group"

# How often expired memories and vanished groups are swept (seconds of the handle clock).
SWEEP_INTERVAL_SECONDS = 60.0

# Reason strings (user-facing; kept close to scheduler-plugins' wording).
REASON_NOT_FOUND = "PodGroup {group} not found"
REASON_NOT_ENOUGH_SIBLINGS = (
    "pre-filter pod {pod} cannot find enough sibling pods, "
    "current pods number: {current}, minMember of group: {min_member}"
)
REASON_BACKED_OFF = "PodGroup {group} failed recently, backing off for {seconds}s more"
REASON_NO_RESOURCES = "PodGroup {group} does not fit the cluster's free resources: {gaps}"


class PermitOutcome(enum.Enum):
    NOT_SPECIFIED = "PodGroup not specified"
    NOT_FOUND = "PodGroup not found"
    INVALID = "PodGroup invalid"
    WAIT = "Wait"
    ALLOW = "Success"


@dataclass(frozen=True, slots=True)
class PodGroupInfo:
    """The parts of a PodGroup the scheduler reads, parsed once per resourceVersion."""

    namespace: str
    name: str
    min_member: int
    # None when spec.minResources is unset (no capacity check).
    min_resources: Mapping[str, int] | None
    schedule_timeout_seconds: int | None
    # metadata.creationTimestamp as POSIX seconds, None if absent.
    created: float | None
    resource_version: str
    # kube-py-scheduler.io/required-topology or preferred-topology (topology.py).
    topology: TopologyConstraint | None = None

    @property
    def full_name(self) -> str:
        return f"{self.namespace}/{self.name}"


def pod_group_name(pod: Mapping[str, Any]) -> str:
    """The PodGroup a pod belongs to ('' for none)."""
    meta = pod.get("metadata")
    labels = meta.get("labels") if isinstance(meta, Mapping) else None
    # Sibling pods are read raw from the informer: a malformed one belongs to no group.
    value = labels.get(POD_GROUP_LABEL) if isinstance(labels, Mapping) else None
    return value if isinstance(value, str) else ""


def pod_group_full_name(pod: Mapping[str, Any]) -> str:
    """``namespace/group`` of a pod's PodGroup ('' for none)."""
    name = pod_group_name(pod)
    if not name:
        return ""
    return f"{(pod.get('metadata') or {}).get('namespace') or ''}/{name}"


def _int_field(obj: Mapping[str, Any], spec: Mapping[str, Any], field: str,
               *, minimum: int) -> int | None:
    value = spec.get(field)
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ObjectError.for_object(
            obj, f"spec.{field}", f"must be an integer >= {minimum}, got {value!r}",
            kind=POD_GROUP_KIND,
        )
    return value


def parse_pod_group(obj: Mapping[str, Any]) -> PodGroupInfo:
    """Parse a PodGroup dict; raises ObjectError naming the PodGroup and the bad field."""
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping) or not meta.get("name"):
        raise ObjectError.for_object(obj, "metadata.name", "required", kind=POD_GROUP_KIND)
    spec = obj.get("spec") or {}
    if not isinstance(spec, Mapping):
        raise ObjectError.for_object(obj, "spec", "must be an object", kind=POD_GROUP_KIND)
    # minMember 0 (unset) means no gang constraint, as the Go zero value does upstream.
    min_member = _int_field(obj, spec, "minMember", minimum=0) or 0
    timeout = _int_field(obj, spec, "scheduleTimeoutSeconds", minimum=0) or None
    raw_resources = spec.get("minResources")
    min_resources: dict[str, int] | None = None
    if raw_resources is not None:
        if not isinstance(raw_resources, Mapping):
            raise ObjectError.for_object(obj, "spec.minResources", "must be a map of quantities",
                                         kind=POD_GROUP_KIND)
        try:
            parsed = Resource.from_resource_list(raw_resources, where="spec.minResources")
        except QuantityError as exc:
            field = getattr(exc, "field", "spec.minResources")
            detail = getattr(exc, "detail", str(exc))
            raise ObjectError.for_object(obj, field, detail, kind=POD_GROUP_KIND) from None
        min_resources = {name: parsed.get(name) for name in raw_resources if parsed.get(name) > 0}
    return PodGroupInfo(
        namespace=str(meta.get("namespace") or ""),
        name=str(meta["name"]),
        min_member=min_member,
        min_resources=min_resources,
        schedule_timeout_seconds=timeout,
        created=parse_rfc3339(meta.get("creationTimestamp")),
        resource_version=str(meta.get("resourceVersion") or ""),
        topology=parse_topology(obj, kind=POD_GROUP_KIND),
    )


def _is_live(pod: Mapping[str, Any]) -> bool:
    """Not finished and not being deleted: a pod that can still be a gang member."""
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        return False
    return (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")


def _members_index_key(pod: dict[str, Any]) -> str | None:
    """The key of the informer's index of pods by group: ``namespace/group``, or None."""
    return pod_group_full_name(pod) or None


class MembersOnNodes:
    """Gang members per node of the snapshot, kept across cycles.

    Permit asks every cycle how many members of the pod's group hold a node; walking every
    pod of every node for that made a gang cycle O(cluster pods).  This keeps, per node,
    its members by group and updates only the nodes that changed since the last question
    (``NodeChanges``), so the answer is the same as the walk's.
    """

    __slots__ = ("_changes", "_nodes_of", "_per_node")

    def __init__(self) -> None:
        self._changes = NodeChanges()
        # node name -> ``namespace/group`` -> members on it, in the node's pod order
        self._per_node: dict[str, dict[str, list[PodInfo]]] = {}
        # ``namespace/group`` -> names of the nodes holding members
        self._nodes_of: dict[str, set[str]] = {}

    def members(self, snapshot: NodeInfoLister, full: str) -> list[PodInfo]:
        """The members of group ``full`` on ``snapshot``'s nodes."""
        out: list[PodInfo] = []
        for pods in self.by_node(snapshot, full).values():
            out.extend(pods)
        return out

    def by_node(self, snapshot: NodeInfoLister, full: str) -> dict[str, list[PodInfo]]:
        """Node name -> the members of group ``full`` on it (nodes holding some only)."""
        node_infos = snapshot.list()
        changed, removed = self._changes.since_last(node_infos, snapshot=snapshot)
        for name in removed:
            self._forget(name)
        for i in changed:
            node_info = node_infos[i]
            self._forget(node_info.name)
            groups: dict[str, list[PodInfo]] = {}
            for p in node_info.pods:
                group = p.labels.get(POD_GROUP_LABEL)
                if group:
                    groups.setdefault(f"{p.namespace}/{group}", []).append(p)
            if groups:
                self._per_node[node_info.name] = groups
                for group_name in groups:
                    self._nodes_of.setdefault(group_name, set()).add(node_info.name)
        return {node_name: self._per_node[node_name][full]
                for node_name in self._nodes_of.get(full, ())}

    def _forget(self, node_name: str) -> None:
        groups = self._per_node.pop(node_name, None)
        if groups is None:
            return
        for group_name in groups:
            nodes = self._nodes_of[group_name]
            nodes.discard(node_name)
            if not nodes:
                del self._nodes_of[group_name]


class FreeCapacity:
    """What the snapshot's nodes have left of some resources (``pods``: pod slots), summed
    over the nodes, kept across cycles.

    PreFilter checks a group's minResources against the cluster's free capacity when the
    group's first member comes; walking every pod of every node for that cost tens of
    milliseconds at 5000 nodes.  Each node's leftovers are kept and only changed nodes are
    looked at again (``NodeChanges``).
    """

    __slots__ = ("_changes", "_left", "_resources", "_totals")

    def __init__(self) -> None:
        self._changes = NodeChanges()
        self._resources: tuple[str, ...] = ()
        # node name -> allocatable minus requested per resource (None: no Node object)
        self._left: dict[str, tuple[int, ...] | None] = {}
        self._totals: list[int] = []  # per resource, the sum of the positive leftovers

    def refresh(self, snapshot: NodeInfoLister, resources: Iterable[str]
                ) -> tuple[tuple[str, ...], list[int], dict[str, tuple[int, ...] | None]]:
        """(resources tracked, free per resource, each node's leftovers), covering at
        least ``resources``; read-only."""
        if not set(resources) <= set(self._resources):
            self._resources = tuple(sorted(set(self._resources) | set(resources)))
            self._changes = NodeChanges()
            self._left = {}
            self._totals = [0] * len(self._resources)
        node_infos = snapshot.list()
        changed, removed = self._changes.since_last(node_infos, snapshot=snapshot)
        for name in removed:
            self._apply(self._left.pop(name), -1)
        for i in changed:
            node_info = node_infos[i]
            self._apply(self._left.get(node_info.name), -1)
            left = None if node_info.node is None else tuple(
                _left_on(node_info, resource) for resource in self._resources)
            self._left[node_info.name] = left
            self._apply(left, 1)
        return self._resources, self._totals, self._left

    def _apply(self, left: tuple[int, ...] | None, sign: int) -> None:
        if left is None:
            return
        totals = self._totals
        for i, amount in enumerate(left):
            if amount > 0:
                totals[i] += sign * amount


def _left_on(node_info: NodeInfo, resource: str) -> int:
    if resource == PODS:
        return node_info.allocatable.allowed_pod_number - len(node_info.pods)
    return node_info.allocatable.get(resource) - node_info.requested.get(resource)


def format_amount(resource: str, amount: int) -> str:
    """A readable quantity: cpu from millicores, byte-like amounts with binary suffixes."""
    if resource == CPU:
        return str(amount // 1000) if amount % 1000 == 0 else f"{amount}m"
    for suffix, factor in (("Gi", 1 << 30), ("Mi", 1 << 20), ("Ki", 1 << 10)):
        if amount >= factor and amount % factor == 0:
            return f"{amount // factor}{suffix}"
    return str(amount)


class PodGroupManager:
    """Group-level state and questions for one profile's Coscheduling plugin."""

    def __init__(
        self,
        handle: Handle,
        *,
        permit_waiting_time_seconds: float,
        pod_group_backoff_seconds: float,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self._handle = handle
        self.permit_waiting_time_seconds = float(permit_waiting_time_seconds)
        self.pod_group_backoff_seconds = float(pod_group_backoff_seconds)
        # QueueSort compares PodGroup creation times (wall clock) with queue timestamps
        # (the handle's monotonic clock): convert once with a fixed offset.
        self._wall_to_clock = handle.clock() - float(wall_clock())
        self._infos: dict[str, tuple[Mapping[str, Any], PodGroupInfo]] = {}
        # full name -> (expiry, PodGroup resourceVersion)
        self._admitted: dict[str, tuple[float, str]] = {}
        # full name -> (snapshot fingerprint, PodGroup resourceVersion, message)
        self._denied: dict[str, tuple[tuple[int, int], str, str]] = {}
        # full name -> backoff end
        self._backoff: dict[str, float] = {}
        self._backoff_timers: dict[str, asyncio.TimerHandle] = {}
        # full name -> the gang rejection of the current pass, reported once at its end
        self._rejections: dict[str, str] = {}
        self._completions: set[str] = set()
        self._next_sweep = handle.clock() + SWEEP_INTERVAL_SECONDS
        self._on_nodes = MembersOnNodes()
        self._free = FreeCapacity()

    # --- PodGroups -----------------------------------------------------------------------

    def get_pod_group(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        return self._handle.listers.get(PODGROUPS, namespace, name)

    def info(self, obj: Mapping[str, Any]) -> PodGroupInfo:
        """Parsed PodGroup, cached per object version; raises ObjectError when malformed."""
        meta = obj.get("metadata") or {}
        key = f"{meta.get('namespace') or ''}/{meta.get('name') or ''}"
        cached = self._infos.get(key)
        if cached is not None:
            cached_obj, cached_info = cached
            rv = str(meta.get("resourceVersion") or "")
            if cached_obj is obj or (rv and rv == cached_info.resource_version):
                return cached_info
        info = parse_pod_group(obj)
        self._infos[key] = (obj, info)
        return info

    def lookup(self, pod: PodInfo) -> tuple[str, Mapping[str, Any] | None]:
        """(``namespace/group`` or '', the PodGroup object or None)."""
        name = pod.labels.get(POD_GROUP_LABEL) or ""
        if not name:
            return "", None
        return f"{pod.namespace}/{name}", self.get_pod_group(pod.namespace, name)

    def wait_timeout(self, info: PodGroupInfo) -> float:
        """How long a member waits at Permit: scheduleTimeoutSeconds, else the plugin arg."""
        if info.schedule_timeout_seconds:
            return float(info.schedule_timeout_seconds)
        return self.permit_waiting_time_seconds

    # --- QueueSort -----------------------------------------------------------------------

    def sort_key(self, qpi: QueuedPodInfo) -> tuple[float, str]:
        """(time, ``namespace/group-or-pod``): the group's creation time for gang members,
        the pod's first enqueue time otherwise."""
        pod = qpi.pod_info
        fallback = qpi.initial_attempt_timestamp
        if fallback is None:
            fallback = qpi.timestamp
        name = pod.labels.get(POD_GROUP_LABEL) or ""
        if not name:
            return fallback, pod.key
        obj = self.get_pod_group(pod.namespace, name)
        if obj is None:
            return fallback, f"{pod.namespace}/{name}"
        try:
            created = self.info(obj).created
        except ObjectError:
            created = None
        if created is None:
            return fallback, f"{pod.namespace}/{name}"
        return created + self._wall_to_clock, f"{pod.namespace}/{name}"

    # --- members -------------------------------------------------------------------------

    def members(self, namespace: str, name: str) -> list[dict[str, Any]]:
        """Live pods of the group known to the pod informer (assigned or not), from an
        index of the informer's pods by group (not a walk over the namespace's pods)."""
        try:
            pods = self._handle.listers.by_index(
                PODS_RESOURCE, MEMBERS_INDEX, f"{namespace}/{name}", _members_index_key)
        except KeyError:  # no pod informer behind the listers: the snapshot must do
            return []
        return [p for p in pods if _is_live(p)]

    def assigned_in_snapshot(self, namespace: str, name: str) -> list[PodInfo]:
        """Members holding a node in this cycle's snapshot (bound, assumed or waiting)."""
        return self._on_nodes.members(self._handle.snapshot(), f"{namespace}/{name}")

    def waiting_members(self, namespace: str, name: str) -> list[Any]:
        return [
            wp for wp in self._handle.iterate_waiting_pods()
            if wp.pod_info.namespace == namespace
            and wp.pod_info.labels.get(POD_GROUP_LABEL) == name
        ]

    def count_members(self, pod: PodInfo, name: str) -> int:
        """Distinct live members: the informer's pods, the snapshot's, and this pod."""
        uids = {pod.uid or pod.key}
        for p in self.members(pod.namespace, name):
            meta = p.get("metadata") or {}
            uids.add(str(meta.get("uid") or f"{meta.get('namespace')}/{meta.get('name')}"))
        for info in self.assigned_in_snapshot(pod.namespace, name):
            if _is_live(info.pod):
                uids.add(info.uid or info.key)
        return len(uids)

    def assigned_uids(self, namespace: str, name: str, *, including: PodInfo | None = None
                      ) -> set[str]:
        """Members that hold a place: in the snapshot (bound or assumed), waiting at Permit,
        and ``including`` (the pod at Permit, not yet in the cycle's snapshot)."""
        uids = {p.uid or p.key for p in self.assigned_in_snapshot(namespace, name)}
        for wp in self.waiting_members(namespace, name):
            uids.add(wp.pod_info.uid or wp.pod_info.key)
        if including is not None:
            uids.add(including.uid or including.key)
        return uids

    def pending_siblings(self, pod: PodInfo, name: str) -> list[dict[str, Any]]:
        """Members still to be scheduled (not assigned, not waiting), excluding ``pod``."""
        waiting = {wp.pod_info.uid for wp in self.waiting_members(pod.namespace, name)}
        out = []
        for p in self.members(pod.namespace, name):
            meta = p.get("metadata") or {}
            uid = meta.get("uid")
            if uid == pod.uid or uid in waiting or (p.get("spec") or {}).get("nodeName"):
                continue
            out.append(p)
        return out

    # --- PreFilter -----------------------------------------------------------------------

    def pre_filter(self, pod: PodInfo) -> Status | None:
        """None to admit the pod; an UnschedulableAndUnresolvable status naming the reason."""
        full, obj = self.lookup(pod)
        if not full:
            return None
        now = self._handle.clock()
        self._maybe_sweep(now)
        if obj is None:
            return unresolvable(REASON_NOT_FOUND.format(group=full))
        try:
            info = self.info(obj)
        except ObjectError as exc:
            return unresolvable(str(exc))

        remaining = self.backoff_remaining(full, now=now)
        if remaining > 0:
            return unresolvable(REASON_BACKED_OFF.format(group=full, seconds=_ceil(remaining)))

        admitted = self._admitted.get(full)
        if admitted is not None and admitted[0] > now and admitted[1] == info.resource_version:
            return None

        current = self.count_members(pod, info.name)
        if current < info.min_member:
            return unresolvable(REASON_NOT_ENOUGH_SIBLINGS.format(
                pod=pod.name, current=current, min_member=info.min_member))

        if info.min_resources is not None:
            fingerprint = self._snapshot_fingerprint()
            denied = self._denied.get(full)
            if (denied is not None and fingerprint is not None and denied[0] == fingerprint
                    and denied[1] == info.resource_version):
                return unresolvable(denied[2])
            gaps = self.resource_gaps(info)
            if gaps:
                message = REASON_NO_RESOURCES.format(group=full, gaps=gaps)
                if fingerprint is not None:
                    self._denied[full] = (fingerprint, info.resource_version, message)
                return unresolvable(message)
            self._denied.pop(full, None)

        self._admitted[full] = (now + self.wait_timeout(info), info.resource_version)
        return None

    def _snapshot_fingerprint(self) -> tuple[int, int] | None:
        """Changes whenever a node or a pod on a node changes (None: cannot tell)."""
        snapshot = self._handle.snapshot()
        generation = getattr(snapshot, "generation", None)
        if not isinstance(generation, int):
            return None
        return generation, len(snapshot.list())

    def resource_gaps(self, info: PodGroupInfo) -> str:
        """'' when the cluster's free capacity covers minResources (the group's own assigned
        pods count as free), else a description of each missing resource."""
        need = dict(info.min_resources or {})
        if info.min_member > 0:
            need[PODS] = info.min_member  # room for minMember pods, as upstream checks
        if not need:
            return ""
        snapshot = self._handle.snapshot()
        tracked, totals, left_of = self._free.refresh(snapshot, need)
        index = {resource: i for i, resource in enumerate(tracked)}
        free = {resource: totals[index[resource]] for resource in need}
        # On a node holding members, what they use is free for the group.
        for node_name, own in self._on_nodes.by_node(snapshot, info.full_name).items():
            left = left_of.get(node_name)
            if left is None:
                continue
            for resource in need:
                before = left[index[resource]]
                if resource == PODS:
                    after = before + len(own)
                else:
                    after = before + sum(p.requests.get(resource) for p in own)
                free[resource] += max(after, 0) - max(before, 0)
        if all(free[r] >= need[r] for r in need):
            return ""
        return ", ".join(
            f"{r} (needs {format_amount(r, need[r])}, free {format_amount(r, free[r])})"
            for r in need if free[r] < need[r]
        )

    # --- admissions and backoff ----------------------------------------------------------

    def forget_admission(self, full: str) -> None:
        self._admitted.pop(full, None)

    def record_rejection(self, full: str, message: str) -> None:
        """The gang was given up in this pass (PostFilter): the pass's end reports it once."""
        self._rejections[full] = message

    def take_rejection(self, full: str) -> str:
        return self._rejections.pop(full, "")

    def record_completion(self, full: str) -> None:
        """Permit let the whole gang go in this pass (its last members are assumed after
        the cycle's snapshot, so the snapshot cannot tell)."""
        self._completions.add(full)

    def take_completion(self, full: str) -> bool:
        if full in self._completions:
            self._completions.discard(full)
            return True
        return False

    def backoff_remaining(self, full: str, *, now: float | None = None) -> float:
        until = self._backoff.get(full)
        if until is None:
            return 0.0
        now = self._handle.clock() if now is None else now
        if until <= now:
            del self._backoff[full]
            return 0.0
        return until - now

    def backoff(self, namespace: str, name: str) -> bool:
        """Back the group off (unless backoff is disabled or it is backing off already, which
        must not extend: members denied during the backoff would otherwise renew it)."""
        if self.pod_group_backoff_seconds <= 0:
            return False
        full = f"{namespace}/{name}"
        if self.backoff_remaining(full) > 0:
            return False
        self._backoff[full] = self._handle.clock() + self.pod_group_backoff_seconds
        self._schedule_reactivation(namespace, name)
        return True

    def _schedule_reactivation(self, namespace: str, name: str) -> None:
        """When the backoff ends, bring the members back from the unschedulable pool (no
        cluster event may come to move them)."""
        full = f"{namespace}/{name}"
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # called outside the loop (unit tests): nothing to schedule
            return
        old = self._backoff_timers.pop(full, None)
        if old is not None:
            old.cancel()
        self._backoff_timers[full] = loop.call_later(
            self.pod_group_backoff_seconds, self._reactivate, namespace, name)

    def _reactivate(self, namespace: str, name: str) -> None:
        self._backoff_timers.pop(f"{namespace}/{name}", None)
        pods = [p for p in self.members(namespace, name)
                if not (p.get("spec") or {}).get("nodeName")]
        if pods:
            self._handle.activate(pods)

    def reject_waiting(self, namespace: str, name: str, *, plugin: str, message: str,
                       exclude_uid: str = "") -> int:
        """Reject every member waiting at Permit; returns how many were rejected."""
        count = 0
        for wp in self.waiting_members(namespace, name):
            if exclude_uid and wp.pod_info.uid == exclude_uid:
                continue
            wp.reject(plugin, message)
            count += 1
        return count

    def allow_waiting(self, namespace: str, name: str, *, plugin: str) -> int:
        count = 0
        for wp in self.waiting_members(namespace, name):
            wp.allow(plugin)
            count += 1
        return count

    def _maybe_sweep(self, now: float) -> None:
        """Drop expired memories and parsed groups that no longer exist (bounded memory)."""
        if now < self._next_sweep:
            return
        self._next_sweep = now + SWEEP_INTERVAL_SECONDS
        for full, (expiry, _) in list(self._admitted.items()):
            if expiry <= now:
                del self._admitted[full]
        for full, until in list(self._backoff.items()):
            if until <= now:
                del self._backoff[full]
        for full in list(self._infos):
            namespace, _, name = full.partition("/")
            if self.get_pod_group(namespace, name) is None:
                self._infos.pop(full, None)
                self._rejections.pop(full, None)
                self._completions.discard(full)
                self._denied.pop(full, None)
                self._admitted.pop(full, None)

    # --- introspection (tests, debugging) ------------------------------------------------

    def is_admitted(self, full: str) -> bool:
        entry = self._admitted.get(full)
        return entry is not None and entry[0] > self._handle.clock()

    def known_groups(self) -> Iterable[str]:
        return list(self._infos)


def _ceil(seconds: float) -> int:
    whole = int(seconds)
    return whole if whole == seconds else whole + 1
