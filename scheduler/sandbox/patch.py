"""PATCH bodies: JSON merge patch (RFC 7386), JSON patch (RFC 6902) and strategic merge patch.

Strategic merge patch needs per-field knowledge of Go struct tags (``patchMergeKey`` and
``patchStrategy``) that kube-apiserver gets from the compiled types; here a small table covers
the fields a scheduler and ``kubectl apply`` touch (see ``MERGE_KEYS``). Fields not listed are
replaced as a whole, which is also upstream's behaviour for lists without a strategy.
All functions return new values and never mutate their inputs.
"""

from __future__ import annotations

import copy
from typing import Any

import jsonpatch
import jsonpointer

from .errors import ApiError, bad_request

# field name -> merge key of its list elements (patchStrategy "merge").
MERGE_KEYS: dict[str, str] = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "env": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "imagePullSecrets": "name",
    "conditions": "type",
    "ownerReferences": "uid",
    "hostAliases": "ip",
    "topologySpreadConstraints": "topologyKey",
    "resourceClaims": "name",
    "schedulingGates": "name",
    "addresses": "type",
    "podIPs": "ip",
    "hostIPs": "ip",
    "ports": "containerPort",
    "reservedFor": "uid",  # ResourceClaim status (resource.k8s.io)
}
# Lists of primitives merged as sets (patchStrategy "merge" on []string).
PRIMITIVE_MERGE = {"finalizers"}


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


# ------------------------------------------------------------------ JSON patch


def json_patch(doc: Any, ops: Any) -> Any:
    """RFC 6902 through the ``jsonpatch`` library, with kube-apiserver's codes: a body that
    is not a list of operations does not decode (400); an operation that cannot be applied
    (failed test, missing path, index out of range, unknown op) is 422 Invalid."""
    if not isinstance(ops, list):
        raise bad_request("json patch must be a list of operations")
    try:
        return jsonpatch.JsonPatch(ops).apply(doc)
    except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException, TypeError, AttributeError) as e:
        raise ApiError(422, "Invalid", f"the patch could not be applied: {e}") from None


# ------------------------------------------------------------------ strategic merge patch

_SET_ORDER = "$setElementOrder/"
_DELETE_PRIMITIVE = "$deleteFromPrimitiveList/"


def strategic_merge_patch(original: Any, patch: Any, *, service: bool = False) -> Any:
    return _smp_map(original if isinstance(original, dict) else {}, patch, service=service)


def _merge_key(field: str, *, service: bool) -> str | None:
    if field == "ports" and service:
        return "port"
    return MERGE_KEYS.get(field)


def _smp_map(orig: dict[str, Any], patch: Any, *, service: bool) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    directive = patch.get("$patch")
    if directive == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    if directive == "delete":
        return None
    out = dict(orig)
    retain = patch.get("$retainKeys")
    if isinstance(retain, list):
        out = {k: v for k, v in out.items() if k in retain}
    orders: dict[str, list[Any]] = {}
    for k, v in patch.items():
        if k in ("$patch", "$retainKeys"):
            continue
        if k.startswith(_SET_ORDER):
            if isinstance(v, list):
                orders[k[len(_SET_ORDER):]] = v
            continue
        if k.startswith(_DELETE_PRIMITIVE):
            field = k[len(_DELETE_PRIMITIVE):]
            cur = out.get(field)
            if isinstance(cur, list) and isinstance(v, list):
                out[field] = [x for x in cur if x not in v]
            continue
        if v is None:
            out.pop(k, None)
            continue
        cur = out.get(k)
        if isinstance(v, dict):
            merged = _smp_map(cur if isinstance(cur, dict) else {}, v, service=service)
            if merged is None:
                out.pop(k, None)
            else:
                out[k] = merged
        elif isinstance(v, list):
            out[k] = _smp_list(k, cur if isinstance(cur, list) else [], v, service=service)
        else:
            out[k] = v
    for field, order in orders.items():
        cur = out.get(field)
        if isinstance(cur, list):
            out[field] = _apply_order(field, cur, order, service=service)
    return out


def _smp_list(field: str, cur: list[Any], patch: list[Any], *, service: bool) -> list[Any]:
    if any(isinstance(p, dict) and p.get("$patch") == "replace" for p in patch):
        return [copy.deepcopy(p) for p in patch if not (isinstance(p, dict) and "$patch" in p)]
    if field in PRIMITIVE_MERGE:
        out = list(cur)
        for p in patch:
            if p not in out:
                out.append(p)
        return out
    key = _merge_key(field, service=service)
    if key is None or not all(isinstance(p, dict) for p in patch):
        return [copy.deepcopy(p) for p in patch]
    out = list(cur)
    for p in patch:
        kv = p.get(key)
        idx = next(
            (i for i, c in enumerate(out) if isinstance(c, dict) and c.get(key) == kv), None
        )
        if p.get("$patch") == "delete":
            if idx is not None:
                out.pop(idx)
            continue
        if idx is None:
            out.append(_smp_map({}, p, service=service))
        else:
            out[idx] = _smp_map(out[idx], p, service=service)
    return out


def _apply_order(field: str, cur: list[Any], order: list[Any], *, service: bool) -> list[Any]:
    key = _merge_key(field, service=service)

    def ident(x: Any) -> Any:
        if key is not None and isinstance(x, dict):
            return x.get(key)
        return x if not isinstance(x, (dict, list)) else None

    wanted = [ident(o) for o in order]
    pos = {w: i for i, w in enumerate(wanted) if w is not None}
    indexed = [(pos.get(ident(x), len(pos) + i), x) for i, x in enumerate(cur)]
    indexed.sort(key=lambda t: t[0])
    return [x for _, x in indexed]
