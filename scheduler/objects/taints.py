"""Node taints and pod tolerations, parsed once and matched like upstream ``ToleratesTaint``."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from scheduler.objects.errors import ObjectError

__all__ = [
    "NO_SCHEDULE",
    "PREFER_NO_SCHEDULE",
    "NO_EXECUTE",
    "OP_EQUAL",
    "OP_EXISTS",
    "OP_LT",
    "OP_GT",
    "set_comparison_operators",
    "comparison_operators_enabled",
    "Taint",
    "Toleration",
    "parse_taints",
    "parse_tolerations",
    "tolerates",
    "tolerates_all",
    "find_untolerated_taint",
    "compare_numeric_values",
    "format_taint",
]

NO_SCHEDULE = "NoSchedule"
PREFER_NO_SCHEDULE = "PreferNoSchedule"
NO_EXECUTE = "NoExecute"
OP_EQUAL = "Equal"
OP_EXISTS = "Exists"
# Numeric comparisons (KEP-5471, alpha 1.35, gate TaintTolerationComparisonOperators): Gt
# tolerates a taint whose value is greater than the toleration's, Lt one whose value is less.
OP_LT = "Lt"
OP_GT = "Gt"
# Canonical int64 decimals only: no plus sign, no leading zero, no "-0", no spaces.
_CANONICAL_INT = re.compile(r"(0|-?[1-9][0-9]*)\Z")
_INT64 = (-(2**63), 2**63 - 1)
# Process-wide, as upstream's feature gate (the command line sets it from --feature-gates).
_comparison_operators = False
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
    raw = spec.get("taints") if type(spec) is dict or isinstance(spec, Mapping) else None
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


def set_comparison_operators(enabled: bool) -> None:
    """Turn the Lt/Gt toleration operators on or off (TaintTolerationComparisonOperators)."""
    global _comparison_operators
    _comparison_operators = enabled


def comparison_operators_enabled() -> bool:
    return _comparison_operators


def _int64(value: str) -> int | None:
    if not _CANONICAL_INT.match(value):
        return None
    n = int(value)
    return n if _INT64[0] <= n <= _INT64[1] else None


def compare_numeric_values(toleration_value: str, taint_value: str, operator: str) -> bool:
    """Upstream ``compareNumericValues``: both values canonical int64s, else no match."""
    tol, taint = _int64(toleration_value), _int64(taint_value)
    if tol is None or taint is None:
        return False
    if operator == OP_GT:
        return taint > tol
    if operator == OP_LT:
        return taint < tol
    return False


def tolerates(toleration: Toleration, taint: Taint) -> bool:
    """Upstream ``Toleration.ToleratesTaint``.

    Empty effect matches every effect; empty key (with Exists) matches every key; Equal (or
    empty operator) compares values; Exists ignores the value; Lt/Gt compare them as
    integers when the TaintTolerationComparisonOperators gate is on; unknown operators never
    match.
    """
    if toleration.effect and toleration.effect != taint.effect:
        return False
    if toleration.key and toleration.key != taint.key:
        return False
    op = toleration.operator
    if op == "" or op == OP_EQUAL:
        return toleration.value == taint.value
    if op == OP_EXISTS:
        return True
    if op in (OP_LT, OP_GT) and _comparison_operators:
        return compare_numeric_values(toleration.value, taint.value, op)
    return False


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
