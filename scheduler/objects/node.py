"""Small read-only helpers over raw Node dicts."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scheduler.objects.errors import ObjectError
from scheduler.objects.resources import Resource, ResourceListError

__all__ = [
    "node_name",
    "node_labels",
    "node_allocatable",
    "node_capacity",
    "node_is_unschedulable",
    "node_images",
    "node_condition",
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
    out: list[tuple[list[str], int]] = []
    for i, img in enumerate(status.get("images") or ()):
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
