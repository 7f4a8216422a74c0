"""The scheduler's volume binder (upstream ``SchedulerVolumeBinder``).

Why: PV/PVC binding for WaitForFirstConsumer claims must be decided together with the node, so
the PV's node affinity and the StorageClass's allowed topologies count like any other
placement constraint.  The binder splits that work along the scheduling framework:

* ``get_pod_volume_claims`` (PreFilter) sorts the pod's claims into bound, unbound
  delayed-binding and unbound immediate ones, and lists candidate PVs per class once;
* ``find_pod_volumes`` (Filter, per node) checks bound PVs' node affinity, matches unbound
  claims to Available PVs (smallest fit) or to dynamic provisioning;
* ``assume_pod_volumes`` (Reserve) records the chosen PV<->PVC bindings and selected nodes in
  the assume caches so later cycles never hand out the same PV;
* ``bind_pod_volumes`` (PreBind) writes what upstream writes -- the PV with ``claimRef`` and
  ``pv.kubernetes.io/bound-by-controller``, the PVC with ``volume.kubernetes.io/selected-node``
  -- and waits until the PV controller (or provisioner) reports every claim bound.

Differences from upstream, on purpose: in-tree to CSI translation of PVs is not done (node
affinity of migrated in-tree PVs is read as written); the pod-deleted check of the wait loop is
left to the binding cycle (the Handle has no pod lister); CSIStorageCapacity is honoured only
when the listers serve ``csistoragecapacities``.
"""

from __future__ import annotations

import asyncio
import copy
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from scheduler.framework.interfaces import Handle
from scheduler.objects.labels import LabelSelector, LabelSelectorError
from scheduler.objects.quantity import QuantityError, parse_quantity_nano
from scheduler.objects.validation import validate_object
from scheduler.plugins.volumebinding.assume_cache import AssumeCache, AssumeError, pv_cache, pvc_cache
from scheduler.plugins.volumebinding.matching import (
    ANN_SELECTED_NODE,
    NOT_SUPPORTED_PROVISIONER,
    CandidatePV,
    annotations_of,
    bind_volume_to_claim,
    compare_resource_versions,
    ephemeral_claim_error,
    find_matching_volume,
    is_delay_binding_mode,
    is_pvc_fully_bound,
    labels_of,
    meta,
    name_of,
    namespace_of,
    pod_claims,
    pod_namespace,
    pv_node_affinity_matches,
    pv_storage_class,
    pvc_key,
    pvc_storage_class,
    resource_version,
    spec,
    storage_request_nano,
    topology_terms_match,
)
from scheduler.objects.pod import PodInfo

__all__ = [
    "ERR_REASON_BIND_CONFLICT",
    "ERR_REASON_NODE_CONFLICT",
    "ERR_REASON_NOT_ENOUGH_SPACE",
    "ERR_REASON_PV_NOT_EXIST",
    "BindingInfo",
    "PodVolumes",
    "PodVolumeClaims",
    "VolumeBinder",
    "VolumeBindingError",
]

log = logging.getLogger(__name__)

# Conflict reasons, as upstream spells them (they end up in FailedScheduling messages).
ERR_REASON_BIND_CONFLICT = "node(s) didn't find available persistent volumes to bind"
ERR_REASON_NODE_CONFLICT = "node(s) had volume node affinity conflict"
ERR_REASON_NOT_ENOUGH_SPACE = "node(s) did not have enough free storage"
ERR_REASON_PV_NOT_EXIST = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"

Sleep = Callable[[float], Awaitable[None]]


class VolumeBindingError(Exception):
    """Something went wrong finding, assuming or binding volumes (maps to Status(ERROR))."""


@dataclass(slots=True)
class BindingInfo:
    """A PV chosen for a PVC (after Reserve: the PV copy with claimRef set)."""

    pvc: dict[str, Any]
    pv: dict[str, Any]

    @property
    def storage_class(self) -> str:
        return pv_storage_class(self.pv)


@dataclass(slots=True)
class PodVolumes:
    """What one node needs for the pod's unbound claims."""

    static_bindings: list[BindingInfo] = field(default_factory=list)
    dynamic_provisions: list[dict[str, Any]] = field(default_factory=list)
    # Beside each of ``dynamic_provisions``: the CSIStorageCapacity that showed the node has
    # room for it (upstream ``DynamicProvision.NodeCapacity``), None when the driver does not
    # track capacity.  StorageCapacityScoring scores nodes by it.
    provision_capacities: list[Mapping[str, Any] | None] = field(default_factory=list)


