"""Node selectors and node affinity (``k8s.io/component-helpers/scheduling/corev1/nodeaffinity``).

Terms are ORed, requirements inside a term ANDed; a term with neither matchExpressions nor
matchFields matches nothing, as does a selector with no terms. ``matchFields`` supports the
only field upstream exposes, ``metadata.name``, with In/NotIn and exactly one value.

Deliberate difference: upstream silently skips a term that fails to parse (the apiserver
rejects such pods anyway); here parsing raises :class:`ObjectError` so the bad pod is reported.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from scheduler.objects.errors import ObjectError
from scheduler.objects.labels import (
    DOES_NOT_EXIST,
    EXISTS,
    GT,
    IN,
    LT,
    NOT_IN,
    LabelSelectorError,
    Requirement,
)

__all__ = [
    "NodeSelectorRequirement",
    "NodeFieldRequirement",
    "NodeSelectorTerm",
    "NodeSelector",
    "RequiredNodeAffinity",
    "PreferredSchedulingTerms",
    "node_selector_matches",
    "node_fields",
]

_LABEL_OPS = frozenset({IN, NOT_IN, EXISTS, DOES_NOT_EXIST, GT, LT})
_NAME_FIELD = "metadata.name"

# A label requirement of a node selector is exactly a label Requirement (same operators).
NodeSelectorRequirement = Requirement


class _ParseError(Exception):
    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


def node_fields(node: Mapping[str, Any]) -> dict[str, str]:
    """Fields usable in matchFields (only ``metadata.name`` upstream, when non-empty)."""
    meta = node.get("metadata") or {}
    name = meta.get("name") if isinstance(meta, Mapping) else None
    return {_NAME_FIELD: name} if isinstance(name, str) and name else {}


def _node_labels(node: Mapping[str, Any]) -> Mapping[str, str]:
    meta = node.get("metadata")
    if not meta:
        return {}
    labels = meta.get("labels")
    return labels if labels else {}


class NodeFieldRequirement:
    """A matchFields entry: ``key`` In/NotIn a single value."""

    __slots__ = ("key", "operator", "value")

    def __init__(self, key: str, operator: str, value: str) -> None:
        self.key = key
        self.operator = operator
        self.value = value

    def matches(self, fields: Mapping[str, str]) -> bool:
        actual = fields.get(self.key, "")
        return (actual == self.value) if self.operator == IN else (actual != self.value)

    def __repr__(self) -> str:
        return f"NodeFieldRequirement({self.key!r}, {self.operator!r}, {self.value!r})"


def _parse_expressions(raw: Any, path: str) -> tuple[Requirement, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise _ParseError(path, "must be a list")
    out: list[Requirement] = []
    for i, e in enumerate(raw):
        p = f"{path}[{i}]"
        if not isinstance(e, Mapping):
            raise _ParseError(p, "must be an object")
        op = e.get("operator")
        if op not in _LABEL_OPS:
            raise _ParseError(f"{p}.operator", f"unsupported value {op!r}: must be one of "
                              "In, NotIn, Exists, DoesNotExist, Gt, Lt")
        key = e.get("key")
        if not isinstance(key, str):
            raise _ParseError(f"{p}.key", "must be a string")
        vals = e.get("values") or []
        if not isinstance(vals, list) or not all(isinstance(v, str) for v in vals):
            raise _ParseError(f"{p}.values", "must be a list of strings")
        try:
            out.append(Requirement(key, op, vals))
        except LabelSelectorError as exc:
            raise _ParseError(p, str(exc)) from None
    return tuple(out)


def _parse_fields(raw: Any, path: str) -> tuple[NodeFieldRequirement, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise _ParseError(path, "must be a list")
    out: list[NodeFieldRequirement] = []
    for i, e in enumerate(raw):
        p = f"{path}[{i}]"
        if not isinstance(e, Mapping):
            raise _ParseError(p, "must be an object")
        op = e.get("operator")
        if op not in (IN, NOT_IN):
            raise _ParseError(f"{p}.operator", f"{op!r} is not a valid node field selector "
                              "operator (must be In or NotIn)")
        key = e.get("key")
        if not isinstance(key, str):
            raise _ParseError(f"{p}.key", "must be a string")
        vals = e.get("values") or []
        if not isinstance(vals, list) or len(vals) != 1 or not isinstance(vals[0], str):
            raise _ParseError(f"{p}.values", "must have exactly one string element")
        out.append(NodeFieldRequirement(key, op, vals[0]))
    return tuple(out)


class NodeSelectorTerm:
    """One ``nodeSelectorTerms`` entry: all expressions and all fields must match."""

    __slots__ = ("expressions", "fields")

    def __init__(self, expressions: Sequence[Requirement] = (),
                 fields: Sequence[NodeFieldRequirement] = ()) -> None:
        self.expressions = tuple(expressions)
        self.fields = tuple(fields)

    @classmethod
    def parse(cls, raw: Any, *, where: str = "") -> NodeSelectorTerm:
        """Parse a raw term; raises ValueError (``_ParseError``) naming the path."""
        if raw is None:
            return cls()
        if not isinstance(raw, Mapping):
            raise _ParseError(where, "must be an object")
        p = f"{where}." if where else ""
        return cls(_parse_expressions(raw.get("matchExpressions"), f"{p}matchExpressions"),
                   _parse_fields(raw.get("matchFields"), f"{p}matchFields"))

    def is_empty(self) -> bool:
        return not self.expressions and not self.fields

    def matches(self, labels: Mapping[str, str], fields: Mapping[str, str]) -> bool:
        if not self.expressions and not self.fields:
            return False
        for r in self.expressions:
            if not r.matches(labels):
                return False
        for f in self.fields:
            if not f.matches(fields):
                return False
        return True

    def match_node(self, node: Mapping[str, Any]) -> bool:
        return self.matches(_node_labels(node), node_fields(node) if self.fields else {})


class NodeSelector:
    """A ``v1.NodeSelector``: terms ORed; no (non-empty) term means no node matches."""

    __slots__ = ("terms", "_needs_fields")

    def __init__(self, terms: Sequence[NodeSelectorTerm]) -> None:
        # empty terms select nothing; drop them up front
        self.terms = tuple(t for t in terms if not t.is_empty())
        self._needs_fields = any(t.fields for t in self.terms)

    @classmethod
    def parse(cls, raw: Any, *, where: str = "") -> NodeSelector:
        if not isinstance(raw, Mapping):
            raise _ParseError(where, "must be an object")
        p = f"{where}." if where else ""
        terms = raw.get("nodeSelectorTerms")
        if terms is None:
            terms = []
        if not isinstance(terms, list):
            raise _ParseError(f"{p}nodeSelectorTerms", "must be a list")
        return cls([NodeSelectorTerm.parse(t, where=f"{p}nodeSelectorTerms[{i}]")
                    for i, t in enumerate(terms)])

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any], *, where: str = "",
                  obj: Mapping[str, Any] | None = None, kind: str = "") -> NodeSelector:
        """Parse, raising :class:`ObjectError` naming ``obj`` (if given) and the field."""
        try:
            return cls.parse(raw, where=where)
        except _ParseError as exc:
            raise ObjectError.for_object(obj, exc.field, exc.message, kind=kind) from None

    def match(self, node: Mapping[str, Any]) -> bool:
        labels = _node_labels(node)
        fields = node_fields(node) if self._needs_fields else {}
        for t in self.terms:
            if t.matches(labels, fields):
                return True
        return False


def node_selector_matches(node_selector: Mapping[str, Any] | None,
                          node: Mapping[str, Any]) -> bool:
    """Whether ``node`` satisfies a NodeSelector (e.g. a PV's ``spec.nodeAffinity.required``).

    None (no constraint) matches every node. Raises ObjectError on a malformed selector.
    """
    if node_selector is None:
        return True
    return NodeSelector.from_dict(node_selector, where="nodeAffinity.required").match(node)


def _pod_spec(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    spec = pod.get("spec")
    return spec if isinstance(spec, Mapping) else {}


def _node_affinity(pod: Mapping[str, Any]) -> Mapping[str, Any] | None:
    aff = _pod_spec(pod).get("affinity")
    if not aff:
        return None
    if not isinstance(aff, Mapping):
        raise ObjectError.for_object(pod, "spec.affinity", "must be an object", kind="Pod")
    na = aff.get("nodeAffinity")
    if na is None:
        return None
    if not isinstance(na, Mapping):
        raise ObjectError.for_object(pod, "spec.affinity.nodeAffinity", "must be an object",
                                     kind="Pod")
    return na


class RequiredNodeAffinity:
    """``spec.nodeSelector`` AND ``requiredDuringSchedulingIgnoredDuringExecution``."""

    __slots__ = ("node_selector", "selector")

    def __init__(self, node_selector: Mapping[str, str] | None = None,
                 selector: NodeSelector | None = None) -> None:
        self.node_selector: tuple[tuple[str, str], ...] = tuple(
            sorted((node_selector or {}).items()))
        self.selector = selector

    @classmethod
    def from_pod(cls, pod: Mapping[str, Any]) -> RequiredNodeAffinity:
        spec = _pod_spec(pod)
        ns = spec.get("nodeSelector")
        if ns is not None:
            if not isinstance(ns, Mapping) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in ns.items()
            ):
                raise ObjectError.for_object(pod, "spec.nodeSelector",
                                             "must be a map of strings", kind="Pod")
        selector = None
        na = _node_affinity(pod)
        if na is not None:
            req = na.get("requiredDuringSchedulingIgnoredDuringExecution")
            if req is not None:
                selector = NodeSelector.from_dict(
                    req, where="spec.affinity.nodeAffinity."
                    "requiredDuringSchedulingIgnoredDuringExecution", obj=pod, kind="Pod")
        return cls(ns, selector)

    def is_empty(self) -> bool:
        """True when the pod places no required constraint on nodes."""
        return not self.node_selector and self.selector is None

    def match(self, node: Mapping[str, Any]) -> bool:
        if self.node_selector:
            labels = _node_labels(node)
            for k, v in self.node_selector:
                if labels.get(k) != v:
                    return False
        if self.selector is not None:
            return self.selector.match(node)
        return True


class PreferredSchedulingTerms:
    """Weighted preferred terms; :meth:`score` sums the weights of the terms a node matches."""

    __slots__ = ("terms",)

    def __init__(self, terms: Sequence[Mapping[str, Any]] | None, *, where: str = "",
                 obj: Mapping[str, Any] | None = None, kind: str = "") -> None:
        parsed: list[tuple[int, NodeSelectorTerm]] = []
        try:
            if terms is not None and not isinstance(terms, list):
                raise _ParseError(where, "must be a list")
            for i, t in enumerate(terms or []):
                p = f"{where}[{i}]"
                if not isinstance(t, Mapping):
                    raise _ParseError(p, "must be an object")
                w = t.get("weight", 0)
                if not isinstance(w, int) or isinstance(w, bool):
                    raise _ParseError(f"{p}.weight", "must be an integer")
                term = NodeSelectorTerm.parse(t.get("preference"), where=f"{p}.preference")
                # zero weight or empty preference contributes nothing (upstream skips them)
                if w == 0 or term.is_empty():
                    continue
                parsed.append((w, term))
        except _ParseError as exc:
            raise ObjectError.for_object(obj, exc.field, exc.message, kind=kind) from None
        self.terms = tuple(parsed)

    @classmethod
    def from_pod(cls, pod: Mapping[str, Any]) -> PreferredSchedulingTerms:
        na = _node_affinity(pod)
        raw = None if na is None else na.get("preferredDuringSchedulingIgnoredDuringExecution")
        return cls(raw, where="spec.affinity.nodeAffinity."
                   "preferredDuringSchedulingIgnoredDuringExecution", obj=pod, kind="Pod")

    def __len__(self) -> int:
        return len(self.terms)

    def score(self, node: Mapping[str, Any]) -> int:
        if not self.terms:
            return 0
        labels = _node_labels(node)
        fields = node_fields(node)
        total = 0
        for w, t in self.terms:
            if t.matches(labels, fields):
                total += w
        return total
