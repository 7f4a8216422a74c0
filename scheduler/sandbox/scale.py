"""The ``scale`` subresource (autoscaling/v1 Scale) of Deployments, ReplicaSets and StatefulSets.

``kubectl scale`` and autoscalers read and write ``.../scale`` rather than the object; the
Scale's ``spec.replicas`` is the object's, its ``status.selector`` the label selector as a
string. Writes go through a normal update of the object, so generation, resourceVersion and
watch events are the object's own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import orjson

from . import errors
from .patch import json_patch, merge_patch, strategic_merge_patch
from .resources import ResourceType

if TYPE_CHECKING:
    from .registry import Registry

Obj = dict[str, Any]


def _selector_string(sel: Any) -> str:
    if not isinstance(sel, dict):
        return ""
    parts = [f"{k}={v}" for k, v in sorted((sel.get("matchLabels") or {}).items())]
    for e in sel.get("matchExpressions") or []:
        op, key, vals = e.get("operator"), e.get("key"), ",".join(e.get("values") or [])
        parts.append({"In": f"{key} in ({vals})", "NotIn": f"{key} notin ({vals})", "Exists": str(key),
                      "DoesNotExist": f"!{key}"}.get(str(op), ""))
    return ",".join(p for p in parts if p)


def get_scale(reg: Registry, rt: ResourceType, ns: str, name: str) -> Obj:
    obj = reg.get(rt, ns, name).obj
    md = obj["metadata"]
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    replicas = spec.get("replicas")
    return {
        "kind": "Scale", "apiVersion": "autoscaling/v1",
        "metadata": {k: md[k] for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp") if k in md},
        "spec": {"replicas": replicas if isinstance(replicas, int) else 1},
        "status": {"replicas": int(status.get("replicas") or 0), "selector": _selector_string(spec.get("selector"))},
    }


def update_scale(reg: Registry, rt: ResourceType, ns: str, name: str, scale: Any, *, dry_run: bool = False) -> Obj:
    if not isinstance(scale, dict):
        raise errors.bad_request("the body of the request must be a Scale object")
    replicas = (scale.get("spec") or {}).get("replicas")
    if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
        raise errors.invalid("Scale", name, [("spec.replicas", "FieldValueInvalid",
                                              f"Invalid value: {replicas}: must be greater than or equal to 0")],
                             group="autoscaling")
    cur = reg.get(rt, ns, name).obj
    rv = (scale.get("metadata") or {}).get("resourceVersion")
    if rv and rv != cur["metadata"]["resourceVersion"]:
        raise errors.conflict(rt.plural, name, errors.STALE_RV, group=rt.group)
    body = {**cur, "spec": {**(cur.get("spec") or {}), "replicas": replicas}}
    reg.update(rt, ns, name, body, dry_run=dry_run)
    return get_scale(reg, rt, ns, name) if not dry_run else {**get_scale(reg, rt, ns, name),
                                                            "spec": {"replicas": replicas}}


def patch_scale(reg: Registry, rt: ResourceType, ns: str, name: str, content_type: str, raw: bytes,
                *, dry_run: bool = False) -> Obj:
    cur = get_scale(reg, rt, ns, name)
    try:
        patch = orjson.loads(raw)
    except orjson.JSONDecodeError as e:
        raise errors.bad_request(f"error decoding patch: {e}") from None
    ct = content_type.split(";")[0].strip().lower()
    if ct == "application/merge-patch+json":
        new = merge_patch(cur, patch)
    elif ct == "application/json-patch+json":
        new = json_patch(cur, patch)
    elif ct == "application/strategic-merge-patch+json":
        new = strategic_merge_patch(cur, patch)
    else:
        raise errors.unsupported_media_type(content_type)
    return update_scale(reg, rt, ns, name, new, dry_run=dry_run)
