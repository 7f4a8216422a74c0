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


def _ptr(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise _patch_error(f"invalid JSON pointer: {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _patch_error(msg: str) -> ApiError:
    return ApiError(422, "Invalid", msg)


def _index(lst: list[Any], tok: str, *, for_add: bool) -> int:
    if tok == "-" and for_add:
        return len(lst)
    try:
        i = int(tok)
    except ValueError:
        raise _patch_error(f"invalid array index: {tok}") from None
    limit = len(lst) if for_add else len(lst) - 1
    if i < 0 or i > limit:
        raise _patch_error(f"array index out of bounds: {i}")
    return i


def _parent(doc: Any, toks: list[str]) -> Any:
    cur = doc
    for t in toks[:-1]:
        if isinstance(cur, dict):
            if t not in cur:
                raise _patch_error(f"doc is missing path: /{'/'.join(toks)}")
            cur = cur[t]
        elif isinstance(cur, list):
            cur = cur[_index(cur, t, for_add=False)]
        else:
            raise _patch_error(f"doc is missing path: /{'/'.join(toks)}")
    return cur


def _get(doc: Any, toks: list[str]) -> Any:
    if not toks:
        return doc
    parent = _parent(doc, toks)
    t = toks[-1]
    if isinstance(parent, dict):
        if t not in parent:
            raise _patch_error(f"doc is missing path: /{'/'.join(toks)}")
        return parent[t]
    if isinstance(parent, list):
        return parent[_index(parent, t, for_add=False)]
    raise _patch_error(f"doc is missing path: /{'/'.join(toks)}")


def _remove(doc: Any, toks: list[str]) -> Any:
    parent = _parent(doc, toks)
    t = toks[-1]
    if isinstance(parent, dict):
        if t not in parent:
            raise _patch_error(f"unable to remove nonexistent key: {t}: missing value")
        return parent.pop(t)
    if isinstance(parent, list):
        return parent.pop(_index(parent, t, for_add=False))
    raise _patch_error(f"doc is missing path: /{'/'.join(toks)}")


def _add(doc: Any, toks: list[str], value: Any) -> Any:
    if not toks:
        return value
    parent = _parent(doc, toks)
    t = toks[-1]
    if isinstance(parent, dict):
        parent[t] = value
    elif isinstance(parent, list):
        parent.insert(_index(parent, t, for_add=True), value)
    else:
        raise _patch_error(f"doc is missing path: /{'/'.join(toks)}")
    return doc


def json_patch(doc: Any, ops: Any) -> Any:
    if not isinstance(ops, list):
        raise bad_request("json patch must be a list of operations")
    doc = copy.deepcopy(doc)
    for op in ops:
        if not isinstance(op, dict) or "op" not in op:
            raise bad_request(f"invalid json patch operation: {op!r}")
        kind = op["op"]
        toks = _ptr(str(op.get("path", "")))
        if kind == "add":
            doc = _add(doc, toks, copy.deepcopy(op.get("value")))
        elif kind == "remove":
            _remove(doc, toks)
        elif kind == "replace":
            if not toks:
                doc = copy.deepcopy(op.get("value"))
            else:
                _get(doc, toks)
                parent = _parent(doc, toks)
                if isinstance(parent, dict):
                    parent[toks[-1]] = copy.deepcopy(op.get("value"))
                else:
                    parent[_index(parent, toks[-1], for_add=False)] = copy.deepcopy(op.get("value"))
        elif kind in ("move", "copy"):
            src = _ptr(str(op.get("from", "")))
            val = _remove(doc, src) if kind == "move" else copy.deepcopy(_get(doc, src))
            doc = _add(doc, toks, val)
        elif kind == "test":
            if _get(doc, toks) != op.get("value"):
                raise _patch_error(f"testing value /{'/'.join(toks)} failed: test failed")
        else:
            raise bad_request(f"unexpected json patch operation: {kind!r}")
    return doc


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
