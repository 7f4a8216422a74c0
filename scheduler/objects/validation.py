"""Shape checks for the objects the scheduler only reads (PVs, PVCs, StorageClasses, CSINodes,
CSIDrivers, PDBs, PodGroups, ElasticQuotas): the fields a plugin or a queueing hint reads must have the type
kube-apiserver (or the CRD schema) guarantees, or the object is malformed.

The event handlers run :func:`validate_object` on every informer event so a malformed object
is logged once, naming the object and the field, and moves no pod; the plugins reading these
objects from the informer's store report them on the pods that use them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from scheduler.objects.errors import ObjectError
from scheduler.objects.labels import LabelSelector, LabelSelectorError
from scheduler.objects.node_affinity import NodeSelector
from scheduler.objects.resources import ResourceListError, parse_resource_list_nano

__all__ = ["validate_object"]

_Check = Callable[["_Obj"], None]


class _Obj:
    """The object under test and its kind, for errors naming both."""

    __slots__ = ("obj", "kind")

    def __init__(self, obj: Mapping[str, Any], kind: str) -> None:
        self.obj = obj
        self.kind = kind

    def err(self, field: str, message: str) -> ObjectError:
        return ObjectError.for_object(self.obj, field, message, kind=self.kind)

    def get(self, path: str) -> Any:
        """The value at a dotted path (None when missing); a non-object on the way is an error."""
        cur: Any = self.obj
        walked: list[str] = []
        for part in path.split("."):
            if cur is None:
                return None
            if not isinstance(cur, Mapping):
                raise self.err(".".join(walked), "must be an object")
            walked.append(part)
            cur = cur.get(part)
        return cur

    def object(self, path: str) -> Mapping[str, Any] | None:
        value = self.get(path)
        if value is not None and not isinstance(value, Mapping):
            raise self.err(path, "must be an object")
        return value

    def string(self, path: str, *, allowed: tuple[str, ...] = ()) -> None:
        value = self.get(path)
        if value is None:
            return
        if not isinstance(value, str):
            raise self.err(path, f"must be a string, got {type(value).__name__}")
        if allowed and value not in allowed:
            raise self.err(path, f"unsupported value {value!r}: must be one of "
                           + ", ".join(allowed))

    def strings(self, path: str) -> None:
        value = self.get(path)
        if value is not None and not (
                isinstance(value, list) and all(isinstance(v, str) for v in value)):
            raise self.err(path, "must be a list of strings")

    def string_map(self, path: str) -> None:
        value = self.get(path)
        if value is not None and not (isinstance(value, Mapping) and all(
                isinstance(k, str) and isinstance(v, str) for k, v in value.items())):
            raise self.err(path, "must be a map of strings")

    def integer(self, path: str, *, minimum: int | None = 0) -> None:
        value = self.get(path)
        if value is None:
            return
        if not isinstance(value, int) or isinstance(value, bool):
            raise self.err(path, f"must be an integer, got {value!r}")
        if minimum is not None and value < minimum:
            raise self.err(path, f"must be greater than or equal to {minimum}")

    def quantities(self, path: str) -> None:
        try:
            amounts = parse_resource_list_nano(self.get(path), where=path)
        except ResourceListError as exc:
            raise self.err(exc.field, exc.detail) from None
        for name, nano in amounts.items():
            if nano < 0:
                raise self.err(f"{path}.{name}", "must be greater than or equal to 0")

    def selector(self, path: str) -> None:
        try:
            LabelSelector.from_dict(self.get(path), where=path)
        except LabelSelectorError as exc:
            field, sep, detail = str(exc).partition(": ")
            raise self.err(field if sep else path, detail if sep else str(exc)) from None

    def objects(self, path: str) -> list[Mapping[str, Any]]:
        value = self.get(path)
        if value is None:
            return []
        if not isinstance(value, list):
            raise self.err(path, "must be a list")
        for i, item in enumerate(value):
            if not isinstance(item, Mapping):
                raise self.err(f"{path}[{i}]", "must be an object")
        return value


def _pv(o: _Obj) -> None:
    o.object("spec")
    o.quantities("spec.capacity")
    o.strings("spec.accessModes")
    for field in ("storageClassName", "volumeMode", "persistentVolumeReclaimPolicy"):
        o.string(f"spec.{field}")
    if o.object("spec.claimRef") is not None:
        for field in ("name", "namespace", "uid"):
            o.string(f"spec.claimRef.{field}")
    if o.object("spec.csi") is not None:
        o.string("spec.csi.driver")
    required = o.get("spec.nodeAffinity.required")
    if required is not None:
        NodeSelector.from_dict(required, where="spec.nodeAffinity.required", obj=o.obj,
                               kind=o.kind)
    o.object("status")
    o.string("status.phase")


def _pvc(o: _Obj) -> None:
    o.object("spec")
    o.quantities("spec.resources.requests")
    o.strings("spec.accessModes")
    for field in ("storageClassName", "volumeName", "volumeMode"):
        o.string(f"spec.{field}")
    o.selector("spec.selector")
    o.object("status")
    o.string("status.phase")


def _storage_class(o: _Obj) -> None:
    o.string("provisioner")
    o.string("volumeBindingMode", allowed=("Immediate", "WaitForFirstConsumer"))
    for i, term in enumerate(o.objects("allowedTopologies")):
        for j, expr in enumerate(term.get("matchLabelExpressions") or ()):
            where = f"allowedTopologies[{i}].matchLabelExpressions[{j}]"
            if not isinstance(expr, Mapping) or not isinstance(expr.get("key"), str):
                raise o.err(where, "must be an object with a string key")
            values = expr.get("values")
            if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
                raise o.err(f"{where}.values", "must be a list of strings")


def _csi_node(o: _Obj) -> None:
    o.object("spec")
    for i, driver in enumerate(o.objects("spec.drivers")):
        where = f"spec.drivers[{i}]"
        if not isinstance(driver.get("name"), str):
            raise o.err(f"{where}.name", "must be a string")
        keys = driver.get("topologyKeys")
        if keys is not None and not (
                isinstance(keys, list) and all(isinstance(k, str) for k in keys)):
            raise o.err(f"{where}.topologyKeys", "must be a list of strings")
        allocatable = driver.get("allocatable")
        if allocatable is None:
            continue
        if not isinstance(allocatable, Mapping):
            raise o.err(f"{where}.allocatable", "must be an object")
        count = allocatable.get("count")
        if count is not None and (
                not isinstance(count, int) or isinstance(count, bool) or count < 0):
            raise o.err(f"{where}.allocatable.count", "must be a non-negative integer")


def _csi_driver(o: _Obj) -> None:
    o.object("spec")


def _pdb(o: _Obj) -> None:
    o.object("spec")
    o.selector("spec.selector")
    for field in ("minAvailable", "maxUnavailable"):
        value = o.get(f"spec.{field}")
        if value is not None and not (
                isinstance(value, str) or isinstance(value, int) and not isinstance(value, bool)):
            raise o.err(f"spec.{field}", "must be an integer or a percentage")
    o.object("status")
    o.integer("status.disruptionsAllowed", minimum=None)
    o.string_map("status.disruptedPods")


def _pod_group(o: _Obj) -> None:
    o.object("spec")
    o.integer("spec.minMember")
    o.quantities("spec.minResources")
    o.integer("spec.scheduleTimeoutSeconds")
    o.object("status")


def _elastic_quota(o: _Obj) -> None:
    """scheduler-plugins' ElasticQuota: quantities well formed and non-negative, min <= max
    for every resource both name."""
    o.object("spec")
    o.quantities("spec.min")
    o.quantities("spec.max")
    low = parse_resource_list_nano(o.get("spec.min"), where="spec.min")
    high = parse_resource_list_nano(o.get("spec.max"), where="spec.max")
    for name in sorted(low.keys() & high.keys()):
        if low[name] > high[name]:
            raise o.err(f"spec.min.{name}", f"must be less than or equal to spec.max.{name}")
    o.object("status")


_CHECKS: dict[str, _Check] = {
    "PersistentVolume": _pv,
    "PersistentVolumeClaim": _pvc,
    "StorageClass": _storage_class,
    "CSINode": _csi_node,
    "CSIDriver": _csi_driver,
    "PodDisruptionBudget": _pdb,
    "PodGroup": _pod_group,
    "ElasticQuota": _elastic_quota,
}


def validate_object(kind: str, obj: Any) -> ObjectError | None:
    """The first problem of ``obj`` (a ``kind``: ``PersistentVolume``, ...), or None.

    Every kind gets the metadata checks (name, namespace, labels, annotations); the kinds
    above also get the fields the scheduler reads.
    """
    if not isinstance(obj, Mapping):
        return ObjectError(f"expected an object, got {type(obj).__name__}", kind=kind)
    o = _Obj(obj, kind)
    try:
        meta = o.object("metadata")
        if meta is None or not isinstance(meta.get("name"), str) or not meta["name"]:
            raise o.err("metadata.name", "required (a non-empty string)")
        o.string("metadata.namespace")
        o.string_map("metadata.labels")
        o.string_map("metadata.annotations")
        check = _CHECKS.get(kind)
        if check is not None:
            check(o)
    except ObjectError as exc:
        return exc
    return None
