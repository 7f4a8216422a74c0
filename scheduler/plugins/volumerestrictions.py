"""VolumeRestrictions: volumes that cannot be shared between pods.

Why: some volumes may be mounted by only one pod at a time (or only read-only by several), and
the kubelet would fail the second pod long after it was bound.  Two families are checked, as
upstream does:

* inline disks on the same node: GCE PD (unless every mount is read-only), AWS EBS (never
  shared), ISCSI by IQN and Ceph RBD by monitor/pool/image (unless all read-only);
* PVCs with the ``ReadWriteOncePod`` access mode: if any scheduled pod anywhere in the cluster
  already uses the claim, no node fits (counted in PreFilter from the snapshot's PVC reference
  counts, adjusted by the AddPod/RemovePod extensions so preemption can free the claim).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from scheduler.framework.cycle_state import CycleState, read_state
from scheduler.framework.events import (
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    EventResource,
    QueueingHint,
)
from scheduler.framework.interfaces import (
    EnqueueExtensions,
    FilterPlugin,
    Handle,
    PluginArgs,
    PreFilterExtensions,
    PreFilterPlugin,
)
from scheduler.framework.node_info import NodeInfo
from scheduler.framework.status import SKIP, Status, unresolvable, unschedulable
from scheduler.framework.types import PreFilterResult
from scheduler.objects.pod import PodInfo
from scheduler.plugins import names
from scheduler.plugins.helper import validate_no_args
from scheduler.plugins.volumebinding.matching import (
    READ_WRITE_ONCE_POD,
    access_modes,
    name_of,
    namespace_of,
    not_found,
    pod_namespace,
    spec,
    without_volumes,
)

__all__ = [
    "NAME",
    "VolumeRestrictions",
    "ERR_REASON_DISK_CONFLICT",
    "ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT",
]

NAME = names.VOLUME_RESTRICTIONS
PRE_FILTER_STATE_KEY = "PreFilter" + NAME

ERR_REASON_DISK_CONFLICT = "node(s) had no available disk"
# kube-scheduler v1.28+ wording; releases up to v1.27 said "node has pod using
# PersistentVolumeClaim with the same name and ReadWriteOncePod access mode".
ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT = (
    "node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode already "
    "in-use by another pod"
)

_RESTRICTED_SOURCES = ("gcePersistentDisk", "awsElasticBlockStore", "rbd", "iscsi")


@dataclass(slots=True)
class _PreFilterState:
    namespace: str
    # Names of the pod's claims using ReadWriteOncePod.
    rwop_claims: frozenset[str]
    # References to those claims by pods already scheduled (or nominated, via AddPod).
    conflicting_refs: int

    def clone(self) -> _PreFilterState:
        return _PreFilterState(self.namespace, self.rwop_claims, self.conflicting_refs)

    def refs_of(self, pod: Mapping[str, Any]) -> int:
        if pod_namespace(pod) != self.namespace:
            return 0
        count = 0
        for vol in spec(pod).get("volumes") or ():
            src = vol.get("persistentVolumeClaim") if isinstance(vol, Mapping) else None
            if isinstance(src, Mapping) and src.get("claimName") in self.rwop_claims:
                count += 1
        return count


def _needs_check(vol: Mapping[str, Any]) -> bool:
    return any(vol.get(k) is not None for k in _RESTRICTED_SOURCES)


def _read_only(src: Mapping[str, Any]) -> bool:
    return bool(src.get("readOnly"))


def _is_volume_conflict(vol: Mapping[str, Any], existing_pod: Mapping[str, Any]) -> bool:
    gce = vol.get("gcePersistentDisk")
    ebs = vol.get("awsElasticBlockStore")
    iscsi = vol.get("iscsi")
    rbd = vol.get("rbd")
    for ev in spec(existing_pod).get("volumes") or ():
        if not isinstance(ev, Mapping):
            continue
        egce = ev.get("gcePersistentDisk")
        if isinstance(gce, Mapping) and isinstance(egce, Mapping):
            if gce.get("pdName") == egce.get("pdName") and not (_read_only(gce) and _read_only(egce)):
                return True
        eebs = ev.get("awsElasticBlockStore")
        if isinstance(ebs, Mapping) and isinstance(eebs, Mapping):
            if ebs.get("volumeID") == eebs.get("volumeID"):
                return True
        eiscsi = ev.get("iscsi")
        if isinstance(iscsi, Mapping) and isinstance(eiscsi, Mapping):
            if iscsi.get("iqn") == eiscsi.get("iqn") and not (_read_only(iscsi) and _read_only(eiscsi)):
                return True
        erbd = ev.get("rbd")
        if isinstance(rbd, Mapping) and isinstance(erbd, Mapping):
            monitors = set(rbd.get("monitors") or ())
            shared_monitor = any(m in monitors for m in erbd.get("monitors") or ())
            # "rbd" is the API default pool.
            same_pool = (rbd.get("pool") or "rbd") == (erbd.get("pool") or "rbd")
            if (shared_monitor and same_pool and rbd.get("image") == erbd.get("image")
                    and not (_read_only(rbd) and _read_only(erbd))):
                return True
    return False


def _conflicts_with(pod: Mapping[str, Any], existing_pods: list[Mapping[str, Any]]) -> bool:
    for vol in spec(pod).get("volumes") or ():
        if not isinstance(vol, Mapping) or not _needs_check(vol):
            continue
        for existing in existing_pods:
            if _is_volume_conflict(vol, existing):
                return True
    return False


def _satisfies_volume_conflicts(pod: Mapping[str, Any], node_info: NodeInfo) -> bool:
    return not _conflicts_with(pod, [p.pod for p in node_info.pods])


class VolumeRestrictions(PreFilterPlugin, FilterPlugin, EnqueueExtensions):
    NAME = NAME

    def __init__(self, args: PluginArgs, handle: Handle) -> None:
        validate_no_args(NAME, args)
        self._handle = handle

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            # Deleting the pod that holds the disk or the ReadWriteOncePod claim frees it.
            ClusterEventWithHint(ClusterEvent(EventResource.POD, ActionType.DELETE),
                                 _after_pod_deleted),
            ClusterEventWithHint(ClusterEvent(EventResource.NODE, ActionType.ADD)),
            # The claim must exist to read its access modes.
            ClusterEventWithHint(ClusterEvent(EventResource.PERSISTENT_VOLUME_CLAIM,
                                              ActionType.ADD), _after_pvc_added),
        ]

    def pre_filter(
        self, state: CycleState, pod_info: PodInfo, nodes: list[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status | None]:
        pod = pod_info.pod
        if without_volumes(pod):
            return None, SKIP  # nothing to check, no claim to conflict
        ns = pod_namespace(pod)
        needs_check = False
        rwop: set[str] = set()
        for vol in spec(pod).get("volumes") or ():
            if not isinstance(vol, Mapping):
                continue
            if _needs_check(vol):
                needs_check = True
            src = vol.get("persistentVolumeClaim")
            if not isinstance(src, Mapping):
                continue
            claim_name = str(src.get("claimName") or "")
            pvc = self._handle.listers.get("persistentvolumeclaims", ns, claim_name)
            if pvc is None:
                return None, unresolvable(not_found("persistentvolumeclaim", claim_name))
            if READ_WRITE_ONCE_POD in access_modes(pvc):
                rwop.add(name_of(pvc))
        conflicting = 0
        for claim in rwop:
            key = f"{ns}/{claim}"
            # At most one pod can hold a ReadWriteOncePod claim: count the claim once.
            if any(key in ni.pvc_ref_counts for ni in nodes):
                conflicting += 1
        if not needs_check and conflicting == 0:
            return None, SKIP
        state.write(PRE_FILTER_STATE_KEY, _PreFilterState(ns, frozenset(rwop), conflicting))
        return None, None

    def pre_filter_extensions(self) -> PreFilterExtensions | None:
        return self

    def add_pod(self, state: CycleState, pod_to_schedule: PodInfo, pod_to_add: PodInfo,
                node_info: NodeInfo) -> Status | None:
        s = read_state(state, PRE_FILTER_STATE_KEY, _PreFilterState)
        if isinstance(s, Status):
            return s
        s.conflicting_refs += s.refs_of(pod_to_add.pod)
        return None

    def remove_pod(self, state: CycleState, pod_to_schedule: PodInfo, pod_to_remove: PodInfo,
                   node_info: NodeInfo) -> Status | None:
        s = read_state(state, PRE_FILTER_STATE_KEY, _PreFilterState)
        if isinstance(s, Status):
            return s
        s.conflicting_refs -= s.refs_of(pod_to_remove.pod)
        return None

    def filter(self, state: CycleState, pod_info: PodInfo, node_info: NodeInfo) -> Status | None:
        if not _satisfies_volume_conflicts(pod_info.pod, node_info):
            return unschedulable(ERR_REASON_DISK_CONFLICT)
        s = read_state(state, PRE_FILTER_STATE_KEY, _PreFilterState)
        if isinstance(s, Status):
            return s
        if s.conflicting_refs > 0:
            return unschedulable(ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT)
        return None


def _after_pvc_added(pod: dict[str, Any], old: Any, new: Any) -> QueueingHint:
    if not isinstance(new, Mapping):
        return QueueingHint.QUEUE
    if namespace_of(new) != pod_namespace(pod):
        return QueueingHint.SKIP
    for vol in spec(pod).get("volumes") or ():
        src = vol.get("persistentVolumeClaim") if isinstance(vol, Mapping) else None
        if isinstance(src, Mapping) and src.get("claimName") == name_of(new):
            return QueueingHint.QUEUE
    return QueueingHint.SKIP


def _after_pod_deleted(pod: dict[str, Any], old: Any, new: Any) -> QueueingHint:
    deleted = old if isinstance(old, Mapping) else new
    if not isinstance(deleted, Mapping):
        return QueueingHint.QUEUE
    if pod_namespace(deleted) != pod_namespace(pod):
        return QueueingHint.SKIP
    if _conflicts_with(pod, [deleted]):
        return QueueingHint.QUEUE
    claims = set()
    for vol in spec(pod).get("volumes") or ():
        src = vol.get("persistentVolumeClaim") if isinstance(vol, Mapping) else None
        if isinstance(src, Mapping):
            claims.add(src.get("claimName"))
    for vol in spec(deleted).get("volumes") or ():
        src = vol.get("persistentVolumeClaim") if isinstance(vol, Mapping) else None
        if isinstance(src, Mapping) and src.get("claimName") in claims:
            return QueueingHint.QUEUE
    return QueueingHint.SKIP
