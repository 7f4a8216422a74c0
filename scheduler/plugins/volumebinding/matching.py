"""Storage helpers shared by the volume plugins (``component-helpers/storage/volume``).

Why a module of its own: VolumeBinding, VolumeZone, NodeVolumeLimits and VolumeRestrictions
all need the same reading of PVs, PVCs and StorageClasses (which class a claim asks for,
whether a claim is fully bound, the claim name of a generic ephemeral volume), and the
scheduler path of the PV controller's ``FindMatchingVolume`` (size, access modes, class,
selector, volume mode, node affinity, smallest fit) must be exactly the one upstream uses,
or we would promise pods volumes the PV controller would never hand them.

Objects stay raw API dicts.  ``CandidatePV`` parses a PV once per scheduling cycle so that
the per-node Filter only re-evaluates node affinity.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from scheduler.objects.errors import ObjectError
from scheduler.objects.labels import LabelSelector, LabelSelectorError
from scheduler.objects.node_affinity import NodeSelector
from scheduler.objects.quantity import QuantityError, nano_to_int, parse_quantity_nano

__all__ = [
    "ANN_BIND_COMPLETED",
    "ANN_BOUND_BY_CONTROLLER",
    "ANN_SELECTED_NODE",
    "ANN_BETA_STORAGE_CLASS",
    "ANN_MIGRATED_PLUGINS",
    "NOT_SUPPORTED_PROVISIONER",
    "WAIT_FOR_FIRST_CONSUMER",
    "READ_WRITE_ONCE_POD",
    "CandidatePV",
    "ClaimRef",
    "not_found",
    "meta",
    "spec",
    "name_of",
    "namespace_of",
    "resource_version",
    "annotations_of",
    "pvc_key",
    "pod_namespace",
    "pod_claims",
    "ephemeral_claim_error",
    "pvc_storage_class",
    "pv_storage_class",
    "storage_request_nano",
    "storage_capacity_nano",
    "is_pvc_fully_bound",
    "is_delay_binding_mode",
    "is_volume_bound_to_claim",
    "check_access_modes",
    "volume_mode_mismatch",
    "pv_node_affinity_matches",
    "find_matching_volume",
    "bind_volume_to_claim",
    "topology_terms_match",
    "compare_resource_versions",
    "access_modes",
]

# Annotations and magic values, spelled as upstream.
ANN_BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
ANN_BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"
ANN_SELECTED_NODE = "volume.kubernetes.io/selected-node"
ANN_BETA_STORAGE_CLASS = "volume.beta.kubernetes.io/storage-class"
ANN_MIGRATED_PLUGINS = "storage.alpha.kubernetes.io/migrated-plugins"
NOT_SUPPORTED_PROVISIONER = "kubernetes.io/no-provisioner"
WAIT_FOR_FIRST_CONSUMER = "WaitForFirstConsumer"
READ_WRITE_ONCE_POD = "ReadWriteOncePod"
_FILESYSTEM = "Filesystem"
_EMPTY: Mapping[str, Any] = {}


# --- raw object access ------------------------------------------------------------------------


def meta(obj: Mapping[str, Any] | None) -> Mapping[str, Any]:
    m = (obj or _EMPTY).get("metadata")
    return m if isinstance(m, Mapping) else _EMPTY


def without_volumes(pod: Mapping[str, Any]) -> bool:
    """Whether ``pod``'s spec is a plain dict without volumes: the common pod, for which
    the volume plugins' PreFilter answers Skip without looking further (False also when
    that cannot be told this cheaply: the full check then runs)."""
    s = pod.get("spec")
    return type(s) is dict and not s.get("volumes")


def spec(obj: Mapping[str, Any] | None) -> Mapping[str, Any]:
    s = (obj or _EMPTY).get("spec")
    return s if isinstance(s, Mapping) else _EMPTY


def status_of(obj: Mapping[str, Any] | None) -> Mapping[str, Any]:
    s = (obj or _EMPTY).get("status")
    return s if isinstance(s, Mapping) else _EMPTY


def name_of(obj: Mapping[str, Any] | None) -> str:
    return str(meta(obj).get("name") or "")


def namespace_of(obj: Mapping[str, Any] | None) -> str:
    return str(meta(obj).get("namespace") or "")


def resource_version(obj: Mapping[str, Any] | None) -> str:
    return str(meta(obj).get("resourceVersion") or "")


def annotations_of(obj: Mapping[str, Any] | None) -> Mapping[str, str]:
    a = meta(obj).get("annotations")
    return a if isinstance(a, Mapping) else _EMPTY


def labels_of(obj: Mapping[str, Any] | None) -> Mapping[str, str]:
    lbl = meta(obj).get("labels")
    return lbl if isinstance(lbl, Mapping) else _EMPTY


def pvc_key(pvc: Mapping[str, Any]) -> str:
    return f"{namespace_of(pvc)}/{name_of(pvc)}"


def not_found(resource: str, name: str) -> str:
    """The message of an informer lister's NotFound error (``persistentvolumeclaim "x" not found``)."""
    return f'{resource} "{name}" not found'


