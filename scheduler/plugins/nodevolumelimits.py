"""NodeVolumeLimits (CSI): respect how many volumes of each CSI driver a node can attach.

Why: a CSI node plugin reports ``spec.drivers[].allocatable.count`` in the node's CSINode; a
pod placed past that limit would hang in ContainerCreating.  For each node we count the unique
CSI volumes (driver + volume handle) of the pods already there, add the pod's new ones, and
reject the node when a driver's count would exceed its limit.

A claim's driver comes from its bound PV (``spec.csi.driver``) or, while unbound, from its
StorageClass's provisioner (with a per-claim placeholder handle, as upstream).  In-tree volumes
(AWS EBS, GCE PD, Azure Disk, Cinder, vSphere) are counted under their CSI driver when the
node's CSINode lists the plugin as migrated.  Not done: VolumeAttachment objects (the Handle
does not list them) and Azure File / Portworx translation.

VolumeLimitScaling (KEP-5030, beta and on in 1.37): a node whose CSINode does not (yet) list a
driver would otherwise count as unlimited for it, so a fresh node is crowded with more volume
pods than it can attach.  A CSIDriver with ``spec.preventPodSchedulingIfMissing: true`` opts
in to refusing such nodes ("<driver> CSI driver is not installed on the node") until the
driver registers there; other drivers keep the old behaviour.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Mapping
from typing import Any

from scheduler.config import features
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
from scheduler.framework.status import SKIP, Status, error, unresolvable, unschedulable
from scheduler.framework.types import PreFilterResult
from scheduler.objects.pod import PodInfo
from scheduler.objects.validation import validate_object
from scheduler.plugins import names
from scheduler.plugins.helper import validate_no_args
from scheduler.plugins.volumebinding.matching import (
    ANN_MIGRATED_PLUGINS,
    annotations_of,
    ephemeral_claim_error,
    name_of,
    namespace_of,
    not_found,
    pod_claims,
    pod_namespace,
    pvc_storage_class,
    spec,
    without_volumes,
)

__all__ = [
    "NAME",
    "NodeVolumeLimits",
    "ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED",
    "ERR_REASON_CSI_DRIVER_MISSING",
    "VOLUME_LIMIT_SCALING",
]

NAME = names.NODE_VOLUME_LIMITS
ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED = "node(s) exceed max volume count"
# VolumeLimitScaling; formatted with the driver's name.
ERR_REASON_CSI_DRIVER_MISSING = "{driver} CSI driver is not installed on the node"
VOLUME_LIMIT_SCALING = "VolumeLimitScaling"


def _ebs_handle(src: Mapping[str, Any]) -> str:
    vid = str(src.get("volumeID") or "")
    # aws://<zone>/<vol-id> -> <vol-id>
    return vid.rsplit("/", 1)[-1] if vid.startswith("aws://") else vid


def _gce_handle(src: Mapping[str, Any]) -> str:
    return f"projects/UNSPECIFIED/zones/UNSPECIFIED/disks/{src.get('pdName') or ''}"


# volume source field -> (in-tree plugin name, CSI driver, volume handle of the source)
_MIGRATABLE: dict[str, tuple[str, str, Callable[[Mapping[str, Any]], str]]] = {
    "awsElasticBlockStore": ("kubernetes.io/aws-ebs", "ebs.csi.aws.com", _ebs_handle),
    "gcePersistentDisk": ("kubernetes.io/gce-pd", "pd.csi.storage.gke.io", _gce_handle),
    "azureDisk": ("kubernetes.io/azure-disk", "disk.csi.azure.com",
                  lambda s: str(s.get("diskURI") or "")),
    "cinder": ("kubernetes.io/cinder", "cinder.csi.openstack.org",
               lambda s: str(s.get("volumeID") or "")),
    "vsphereVolume": ("kubernetes.io/vsphere-volume", "csi.vsphere.vmware.com",
                      lambda s: str(s.get("volumePath") or "")),
}
_PLUGIN_TO_DRIVER = {plugin: driver for plugin, driver, _ in _MIGRATABLE.values()}


class _LookupError(Exception):
    def __init__(self, message: str, *, not_found: bool = False) -> None:
        super().__init__(message)
        self.not_found = not_found


def _migration_on(csi_node: Mapping[str, Any] | None, plugin: str) -> bool:
    if csi_node is None:
        return False
    raw = annotations_of(csi_node).get(ANN_MIGRATED_PLUGINS) or ""
    return plugin in {p.strip() for p in str(raw).split(",")}


def _migratable_source(obj: Mapping[str, Any]) -> tuple[str, Mapping[str, Any]] | None:
    for field_name in _MIGRATABLE:
        src = obj.get(field_name)
        if isinstance(src, Mapping):
            return field_name, src
    return None


def _drivers_of(csi_node: Mapping[str, Any] | None) -> set[str]:
    drivers = spec(csi_node).get("drivers") if csi_node is not None else None
    if not isinstance(drivers, list):
        return set()
    return {str(d.get("name") or "") for d in drivers if isinstance(d, Mapping)}


def _prevents_scheduling_if_missing(csi_driver: Any) -> bool:
    return isinstance(csi_driver, Mapping) and spec(csi_driver).get(
        "preventPodSchedulingIfMissing") is True


def _volume_limits(csi_node: Mapping[str, Any] | None) -> dict[str, int]:
    limits: dict[str, int] = {}
    if csi_node is None:
        return limits
    for driver in spec(csi_node).get("drivers") or ():
        if not isinstance(driver, Mapping):
            continue
        alloc = driver.get("allocatable")
        if isinstance(alloc, Mapping) and alloc.get("count") is not None:
            limits[str(driver.get("name") or "")] = int(alloc["count"])
    return limits


class NodeVolumeLimits(PreFilterPlugin, FilterPlugin, EnqueueExtensions):
    NAME = NAME

    def __init__(self, args: PluginArgs, handle: Handle, *,
                 gates: features.FeatureGates | None = None) -> None:
        validate_no_args(NAME, args)
        self._handle = handle
        self.volume_limit_scaling = (gates or features.DEFAULT).enabled(VOLUME_LIMIT_SCALING)
        # Placeholder handles of unbound claims must never collide with real volume IDs.
        self._random_prefix = secrets.token_hex(16)

    def events_to_register(self) -> list[ClusterEventWithHint]:
        events = [
            # Any new CSINode may carry the limits (or the migration annotation) that help.
            ClusterEventWithHint(ClusterEvent(EventResource.CSI_NODE, ActionType.ADD)),
            ClusterEventWithHint(ClusterEvent(EventResource.CSI_NODE, ActionType.UPDATE),
                                 _after_csi_node_updated_scaling if self.volume_limit_scaling
                                 else _after_csi_node_updated),
            ClusterEventWithHint(ClusterEvent(EventResource.POD, ActionType.DELETE),
                                 _after_pod_deleted),
            ClusterEventWithHint(ClusterEvent(EventResource.PERSISTENT_VOLUME_CLAIM,
                                              ActionType.ADD), _after_pvc_added),
        ]
        if self.volume_limit_scaling:
            # A driver that stops preventing scheduling where it is missing frees the pods it
            # kept off nodes without it.
            events.append(ClusterEventWithHint(
                ClusterEvent(EventResource.CSI_DRIVER, ActionType.UPDATE),
                _after_csi_driver_updated))
        return events

    def pre_filter(
        self, state: CycleState, pod_info: PodInfo, nodes: list[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status | None]:
        if without_volumes(pod_info.pod):
            return None, SKIP
        for vol in spec(pod_info.pod).get("volumes") or ():
            if not isinstance(vol, Mapping):
                continue
            if (vol.get("persistentVolumeClaim") is not None or vol.get("ephemeral") is not None
                    or _migratable_source(vol) is not None):
                return None, None
        return None, SKIP

    def filter(self, state: CycleState, pod_info: PodInfo, node_info: NodeInfo) -> Status | None:
        pod = pod_info.pod
        if not spec(pod).get("volumes"):
            return None
        node_name = node_info.name
        csi_node = self._handle.listers.get("csinodes", "", node_name)
        if csi_node is not None and validate_object("CSINode", csi_node) is not None:
            csi_node = None  # malformed (logged once by the event handlers): no limits known
        new_volumes: dict[str, str] = {}
        try:
            self._attachable_volumes(pod, csi_node, True, new_volumes)
        except _LookupError as exc:
            if exc.not_found:
                # The pod can never run until the claim exists.
                return unresolvable(str(exc))
            return error(str(exc))
        if not new_volumes:
            return None
        if self.volume_limit_scaling:
            missing = self._missing_driver(new_volumes, csi_node)
            if missing is not None:
                return unschedulable(ERR_REASON_CSI_DRIVER_MISSING.format(driver=missing))
        limits = _volume_limits(csi_node)
        if not limits:
            return None
        attached: dict[str, str] = {}
        try:
            for existing in node_info.pods:
                self._attachable_volumes(existing.pod, csi_node, False, attached)
        except _LookupError as exc:
            return error(str(exc))
        attached_count: dict[str, int] = {}
        for unique, driver in attached.items():
            # A volume already attached for another pod is not attached again.
            new_volumes.pop(unique, None)
            attached_count[driver] = attached_count.get(driver, 0) + 1
        new_count: dict[str, int] = {}
        for driver in new_volumes.values():
            new_count[driver] = new_count.get(driver, 0) + 1
        for driver, count in new_count.items():
            limit = limits.get(driver)
            if limit is not None and attached_count.get(driver, 0) + count > limit:
                return unschedulable(ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED)
        return None

    def _missing_driver(self, new_volumes: Mapping[str, str],
                        csi_node: Mapping[str, Any] | None) -> str | None:
        """The first driver of the pod's new volumes that opted in (its CSIDriver's
        ``preventPodSchedulingIfMissing``) and is not registered in the node's CSINode (or the
        node has no CSINode)."""
        on_node = _drivers_of(csi_node)
        for driver in dict.fromkeys(new_volumes.values()):
            if driver in on_node:
                continue
            if _prevents_scheduling_if_missing(self._handle.listers.get("csidrivers", "", driver)):
                return driver
        return None

    def _attachable_volumes(self, pod: Mapping[str, Any], csi_node: Mapping[str, Any] | None,
                            new_pod: bool, result: dict[str, str]) -> None:
        """Add ``driver/handle -> driver`` for each CSI(-migrated) volume of ``pod``."""
        ns = pod_namespace(pod)
        claims = {c.volume_name: c for c in pod_claims(pod)}
        for vol in spec(pod).get("volumes") or ():
            if not isinstance(vol, Mapping):
                continue
            claim = claims.get(str(vol.get("name") or ""))
            if claim is None or (vol.get("persistentVolumeClaim") is None
                                 and vol.get("ephemeral") is None):
                inline = self._inline_volume(vol, csi_node)
                if inline is not None:
                    result[f"{inline[0]}/{inline[1]}"] = inline[0]
                continue
            if not claim.name:
                raise _LookupError("PersistentVolumeClaim had no name")
            pvc = self._handle.listers.get("persistentvolumeclaims", ns, claim.name)
            if pvc is None:
                if new_pod:
                    raise _LookupError(f"looking up PVC {ns}/{claim.name}: "
                                       + not_found("persistentvolumeclaim", claim.name),
                                       not_found=True)
                continue  # an existing pod's missing claim is not counted
            if claim.ephemeral:
                problem = ephemeral_claim_error(pod, pvc)
                if problem is not None:
                    raise _LookupError(problem)
            driver, handle = self._csi_driver_info(csi_node, pvc)
            if driver and handle:
                result[f"{driver}/{handle}"] = driver

    def _inline_volume(self, vol: Mapping[str, Any],
                       csi_node: Mapping[str, Any] | None) -> tuple[str, str] | None:
        found = _migratable_source(vol)
        if found is None:
            return None
        plugin, driver, handle_of = _MIGRATABLE[found[0]]
        if not _migration_on(csi_node, plugin):
            return None
        return driver, handle_of(found[1])

    def _csi_driver_info(self, csi_node: Mapping[str, Any] | None,
                         pvc: Mapping[str, Any]) -> tuple[str, str]:
        pv_name = str(spec(pvc).get("volumeName") or "")
        if not pv_name:
            return self._driver_from_class(csi_node, pvc)
        pv = self._handle.listers.get("persistentvolumes", "", pv_name)
        if pv is None:
            # Deleted, or pre-bound to a PV not created yet: count by class.
            return self._driver_from_class(csi_node, pvc)
        csi = spec(pv).get("csi")
        if isinstance(csi, Mapping):
            return str(csi.get("driver") or ""), str(csi.get("volumeHandle") or "")
        found = _migratable_source(spec(pv))
        if found is None:
            return "", ""
        plugin, driver, handle_of = _MIGRATABLE[found[0]]
        if not _migration_on(csi_node, plugin):
            return "", ""
        return driver, handle_of(found[1])

    def _driver_from_class(self, csi_node: Mapping[str, Any] | None,
                           pvc: Mapping[str, Any]) -> tuple[str, str]:
        class_name = pvc_storage_class(pvc)
        if not class_name:
            # No class: an Immediate claim, bound before scheduling; nothing to count.
            return "", ""
        sc = self._handle.listers.get("storageclasses", "", class_name)
        if sc is None:
            return "", ""
        handle = f"{self._random_prefix}-{namespace_of(pvc)}/{name_of(pvc)}"
        provisioner = str(sc.get("provisioner") or "")
        if provisioner in _PLUGIN_TO_DRIVER:
            if not _migration_on(csi_node, provisioner):
                return "", ""
            return _PLUGIN_TO_DRIVER[provisioner], handle
        return provisioner, handle


def _after_csi_node_updated(pod: dict[str, Any], old: Any, new: Any) -> QueueingHint:
    if not isinstance(old, Mapping) or not isinstance(new, Mapping):
        return QueueingHint.QUEUE
    old_limits = _volume_limits(old)
    for driver, limit in _volume_limits(new).items():
        if limit > old_limits.get(driver, 0):
            return QueueingHint.QUEUE
    return QueueingHint.SKIP


def _after_csi_node_updated_scaling(pod: dict[str, Any], old: Any, new: Any) -> QueueingHint:
    """With VolumeLimitScaling a driver newly registered on the node can help too."""
    if not isinstance(old, Mapping) or not isinstance(new, Mapping):
        return QueueingHint.QUEUE
    if _drivers_of(new) - _drivers_of(old):
        return QueueingHint.QUEUE
    return _after_csi_node_updated(pod, old, new)


def _after_csi_driver_updated(pod: dict[str, Any], old: Any, new: Any) -> QueueingHint:
    if not isinstance(old, Mapping) or not isinstance(new, Mapping):
        return QueueingHint.QUEUE
    if _prevents_scheduling_if_missing(old) and not _prevents_scheduling_if_missing(new):
        return QueueingHint.QUEUE
    return QueueingHint.SKIP


def _after_pod_deleted(pod: dict[str, Any], old: Any, new: Any) -> QueueingHint:
    deleted = old if isinstance(old, Mapping) else new
    if not isinstance(deleted, Mapping):
        return QueueingHint.QUEUE
    volumes = spec(deleted).get("volumes") or ()
    if not volumes:
        return QueueingHint.SKIP
    if not spec(deleted).get("nodeName") and not (deleted.get("status") or {}).get(
            "nominatedNodeName"):
        return QueueingHint.SKIP
    for vol in volumes:
        if not isinstance(vol, Mapping):
            continue
        if (vol.get("persistentVolumeClaim") is not None or vol.get("ephemeral") is not None
                or _migratable_source(vol) is not None):
            return QueueingHint.QUEUE
    return QueueingHint.SKIP


def _after_pvc_added(pod: dict[str, Any], old: Any, new: Any) -> QueueingHint:
    if not isinstance(new, Mapping):
        return QueueingHint.QUEUE
    if namespace_of(new) != pod_namespace(pod):
        return QueueingHint.SKIP
    if any(c.name == name_of(new) for c in pod_claims(pod)):
        return QueueingHint.QUEUE
    return QueueingHint.SKIP
