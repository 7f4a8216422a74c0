"""Coscheduling: all-or-nothing (gang) scheduling of the pods of a PodGroup.

Compatible with kubernetes-sigs/scheduler-plugins: the same plugin name, args, PodGroup CRD
(``scheduling.x-k8s.io/v1alpha1``) and pod label, so manifests and scheduler configurations
written for it work unchanged.

How a gang gets through:

* QueueSort keeps the members of a group next to each other (priority, then the group's
  creation time, then ``namespace/group``), so gangs are not interleaved in activeQ.
* PreFilter turns a member away early (UnschedulableAndUnresolvable, no preemption) when the
  group is missing, has fewer than minMember pods, is backing off, or its minResources
  cannot fit the cluster's free capacity.
* Permit parks each member (Wait) until minMember members hold a place, then allows them
  all at once; while waiting it activates the pending siblings so they are tried next
  (scheduler-plugins #114/#117: two gangs that each hold part of the cluster deadlock).
* PostFilter and Unreserve reject the waiting siblings when a member cannot be placed or a
  waiting member fails / times out, so a partial gang releases its resources at once.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from scheduler.framework import events as ev
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.events import ClusterEventWithHint, QueueingHint
from scheduler.framework.interfaces import (
    EnqueueExtensions,
    Handle,
    PermitPlugin,
    PodGroupPlugin,
    PostFilterPlugin,
    PreFilterPlugin,
    QueueSortPlugin,
    ReservePlugin,
)
from scheduler.framework.node_info import NodeInfo
from scheduler.framework.status import Code, Status, unresolvable
from scheduler.framework.types import PostFilterResult, PreFilterResult, QueuedPodInfo
from scheduler.objects.errors import ObjectError
from scheduler.objects.pod import PodInfo, pod_requests
from scheduler.objects.quantity import QuantityError
from scheduler.objects.resources import Resource
from scheduler.plugins import names
from scheduler.plugins.coscheduling.core import (
    POD_GROUP_LABEL,
    PermitOutcome,
    PodGroupInfo,
    PodGroupManager,
    pod_group_name,
)
from scheduler.plugins.coscheduling.topology import (
    REASON_NO_DOMAIN,
    DomainIndex,
    TopologyView,
    choose_domain,
    describe,
)
from scheduler.plugins.helper import (
    GANG_TOPOLOGY_STATE_KEY,
    RequiredGangTopology,
    args_error,
)

NAME = names.COSCHEDULING

# Args (CoschedulingArgs of scheduler-plugins) and their defaults.
ARG_PERMIT_WAITING_TIME = "permitWaitingTimeSeconds"
ARG_BACKOFF = "podGroupBackoffSeconds"
ARG_REJECT_PERCENTAGE = "podGroupRejectPercentage"
DEFAULT_PERMIT_WAITING_TIME_SECONDS = 60
DEFAULT_POD_GROUP_BACKOFF_SECONDS = 0
DEFAULT_POD_GROUP_REJECT_PERCENTAGE = 10
# Fields of older scheduler-plugins releases: accepted so old configurations keep loading,
# and ignored (we read PodGroups from the informer; denials are tied to the snapshot).
_DEPRECATED_ARGS = frozenset({"kubeConfigPath", "kubeMaster", "deniedPGExpirationTimeSeconds"})
_ARGS = frozenset({ARG_PERMIT_WAITING_TIME, ARG_BACKOFF, ARG_REJECT_PERCENTAGE})

# Reason strings.
REASON_GROUP_REJECTED = (
    "PodGroup {group} gets rejected due to Pod {pod} is unschedulable even after PostFilter"
)
# scheduler-plugins' words for the waiting siblings a failed member's PostFilter lets go.
REASON_POST_FILTER_REJECT = "optimistic rejection in PostFilter"
REASON_UNRESERVE_REJECT = "rejected in Unreserve: member {pod} of PodGroup {group} was rejected"
REASON_PERMIT_NOT_FOUND = "PodGroup {group} not found"
# Events on the PodGroup, one per gang decision.
EVENT_REASON_SCHEDULED = "Scheduled"
EVENT_REASON_FAILED = "FailedScheduling"
REASON_GANG_PLACED = "PodGroup {group}: {placed} member(s) placed, minMember {min_member}"
# The waiting members, when a pass over every queued member left the gang short.
REASON_PASS_INCOMPLETE = (
    "PodGroup {group} is incomplete after trying its members: {placed}/{min_member} placed")

# CycleState key: Coscheduling's own PreFilter rejected the pod (PostFilter then stays quiet:
# the PreFilter message already says why, and there is no gang to roll back).
_STATE_KEY = "Coscheduling/preFilterRejected"


class _Rejected:
    __slots__ = ()

    def clone(self) -> _Rejected:
        return self


_REJECTED = _Rejected()


def _int_arg(args: Mapping[str, Any], field: str, default: int, *, low: int,
             high: int | None = None) -> int:
    value = args.get(field)
    if value is None:
        return default
    if not isinstance(value, int) or isinstance(value, bool):
        raise args_error(NAME, field, f"must be an integer, got {value!r}")
    if value < low or (high is not None and value > high):
        bound = f"between {low} and {high}" if high is not None else f">= {low}"
        raise args_error(NAME, field, f"must be {bound}, got {value}")
    return value


def _same_group(pod: Mapping[str, Any], namespace: str, group: str) -> bool:
    meta = pod.get("metadata") or {}
    return bool(group) and (meta.get("namespace") or "") == namespace and (
        pod_group_name(pod) == group)


def _pod_group_hint(pod: dict[str, Any], old: Any, new: Any) -> QueueingHint:
    """Queue a pod when its own PodGroup is added or updated."""
    obj = new if isinstance(new, Mapping) else old
    if not isinstance(obj, Mapping):
        return QueueingHint.QUEUE
    meta = obj.get("metadata") or {}
    pod_meta = pod.get("metadata") or {}
    if (meta.get("namespace") or "") == (pod_meta.get("namespace") or "") and (
            meta.get("name") == pod_group_name(pod)):
        return QueueingHint.QUEUE
    return QueueingHint.SKIP


def _group_event_keys(old: Any, new: Any) -> list[tuple[str, Any]] | None:
    """Keys of a PodGroup event for ``_pod_group_hint``: the group's (namespace, name);
    None (every pod) when the event carries no object."""
    obj = new if isinstance(new, Mapping) else old
    if not isinstance(obj, Mapping):
        return None
    meta = obj.get("metadata") or {}
    return [(meta.get("namespace") or "", meta.get("name"))]


def _sibling_event_keys(old: Any, new: Any) -> list[tuple[str, str]] | None:
    """Keys of a pod event for ``_sibling_hint``: the (namespace, group) the pod is in."""
    obj = new if isinstance(new, Mapping) else old
    if not isinstance(obj, Mapping):
        return None
    group = pod_group_name(obj)
    return [((obj.get("metadata") or {}).get("namespace") or "", group)] if group else []


def _member_keys(pod: dict[str, Any]) -> list[tuple[str, str]]:
    """Keys of a waiting pod for both hints: its group's (namespace, name) ('' for none:
    ``_pod_group_hint`` compares the names as they are)."""
    return [((pod.get("metadata") or {}).get("namespace") or "", pod_group_name(pod))]


def _sibling_hint(pod: dict[str, Any], old: Any, new: Any) -> QueueingHint:
    """Queue a gang member when a sibling appears (its group may now reach minMember)."""
    obj = new if isinstance(new, Mapping) else old
    if not isinstance(obj, Mapping):
        return QueueingHint.QUEUE
    group = pod_group_name(pod)
    if not group:
        return QueueingHint.SKIP
    namespace = (pod.get("metadata") or {}).get("namespace") or ""
    return QueueingHint.QUEUE if _same_group(obj, namespace, group) else QueueingHint.SKIP


_POD_GROUP_HINT = ev.KeyedHint(_pod_group_hint, event_keys=_group_event_keys,
                               pod_keys=_member_keys)
_SIBLING_HINT = ev.KeyedHint(_sibling_hint, event_keys=_sibling_event_keys,
                             pod_keys=_member_keys)


def _freed_capacity_hint(pod: dict[str, Any], old: Any, new: Any) -> QueueingHint:
    """Queue a gang member when an assigned pod goes away, unless it is a member of the same
    gang: a gang's own members are released when the gang is rolled back (or taken down as
    a whole), and what they free is what the gang already counted as its own.  Requeueing
    on it retried the gang at once after each of its own rollbacks (issue 22)."""
    obj = old if isinstance(old, Mapping) else new
    if not isinstance(obj, Mapping):
        return QueueingHint.QUEUE
    group = pod_group_name(pod)
    if not group:
        return QueueingHint.QUEUE
    namespace = (pod.get("metadata") or {}).get("namespace") or ""
    return QueueingHint.SKIP if _same_group(obj, namespace, group) else QueueingHint.QUEUE


def _size_first(requests: Resource, key: str) -> tuple[int, int, str]:
    return -requests.milli_cpu, -requests.memory, key


_SIZES_CACHE_LIMIT = 100_000
_DOMAIN_INDEX_LIMIT = 16  # topology keys in use at once (racks, blocks, zones ...)


def _key(pod: dict[str, Any]) -> str:
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace') or ''}/{meta.get('name') or ''}"


def _sibling_order(pod: dict[str, Any]) -> tuple[int, int, str]:
    """QueueSort's order among siblings, for raw pods: the largest first, then by key."""
    key = _key(pod)
    try:
        requests = pod_requests(pod)
    except (ObjectError, QuantityError, ValueError, TypeError):
        requests = Resource()  # malformed: the scheduler reports it when it pops the pod
    return _size_first(requests, key)


