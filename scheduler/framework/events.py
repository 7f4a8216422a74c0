"""Cluster events and queueing hints.

A pod rejected by plugins X and Y sits in the unschedulable pool until something happens in
the cluster that could make X or Y change its mind.  Each plugin declares those events
(``events_to_register``), optionally with a hint function that looks at the concrete change and
answers Queue or Skip.  The queue moves a pod only when one of its rejecting plugins registered
a matching event and no hint said Skip.  This is what keeps a retry storm from happening on a
busy cluster, and what makes a pod schedulable promptly after the right event.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Hashable, Iterable
from dataclasses import KW_ONLY, dataclass
from typing import Any

from scheduler.objects.errors import ObjectError
from scheduler.objects.pod import pod_requests, resize_report
from scheduler.objects.resources import Resource


class ActionType(enum.IntFlag):
    ADD = 1 << 0
    DELETE = 1 << 1
    UPDATE_NODE_ALLOCATABLE = 1 << 2
    UPDATE_NODE_LABEL = 1 << 3
    UPDATE_NODE_TAINT = 1 << 4
    UPDATE_NODE_CONDITION = 1 << 5
    UPDATE_NODE_ANNOTATION = 1 << 6
    UPDATE_POD_LABEL = 1 << 7
    UPDATE_POD_SCALE_DOWN = 1 << 8
    UPDATE_POD_TOLERATION = 1 << 9
    UPDATE_POD_SCHEDULING_GATES_ELIMINATED = 1 << 10
    # Any other update (a PVC's phase, a PodGroup's spec ...).
    UPDATE_OTHER = 1 << 11
    # status.declaredFeatures changed (NodeDeclaredFeatures, KEP-5328).
    UPDATE_NODE_DECLARED_FEATURE = 1 << 12
    UPDATE = (
        UPDATE_NODE_ALLOCATABLE
        | UPDATE_NODE_LABEL
        | UPDATE_NODE_TAINT
        | UPDATE_NODE_CONDITION
        | UPDATE_NODE_ANNOTATION
        | UPDATE_POD_LABEL
        | UPDATE_POD_SCALE_DOWN
        | UPDATE_POD_TOLERATION
        | UPDATE_POD_SCHEDULING_GATES_ELIMINATED
        | UPDATE_OTHER
        | UPDATE_NODE_DECLARED_FEATURE
    )
    ALL = ADD | DELETE | UPDATE


class EventResource(str, enum.Enum):
    # Assigned pods (pods bound to a node): their arrival or departure changes what fits.
    POD = "Pod"
    # Updates to a pod that is still waiting to be scheduled (only that pod is requeued).
    UNSCHEDULED_POD = "UnscheduledPod"
    NODE = "Node"
    PERSISTENT_VOLUME = "PersistentVolume"
    PERSISTENT_VOLUME_CLAIM = "PersistentVolumeClaim"
    STORAGE_CLASS = "storage.k8s.io/StorageClass"
    CSI_NODE = "storage.k8s.io/CSINode"
    CSI_DRIVER = "storage.k8s.io/CSIDriver"
    CSI_STORAGE_CAPACITY = "storage.k8s.io/CSIStorageCapacity"
    POD_DISRUPTION_BUDGET = "policy/PodDisruptionBudget"
    POD_GROUP = "scheduling.x-k8s.io/PodGroup"
    RESOURCE_CLAIM = "resource.k8s.io/ResourceClaim"
    RESOURCE_SLICE = "resource.k8s.io/ResourceSlice"
    DEVICE_CLASS = "resource.k8s.io/DeviceClass"
    DEVICE_TAINT_RULE = "resource.k8s.io/DeviceTaintRule"
    ELASTIC_QUOTA = "scheduling.x-k8s.io/ElasticQuota"
    WILDCARD = "*"


@dataclass(frozen=True, slots=True)
class ClusterEvent:
    resource: EventResource
    action_type: ActionType
    label: str = ""

    def is_wildcard(self) -> bool:
        return self.resource is EventResource.WILDCARD and self.action_type == ActionType.ALL

    def matches(self, incoming: ClusterEvent) -> bool:
        """Whether a registered event (self) covers an incoming event."""
        if self.is_wildcard():
            return True
        resource_ok = (
            self.resource is EventResource.WILDCARD or self.resource is incoming.resource
        )
        return resource_ok and bool(self.action_type & incoming.action_type)

    def __str__(self) -> str:
        return self.label or f"{self.resource.value}{self.action_type!r}"


class QueueingHint(enum.IntEnum):
    SKIP = 0
    QUEUE = 1


# hint(pod waiting in the queue, old object or None, new object or None) -> Queue or Skip.
# A hint that raises is treated as Queue (as upstream does), and the error is logged.
QueueingHintFn = Callable[[dict[str, Any], Any, Any], QueueingHint]


# event_keys(old, new): the keys of the waiting pods an event can concern, or None when it
# may concern any pod; pod_keys(pod): the keys a waiting pod names.
EventKeysFn = Callable[[Any, Any], Iterable[Hashable] | None]
PodKeysFn = Callable[[dict[str, Any]], Iterable[Hashable]]


@dataclass(frozen=True, slots=True, eq=False)
class KeyedHint:
    """A queueing hint that declares which waiting pods an event can concern, so that the
    scheduling queue asks only those (public: ``scheduler.framework.KeyedHint``).

    ``KeyedHint(fn, event_keys=..., pod_keys=...)`` goes wherever a hint goes
    (``ClusterEventWithHint(event, KeyedHint(...))``); calling it calls ``fn``.

    - ``fn(pod, old, new)``: the hint itself, Queue or Skip, as for a plain hint;
    - ``event_keys(old, new)``: the event's objects (old is None for an add, new for a
      delete); returns the keys of the pods the event can concern (a claim's namespace and
      name ...), or None when it may concern any pod (a claim deallocated frees devices for
      everyone);
    - ``pod_keys(pod)``: a waiting pod (computed when the pod starts waiting, again when it
      is updated: it must read the pod only); returns the keys it names, none if none.

    Keys are any hashable values (strings, tuples); a pod is asked when its keys and the
    event's share one.  The contract: whenever ``event_keys`` gives keys and they share none
    with ``pod_keys(pod)``, ``fn`` answers Skip for that pod, so the same pods move as with
    ``fn`` alone.  A key function that raises or gives an unhashable key never hides a pod
    (it is logged): ``event_keys`` failing asks every pod the plugin rejected, ``pod_keys``
    failing for a pod asks that pod on every event.  The keys narrow an event only when
    every hint the plugin registered for it is keyed; one ``KeyedHint`` registered for
    several events keeps one index.
    """

    fn: QueueingHintFn
    _: KW_ONLY
    event_keys: EventKeysFn
    pod_keys: PodKeysFn

    def __call__(self, pod: dict[str, Any], old: Any, new: Any) -> QueueingHint:
        return self.fn(pod, old, new)


@dataclass(frozen=True, slots=True)
class ClusterEventWithHint:
    event: ClusterEvent
    hint: QueueingHintFn | None = None


def _event(resource: EventResource, action: ActionType, label: str) -> ClusterEvent:
    return ClusterEvent(resource, action, label)


# Events raised by the event handlers; their labels are the `event` label of
# scheduler_queue_incoming_pods_total, as upstream spells them.
NODE_ADD = _event(EventResource.NODE, ActionType.ADD, "NodeAdd")
NODE_DELETE = _event(EventResource.NODE, ActionType.DELETE, "NodeDelete")
ASSIGNED_POD_ADD = _event(EventResource.POD, ActionType.ADD, "AssignedPodAdd")
ASSIGNED_POD_UPDATE = _event(EventResource.POD, ActionType.UPDATE, "AssignedPodUpdate")
ASSIGNED_POD_DELETE = _event(EventResource.POD, ActionType.DELETE, "AssignedPodDelete")
UNSCHEDULED_POD_ADD = _event(EventResource.UNSCHEDULED_POD, ActionType.ADD, "UnschedulablePodAdd")
UNSCHEDULED_POD_UPDATE = _event(
    EventResource.UNSCHEDULED_POD, ActionType.UPDATE, "UnschedulablePodUpdate"
)
UNSCHEDULED_POD_DELETE = _event(
    EventResource.UNSCHEDULED_POD, ActionType.DELETE, "UnschedulablePodDelete"
)
PVC_ADD = _event(EventResource.PERSISTENT_VOLUME_CLAIM, ActionType.ADD, "PersistentVolumeClaimAdd")
PVC_UPDATE = _event(
    EventResource.PERSISTENT_VOLUME_CLAIM, ActionType.UPDATE, "PersistentVolumeClaimUpdate"
)
PVC_DELETE = _event(
    EventResource.PERSISTENT_VOLUME_CLAIM, ActionType.DELETE, "PersistentVolumeClaimDelete"
)
PV_ADD = _event(EventResource.PERSISTENT_VOLUME, ActionType.ADD, "PersistentVolumeAdd")
PV_UPDATE = _event(EventResource.PERSISTENT_VOLUME, ActionType.UPDATE, "PersistentVolumeUpdate")
PV_DELETE = _event(EventResource.PERSISTENT_VOLUME, ActionType.DELETE, "PersistentVolumeDelete")
STORAGE_CLASS_ADD = _event(EventResource.STORAGE_CLASS, ActionType.ADD, "StorageClassAdd")
STORAGE_CLASS_UPDATE = _event(EventResource.STORAGE_CLASS, ActionType.UPDATE, "StorageClassUpdate")
CSI_NODE_ADD = _event(EventResource.CSI_NODE, ActionType.ADD, "CSINodeAdd")
CSI_NODE_UPDATE = _event(EventResource.CSI_NODE, ActionType.UPDATE, "CSINodeUpdate")
CSI_DRIVER_ADD = _event(EventResource.CSI_DRIVER, ActionType.ADD, "CSIDriverAdd")
CSI_DRIVER_UPDATE = _event(EventResource.CSI_DRIVER, ActionType.UPDATE, "CSIDriverUpdate")
PDB_ADD = _event(EventResource.POD_DISRUPTION_BUDGET, ActionType.ADD, "PodDisruptionBudgetAdd")
PDB_UPDATE = _event(
    EventResource.POD_DISRUPTION_BUDGET, ActionType.UPDATE, "PodDisruptionBudgetUpdate"
)
PDB_DELETE = _event(
    EventResource.POD_DISRUPTION_BUDGET, ActionType.DELETE, "PodDisruptionBudgetDelete"
)
POD_GROUP_ADD = _event(EventResource.POD_GROUP, ActionType.ADD, "PodGroupAdd")
POD_GROUP_UPDATE = _event(EventResource.POD_GROUP, ActionType.UPDATE, "PodGroupUpdate")
POD_GROUP_DELETE = _event(EventResource.POD_GROUP, ActionType.DELETE, "PodGroupDelete")
RESOURCE_CLAIM_ADD = _event(EventResource.RESOURCE_CLAIM, ActionType.ADD, "ResourceClaimAdd")
RESOURCE_CLAIM_UPDATE = _event(EventResource.RESOURCE_CLAIM, ActionType.UPDATE,
                               "ResourceClaimUpdate")
RESOURCE_CLAIM_DELETE = _event(EventResource.RESOURCE_CLAIM, ActionType.DELETE,
                               "ResourceClaimDelete")
RESOURCE_SLICE_ADD = _event(EventResource.RESOURCE_SLICE, ActionType.ADD, "ResourceSliceAdd")
RESOURCE_SLICE_UPDATE = _event(EventResource.RESOURCE_SLICE, ActionType.UPDATE,
                               "ResourceSliceUpdate")
RESOURCE_SLICE_DELETE = _event(EventResource.RESOURCE_SLICE, ActionType.DELETE,
                               "ResourceSliceDelete")
DEVICE_CLASS_ADD = _event(EventResource.DEVICE_CLASS, ActionType.ADD, "DeviceClassAdd")
DEVICE_CLASS_UPDATE = _event(EventResource.DEVICE_CLASS, ActionType.UPDATE, "DeviceClassUpdate")
DEVICE_TAINT_RULE_ADD = _event(EventResource.DEVICE_TAINT_RULE, ActionType.ADD, "DeviceTaintRuleAdd")
DEVICE_TAINT_RULE_UPDATE = _event(EventResource.DEVICE_TAINT_RULE, ActionType.UPDATE,
                                  "DeviceTaintRuleUpdate")
DEVICE_TAINT_RULE_DELETE = _event(EventResource.DEVICE_TAINT_RULE, ActionType.DELETE,
                                  "DeviceTaintRuleDelete")
ELASTIC_QUOTA_ADD = _event(EventResource.ELASTIC_QUOTA, ActionType.ADD, "ElasticQuotaAdd")
ELASTIC_QUOTA_UPDATE = _event(EventResource.ELASTIC_QUOTA, ActionType.UPDATE, "ElasticQuotaUpdate")
ELASTIC_QUOTA_DELETE = _event(EventResource.ELASTIC_QUOTA, ActionType.DELETE, "ElasticQuotaDelete")

# Queue-internal moves: these are not cluster events, but they label pods entering a queue.
UNSCHEDULABLE_TIMEOUT = _event(EventResource.WILDCARD, ActionType.ALL, "UnschedulableTimeout")
FORCE_ACTIVATE = _event(EventResource.WILDCARD, ActionType.ALL, "ForceActivate")
BACKOFF_COMPLETE = _event(EventResource.WILDCARD, ActionType.ALL, "BackoffComplete")
POD_ADD_LABEL = "PodAdd"
SCHEDULE_ATTEMPT_FAILURE = "ScheduleAttemptFailure"
EVENT_UNSCHEDULED_POD_ADD = "UnschedulablePodAdd"


def node_update_action(old: dict[str, Any], new: dict[str, Any]) -> ActionType:
    """Which kinds of node change happened (a node update can be several at once)."""
    action = ActionType(0)
    old_status, new_status = old.get("status") or {}, new.get("status") or {}
    if old_status.get("allocatable") != new_status.get("allocatable"):
        action |= ActionType.UPDATE_NODE_ALLOCATABLE
    old_meta, new_meta = old.get("metadata") or {}, new.get("metadata") or {}
    if old_meta.get("labels") != new_meta.get("labels"):
        action |= ActionType.UPDATE_NODE_LABEL
    old_spec, new_spec = old.get("spec") or {}, new.get("spec") or {}
    if old_spec.get("taints") != new_spec.get("taints") or bool(
        old_spec.get("unschedulable")
    ) != bool(new_spec.get("unschedulable")):
        action |= ActionType.UPDATE_NODE_TAINT
    if _condition_statuses(old_status) != _condition_statuses(new_status):
        action |= ActionType.UPDATE_NODE_CONDITION
    if old_meta.get("annotations") != new_meta.get("annotations"):
        action |= ActionType.UPDATE_NODE_ANNOTATION
    if old_status.get("declaredFeatures") != new_status.get("declaredFeatures"):
        action |= ActionType.UPDATE_NODE_DECLARED_FEATURE
    return action


def _condition_statuses(status: dict[str, Any]) -> dict[str, Any]:
    # Heartbeat timestamps change constantly; only type->status matters for scheduling.
    return {c.get("type"): c.get("status") for c in status.get("conditions") or []}


def pod_update_action(old: dict[str, Any], new: dict[str, Any], *,
                      same_sizing: bool = False) -> ActionType:
    """Which kinds of pod change happened, for both assigned and unscheduled pods.
    ``same_sizing``: the caller compared both versions' spec and resize report already and
    found them equal (their effective requests cannot differ: no scale-down to look for)."""
    action = ActionType(0)
    old_meta, new_meta = old.get("metadata") or {}, new.get("metadata") or {}
    if old_meta.get("labels") != new_meta.get("labels"):
        action |= ActionType.UPDATE_POD_LABEL
    old_spec, new_spec = old.get("spec") or {}, new.get("spec") or {}
    if old_spec.get("tolerations") != new_spec.get("tolerations"):
        action |= ActionType.UPDATE_POD_TOLERATION
    if old_spec.get("schedulingGates") and not new_spec.get("schedulingGates"):
        action |= ActionType.UPDATE_POD_SCHEDULING_GATES_ELIMINATED
    if not same_sizing and _scaled_down(old, new) or _terminated(new) and not _terminated(old):
        action |= ActionType.UPDATE_POD_SCALE_DOWN
    return action or ActionType.UPDATE_OTHER


def _sizing(pod: dict[str, Any]) -> tuple[Any, ...]:
    """What a pod's effective requests are computed from (spec and the kubelet's resize
    report), to skip recomputing them on the many updates that change none of it."""
    spec = pod.get("spec") or {}
    return (spec.get("containers"), spec.get("initContainers"), spec.get("resources"),
            spec.get("overhead"), resize_report(pod))


def _scaled_down(old: dict[str, Any], new: dict[str, Any]) -> bool:
    """Upstream's UpdatePodScaleDown: some resource of the effective requests (resize-aware:
    the larger of desired and reported sizes) went down or away, e.g. when the kubelet
    reports a shrink done."""
    if _sizing(old) == _sizing(new):
        return False
    try:
        before, after = pod_requests(old), pod_requests(new)
    except ObjectError:
        return True  # cannot tell: let the hints look
    return _any_lower(before, after)


def _any_lower(before: Resource, after: Resource) -> bool:
    if (after.milli_cpu < before.milli_cpu or after.memory < before.memory
            or after.ephemeral_storage < before.ephemeral_storage):
        return True
    return any(after.scalar_resources.get(k, 0) < v
               for k, v in before.scalar_resources.items())


def _terminated(pod: dict[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")
