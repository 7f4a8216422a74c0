"""Small read-only helpers over raw Node dicts, and :func:`validate_node`, run before a node
enters the scheduler cache so every later read of it (Filter, Score, the node tree, queueing
hints) can trust its shape."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scheduler.objects.errors import ObjectError
from scheduler.objects.resources import Resource, ResourceListError, parse_resource_list_nano
from scheduler.objects.taints import parse_taints

__all__ = [
    "node_name",
    "node_labels",
    "node_allocatable",
    "node_capacity",
    "node_is_unschedulable",
    "node_images",
    "node_condition",
    "validate_node",
]

_EMPTY: Mapping[str, Any] = {}


def node_name(node: Mapping[str, Any]) -> str:
    meta = node.get("metadata") or _EMPTY
    return str(meta.get("name") or "")


def node_labels(node: Mapping[str, Any]) -> Mapping[str, str]:
    meta = node.get("metadata") or _EMPTY
    labels = meta.get("labels")
    return labels if labels else _EMPTY


def _status_rl(node: Mapping[str, Any], field: str) -> Resource:
    status = node.get("status") or _EMPTY
    try:
        return Resource.from_resource_list(status.get(field), where=f"status.{field}")
    except ResourceListError as exc:
        raise ObjectError.for_object(node, exc.field, exc.detail, kind="Node") from None


def node_allocatable(node: Mapping[str, Any]) -> Resource:
    """``status.allocatable`` as a Resource (``pods`` goes to ``allowed_pod_number``)."""
    return _status_rl(node, "allocatable")


def node_capacity(node: Mapping[str, Any]) -> Resource:
    return _status_rl(node, "capacity")


def node_is_unschedulable(node: Mapping[str, Any]) -> bool:
    spec = node.get("spec") or _EMPTY
    return bool(spec.get("unschedulable"))


def node_images(node: Mapping[str, Any]) -> list[tuple[list[str], int]]:
    """``status.images`` as (names, sizeBytes) pairs; entries without names are skipped."""
    status = node.get("status") or _EMPTY
    raw = status.get("images") if type(status) is dict or isinstance(status, Mapping) else None
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise ObjectError.for_object(node, "status.images", "must be a list", kind="Node")
    out: list[tuple[list[str], int]] = []
    for i, img in enumerate(raw):
        if not isinstance(img, Mapping):
            raise ObjectError.for_object(node, f"status.images[{i}]", "must be an object",
                                         kind="Node")
        names = img.get("names") or []
        size = img.get("sizeBytes") or 0
        if not isinstance(names, list) or not isinstance(size, int) or isinstance(size, bool):
            raise ObjectError.for_object(node, f"status.images[{i}]",
                                         "names must be a list and sizeBytes an integer",
                                         kind="Node")
        if names:
            out.append(([str(n) for n in names], size))
    return out


def node_condition(node: Mapping[str, Any], cond_type: str) -> Mapping[str, Any] | None:
    """The ``status.conditions`` entry of the given type, or None."""
    status = node.get("status") or _EMPTY
    for c in status.get("conditions") or ():
        if isinstance(c, Mapping) and c.get("type") == cond_type:
            return c
    return None


def _node_err(node: Mapping[str, Any], field: str, message: str) -> ObjectError:
    return ObjectError.for_object(node, field, message, kind="Node")


def validate_node(node: Any) -> None:
    """Raise ObjectError naming the field if the scheduler cannot use this node as it is."""
    # Each map is a dict from the wire: asked by its type first, the Mapping ABC's Python-level
    # check only for what is not (every node event validates, 5000 at a sync).
    if type(node) is not dict and not isinstance(node, Mapping):
        raise ObjectError(f"expected a Node object, got {type(node).__name__}", kind="Node")
    meta = node.get("metadata")
    if type(meta) is not dict and not isinstance(meta, Mapping):
        raise _node_err(node, "metadata", "must be an object")
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise _node_err(node, "metadata.name", "required (a non-empty string)")
    for field in ("labels", "annotations"):
        value = meta.get(field)
        if value is not None and not ((type(value) is dict or isinstance(value, Mapping)) and all(
                isinstance(k, str) and isinstance(v, str) for k, v in value.items())):
            raise _node_err(node, f"metadata.{field}", "must be a map of strings")
    spec = node.get("spec")
    if spec is not None:
        if type(spec) is not dict and not isinstance(spec, Mapping):
            raise _node_err(node, "spec", "must be an object")
        unschedulable = spec.get("unschedulable")
        if unschedulable is not None and not isinstance(unschedulable, bool):
            raise _node_err(node, "spec.unschedulable", "must be a boolean")
    parse_taints(node)
    status = node.get("status")
    if status is not None and type(status) is not dict and not isinstance(status, Mapping):
        raise _node_err(node, "status", "must be an object")
    for field in ("allocatable", "capacity"):
        try:
            amounts = parse_resource_list_nano((status or _EMPTY).get(field),
                                               where=f"status.{field}")
        except ResourceListError as exc:
            raise _node_err(node, exc.field, exc.detail) from None
        for resource, amount in amounts.items():
            if amount < 0:
                raise _node_err(node, f"status.{field}.{resource}",
                                "must be greater than or equal to 0")
    conditions = (status or _EMPTY).get("conditions")
    if conditions is not None and not (
            isinstance(conditions, list)
            and all(type(c) is dict or isinstance(c, Mapping) for c in conditions)):
        raise _node_err(node, "status.conditions", "must be a list of objects")
    node_images(node)