def compare_resource_versions(a: str, b: str) -> int:
    """-1/0/1 like ``APIObjectVersioner.CompareResourceVersion`` (unparsable versions compare equal)."""
    try:
        ia, ib = int(a), int(b)
    except ValueError:
        return 0
    return (ia > ib) - (ia < ib)


# --- pods and their claims --------------------------------------------------------------------


def pod_namespace(pod: Mapping[str, Any]) -> str:
    # NodeInfo counts claim references under "default" for namespace-less pods; stay consistent.
    return namespace_of(pod) or "default"


@dataclass(frozen=True, slots=True)
class PodClaim:
    """A PVC the pod uses: through ``persistentVolumeClaim`` or a generic ephemeral volume."""

    name: str
    ephemeral: bool
    volume_name: str


def pod_claims(pod: Mapping[str, Any]) -> list[PodClaim]:
    """The claims of ``pod`` in volume order (ephemeral claims are named ``<pod>-<volume>``)."""
    out: list[PodClaim] = []
    for vol in spec(pod).get("volumes") or ():
        if not isinstance(vol, Mapping):
            continue
        vname = str(vol.get("name") or "")
        pvc_src = vol.get("persistentVolumeClaim")
        if isinstance(pvc_src, Mapping):
            out.append(PodClaim(str(pvc_src.get("claimName") or ""), False, vname))
        elif vol.get("ephemeral") is not None:
            out.append(PodClaim(f"{name_of(pod)}-{vname}", True, vname))
    return out


def ephemeral_claim_error(pod: Mapping[str, Any], pvc: Mapping[str, Any]) -> str | None:
    """Why ``pvc`` may not serve the pod's ephemeral volume (the pod must control it), or None."""
    uid = meta(pod).get("uid")
    for ref in meta(pvc).get("ownerReferences") or ():
        if isinstance(ref, Mapping) and ref.get("controller") and uid and ref.get("uid") == uid:
            return None
    return (f"PVC {namespace_of(pvc)}/{name_of(pvc)} was not created for pod "
            f"{pod_namespace(pod)}/{name_of(pod)} (pod is not owner)")


# --- classes, sizes, binding state ------------------------------------------------------------


def pvc_storage_class(pvc: Mapping[str, Any]) -> str:
    """The class a claim asks for: the beta annotation wins over ``spec.storageClassName``."""
    ann = annotations_of(pvc)
    if ANN_BETA_STORAGE_CLASS in ann:
        return str(ann[ANN_BETA_STORAGE_CLASS])
    return str(spec(pvc).get("storageClassName") or "")


def pv_storage_class(pv: Mapping[str, Any]) -> str:
    ann = annotations_of(pv)
    if ANN_BETA_STORAGE_CLASS in ann:
        return str(ann[ANN_BETA_STORAGE_CLASS])
    return str(spec(pv).get("storageClassName") or "")


def _quantity_nano(obj: Mapping[str, Any], raw: Any, field: str, kind: str) -> int:
    if raw is None:
        return 0
    try:
        return parse_quantity_nano(raw)
    except QuantityError as exc:
        raise ObjectError.for_object(obj, field, str(exc), kind=kind) from None


def storage_request_nano(pvc: Mapping[str, Any]) -> int:
    """``spec.resources.requests.storage`` in nano-bytes (0 when unset)."""
    res = spec(pvc).get("resources") or _EMPTY
    requests = (res.get("requests") or _EMPTY) if isinstance(res, Mapping) else _EMPTY
    return _quantity_nano(pvc, requests.get("storage"), "spec.resources.requests.storage",
                          "PersistentVolumeClaim")


def storage_capacity_nano(pv: Mapping[str, Any]) -> int:
    capacity = spec(pv).get("capacity") or _EMPTY
    return _quantity_nano(pv, capacity.get("storage"), "spec.capacity.storage",
                          "PersistentVolume")


def storage_bytes(nano: int) -> int:
    """Whole bytes rounded up, as ``Quantity.Value()``."""
    return nano_to_int(nano)


