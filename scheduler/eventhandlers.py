"""Informer events → cache and queue (kube-scheduler's addAllEventHandlers).

Pods split three ways: assigned pods (any scheduler's) feed the cache because they use node
capacity; unassigned pods whose schedulerName is one of our profiles feed the queue; other
pods are ignored.  A pod crossing from one side to the other (bound by us, or by someone else)
is a delete on one side and an add on the other.  Everything else (nodes, volumes, PDBs,
PodGroups) updates the cache where relevant and then asks the queue to move the unschedulable
pods that the event might help.

Malformed objects (written by an older API server, a webhook or a bug) never reach the cache
half-parsed and never raise out of a handler: a pending pod that cannot be parsed is told why
(event + PodScheduled condition, once per problem) and kept out of the queue; a bound pod we
cannot read is accounted safely (``PodInfo.from_assigned_pod``: the bad fields dropped, never
negative usage) because it does run on its node; a malformed node is kept out of the cache
(withdrawn if it was there), so nothing is scheduled onto it; a malformed volume, PDB or
PodGroup event moves no pod.  Each is logged once per problem, with the object and the field.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import structlog

from scheduler.cache.cache import CacheError
from scheduler.framework import events as ev
from scheduler.framework.events import ActionType, ClusterEvent, EventResource
from scheduler.metrics import ChildrenByValue
from scheduler.objects.errors import ObjectError
from scheduler.objects.node import validate_node
from scheduler.objects.pod import PodInfo, resize_report
from scheduler.objects.validation import validate_object

if TYPE_CHECKING:
    from scheduler.scheduler import Scheduler

log = structlog.get_logger(__name__)

_NODE_UPDATE_LABELS = (
    (ActionType.UPDATE_NODE_ALLOCATABLE, "NodeAllocatableChange"),
    (ActionType.UPDATE_NODE_LABEL, "NodeLabelChange"),
    (ActionType.UPDATE_NODE_TAINT, "NodeTaintChange"),
    (ActionType.UPDATE_NODE_CONDITION, "NodeConditionChange"),
    (ActionType.UPDATE_NODE_ANNOTATION, "NodeAnnotationChange"),
    (ActionType.UPDATE_NODE_DECLARED_FEATURE, "NodeDeclaredFeatureChange"),
)


def _unwrap(obj: Any) -> dict[str, Any]:
    """Delete notifications may carry a tombstone (DeletedFinalStateUnknown) with the last state."""
    inner = getattr(obj, "obj", None)
    if isinstance(inner, dict):
        return inner
    return obj  # type: ignore[no-any-return]


def _assigned(pod: dict[str, Any]) -> bool:
    spec = pod.get("spec")
    return isinstance(spec, dict) and bool(spec.get("nodeName"))


# Problems remembered per object, so each is logged (and told to the user) once; bounded
# because objects can be deleted while we do not see it (a relist) and keys would pile up.
_MAX_REMEMBERED = 50_000


class _Once:
    """Remembers the last problem reported per object key.  ``seen`` is empty while no
    problem is remembered (nearly always): callers test it before building a key to clear."""

    __slots__ = ("seen",)

    def __init__(self) -> None:
        self.seen: dict[str, str] = {}

    def first(self, key: str, problem: str) -> bool:
        """True the first time ``problem`` is seen for ``key`` (until it changes or clears)."""
        if self.seen.get(key) == problem:
            return False
        if len(self.seen) >= _MAX_REMEMBERED:
            self.seen.clear()
        self.seen[key] = problem
        return True

    def clear(self, key: str) -> None:
        self.seen.pop(key, None)


_NODE_UPDATE = "NodeUpdate"  # upstream's label for a node update, whatever changed


class EventHandlers:
    def __init__(self, sched: Scheduler) -> None:
        self.sched = sched
        self._once = _Once()
        # scheduler_event_handling_duration_seconds{event}: one observation per event handled.
        self._handling = ChildrenByValue(sched.metrics.ops.event_handling_duration)

    def _handled(self, label: str, started: float) -> None:
        self._handling[label].observe(time.perf_counter() - started)

    def _log_once(self, kind: str, key: str, error: Exception, what: str, *,
                  name: str | None = None) -> bool:
        """Log ``error`` about the object unless it was the last problem logged for ``key``
        (pods are keyed by uid: a deleted and recreated pod is a new object)."""
        if not self._once.first(f"{kind}:{key}", str(error)):
            return False
        log.warning(what, kind=kind, object=key if name is None else name, error=str(error))
        return True

    # --- pods ------------------------------------------------------------------------------

    def responsible_for(self, pod: dict[str, Any]) -> bool:
        spec = pod.get("spec")
        name = (spec.get("schedulerName") if isinstance(spec, dict) else None) or (
            "default-scheduler")
        return isinstance(name, str) and name in self.sched.profiles

    def on_pod_add(self, pod: dict[str, Any]) -> None:
        started = time.perf_counter()
        if _assigned(pod):
            self.add_pod_to_cache(pod)
            self._handled(ev.ASSIGNED_POD_ADD.label, started)
        elif self.responsible_for(pod):
            self.add_pod_to_queue(pod)
            self._handled(ev.UNSCHEDULED_POD_ADD.label, started)

    def on_pod_update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        started = time.perf_counter()
        old_assigned, new_assigned = _assigned(old), _assigned(new)
        if old_assigned and new_assigned:
            self.update_pod_in_cache(old, new)
            self._handled(ev.ASSIGNED_POD_UPDATE.label, started)
            return
        if new_assigned:
            # Bound (by us or anyone): leaves the queue, enters the cache.
            if self.responsible_for(old):
                self.delete_pod_from_queue(old, bound=True)
            self.add_pod_to_cache(new)
            self._handled(ev.ASSIGNED_POD_ADD.label, started)
            return
        if old_assigned:
            # nodeName cannot be unset through the API; treat it as delete + add to be safe.
            self.delete_pod_from_cache(old)
            if self.responsible_for(new):
                self.add_pod_to_queue(new)
            self._handled(ev.ASSIGNED_POD_DELETE.label, started)
            return
        old_ours, new_ours = self.responsible_for(old), self.responsible_for(new)
        if old_ours and new_ours:
            self.update_pod_in_queue(old, new)
            self._handled(ev.UNSCHEDULED_POD_UPDATE.label, started)
        elif old_ours:
            self.delete_pod_from_queue(old, bound=False)
            self._handled(ev.UNSCHEDULED_POD_DELETE.label, started)
        elif new_ours:
            self.add_pod_to_queue(new)
            self._handled(ev.UNSCHEDULED_POD_ADD.label, started)

    def on_pod_delete(self, obj: Any) -> None:
        started = time.perf_counter()
        pod = _unwrap(obj)
        if _assigned(pod):
            self.delete_pod_from_cache(pod)
            self._handled(ev.ASSIGNED_POD_DELETE.label, started)
        elif self.responsible_for(pod):
            self.delete_pod_from_queue(pod, bound=False)
            self._handled(ev.UNSCHEDULED_POD_DELETE.label, started)

    def _report_malformed(self, pod: dict[str, Any], exc: ObjectError) -> None:
        # Once per problem: our own condition patch comes back as an update of the same pod.
        if self._once.first(f"Pod:{_uid_or_key(pod)}", str(exc)):
            self.sched.report_malformed_pod(pod, exc)

    def add_pod_to_queue(self, pod: dict[str, Any]) -> None:
        try:
            self.sched.queue.add(pod)
        except ObjectError as exc:
            self._report_malformed(pod, exc)
            return
        if self._once.seen:
            self._once.clear(f"Pod:{_uid_or_key(pod)}")
        # A new pending pod can help others (a gang's missing sibling arriving).
        self.sched.queue.move_all_to_active_or_backoff_queue(ev.UNSCHEDULED_POD_ADD, None, pod)

    def update_pod_in_queue(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        if _resource_version(old) == _resource_version(new):
            return  # a relist delivering the same object
        if self.sched.cache.is_assumed_pod(new):
            # Our own assumed pod being updated while it binds (e.g. the condition patch):
            # the binding cycle owns it.
            return
        try:
            self.sched.queue.update(old, new)
        except ObjectError as exc:
            # The version we hold is no longer the pod: we cannot schedule what it now is.
            self.sched.queue.delete(old)
            self._report_malformed(new, exc)
            return
        if self._once.seen:
            self._once.clear(f"Pod:{_uid_or_key(new)}")

    def delete_pod_from_queue(self, pod: dict[str, Any], *, bound: bool) -> None:
        sched = self.sched
        sched.queue.delete(pod, bound=bound)
        uid = _uid_or_key(pod)
        if self._once.seen:
            self._once.clear(f"Pod:{uid}")
        if sched.reject_waiting_pod(uid):
            # A waiting pod held reserved resources; others may fit now.
            sched.queue.move_all_to_active_or_backoff_queue(ev.ASSIGNED_POD_DELETE, pod, None)
        if not bound and sched.cache.is_assumed_pod(pod) and not sched.is_binding(uid):
            # Bound by us, but deleted before the informer showed it bound: no trace may stay.
            try:
                sched.cache.forget_pod(sched.cache.get_pod(pod) or pod)
            except CacheError as exc:
                log.warning("could not drop assumed pod", pod=_pod_key(pod), error=str(exc))

    def _assigned_info(self, pod: dict[str, Any]) -> PodInfo | None:
        """The bound pod as the cache accounts it (malformed fields dropped, logged once)."""
        confirmed = self._confirmed_assumed_info(pod)
        if confirmed is not None:
            return confirmed
        try:
            info, problems = PodInfo.from_assigned_pod(pod)
        except ObjectError as exc:
            self._log_once("Pod", _uid_or_key(pod), exc,
                           "bound pod cannot be identified; it is left out of the cache",
                           name=_pod_key(pod))
            return None
        if problems:
            self._log_once(
                "Pod", _uid_or_key(pod), problems[0],
                "bound pod is malformed; accounting it without the malformed fields",
                name=info.key)
        return info

    def _confirmed_assumed_info(self, pod: dict[str, Any]) -> PodInfo | None:
        """For the informer's copy of a pod we assumed (and bound), the assumed PodInfo
        re-pointed at it, when nothing a PodInfo is parsed from (spec, the kubelet's resize
        report, name, namespace, labels) differs: the binding set only spec.nodeName, which
        the assumed copy has too. Every scheduled pod comes back this way once, and parsing it again was the
        largest piece of the daemon's per-pod work outside the plugins."""
        meta = _meta(pod)
        uid = meta.get("uid")
        if not uid:
            return None
        assumed = self.sched.cache.assumed_pod_info(str(uid))
        if assumed is None:
            return None
        return _reparsed(pod, assumed, meta)

    def add_pod_to_cache(self, pod: dict[str, Any]) -> None:
        sched = self.sched
        info = self._assigned_info(pod)
        if info is None:
            return
        try:
            sched.cache.add_pod(info)
        except CacheError as exc:
            log.warning("cache add failed", pod=info.key, error=str(exc))
            return
        sched.queue.assigned_pod_added(info)

    def update_pod_in_cache(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        sched = self.sched
        cached = sched.cache.get_pod_info(old) if _has_uid(old) else None
        # A bound pod's updates are mostly its kubelet's status writes, which change nothing
        # a PodInfo is parsed from: the cached parse serves the new version (its metadata
        # read once, for the uid and by _reparsed).
        reused = None
        if cached is not None:
            meta = _meta(new)
            if str(meta.get("uid") or "") == cached.uid:
                reused = _reparsed(new, cached, meta)
        info = reused or self._assigned_info(new)
        if info is None or cached is None:
            # Never added (unreadable) or gone: the cache holds nothing to update.
            if info is not None:
                self.add_pod_to_cache(new)
            return
        try:
            sched.cache.update_pod(old, info)
        except CacheError as exc:
            log.warning("cache update failed", pod=info.key, error=str(exc))
            return
        # Queueing hints read both versions: hand them the readable (sanitised) ones.  A
        # reused parse means equal spec and resize report (compared by _reparsed, not again).
        sched.queue.assigned_pod_updated(cached.pod, info.pod, same_sizing=reused is not None)

    def delete_pod_from_cache(self, pod: dict[str, Any]) -> None:
        sched = self.sched
        if self._once.seen:
            self._once.clear(f"Pod:{_uid_or_key(pod)}")
        cached = sched.cache.get_pod_info(pod) if _has_uid(pod) else None
        if cached is None:
            log.debug("deleted bound pod was not in the cache", pod=_pod_key(pod))
            return
        try:
            sched.cache.remove_pod(pod)
        except CacheError as exc:
            log.warning("cache remove failed", pod=cached.key, error=str(exc))
        sched.queue.move_all_to_active_or_backoff_queue(ev.ASSIGNED_POD_DELETE, cached.pod, None)

    # --- nodes -----------------------------------------------------------------------------

    def _valid_node(self, node: dict[str, Any]) -> bool:
        try:
            validate_node(node)
        except ObjectError as exc:
            self._log_once("Node", _name(node), exc,
                           "node is malformed; nothing is scheduled onto it until it is fixed")
            return False
        self._once.clear(f"Node:{_name(node)}")
        return True

    def on_node_add(self, node: dict[str, Any]) -> None:
        started = time.perf_counter()
        if not self._valid_node(node):
            return
        self.sched.cache.add_node(node)
        self.sched.queue.move_all_to_active_or_backoff_queue(ev.NODE_ADD, None, node)
        self._handled(ev.NODE_ADD.label, started)

    def on_node_update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        started = time.perf_counter()
        self._on_node_update(old, new)
        self._handled(_NODE_UPDATE, started)

    def _on_node_update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        cache = self.sched.cache
        if not self._valid_node(new):
            # Withdraw the version we hold: a node we cannot read is not a node to use.
            if _name(new) and cache.get_node_info(_name(new)) is not None:
                self._remove_node(old if _name(old) == _name(new) else new)
            return
        try:
            validate_node(old)
        except ObjectError:
            # Fixed: it was never (or no longer) in the cache; it arrives as a new node.
            self.on_node_add(new)
            return
        cache.update_node(old, new)
        action = ev.node_update_action(old, new)
        for bit, label in _NODE_UPDATE_LABELS:
            if action & bit:
                event = ClusterEvent(EventResource.NODE, bit, label)
                self.sched.queue.move_all_to_active_or_backoff_queue(event, old, new)

    def _remove_node(self, node: dict[str, Any]) -> bool:
        cache = self.sched.cache
        info = cache.get_node_info(_name(node))
        if info is None or info.node is None:
            return False
        cache.remove_node(info.node)
        return True

    def on_node_delete(self, obj: Any) -> None:
        started = time.perf_counter()
        node = _unwrap(obj)
        self._once.clear(f"Node:{_name(node)}")
        if not self._remove_node(node):
            log.debug("deleted node was not in the cache", node=_name(node))
            return
        self.sched.queue.move_all_to_active_or_backoff_queue(ev.NODE_DELETE, node, None)
        self._handled(ev.NODE_DELETE.label, started)

    # --- everything else: only moves pods --------------------------------------------------

    def mover(
        self, add: ClusterEvent, update: ClusterEvent, delete: ClusterEvent | None
    ) -> tuple[
        Callable[[dict[str, Any]], None],
        Callable[[dict[str, Any], dict[str, Any]], None],
        Callable[[Any], None],
    ]:
        queue = self.sched.queue
        # "storage.k8s.io/StorageClass" -> "StorageClass"
        kind = add.resource.value.rsplit("/", 1)[-1]

        def valid(obj: Any) -> bool:
            error = validate_object(kind, obj)
            if error is None:
                self._once.clear(f"{kind}:{_object_key(obj)}")
                return True
            # The plugins reading it (from the informer's store) report it on the pods
            # that use it; the event itself can help no pod.
            self._log_once(kind, _object_key(obj), error, "object is malformed")
            return False

        def on_add(obj: dict[str, Any]) -> None:
            started = time.perf_counter()
            if valid(obj):
                queue.move_all_to_active_or_backoff_queue(add, None, obj)
                self._handled(add.label, started)

        def on_update(old: dict[str, Any], new: dict[str, Any]) -> None:
            started = time.perf_counter()
            if _resource_version(old) == _resource_version(new):
                return
            if valid(new) and validate_object(kind, old) is None:
                queue.move_all_to_active_or_backoff_queue(update, old, new)
                self._handled(update.label, started)
            elif valid(new):
                queue.move_all_to_active_or_backoff_queue(add, None, new)  # fixed
                self._handled(add.label, started)

        def on_delete(obj: Any) -> None:
            started = time.perf_counter()
            obj = _unwrap(obj)
            if delete is None:
                return
            if validate_object(kind, obj) is not None:
                self._once.clear(f"{kind}:{_object_key(obj)}")
                return
            queue.move_all_to_active_or_backoff_queue(delete, obj, None)
            self._handled(delete.label, started)

        return on_add, on_update, on_delete


# Resources whose changes only move pods: informer name → (add, update, delete) events.
MOVE_ONLY_RESOURCES: dict[str, tuple[ClusterEvent, ClusterEvent, ClusterEvent | None]] = {
    "persistentvolumes": (ev.PV_ADD, ev.PV_UPDATE, ev.PV_DELETE),
    "persistentvolumeclaims": (ev.PVC_ADD, ev.PVC_UPDATE, ev.PVC_DELETE),
    "storageclasses": (ev.STORAGE_CLASS_ADD, ev.STORAGE_CLASS_UPDATE, None),
    "csinodes": (ev.CSI_NODE_ADD, ev.CSI_NODE_UPDATE, None),
    "csidrivers": (ev.CSI_DRIVER_ADD, ev.CSI_DRIVER_UPDATE, None),
    "poddisruptionbudgets": (ev.PDB_ADD, ev.PDB_UPDATE, ev.PDB_DELETE),
    "podgroups": (ev.POD_GROUP_ADD, ev.POD_GROUP_UPDATE, ev.POD_GROUP_DELETE),
    "resourceclaims": (ev.RESOURCE_CLAIM_ADD, ev.RESOURCE_CLAIM_UPDATE, ev.RESOURCE_CLAIM_DELETE),
    "resourceslices": (ev.RESOURCE_SLICE_ADD, ev.RESOURCE_SLICE_UPDATE, ev.RESOURCE_SLICE_DELETE),
    "deviceclasses": (ev.DEVICE_CLASS_ADD, ev.DEVICE_CLASS_UPDATE, None),
    "devicetaintrules": (ev.DEVICE_TAINT_RULE_ADD, ev.DEVICE_TAINT_RULE_UPDATE,
                         ev.DEVICE_TAINT_RULE_DELETE),
    "elasticquotas": (ev.ELASTIC_QUOTA_ADD, ev.ELASTIC_QUOTA_UPDATE, ev.ELASTIC_QUOTA_DELETE),
}


def _reparsed(pod: dict[str, Any], held: PodInfo,
              meta: dict[str, Any] | None = None) -> PodInfo | None:
    """``held`` (the parse of an earlier version of ``pod``) re-pointed at ``pod``, when
    nothing a PodInfo is parsed from differs: spec, the kubelet's resize report, name,
    namespace, labels (what ``PodInfo.from_pod`` reads besides uid and resourceVersion).
    None when something does (then ``pod`` must be parsed).  The held version's name,
    namespace, labels and resize report are read from its parse (what ``from_pod`` made of
    them: a missing namespace is "", missing labels {}): only ``pod``'s are read
    (``meta``: its metadata, when the caller has read it)."""
    if meta is None:
        meta = _meta(pod)
    labels = meta.get("labels")
    if (pod.get("spec") != held.pod.get("spec")
            or ({} if labels is None else labels) != held.labels
            or meta.get("name") != held.name
            or (meta.get("namespace") or "") != held.namespace
            or resize_report(pod) != held.resize):
        return None
    info = held.with_node_name(pod)
    info.resource_version = str(meta.get("resourceVersion") or "")
    return info


def _uid(pod: dict[str, Any]) -> str:
    return str(_meta(pod).get("uid") or "")


def _meta(obj: Any) -> dict[str, Any]:
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    return meta if isinstance(meta, dict) else {}


def _resource_version(obj: Any) -> str:
    return str(_meta(obj).get("resourceVersion") or "")


def _has_uid(pod: dict[str, Any]) -> bool:
    return bool(_meta(pod).get("uid"))


def _uid_or_key(pod: dict[str, Any]) -> str:
    return str(_meta(pod).get("uid") or _pod_key(pod))


def _pod_key(pod: dict[str, Any]) -> str:
    meta = _meta(pod)
    return f"{meta.get('namespace') or ''}/{meta.get('name') or ''}"


def _object_key(obj: Any) -> str:
    meta = _meta(obj)
    ns, name = meta.get("namespace"), meta.get("name")
    return f"{ns}/{name}" if ns else str(name or "")


def _name(obj: dict[str, Any]) -> str:
    name = _meta(obj).get("name")
    return name if isinstance(name, str) else ""
