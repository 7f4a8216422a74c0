"""VolumeZone: keep pods in the zone/region of their bound PersistentVolumes.

Why: zonal disks (labelled ``topology.kubernetes.io/zone`` / ``region``, or the legacy
``failure-domain.beta.kubernetes.io/*`` labels) can only be attached from nodes of that zone.
PreFilter reads the pod's bound PVs' topology labels once; Filter rejects nodes whose labels
differ.  A node without any topology label is accepted (single-zone clusters), a PV label may
list several zones separated by ``__``, and unbound WaitForFirstConsumer claims are skipped
(VolumeBinding picks their volume with the node).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from scheduler.framework.cycle_state import CycleState
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
    PreFilterPlugin,
)
from scheduler.framework.node_info import NodeInfo
from scheduler.framework.status import SKIP, Status, unresolvable
from scheduler.framework.types import PreFilterResult
from scheduler.objects.pod import PodInfo
from scheduler.plugins import names
from scheduler.plugins.helper import validate_no_args
from scheduler.plugins.volumebinding.matching import (
    WAIT_FOR_FIRST_CONSUMER,
    labels_of,
    name_of,
    namespace_of,
    not_found,
    pod_namespace,
    pvc_storage_class,
    spec,
    without_volumes,
)

__all__ = ["NAME", "VolumeZone", "ERR_REASON_CONFLICT", "TOPOLOGY_LABELS"]

NAME = names.VOLUME_ZONE
PRE_FILTER_STATE_KEY = "PreFilter" + NAME
ERR_REASON_CONFLICT = "node(s) had no available volume zone"

_BETA_ZONE = "failure-domain.beta.kubernetes.io/zone"
_BETA_REGION = "failure-domain.beta.kubernetes.io/region"
_ZONE = "topology.kubernetes.io/zone"
_REGION = "topology.kubernetes.io/region"
TOPOLOGY_LABELS = (_BETA_ZONE, _BETA_REGION, _ZONE, _REGION)
_TO_GA = {_BETA_ZONE: _ZONE, _BETA_REGION: _REGION}


@dataclass(frozen=True, slots=True)
class PVTopology:
    pv_name: str
    key: str
    values: frozenset[str]


@dataclass(slots=True)
class _State:
    topologies: list[PVTopology]

    def clone(self) -> _State:
        return self


def _zones_to_set(value: str) -> frozenset[str] | None:
    """``LabelZonesToSet``: ``a__b`` lists zones a and b; an empty zone makes the label invalid."""
    zones = [z.strip() for z in value.replace("__", ",").split(",")]
    if any(not z for z in zones):
        return None
    return frozenset(zones)


def pv_topologies(pv: Mapping[str, Any]) -> list[PVTopology]:
    out: list[PVTopology] = []
    labels = labels_of(pv)
    for key in TOPOLOGY_LABELS:
        if key in labels:
            zones = _zones_to_set(str(labels[key]))
            if zones is None:
                continue  # an unparsable label constrains nothing, as upstream
            out.append(PVTopology(name_of(pv), key, zones))
    return out


class VolumeZone(PreFilterPlugin, FilterPlugin, EnqueueExtensions):
    NAME = NAME

    def __init__(self, args: PluginArgs, handle: Handle) -> None:
        validate_no_args(NAME, args)
        self._handle = handle

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            # A new WaitForFirstConsumer class lets its unbound claims be skipped.
            ClusterEventWithHint(ClusterEvent(EventResource.STORAGE_CLASS, ActionType.ADD),
                                 _after_storage_class_added),
            ClusterEventWithHint(ClusterEvent(EventResource.NODE,
                                              ActionType.ADD | ActionType.UPDATE_NODE_LABEL)),
            ClusterEventWithHint(ClusterEvent(EventResource.PERSISTENT_VOLUME_CLAIM,
                                              ActionType.ADD | ActionType.UPDATE), _after_pvc_change),
            ClusterEventWithHint(ClusterEvent(EventResource.PERSISTENT_VOLUME,
                                              ActionType.ADD | ActionType.UPDATE), _after_pv_change),
        ]

    def _pod_topologies(self, pod: Mapping[str, Any]) -> tuple[list[PVTopology], Status | None]:
        listers = self._handle.listers
        ns = pod_namespace(pod)
        out: list[PVTopology] = []
        for vol in spec(pod).get("volumes") or ():
            src = vol.get("persistentVolumeClaim") if isinstance(vol, Mapping) else None
            if not isinstance(src, Mapping):
                continue
            claim_name = str(src.get("claimName") or "")
            if not claim_name:
                return [], unresolvable("PersistentVolumeClaim had no name")
            pvc = listers.get("persistentvolumeclaims", ns, claim_name)
            if pvc is None:
                return [], unresolvable(not_found("persistentvolumeclaim", claim_name))
            pv_name = str(spec(pvc).get("volumeName") or "")
            if not pv_name:
                class_name = pvc_storage_class(pvc)
                if not class_name:
                    return [], unresolvable("PersistentVolumeClaim had no pv name and "
                                            "storageClass name")
                sc = listers.get("storageclasses", "", class_name)
                if sc is None:
                    return [], unresolvable(not_found("storageclass.storage.k8s.io", class_name))
                # Unset means Immediate, the apiserver's default.
                if (sc.get("volumeBindingMode") or "Immediate") == WAIT_FOR_FIRST_CONSUMER:
                    continue  # VolumeBinding chooses this claim's volume with the node
                return [], unresolvable("PersistentVolume had no name")
            pv = listers.get("persistentvolumes", "", pv_name)
            if pv is None:
                return [], unresolvable(not_found("persistentvolume", pv_name))
            out.extend(pv_topologies(pv))
        return out, None

    def pre_filter(
        self, state: CycleState, pod_info: PodInfo, nodes: list[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status | None]:
        if without_volumes(pod_info.pod):
            return None, SKIP  # no claim, so no topology
        topologies, status = self._pod_topologies(pod_info.pod)
        if status is not None:
            return None, status
        if not topologies:
            return None, SKIP
        state.write(PRE_FILTER_STATE_KEY, _State(topologies))
        return None, None

    def filter(self, state: CycleState, pod_info: PodInfo, node_info: NodeInfo) -> Status | None:
        if not spec(pod_info.pod).get("volumes"):
            return None
        data = state.get(PRE_FILTER_STATE_KEY)
        if isinstance(data, _State):
            topologies = data.topologies
        else:
            topologies, status = self._pod_topologies(pod_info.pod)
            if status is not None:
                return status
        node_labels = labels_of(node_info.node)
        if not any(key in node_labels for key in TOPOLOGY_LABELS):
            return None  # a node without topology labels: single-zone cluster
        for topo in topologies:
            value = node_labels.get(topo.key)
            if value is None:
                # A PV's beta label is satisfied by the node's GA label.
                value = node_labels.get(_TO_GA.get(topo.key, topo.key))
            if value is None or value not in topo.values:
                return unresolvable(ERR_REASON_CONFLICT)
        return None


def _claim_names(pod: Mapping[str, Any]) -> set[str]:
    out = set()
    for vol in spec(pod).get("volumes") or ():
        src = vol.get("persistentVolumeClaim") if isinstance(vol, Mapping) else None
        if isinstance(src, Mapping):
            out.add(str(src.get("claimName") or ""))
    return out


def _after_pvc_change(pod: dict[str, Any], old: Any, new: Any) -> QueueingHint:
    if not isinstance(new, Mapping):
        return QueueingHint.QUEUE
    if namespace_of(new) == pod_namespace(pod) and name_of(new) in _claim_names(pod):
        return QueueingHint.QUEUE
    return QueueingHint.SKIP


def _after_storage_class_added(pod: dict[str, Any], old: Any, new: Any) -> QueueingHint:
    if not isinstance(new, Mapping):
        return QueueingHint.QUEUE
    if new.get("volumeBindingMode") == WAIT_FOR_FIRST_CONSUMER:
        return QueueingHint.QUEUE
    return QueueingHint.SKIP


def _after_pv_change(pod: dict[str, Any], old: Any, new: Any) -> QueueingHint:
    if not isinstance(old, Mapping) or not isinstance(new, Mapping):
        return QueueingHint.QUEUE
    if pv_topologies(old) != pv_topologies(new):
        return QueueingHint.QUEUE
    return QueueingHint.SKIP