def is_pvc_fully_bound(pvc: Mapping[str, Any]) -> bool:
    """The claim names a volume and the PV controller finished binding it.

    Upstream looks only for the ``pv.kubernetes.io/bind-completed`` annotation; we also accept
    ``status.phase: Bound`` because users (and the sandbox) create pre-bound claims with the
    phase set but without the controller's annotation.  A real PV controller sets both.
    """
    if not spec(pvc).get("volumeName"):
        return False
    return ANN_BIND_COMPLETED in annotations_of(pvc) or status_of(pvc).get("phase") == "Bound"


def is_delay_binding_mode(pvc: Mapping[str, Any], storage_class: Mapping[str, Any] | None) -> bool:
    """Whether the claim's class binds on first consumer.  A missing class means Immediate.

    An unset ``volumeBindingMode`` is read as Immediate, the apiserver's default (upstream
    errors, but only objects that skipped defaulting can have it unset).
    """
    if storage_class is None or not pvc_storage_class(pvc):
        return False
    return (storage_class.get("volumeBindingMode") or "Immediate") == WAIT_FOR_FIRST_CONSUMER


@dataclass(frozen=True, slots=True)
class ClaimRef:
    namespace: str
    name: str
    uid: str


def _claim_ref(pv: Mapping[str, Any]) -> ClaimRef | None:
    ref = spec(pv).get("claimRef")
    if not isinstance(ref, Mapping):
        return None
    return ClaimRef(str(ref.get("namespace") or ""), str(ref.get("name") or ""),
                    str(ref.get("uid") or ""))


def _bound_to(ref: ClaimRef | None, pvc: Mapping[str, Any]) -> bool:
    if ref is None:
        return False
    if ref.name != name_of(pvc) or ref.namespace != namespace_of(pvc):
        return False
    uid = str(meta(pvc).get("uid") or "")
    return not ref.uid or ref.uid == uid


def is_volume_bound_to_claim(pv: Mapping[str, Any], pvc: Mapping[str, Any]) -> bool:
    """The PV is pre-bound or bound to this claim (same namespace/name, same UID if recorded)."""
    return _bound_to(_claim_ref(pv), pvc)


def access_modes(obj: Mapping[str, Any]) -> list[str]:
    return [str(m) for m in spec(obj).get("accessModes") or ()]


def check_access_modes(pvc: Mapping[str, Any], pv: Mapping[str, Any]) -> bool:
    """Every mode the claim asks for is offered by the volume."""
    offered = set(access_modes(pv))
    return all(mode in offered for mode in access_modes(pvc))


def volume_mode_mismatch(pvc: Mapping[str, Any], pv: Mapping[str, Any]) -> bool:
    return (spec(pvc).get("volumeMode") or _FILESYSTEM) != (spec(pv).get("volumeMode") or _FILESYSTEM)


def _pv_node_selector(pv: Mapping[str, Any]) -> NodeSelector | None:
    affinity = spec(pv).get("nodeAffinity")
    if not isinstance(affinity, Mapping) or affinity.get("required") is None:
        return None
    return NodeSelector.from_dict(affinity["required"], where="spec.nodeAffinity.required",
                                  obj=pv, kind="PersistentVolume")


def _labels_only(node: Mapping[str, Any]) -> dict[str, Any]:
    # Upstream's CheckNodeAffinity matches a node built from labels alone, so matchFields
    # (metadata.name) never matches a PV's affinity; keep that behaviour.
    return {"metadata": {"labels": dict(labels_of(node))}}