class Coscheduling(
    QueueSortPlugin, PreFilterPlugin, PostFilterPlugin, PermitPlugin, ReservePlugin,
    EnqueueExtensions, PodGroupPlugin,
):
    NAME = NAME

    def __init__(self, args: Mapping[str, Any] | None, handle: Handle, *,
                 wall_clock: Callable[[], float] = time.time) -> None:
        args = args or {}
        if not isinstance(args, Mapping):
            raise args_error(NAME, "", f"must be an object, got {type(args).__name__}")
        for key in args:
            if key not in _ARGS and key not in _DEPRECATED_ARGS:
                raise args_error(NAME, str(key), "unknown field")
        self.permit_waiting_time_seconds = _int_arg(
            args, ARG_PERMIT_WAITING_TIME, DEFAULT_PERMIT_WAITING_TIME_SECONDS, low=0)
        self.pod_group_backoff_seconds = _int_arg(
            args, ARG_BACKOFF, DEFAULT_POD_GROUP_BACKOFF_SECONDS, low=0)
        self.pod_group_reject_percentage = _int_arg(
            args, ARG_REJECT_PERCENTAGE, DEFAULT_POD_GROUP_REJECT_PERCENTAGE, low=0, high=100)
        self._handle = handle
        # pod uid -> (resourceVersion, requests): siblings' sizes for topology's packing
        self._sizes: dict[str, tuple[Any, Resource]] = {}
        # topology key -> its domains, kept across cycles
        self._domain_indexes: dict[str, DomainIndex] = {}
        self.manager = PodGroupManager(
            handle,
            permit_waiting_time_seconds=self.permit_waiting_time_seconds,
            pod_group_backoff_seconds=self.pod_group_backoff_seconds,
            wall_clock=wall_clock,
        )

    # --- enqueue -------------------------------------------------------------------------

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            # The group arrives after its pods, or its minMember/minResources change.
            # Both keyed by the group: the queue asks only the group's waiting members.
            ClusterEventWithHint(ev.POD_GROUP_ADD, _POD_GROUP_HINT),
            ClusterEventWithHint(ev.POD_GROUP_UPDATE, _POD_GROUP_HINT),
            # A new sibling may bring the group to minMember.
            ClusterEventWithHint(ev.UNSCHEDULED_POD_ADD, _SIBLING_HINT),
            ClusterEventWithHint(ev.ASSIGNED_POD_ADD, _SIBLING_HINT),
            # Freed or added capacity may fit minResources / the rest of the gang (but not
            # the gang's own members being released).
            ClusterEventWithHint(ev.ASSIGNED_POD_DELETE, _freed_capacity_hint),
            ClusterEventWithHint(ev.NODE_ADD),
            # A node joining a topology domain (its label set) may make room in one.
            ClusterEventWithHint(ev.ClusterEvent(
                ev.EventResource.NODE, ev.ActionType.UPDATE_NODE_LABEL, "NodeLabelChange")),
            ClusterEventWithHint(ev.ClusterEvent(
                ev.EventResource.NODE, ev.ActionType.UPDATE_NODE_ALLOCATABLE,
                "NodeAllocatableChange")),
        ]

    # --- QueueSort -----------------------------------------------------------------------

    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        p1, p2 = a.pod_info.priority, b.pod_info.priority
        if p1 != p2:
            return p1 > p2
        t1, k1 = self.manager.sort_key(a)
        t2, k2 = self.manager.sort_key(b)
        if t1 != t2:
            return t1 < t2
        if k1 != k2:
            return k1 < k2
        # Siblings: the largest first (small members then fill the room left next to big
        # ones, in one pass), then a stable order among themselves.
        return _size_first(a.pod_info.requests, a.pod_info.key) < _size_first(
            b.pod_info.requests, b.pod_info.key)

    # --- PreFilter -----------------------------------------------------------------------

    def pre_filter(
        self, state: CycleState, pod_info: PodInfo, nodes: list[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status | None]:
        status = self.manager.pre_filter(pod_info)
        if status is None:
            result, status = self._topology(state, pod_info, nodes)
            if status is None:
                return result, None
        state.write(_STATE_KEY, _REJECTED)
        return None, status

    def _topology(
        self, state: CycleState, pod_info: PodInfo, nodes: list[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status | None]:
        """The nodes of the gang's topology domain (topology.py): the domain its placed
        members hold, else the tightest where the missing members fit.  A required
        topology leaves the gang's domains in the cycle state for preemption, which then
        plans within one domain."""
        view = self.topology_view(pod_info, nodes, every_domain=False)
        if view is None:
            return None, None
        key, required = view.constraint.key, view.constraint.required
        if view.chosen is None and required:
            # Turned down: judge every domain, for the message (the rare, slow path).
            view = self.topology_view(pod_info, nodes) or view
        if view.chosen is not None:
            if required:
                state.write(GANG_TOPOLOGY_STATE_KEY, RequiredGangTopology(
                    key, {view.chosen.value: frozenset(view.chosen.nodes)}, rejected=False))
            return PreFilterResult(node_names=set(view.chosen.nodes)), None
        if not required:
            return None, None  # preferred: anywhere will do
        state.write(GANG_TOPOLOGY_STATE_KEY, RequiredGangTopology(
            key, {d.value: frozenset(d.nodes) for d in view.considered}, rejected=True))
        full = f"{pod_info.namespace}/{pod_info.labels.get(POD_GROUP_LABEL, '')}"
        message = REASON_NO_DOMAIN.format(
            group=full, key=key, need=view.need,
            domains=describe(view.considered, key, view.unlabeled))
        if not view.considered:
            return None, unresolvable(message)  # no node has the label: nothing can help
        # Unschedulable, not unresolvable: preemption may free room in one domain.
        return None, Status(Code.UNSCHEDULABLE, message)

    def topology_view(self, pod_info: PodInfo, nodes: list[NodeInfo] | None = None, *,
                      every_domain: bool = True) -> TopologyView | None:
        """Every domain of the gang's topology key as PreFilter judges it for this pod
        (None: no gang, or no topology annotation); ``explain`` shows it as a table.
        ``every_domain=False``: only the choice, from the kept per-domain totals
        (``DomainIndex``), as each member's PreFilter needs it."""
        full, obj = self.manager.lookup(pod_info)
        if not full or obj is None:
            return None
        try:
            info = self.manager.info(obj)
        except ObjectError:
            return None
        topology = info.topology
        if topology is None:
            return None
        placed = [p.node_name for p in self.manager.assigned_in_snapshot(
            info.namespace, info.name) if p.uid != pod_info.uid]
        need = max(info.min_member - len(placed), 1)
        missing = self._missing_requests(pod_info, info.name, need)
        if not every_domain:
            index = self._domain_indexes.get(topology.key)
            if index is None:
                if len(self._domain_indexes) >= _DOMAIN_INDEX_LIMIT:
                    self._domain_indexes.clear()
                index = self._domain_indexes[topology.key] = DomainIndex(topology.key)
            index.refresh(self._handle.snapshot())
            chosen = index.choose(request=pod_info.requests, need=need, placed_on=placed,
                                  missing=missing)
            return TopologyView(topology, need, chosen, [], 0)
        if not nodes:
            nodes = self._handle.snapshot().list()
        best, considered, unlabeled = choose_domain(
            nodes, topology.key, request=pod_info.requests, need=need, placed_on=placed,
            missing=missing)
        return TopologyView(topology, need, best, considered, unlabeled)

    def _missing_requests(self, pod_info: PodInfo, group: str, need: int) -> list[Resource]:
        """The requests of the ``need`` members to place (this pod, then its pending
        siblings in the pass's order) when they differ in size; [] when they are alike
        (counting members of this pod's size is then exact, and cheaper)."""
        sized = [(self._requests_of(p), p) for p in
                 self.manager.pending_siblings(pod_info, group)]
        sized.sort(key=lambda rp: _size_first(rp[0], _key(rp[1])))
        requests = [pod_info.requests] + [r for r, _ in sized[:max(need - 1, 0)]]
        if all(r == pod_info.requests for r in requests):
            return []
        return requests

    def _requests_of(self, pod: dict[str, Any]) -> Resource:
        """A sibling's requests, parsed once per resourceVersion (PreFilter asks for every
        member of a gang on each member's cycle)."""
        meta = pod.get("metadata") or {}
        uid, version = str(meta.get("uid") or _key(pod)), meta.get("resourceVersion")
        cached = self._sizes.get(uid)
        if cached is not None and cached[0] == version:
            return cached[1]
        try:
            requests = pod_requests(pod)
        except (ObjectError, QuantityError, ValueError, TypeError):
            requests = Resource()  # malformed: reported when the pod itself is popped
        if len(self._sizes) > _SIZES_CACHE_LIMIT:
            self._sizes.clear()
        self._sizes[uid] = (version, requests)
        return requests

    # --- PostFilter ----------------------------------------------------------------------

    def post_filter(
        self,
        state: CycleState,
        pod_info: PodInfo,
        node_to_status: Mapping[str, Status],
    ) -> tuple[PostFilterResult | None, Status | None]:
        manager = self.manager
        full, obj = manager.lookup(pod_info)
        if not full or obj is None:
            return None, Status(Code.UNSCHEDULABLE)
        try:
            info = manager.info(obj)
        except ObjectError:
            return None, Status(Code.UNSCHEDULABLE)
        group, namespace = info.name, info.namespace
        reject_message = REASON_POST_FILTER_REJECT

        if state.get(_STATE_KEY) is not None:
            # Turned away by our own PreFilter: no member of this cycle holds anything, but
            # siblings parked at Permit cannot complete either; let them go now.
            manager.reject_waiting(namespace, group, plugin=NAME, message=reject_message,
                                   exclude_uid=pod_info.uid)
            return None, Status(Code.UNSCHEDULABLE)

        assigned = len(manager.assigned_uids(namespace, group))
        if assigned >= info.min_member:
            # The gang is complete already; this extra member just does not fit.
            return None, Status(Code.UNSCHEDULABLE)
        if not self._missing_too_many(info, assigned):
            # Only a small part of the gang is missing: keep the others waiting, the next
            # members may still complete it.
            return None, Status(Code.UNSCHEDULABLE)

        manager.reject_waiting(namespace, group, plugin=NAME, message=reject_message,
                               exclude_uid=pod_info.uid)
        manager.record_rejection(
            full, REASON_GROUP_REJECTED.format(group=full, pod=pod_info.name))
        if len(manager.members(namespace, group)) >= info.min_member:
            # Enough pods exist and still the gang did not fit: give the cluster a rest.
            manager.backoff(namespace, group)
        manager.forget_admission(full)
        return None, Status(
            Code.UNSCHEDULABLE, REASON_GROUP_REJECTED.format(group=full, pod=pod_info.name))

    def _missing_too_many(self, info: PodGroupInfo, assigned: int) -> bool:
        """scheduler-plugins' podGroupRejectPercentage: give the gang up when more than this
        share of minMember is missing."""
        if info.min_member <= 0:
            return False
        missing_percentage = 100.0 * (info.min_member - assigned) / info.min_member
        return missing_percentage > self.pod_group_reject_percentage

    # --- the PodGroup pass ---------------------------------------------------------------

    def pod_group_members(self, pod_info: PodInfo) -> list[dict[str, Any]] | None:
        """The group's other pending members, in QueueSort's order among siblings (by key):
        the scheduler tries them right after ``pod_info``, before any other pod."""
        full, obj = self.manager.lookup(pod_info)
        if not full or obj is None:
            return None
        group = pod_info.labels.get(POD_GROUP_LABEL) or ""
        siblings = self.manager.pending_siblings(pod_info, group)
        return sorted(siblings, key=_sibling_order)

    def pod_group_pass_done(self, pod_info: PodInfo) -> bool:
        """Every queued member was tried: True if the gang is complete.  A gang still short
        of minMember (by more than podGroupRejectPercentage) lets its waiting members go now
        instead of holding their nodes until scheduleTimeoutSeconds: nothing is left to
        complete it this pass.  One event on the PodGroup per decision (placed whole, or
        given up), rather than one per member per retry."""
        manager = self.manager
        full, obj = manager.lookup(pod_info)
        if not full or obj is None:
            return False
        try:
            info = manager.info(obj)
        except ObjectError:
            return False
        assigned = len(manager.assigned_uids(info.namespace, info.name))
        rejected_by_post_filter = manager.take_rejection(full)
        if manager.take_completion(full) or assigned >= info.min_member:
            assigned = max(assigned, info.min_member)
            self._gang_event(obj, type_="Normal", reason=EVENT_REASON_SCHEDULED,
                             message=REASON_GANG_PLACED.format(
                                 group=full, placed=assigned, min_member=info.min_member))
            return True
        if rejected_by_post_filter:
            self._gang_event(obj, type_="Warning", reason=EVENT_REASON_FAILED,
                             message=rejected_by_post_filter)
            return False
        if not self._missing_too_many(info, assigned):
            return False
        if not manager.waiting_members(info.namespace, info.name):
            return False
        message = REASON_PASS_INCOMPLETE.format(
            group=full, placed=assigned, min_member=info.min_member)
        manager.reject_waiting(info.namespace, info.name, plugin=NAME, message=message)
        manager.backoff(info.namespace, info.name)
        manager.forget_admission(full)
        self._gang_event(obj, type_="Warning", reason=EVENT_REASON_FAILED, message=message)
        return False

    def _gang_event(self, obj: Mapping[str, Any], *, type_: str, reason: str,
                    message: str) -> None:
        try:
            self._handle.event_recorder.event(
                obj, type=type_, reason=reason, action="Scheduling", message=message)
        except Exception:  # events are best effort; never fail the pass
            pass

    # --- Reserve / Unreserve -------------------------------------------------------------

    def reserve(self, state: CycleState, pod_info: PodInfo, node_name: str) -> Status | None:
        # Nothing to reserve: implementing Reserve is what gives the gang its Unreserve hook.
        return None

    def unreserve(self, state: CycleState, pod_info: PodInfo, node_name: str) -> None:
        manager = self.manager
        full, obj = manager.lookup(pod_info)
        if not full or obj is None:
            return
        group = pod_info.labels.get(POD_GROUP_LABEL) or ""
        manager.reject_waiting(
            pod_info.namespace, group, plugin=NAME,
            message=REASON_UNRESERVE_REJECT.format(pod=pod_info.name, group=full),
            exclude_uid=pod_info.uid,
        )
        manager.forget_admission(full)
        manager.backoff(pod_info.namespace, group)

    # --- Permit --------------------------------------------------------------------------

    def permit(
        self, state: CycleState, pod_info: PodInfo, node_name: str
    ) -> tuple[Status | None, float]:
        outcome, info = self._permit_outcome(pod_info)
        if outcome is PermitOutcome.NOT_SPECIFIED:
            return None, 0.0
        full = f"{pod_info.namespace}/{pod_info.labels.get(POD_GROUP_LABEL, '')}"
        if info is None:
            if outcome is PermitOutcome.NOT_FOUND:
                return Status(Code.UNSCHEDULABLE, REASON_PERMIT_NOT_FOUND.format(group=full)), 0.0
            return Status(Code.UNSCHEDULABLE, f"PodGroup {full} is invalid"), 0.0
        if outcome is PermitOutcome.ALLOW:
            self.manager.allow_waiting(info.namespace, info.name, plugin=NAME)
            self.manager.record_completion(info.full_name)
            return None, 0.0
        # Wait for the siblings, and make sure they are tried next.
        siblings = self.manager.pending_siblings(pod_info, info.name)
        if siblings:
            self._handle.activate(siblings)
        return Status(Code.WAIT), self.manager.wait_timeout(info)

    def _permit_outcome(self, pod_info: PodInfo) -> tuple[PermitOutcome, PodGroupInfo | None]:
        manager = self.manager
        full, obj = manager.lookup(pod_info)
        if not full:
            return PermitOutcome.NOT_SPECIFIED, None
        if obj is None:
            return PermitOutcome.NOT_FOUND, None
        try:
            info = manager.info(obj)
        except ObjectError:
            return PermitOutcome.INVALID, None
        assigned = manager.assigned_uids(info.namespace, info.name, including=pod_info)
        if len(assigned) >= info.min_member:
            return PermitOutcome.ALLOW, info
        return PermitOutcome.WAIT, info