@dataclass(slots=True)
class PodVolumeClaims:
    bound_claims: list[dict[str, Any]] = field(default_factory=list)
    unbound_claims_delay_binding: list[dict[str, Any]] = field(default_factory=list)
    unbound_claims_immediate: list[dict[str, Any]] = field(default_factory=list)
    # storage class -> PVs of that class, parsed once for every node's Filter
    unbound_volumes_delay_binding: dict[str, list[CandidatePV]] = field(default_factory=dict)


class VolumeBinder:
    """One per plugin instance; its assume caches are shared by every scheduling cycle."""

    def __init__(
        self,
        handle: Handle,
        *,
        bind_timeout: float,
        poll_interval: float = 0.1,
        sleep: Sleep | None = None,
    ) -> None:
        self._handle = handle
        self.bind_timeout = bind_timeout
        self.poll_interval = poll_interval
        self._sleep: Sleep = sleep or asyncio.sleep
        self.pv_cache: AssumeCache = pv_cache(lambda: handle.listers)
        self.pvc_cache: AssumeCache = pvc_cache(lambda: handle.listers)
        self._capacity_unsupported_logged = False

    # --- PreFilter ----------------------------------------------------------------------------

    def _storage_class(self, name: str) -> dict[str, Any] | None:
        return self._handle.listers.get("storageclasses", "", name) if name else None

    def get_pod_volume_claims(self, pod_info: PodInfo) -> PodVolumeClaims:
        """Sort the pod's claims (read through the assume cache) by binding state."""
        pod = pod_info.pod
        ns = pod_namespace(pod)
        claims = PodVolumeClaims()
        for claim in pod_claims(pod):
            key = f"{ns}/{claim.name}"
            pvc = self.pvc_cache.get(key)
            if pvc is None:
                raise VolumeBindingError(f'error getting PVC "{key}": could not find '
                                         f'v1.PersistentVolumeClaim "{key}"')
            malformed = validate_object("PersistentVolumeClaim", pvc)
            if malformed is not None:
                raise malformed  # names the claim and the field; only its update can help
            if claim.ephemeral:
                problem = ephemeral_claim_error(pod, pvc)
                if problem is not None:
                    raise VolumeBindingError(problem)
            if is_pvc_fully_bound(pvc):
                claims.bound_claims.append(pvc)
                continue
            delay = is_delay_binding_mode(pvc, self._storage_class(pvc_storage_class(pvc)))
            # A claim pre-bound to a volume is the PV controller's to finish, like Immediate.
            if delay and not spec(pvc).get("volumeName"):
                claims.unbound_claims_delay_binding.append(pvc)
            else:
                claims.unbound_claims_immediate.append(pvc)
        for pvc in claims.unbound_claims_delay_binding:
            cls = pvc_storage_class(pvc)
            if cls not in claims.unbound_volumes_delay_binding:
                pvs = self.pv_cache.list(_of_class(cls))
                claims.unbound_volumes_delay_binding[cls] = [CandidatePV(pv) for pv in pvs]
        return claims

    # --- Filter -------------------------------------------------------------------------------

    def find_pod_volumes(
        self, pod_info: PodInfo, claims: PodVolumeClaims, node: Mapping[str, Any]
    ) -> tuple[PodVolumes, list[str]]:
        """This node's bindings/provisionings for the pod, or the conflict reasons."""
        volumes = PodVolumes()
        bound_ok, bound_pvs_found = True, True
        unbound_ok, enough_space = True, True

        def reasons() -> list[str]:
            out = []
            if not bound_ok:
                out.append(ERR_REASON_NODE_CONFLICT)
            if not unbound_ok:
                out.append(ERR_REASON_BIND_CONFLICT)
            if not enough_space:
                out.append(ERR_REASON_NOT_ENOUGH_SPACE)
            if not bound_pvs_found:
                out.append(ERR_REASON_PV_NOT_EXIST)
            return out

        if claims.bound_claims:
            bound_ok, bound_pvs_found = self._check_bound_claims(claims.bound_claims, node)

        if claims.unbound_claims_delay_binding:
            to_match: list[dict[str, Any]] = []
            to_provision: list[dict[str, Any]] = []
            node_name = name_of(node)
            for pvc in claims.unbound_claims_delay_binding:
                selected = annotations_of(pvc).get(ANN_SELECTED_NODE)
                if selected is not None:
                    if selected != node_name:
                        # Provisioning already started for another node.
                        unbound_ok = False
                        return volumes, reasons()
                    to_provision.append(pvc)
                else:
                    to_match.append(pvc)
            if to_match:
                unbound_ok, volumes.static_bindings, unmatched = self._find_matching_volumes(
                    to_match, claims.unbound_volumes_delay_binding, node)
                to_provision.extend(unmatched)
            if to_provision:
                unbound_ok, enough_space, provisions = self._check_volume_provisions(
                    to_provision, node)
                volumes.dynamic_provisions = [pvc for pvc, _ in provisions]
                volumes.provision_capacities = [cap for _, cap in provisions]
        return volumes, reasons()

    def _check_bound_claims(
        self, bound: list[dict[str, Any]], node: Mapping[str, Any]
    ) -> tuple[bool, bool]:
        for pvc in bound:
            pv = self.pv_cache.get(str(spec(pvc).get("volumeName")))
            if pv is None:
                return True, False
            if not pv_node_affinity_matches(pv, node):
                return False, True
        return True, True

    def _find_matching_volumes(
        self,
        to_match: list[dict[str, Any]],
        pvs_by_class: Mapping[str, list[CandidatePV]],
        node: Mapping[str, Any],
    ) -> tuple[bool, list[BindingInfo], list[dict[str, Any]]]:
        # Smallest requests first, so each claim gets the smallest PV that fits it.
        ordered = sorted(to_match, key=storage_request_nano)
        chosen: list[str] = []
        bindings: list[BindingInfo] = []
        unmatched: list[dict[str, Any]] = []
        for pvc in ordered:
            cand = find_matching_volume(pvc, pvs_by_class.get(pvc_storage_class(pvc), ()),
                                        node, chosen)
            if cand is None:
                unmatched.append(pvc)
                continue
            chosen.append(cand.name)
            bindings.append(BindingInfo(pvc=pvc, pv=cand.pv))
        return not unmatched, bindings, unmatched

    def _check_volume_provisions(
        self, to_provision: list[dict[str, Any]], node: Mapping[str, Any]
    ) -> tuple[bool, bool, list[tuple[dict[str, Any], Mapping[str, Any] | None]]]:
        provisions: list[tuple[dict[str, Any], Mapping[str, Any] | None]] = []
        node_labels = labels_of(node)
        for pvc in to_provision:
            class_name = pvc_storage_class(pvc)
            if not class_name:
                raise VolumeBindingError(f'no class for claim "{pvc_key(pvc)}"')
            sc = self._storage_class(class_name)
            if sc is None:
                raise VolumeBindingError(f'failed to find storage class "{class_name}"')
            provisioner = str(sc.get("provisioner") or "")
            if not provisioner or provisioner == NOT_SUPPORTED_PROVISIONER:
                return False, True, []
            if not topology_terms_match(sc.get("allowedTopologies"), node_labels):
                return False, True, []
            enough, capacity = self._has_enough_capacity(provisioner, pvc, sc, node)
            if not enough:
                return True, False, []
            provisions.append((pvc, capacity))
        return True, True, provisions

    def _has_enough_capacity(
        self, provisioner: str, pvc: Mapping[str, Any], sc: Mapping[str, Any],
        node: Mapping[str, Any],
    ) -> tuple[bool, Mapping[str, Any] | None]:
        """CSIStorageCapacity check, only for CSI drivers that opt in (``storageCapacity``).

        Also answers the first accessible CSIStorageCapacity object with room for the claim
        (None when capacity is not tracked), as upstream ``hasEnoughCapacity``.
        """
        requests = (spec(pvc).get("resources") or {}).get("requests") or {}
        if "storage" not in requests:
            return True, None
        driver = self._handle.listers.get("csidrivers", "", provisioner)
        if driver is None or not spec(driver).get("storageCapacity"):
            return True, None
        try:
            capacities = self._handle.listers.list("csistoragecapacities")
        except (KeyError, LookupError, NotImplementedError):
            if not self._capacity_unsupported_logged:
                log.warning("listers do not serve csistoragecapacities; storage capacity of "
                            "CSI driver %s is not checked", provisioner)
                self._capacity_unsupported_logged = True
            return True, None
        size = storage_request_nano(pvc)
        for cap in capacities:
            if cap.get("storageClassName") != name_of(sc):
                continue
            limit = cap.get("maximumVolumeSize", cap.get("capacity"))
            if limit is None:
                continue
            try:
                if parse_quantity_nano(limit) < size:
                    continue
            except QuantityError:
                continue
            topology = cap.get("nodeTopology")
            if topology is None:
                continue
            try:
                if LabelSelector.from_dict(topology).matches(labels_of(node)):
                    return True, cap
            except LabelSelectorError:
                continue
        return False, None

    # --- Reserve / Unreserve ------------------------------------------------------------------

    def _all_bound(self, pod_info: PodInfo) -> bool:
        ns = pod_namespace(pod_info.pod)
        for claim in pod_claims(pod_info.pod):
            pvc = self.pvc_cache.get(f"{ns}/{claim.name}")
            if pvc is None or not is_pvc_fully_bound(pvc):
                return False
        return True

    def assume_pod_volumes(self, pod_info: PodInfo, node_name: str, volumes: PodVolumes) -> bool:
        """Record the node's bindings in the assume caches; True if nothing is left to bind."""
        if self._all_bound(pod_info):
            return True
        new_bindings: list[BindingInfo] = []
        for binding in volumes.static_bindings:
            new_pv, dirty = bind_volume_to_claim(binding.pv, binding.pvc)
            if dirty:
                try:
                    self.pv_cache.assume(new_pv)
                except AssumeError as exc:
                    self._revert_pvs(new_bindings)
                    raise VolumeBindingError(str(exc)) from exc
            new_bindings.append(BindingInfo(pvc=binding.pvc, pv=new_pv))
        new_claims: list[dict[str, Any]] = []
        for pvc in volumes.dynamic_provisions:
            clone = copy.deepcopy(pvc)
            md = clone.setdefault("metadata", {})
            md["annotations"] = {**(md.get("annotations") or {}), ANN_SELECTED_NODE: node_name}
            try:
                self.pvc_cache.assume(clone)
            except AssumeError as exc:
                self._revert_pvs(new_bindings)
                self._revert_pvcs(new_claims)
                raise VolumeBindingError(str(exc)) from exc
            new_claims.append(clone)
        volumes.static_bindings = new_bindings
        volumes.dynamic_provisions = new_claims
        return False

    def _revert_pvs(self, bindings: list[BindingInfo]) -> None:
        for b in bindings:
            self.pv_cache.restore(name_of(b.pv), resource_version(b.pv))

    def _revert_pvcs(self, claims: list[dict[str, Any]]) -> None:
        for pvc in claims:
            self.pvc_cache.restore(pvc_key(pvc), resource_version(pvc))

    def revert_assumed_pod_volumes(self, volumes: PodVolumes) -> None:
        self._revert_pvs(volumes.static_bindings)
        self._revert_pvcs(volumes.dynamic_provisions)

    # --- PreBind ------------------------------------------------------------------------------

    async def bind_pod_volumes(self, pod_info: PodInfo, node_name: str, volumes: PodVolumes) -> None:
        """Write the bindings and wait (up to ``bind_timeout``) until every claim is bound."""
        await self._bind_api_update(volumes)
        deadline = self._handle.clock() + self.bind_timeout
        while True:
            # Poll first, check after (upstream waits one interval before the first check).
            await self._sleep(self.poll_interval)
            try:
                if self._check_bindings(pod_info, node_name, volumes):
                    return
            except VolumeBindingError as exc:
                raise VolumeBindingError(f"binding volumes: {exc}") from exc
            if self._handle.clock() >= deadline:
                raise VolumeBindingError("binding volumes: context deadline exceeded")

    async def _bind_api_update(self, volumes: PodVolumes) -> None:
        client = self._handle.client
        bindings, claims = volumes.static_bindings, volumes.dynamic_provisions
        done_pvs = done_pvcs = 0
        try:
            for binding in bindings:
                pv_name = name_of(binding.pv)
                resp = await client.request("PUT", f"/api/v1/persistentvolumes/{pv_name}",
                                            body=binding.pv)
                _raise_for_status(resp.status, resp.body, f'PersistentVolume "{pv_name}"')
                if isinstance(resp.body, dict) and resp.body.get("metadata"):
                    binding.pv = resp.body  # what the API server stored, for the version check
                done_pvs += 1
            for i, pvc in enumerate(claims):
                path = (f"/api/v1/namespaces/{namespace_of(pvc)}/persistentvolumeclaims/"
                        f"{name_of(pvc)}")
                resp = await client.request("PUT", path, body=pvc)
                _raise_for_status(resp.status, resp.body,
                                  f'PersistentVolumeClaim "{pvc_key(pvc)}"')
                if isinstance(resp.body, dict) and resp.body.get("metadata"):
                    claims[i] = resp.body
                done_pvcs += 1
        finally:
            # Only the writes that did not happen are un-assumed.
            self._revert_pvs(bindings[done_pvs:])
            self._revert_pvcs(claims[done_pvcs:])

    def _check_bindings(self, pod_info: PodInfo, node_name: str, volumes: PodVolumes) -> bool:
        """True when all claims are bound; raises when binding failed and must be retried.

        Reads the informers' objects, never assumed copies: only the API state counts here.
        """
        node_info = self._handle.snapshot().get(node_name)
        node = node_info.node if node_info is not None else None
        if node is None:
            raise VolumeBindingError(f'failed to get node "{node_name}"')
        for binding in volumes.static_bindings:
            pv_name = name_of(binding.pv)
            pv = self.pv_cache.get_api_obj(pv_name)
            if pv is None:
                raise VolumeBindingError(f'failed to check binding: could not find '
                                         f'v1.PersistentVolume "{pv_name}"')
            key = pvc_key(binding.pvc)
            pvc = self.pvc_cache.get_api_obj(key)
            if pvc is None:
                raise VolumeBindingError(f'failed to check binding: could not find '
                                         f'v1.PersistentVolumeClaim "{key}"')
            if compare_resource_versions(resource_version(binding.pv), resource_version(pv)) > 0:
                return False  # the informer has not seen our write yet
            if not pv_node_affinity_matches(pv, node):
                raise VolumeBindingError(f'pv "{pv_name}" node affinity doesn\'t match node '
                                         f'"{node_name}"')
            ref = spec(pv).get("claimRef")
            if not isinstance(ref, Mapping) or not ref.get("uid"):
                raise VolumeBindingError(f'ClaimRef got reset for pv "{pv_name}"')
            if not is_pvc_fully_bound(pvc):
                return False
        for claim in volumes.dynamic_provisions:
            key = pvc_key(claim)
            pvc = self.pvc_cache.get_api_obj(key)
            if pvc is None:
                raise VolumeBindingError(f'failed to check provisioning pvc: could not find '
                                         f'v1.PersistentVolumeClaim "{key}"')
            if compare_resource_versions(resource_version(claim), resource_version(pvc)) > 0:
                return False
            if not meta(pvc).get("annotations"):
                raise VolumeBindingError(f'selectedNode annotation reset for PVC "{name_of(pvc)}"')
            if annotations_of(pvc).get(ANN_SELECTED_NODE) != node_name:
                # The provisioner drops the annotation to ask for a new node.
                raise VolumeBindingError(f'provisioning failed for PVC "{name_of(pvc)}"')
            volume_name = spec(pvc).get("volumeName")
            if volume_name:
                pv = self.pv_cache.get_api_obj(str(volume_name))
                if pv is None:
                    return False  # the new PV may not have reached the informer yet
                if not pv_node_affinity_matches(pv, node):
                    raise VolumeBindingError(f'pv "{volume_name}" node affinity doesn\'t match '
                                             f'node "{node_name}"')
            if not is_pvc_fully_bound(pvc):
                return False
        return True


def _of_class(storage_class: str) -> Callable[[dict[str, Any]], bool]:
    def predicate(pv: dict[str, Any]) -> bool:
        # A malformed PV (logged once by the event handlers) is no candidate for any claim.
        return validate_object("PersistentVolume", pv) is None and (
            pv_storage_class(pv) == storage_class)

    return predicate


def _raise_for_status(status: int, body: Any, what: str) -> None:
    if status < 400:
        return
    message = ""
    if isinstance(body, Mapping):
        message = str(body.get("message") or "")
    raise VolumeBindingError(f"updating {what}: HTTP {status}" + (f": {message}" if message else ""))
