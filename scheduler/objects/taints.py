"""Node taints and pod tolerations, parsed once and matched like upstream ``ToleratesTaint``."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from scheduler.objects.errors import ObjectError

__all__ = [
    "NO_SCHEDULE",
    "PREFER_NO_SCHEDULE",
    "NO_EXECUTE",
    "OP_EQUAL",
    "OP_EXISTS",
    "Taint",
    "Toleration",
    "parse_taints",
    "parse_tolerations",
    "tolerates",
    "tolerates_all",
    "find_untolerated_taint",
    "format_taint",
]

NO_SCHEDULE = "NoSchedule"
PREFER_NO_SCHEDULE = "PreferNoSchedule"
NO_EXECUTE = "NoExecute"
OP_EQUAL = "Equal"
OP_EXISTS = "Exists"
_EFFECTS = frozenset({NO_SCHEDULE, PREFER_NO_SCHEDULE, NO_EXECUTE})


class Taint(NamedTuple):
    key: str
    value: str
    effect: str


class Toleration(NamedTuple):
    key: str = ""
    operator: str = ""  # "" means Equal
    value: str = ""
    effect: str = ""  # "" means every effect
    toleration_seconds: int | None = None


def _str_field(obj: Mapping[str, Any], item: Mapping[str, Any], name: str, path: str,
               kind: str) -> str:
    v = item.get(name)
    if v is None:
        return ""
    if not isinstance(v, str):
        raise ObjectError.for_object(obj, f"{path}.{name}",
                                     f"must be a string, got {type(v).__name__}", kind=kind)
    return v


def parse_taints(node: Mapping[str, Any]) -> list[Taint]:
    """``spec.taints`` of a node; raises ObjectError on malformed entries."""
    spec = node.get("spec") or {}
    raw = spec.get("taints") if isinstance(spec, Mapping) else None
    if raw is None or raw == []:
        return []
    if not isinstance(raw, list):
        raise ObjectError.for_object(node, "spec.taints", "must be a list", kind="Node")
    out: list[Taint] = []
    for i, t in enumerate(raw):
        path = f"spec.taints[{i}]"
        if not isinstance(t, Mapping):
            raise ObjectError.for_object(node, path, "must be an object", kind="Node")
        key = _str_field(node, t, "key", path, "Node")
        effect = _str_field(node, t, "effect", path, "Node")
        if not key:
            raise ObjectError.for_object(node, f"{path}.key", "required", kind="Node")
        if effect not in _EFFECTS:
            raise ObjectError.for_object(
                node, f"{path}.effect",
                f"unsupported value {effect!r}: must be one of NoSchedule, PreferNoSchedule, "
                "NoExecute", kind="Node")
        out.append(Taint(key, _str_field(node, t, "value", path, "Node"), effect))
    return out


def parse_tolerations(pod: Mapping[str, Any]) -> list[Toleration]:
    """``spec.tolerations`` of a pod; raises ObjectError on malformed entries."""
    spec = pod.get("spec") or {}
    raw = spec.get("tolerations") if isinstance(spec, Mapping) else None
    if raw is None or raw == []:
        return []
    if not isinstance(raw, list):
        raise ObjectError.for_object(pod, "spec.tolerations", "must be a list", kind="Pod")
    out: list[Toleration] = []
    for i, t in enumerate(raw):
        path = f"spec.tolerations[{i}]"
        if not isinstance(t, Mapping):
            raise ObjectError.for_object(pod, path, "must be an object", kind="Pod")
        secs = t.get("tolerationSeconds")
        if secs is not None and (not isinstance(secs, int) or isinstance(secs, bool)):
            raise ObjectError.for_object(pod, f"{path}.tolerationSeconds",
                                         "must be an integer", kind="Pod")
        out.append(Toleration(
            _str_field(pod, t, "key", path, "Pod"),
            _str_field(pod, t, "operator", path, "Pod"),
            _str_field(pod, t, "value", path, "Pod"),
            _str_field(pod, t, "effect", path, "Pod"),
            secs,
        ))
    return out


def tolerates(toleration: Toleration, taint: Taint) -> bool:
    """Upstream ``Toleration.ToleratesTaint``.

    Empty effect matches every effect; empty key (with Exists) matches every key; Equal (or
    empty operator) compares values; Exists ignores the value; unknown operators never match.
    """
    if toleration.effect and toleration.effect != taint.effect:
        return False
    if toleration.key and toleration.key != taint.key:
        return False
    op = toleration.operator
    if op == "" or op == OP_EQUAL:
        return toleration.value == taint.value
    return op == OP_EXISTS


def tolerates_all(taint: Taint, tolerations: Iterable[Toleration]) -> bool:
    """True when any toleration tolerates ``taint`` (upstream TolerationsTolerateTaint)."""
    for t in tolerations:
        if tolerates(t, taint):
            return True
    return False


def find_untolerated_taint(
    taints: Sequence[Taint],
    tolerations: Sequence[Toleration],
    *,
    effects: frozenset[str] = frozenset({NO_SCHEDULE, NO_EXECUTE}),
) -> Taint | None:
    """The first taint with an effect in ``effects`` that no toleration tolerates."""
    for taint in taints:
        if taint.effect not in effects:
            continue
        if not tolerates_all(taint, tolerations):
            return taint
    return None


def format_taint(taint: Taint) -> str:
    """``{key: value}`` as in ``node(s) had untolerated taint {key: value}``."""
    return f"{{{taint.key}: {taint.value}}}"
