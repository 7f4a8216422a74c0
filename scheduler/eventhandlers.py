"""Informer events → cache and queue (kube-scheduler's addAllEventHandlers).

Pods split three ways: assigned pods (any scheduler's) feed the cache because they use node
capacity; unassigned pods whose schedulerName is one of our profiles feed the queue; other
pods are ignored.  A pod crossing from one side to the other (bound by us, or by someone else)
is a delete on one side and an add on the other.  Everything else (nodes, volumes, PDBs,
PodGroups) updates the cache where relevant and then asks the queue to move the unschedulable
pods that the event might help.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import structlog

from scheduler.framework import events as ev
from scheduler.framework.events import ActionType, ClusterEvent, EventResource
from scheduler.objects.errors import ObjectError
from scheduler.objects.pod import PodInfo

if TYPE_CHECKING:
    from scheduler.scheduler import Scheduler

log = structlog.get_logger(__name__)

_NODE_UPDATE_LABELS = (
    (ActionType.UPDATE_NODE_ALLOCATABLE, "NodeAllocatableChange"),
    (ActionType.UPDATE_NODE_LABEL, "NodeLabelChange"),
    (ActionType.UPDATE_NODE_TAINT, "NodeTaintChange"),
    (ActionType.UPDATE_NODE_CONDITION, "NodeConditionChange"),
    (ActionType.UPDATE_NODE_ANNOTATION, "NodeAnnotationChange"),
)


def _unwrap(obj: Any) -> dict[str, Any]:
    """Delete notifications may carry a tombstone (DeletedFinalStateUnknown) with the last state."""
    inner = getattr(obj, "obj", None)
    if isinstance(inner, dict):
        return inner
    return obj  # type: ignore[no-any-return]


def _assigned(pod: dict[str, Any]) -> bool:
    return bool((pod.get("spec") or {}).get("nodeName"))


class EventHandlers:
    def __init__(self, sched: Scheduler) -> None:
        self.sched = sched

    # --- pods ------------------------------------------------------------------------------

    def responsible_for(self, pod: dict[str, Any]) -> bool:
        name = (pod.get("spec") or {}).get("schedulerName") or "default-scheduler"
        return name in self.sched.profiles

    def on_pod_add(self, pod: dict[str, Any]) -> None:
        if _assigned(pod):
            self.add_pod_to_cache(pod)
        elif self.responsible_for(pod):
            self.add_pod_to_queue(pod)

    def on_pod_update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        old_assigned, new_assigned = _assigned(old), _assigned(new)
        if old_assigned and new_assigned:
            self.update_pod_in_cache(old, new)
            return
        if new_assigned:
            # Bound (by us or anyone): leaves the queue, enters the cache.
            if self.responsible_for(old):
                self.delete_pod_from_queue(old, bound=True)
            self.add_pod_to_cache(new)
            return
        if old_assigned:
            # nodeName cannot be unset through the API; treat it as delete + add to be safe.
            self.delete_pod_from_cache(old)
            if self.responsible_for(new):
                self.add_pod_to_queue(new)
            return
        old_ours, new_ours = self.responsible_for(old), self.responsible_for(new)
        if old_ours and new_ours:
            self.update_pod_in_queue(old, new)
        elif old_ours:
            self.delete_pod_from_queue(old, bound=False)
        elif new_ours:
            self.add_pod_to_queue(new)

    def on_pod_delete(self, obj: Any) -> None:
        pod = _unwrap(obj)
        if _assigned(pod):
            self.delete_pod_from_cache(pod)
        elif self.responsible_for(pod):
            self.delete_pod_from_queue(pod, bound=False)

    def add_pod_to_queue(self, pod: dict[str, Any]) -> None:
        try:
            self.sched.queue.add(pod)
        except ObjectError as exc:
            self.sched.report_malformed_pod(pod, exc)
            return
        # A new pending pod can help others (a gang's missing sibling arriving).
        self.sched.queue.move_all_to_active_or_backoff_queue(ev.UNSCHEDULED_POD_ADD, None, pod)

    def update_pod_in_queue(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        if (old.get("metadata") or {}).get("resourceVersion") == (new.get("metadata") or {}).get(
            "resourceVersion"
        ):
            return  # a relist delivering the same object
        if self.sched.cache.is_assumed_pod(new):
            # Our own assumed pod being updated while it binds (e.g. the condition patch):
            # the binding cycle owns it.
            return
        try:
            self.sched.queue.update(old, new)
        except ObjectError as exc:
            self.sched.report_malformed_pod(new, exc)

    def delete_pod_from_queue(self, pod: dict[str, Any], *, bound: bool) -> None:
        sched = self.sched
        sched.queue.delete(pod, bound=bound)
        uid = (pod.get("metadata") or {}).get("uid") or ""
        if sched.reject_waiting_pod(uid):
            # A waiting pod held reserved resources; others may fit now.
            sched.queue.move_all_to_active_or_backoff_queue(ev.ASSIGNED_POD_DELETE, pod, None)
        if not bound and sched.cache.is_assumed_pod(pod) and not sched.is_binding(uid):
            # Bound by us, but deleted before the informer showed it bound: no trace may stay.
            try:
                sched.cache.forget_pod(sched.cache.get_pod(pod) or pod)
            except Exception:
                log.exception("could not drop assumed pod", pod=_pod_key(pod))

    def add_pod_to_cache(self, pod: dict[str, Any]) -> None:
        sched = self.sched
        try:
            info = PodInfo.from_pod(pod)
        except ObjectError as exc:
            # Someone else's pod we cannot parse still occupies the node; we count what we can.
            log.warning("assigned pod is malformed; its requests are ignored",
                        pod=_pod_key(pod), error=str(exc))
            info = PodInfo.from_pod(_strip_resources(pod))
        try:
            sched.cache.add_pod(info)
        except Exception:
            log.exception("cache add failed", pod=_pod_key(pod))
            return
        sched.queue.assigned_pod_added(info)

    def update_pod_in_cache(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        sched = self.sched
        try:
            info = PodInfo.from_pod(new)
        except ObjectError as exc:
            log.warning("assigned pod is malformed; its requests are ignored",
                        pod=_pod_key(new), error=str(exc))
            info = PodInfo.from_pod(_strip_resources(new))
        try:
            sched.cache.update_pod(old, info)
        except Exception:
            log.exception("cache update failed", pod=_pod_key(new))
            return
        sched.queue.assigned_pod_updated(old, new)

    def delete_pod_from_cache(self, pod: dict[str, Any]) -> None:
        sched = self.sched
        try:
            sched.cache.remove_pod(pod)
        except Exception:
            log.exception("cache remove failed", pod=_pod_key(pod))
        sched.queue.move_all_to_active_or_backoff_queue(ev.ASSIGNED_POD_DELETE, pod, None)

    # --- nodes -----------------------------------------------------------------------------

    def on_node_add(self, node: dict[str, Any]) -> None:
        try:
            self.sched.cache.add_node(node)
        except Exception:
            log.exception("cache add node failed", node=_name(node))
            return
        self.sched.queue.move_all_to_active_or_backoff_queue(ev.NODE_ADD, None, node)

    def on_node_update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        try:
            self.sched.cache.update_node(old, new)
        except Exception:
            log.exception("cache update node failed", node=_name(new))
            return
        action = ev.node_update_action(old, new)
        for bit, label in _NODE_UPDATE_LABELS:
            if action & bit:
                event = ClusterEvent(EventResource.NODE, bit, label)
                self.sched.queue.move_all_to_active_or_backoff_queue(event, old, new)

    def on_node_delete(self, obj: Any) -> None:
        node = _unwrap(obj)
        try:
            self.sched.cache.remove_node(node)
        except Exception:
            log.exception("cache remove node failed", node=_name(node))
        self.sched.queue.move_all_to_active_or_backoff_queue(ev.NODE_DELETE, node, None)

    # --- everything else: only moves pods --------------------------------------------------

    def mover(
        self, add: ClusterEvent, update: ClusterEvent, delete: ClusterEvent | None
    ) -> tuple[
        Callable[[dict[str, Any]], None],
        Callable[[dict[str, Any], dict[str, Any]], None],
        Callable[[Any], None],
    ]:
        queue = self.sched.queue

        def on_add(obj: dict[str, Any]) -> None:
            queue.move_all_to_active_or_backoff_queue(add, None, obj)

        def on_update(old: dict[str, Any], new: dict[str, Any]) -> None:
            if (old.get("metadata") or {}).get("resourceVersion") == (
                new.get("metadata") or {}
            ).get("resourceVersion"):
                return
            queue.move_all_to_active_or_backoff_queue(update, old, new)

        def on_delete(obj: Any) -> None:
            if delete is not None:
                queue.move_all_to_active_or_backoff_queue(delete, _unwrap(obj), None)

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
}


def _strip_resources(pod: dict[str, Any]) -> dict[str, Any]:
    """A copy of a pod with container resources and overhead removed (for unparseable pods)."""
    spec = dict(pod.get("spec") or {})
    for field in ("containers", "initContainers"):
        spec[field] = [
            {k: v for k, v in c.items() if k != "resources"} for c in spec.get(field) or []
        ]
    spec.pop("overhead", None)
    return {**pod, "spec": spec}


def _pod_key(pod: dict[str, Any]) -> str:
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def _name(obj: dict[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name", ""))