def pv_node_affinity_matches(pv: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    """``volume.CheckNodeAffinity``: no required affinity admits every node."""
    selector = _pv_node_selector(pv)
    return selector is None or selector.match(_labels_only(node))


# --- matching ---------------------------------------------------------------------------------


class CandidatePV:
    """A PV parsed once per cycle for ``find_matching_volume``."""

    __slots__ = ("pv", "name", "capacity", "claim_ref", "phase", "storage_class", "labels",
                 "deleting", "_selector")

    def __init__(self, pv: dict[str, Any]) -> None:
        self.pv = pv
        self.name = name_of(pv)
        self.capacity = storage_capacity_nano(pv)
        self.claim_ref = _claim_ref(pv)
        self.phase = str(status_of(pv).get("phase") or "")
        self.storage_class = pv_storage_class(pv)
        self.labels = labels_of(pv)
        self.deleting = meta(pv).get("deletionTimestamp") is not None
        self._selector = _pv_node_selector(pv)

    def node_affinity_matches(self, node_labels_node: Mapping[str, Any]) -> bool:
        return self._selector is None or self._selector.match(node_labels_node)


def claim_selector(pvc: Mapping[str, Any]) -> LabelSelector | None:
    raw = spec(pvc).get("selector")
    if raw is None:
        return None
    try:
        return LabelSelector.from_dict(raw, where="spec.selector")
    except LabelSelectorError as exc:
        raise ObjectError.for_object(pvc, "spec.selector", str(exc),
                                     kind="PersistentVolumeClaim") from None


def find_matching_volume(
    pvc: Mapping[str, Any],
    volumes: Sequence[CandidatePV],
    node: Mapping[str, Any],
    excluded: Iterable[str] = (),
) -> CandidatePV | None:
    """The scheduler path of ``FindMatchingVolume`` for one unbound delayed-binding claim.

    A volume pre-bound to this claim wins outright (or, if its node affinity rejects the node,
    no volume fits).  Otherwise the smallest Available volume of the claim's class that is
    large enough, has the requested volume mode and access modes, matches the claim's label
    selector and whose node affinity admits ``node``.  ``excluded`` holds names already chosen
    for the pod's other claims, so two claims of one pod never get the same PV.
    """
    requested = storage_request_nano(pvc)
    requested_class = pvc_storage_class(pvc)
    selector = claim_selector(pvc)
    excluded_names = set(excluded)
    node_view = _labels_only(node)
    pvc_modes = access_modes(pvc)
    pvc_mode = spec(pvc).get("volumeMode") or _FILESYSTEM
    smallest: CandidatePV | None = None
    for cand in volumes:
        if cand.name in excluded_names:
            continue
        bound_here = _bound_to(cand.claim_ref, pvc)
        if cand.claim_ref is not None and not bound_here:
            continue
        if cand.capacity < requested:
            continue
        if (spec(cand.pv).get("volumeMode") or _FILESYSTEM) != pvc_mode:
            continue
        if cand.deleting:
            continue
        affinity_ok = cand.node_affinity_matches(node_view)
        if bound_here:
            return cand if affinity_ok else None
        if cand.phase != "Available":
            continue
        if selector is not None and not selector.matches(cand.labels):
            continue
        if cand.storage_class != requested_class:
            continue
        if not affinity_ok:
            continue
        offered = set(access_modes(cand.pv))
        if not all(m in offered for m in pvc_modes):
            continue
        if smallest is None or cand.capacity < smallest.capacity:
            smallest = cand
    return smallest


def bind_volume_to_claim(pv: Mapping[str, Any], pvc: Mapping[str, Any]) -> tuple[dict[str, Any], bool]:
    """A copy of ``pv`` bound to ``pvc`` and whether anything changed (``GetBindVolumeToClaim``).

    Sets ``spec.claimRef`` (kind, namespace, name, uid, apiVersion, resourceVersion of the
    claim) and, unless the user pre-bound the volume, ``pv.kubernetes.io/bound-by-controller``.
    """
    new_pv = copy.deepcopy(dict(pv))
    dirty = False
    set_bound_by_controller = not is_volume_bound_to_claim(pv, pvc)
    ref = _claim_ref(pv)
    uid = str(meta(pvc).get("uid") or "")
    if ref is None or ref.name != name_of(pvc) or ref.namespace != namespace_of(pvc) or ref.uid != uid:
        claim_ref: dict[str, Any] = {
            "kind": "PersistentVolumeClaim",
            "namespace": namespace_of(pvc),
            "name": name_of(pvc),
            "uid": uid,
            "apiVersion": "v1",
        }
        if resource_version(pvc):
            claim_ref["resourceVersion"] = resource_version(pvc)
        new_pv.setdefault("spec", {})["claimRef"] = claim_ref
        dirty = True
    metadata = new_pv.setdefault("metadata", {})
    anns = metadata.get("annotations") or {}
    if set_bound_by_controller and ANN_BOUND_BY_CONTROLLER not in anns:
        metadata["annotations"] = {**anns, ANN_BOUND_BY_CONTROLLER: "yes"}
        dirty = True
    return new_pv, dirty


def topology_terms_match(terms: Any, labels: Mapping[str, str]) -> bool:
    """``MatchTopologySelectorTerms`` for a StorageClass's ``allowedTopologies``.

    No terms admit every node; terms are ORed; an empty term selects nothing; inside a term
    every ``matchLabelExpressions`` entry needs the label present with one of the listed values.
    """
    if not terms:
        return True
    for term in terms:
        if not isinstance(term, Mapping):
            continue
        exprs = term.get("matchLabelExpressions") or []
        if not exprs:
            continue
        ok = True
        for expr in exprs:
            if not isinstance(expr, Mapping):
                ok = False
                break
            value = labels.get(str(expr.get("key") or ""))
            if value is None or value not in (expr.get("values") or ()):
                ok = False
                break
        if ok:
            return True
    return False
