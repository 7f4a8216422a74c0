"""Parsed pod (anti-)affinity terms, and a memo so each pod's terms are parsed once.

Every scheduling cycle of a pod with inter-pod affinity looks at the terms of many existing
pods; parsing their label selectors again for every incoming pod would dominate the cycle.
Terms are immutable once parsed, so they are memoized by what the parse reads (``TermsCache``).

Semantics follow kube-scheduler's ``framework.AffinityTerm``: a term applies to the namespaces
it lists, or the owner pod's own namespace when it lists none and has no namespaceSelector;
a namespaceSelector (nil = nothing, ``{}`` = every namespace) adds namespaces by their labels.
``matchLabelKeys`` / ``mismatchLabelKeys`` add ``key in (value)`` / ``key notin (value)`` for
the owner pod's label values; kube-apiserver already does this at pod creation, and adding
the same requirement twice does not change what the selector matches.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from scheduler.objects.errors import ObjectError
from scheduler.objects.labels import (
    IN,
    NOT_IN,
    LabelSelector,
    LabelSelectorError,
    Requirement,
)

__all__ = [
    "AffinityTerm",
    "WeightedAffinityTerm",
    "PodAffinityTerms",
    "TermsCache",
    "parse_pod_affinity_terms",
    "EMPTY_TERMS",
]

_REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
_PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"
_EMPTY_LABELS: Mapping[str, str] = {}
_NO_META: Mapping[str, Any] = {}


class AffinityTerm:
    """One PodAffinityTerm, compiled."""

    __slots__ = ("namespaces", "selector", "topology_key", "namespace_selector", "_key")

    def __init__(
        self,
        namespaces: frozenset[str],
        selector: LabelSelector,
        topology_key: str,
        namespace_selector: LabelSelector,
    ) -> None:
        self.namespaces = namespaces
        self.selector = selector
        self.topology_key = topology_key
        self.namespace_selector = namespace_selector
        self._key: tuple[Any, ...] | None = None

    @property
    def key(self) -> tuple[Any, ...]:
        """A hashable value equal for terms that select the same pods in the same topology."""
        if self._key is None:
            self._key = (
                self.namespaces, self.selector, self.topology_key, self.namespace_selector
            )
        return self._key

    def matches(
        self, namespace: str, labels: Mapping[str, str], ns_labels: Mapping[str, str] | None
    ) -> bool:
        """Whether a pod in ``namespace`` with ``labels`` is selected by this term.

        ``ns_labels`` are the labels of that pod's namespace (None when unknown: only an
        empty namespaceSelector, or one with nothing but negative requirements, matches).
        """
        if namespace in self.namespaces or self.namespace_selector.matches(
            ns_labels if ns_labels is not None else _EMPTY_LABELS
        ):
            return self.selector.matches(labels)
        return False

    def with_namespaces(self, namespaces: frozenset[str]) -> AffinityTerm:
        """A copy whose namespaceSelector was unrolled into ``namespaces``."""
        return AffinityTerm(
            self.namespaces | namespaces, self.selector, self.topology_key, LabelSelector.nothing()
        )

    def __repr__(self) -> str:
        return (
            f"AffinityTerm(namespaces={sorted(self.namespaces)!r}, selector={self.selector!r}, "
            f"topology_key={self.topology_key!r}, namespace_selector={self.namespace_selector!r})"
        )


class WeightedAffinityTerm:
    __slots__ = ("term", "weight")

    def __init__(self, term: AffinityTerm, weight: int) -> None:
        self.term = term
        self.weight = weight

    def __repr__(self) -> str:
        return f"WeightedAffinityTerm({self.term!r}, weight={self.weight})"


class PodAffinityTerms:
    """The four term lists of one pod; ``errors`` lists what could not be parsed.

    A list that failed to parse is left empty, as upstream's PodInfo leaves it nil: an existing
    pod with a broken term simply has no such term, while an incoming pod is rejected.
    """

    __slots__ = (
        "required_affinity",
        "required_anti_affinity",
        "preferred_affinity",
        "preferred_anti_affinity",
        "errors",
    )

    def __init__(
        self,
        required_affinity: Sequence[AffinityTerm] = (),
        required_anti_affinity: Sequence[AffinityTerm] = (),
        preferred_affinity: Sequence[WeightedAffinityTerm] = (),
        preferred_anti_affinity: Sequence[WeightedAffinityTerm] = (),
        errors: Sequence[str] = (),
    ) -> None:
        self.required_affinity = tuple(required_affinity)
        self.required_anti_affinity = tuple(required_anti_affinity)
        self.preferred_affinity = tuple(preferred_affinity)
        self.preferred_anti_affinity = tuple(preferred_anti_affinity)
        self.errors = tuple(errors)

    def is_empty(self) -> bool:
        return not (
            self.required_affinity
            or self.required_anti_affinity
            or self.preferred_affinity
            or self.preferred_anti_affinity
        )


EMPTY_TERMS = PodAffinityTerms()


def _merge_label_keys(
    selector: LabelSelector,
    raw: Mapping[str, Any],
    pod_labels: Mapping[str, str],
    where: str,
) -> LabelSelector:
    match_keys = raw.get("matchLabelKeys") or []
    mismatch_keys = raw.get("mismatchLabelKeys") or []
    if not match_keys and not mismatch_keys:
        return selector
    # A nil labelSelector matches nothing; label keys cannot widen it (apiserver skips it too).
    if selector.is_nothing():
        return selector
    extra: list[Requirement] = []
    for field, keys, op in (
        ("matchLabelKeys", match_keys, IN),
        ("mismatchLabelKeys", mismatch_keys, NOT_IN),
    ):
        if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
            raise LabelSelectorError(f"{where}.{field}: expected a list of strings")
        for key in keys:
            value = pod_labels.get(key)
            if value is not None:
                extra.append(Requirement(key, op, (value,), where=f"{where}.{field}"))
    if not extra:
        return selector
    return LabelSelector((*selector.requirements, *extra))


def _parse_term(
    raw: Any, *, namespace: str, pod_labels: Mapping[str, str], where: str
) -> AffinityTerm:
    if not isinstance(raw, Mapping):
        raise LabelSelectorError(f"{where}: expected an object")
    selector = LabelSelector.from_dict(raw.get("labelSelector"), where=f"{where}.labelSelector")
    selector = _merge_label_keys(selector, raw, pod_labels, where)
    raw_ns = raw.get("namespaces") or []
    if not isinstance(raw_ns, list) or not all(isinstance(n, str) for n in raw_ns):
        raise LabelSelectorError(f"{where}.namespaces: expected a list of strings")
    raw_ns_selector = raw.get("namespaceSelector")
    if not raw_ns and raw_ns_selector is None:
        namespaces = frozenset((namespace,))
    else:
        namespaces = frozenset(raw_ns)
    ns_selector = LabelSelector.from_dict(raw_ns_selector, where=f"{where}.namespaceSelector")
    topology_key = raw.get("topologyKey") or ""
    if not isinstance(topology_key, str):
        raise LabelSelectorError(f"{where}.topologyKey: expected a string")
    return AffinityTerm(namespaces, selector, topology_key, ns_selector)


def _term_list(section: Mapping[str, Any], which: str, where: str) -> list[Any]:
    raw = section.get(which)
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise LabelSelectorError(f"{where}.{which}: expected a list")
    return raw


def _section(affinity: Mapping[str, Any], kind: str) -> Mapping[str, Any]:
    section = affinity.get(kind)
    if section is None:
        return {}
    if not isinstance(section, Mapping):
        raise LabelSelectorError(f"spec.affinity.{kind}: expected an object")
    return section


def parse_pod_affinity_terms(pod: Mapping[str, Any]) -> PodAffinityTerms:
    """Compile the pod's required and preferred pod (anti-)affinity terms.

    Never raises for a malformed term: the failing list is left empty and the problem, naming
    the pod and the field, is recorded in ``errors``.
    """
    spec = pod.get("spec") or {}
    affinity = spec.get("affinity") if isinstance(spec, Mapping) else None
    if not affinity:
        return EMPTY_TERMS
    meta = pod.get("metadata") or {}
    namespace = str(meta.get("namespace") or "")
    labels = meta.get("labels") or _EMPTY_LABELS
    if not isinstance(affinity, Mapping):
        return PodAffinityTerms(errors=[_describe(pod, "spec.affinity: expected an object")])

    errors: list[str] = []
    lists: dict[str, list[Any]] = {}
    for kind in ("podAffinity", "podAntiAffinity"):
        base = f"spec.affinity.{kind}"
        try:
            section = _section(affinity, kind)
        except LabelSelectorError as exc:
            errors.append(_describe(pod, str(exc)))
            continue
        required: list[AffinityTerm] = []
        try:
            for i, raw in enumerate(_term_list(section, _REQUIRED, base)):
                required.append(
                    _parse_term(
                        raw,
                        namespace=namespace,
                        pod_labels=labels,
                        where=f"{base}.{_REQUIRED}[{i}]",
                    )
                )
        except LabelSelectorError as exc:
            errors.append(_describe(pod, str(exc)))
            required = []
        preferred: list[WeightedAffinityTerm] = []
        try:
            for i, raw in enumerate(_term_list(section, _PREFERRED, base)):
                where = f"{base}.{_PREFERRED}[{i}]"
                if not isinstance(raw, Mapping):
                    raise LabelSelectorError(f"{where}: expected an object")
                weight = raw.get("weight", 0)
                if not isinstance(weight, int) or isinstance(weight, bool):
                    raise LabelSelectorError(f"{where}.weight: expected an integer")
                term = _parse_term(
                    raw.get("podAffinityTerm") or {},
                    namespace=namespace,
                    pod_labels=labels,
                    where=f"{where}.podAffinityTerm",
                )
                preferred.append(WeightedAffinityTerm(term, weight))
        except LabelSelectorError as exc:
            errors.append(_describe(pod, str(exc)))
            preferred = []
        lists[kind + ".required"] = required
        lists[kind + ".preferred"] = preferred
    result = PodAffinityTerms(
        lists.get("podAffinity.required", ()),
        lists.get("podAntiAffinity.required", ()),
        lists.get("podAffinity.preferred", ()),
        lists.get("podAntiAffinity.preferred", ()),
        errors,
    )
    return EMPTY_TERMS if result.is_empty() and not errors else result


def _describe(pod: Mapping[str, Any], message: str) -> str:
    field, sep, detail = message.partition(": ")
    if not sep:
        field, detail = "spec.affinity", message
    return str(ObjectError.for_object(pod, field, detail, kind="Pod"))


class TermsCache:
    """Bounded memo of parsed terms, keyed by what a parse reads: the pod's namespace (the
    default of a term listing no namespace), its ``spec.affinity`` as JSON (``orjson``) and,
    when a term has ``matchLabelKeys`` / ``mismatchLabelKeys``, its labels.

    The replicas of a workload carry the same affinity, and every pod is asked about again
    for each watch event that carries it (pending, then bound: a new resourceVersion), so a
    memo by uid and resourceVersion parsed each replica two or three times; by content, a
    workload's terms are parsed once.  Parsed terms are immutable and shared.  A parse with
    errors is never kept (its messages name the pod), nor is an affinity that is not plain
    JSON; the memo starts over when full.
    """

    __slots__ = ("_entries", "_max_size", "hits", "misses")

    def __init__(self, max_size: int = 4096) -> None:
        self._entries: dict[tuple[str, bytes, tuple[tuple[str, str], ...]],
                            PodAffinityTerms] = {}
        self._max_size = max_size
        self.hits = 0
        self.misses = 0

    def get(self, pod: Mapping[str, Any]) -> PodAffinityTerms:
        spec = pod.get("spec")
        if type(spec) is not dict and not isinstance(spec, Mapping):  # a dict from the wire
            return EMPTY_TERMS
        affinity = spec.get("affinity")
        if not affinity:
            return EMPTY_TERMS
        meta = pod.get("metadata") or _NO_META
        try:
            raw = orjson.dumps(affinity)
        except TypeError:  # not plain JSON (a test's hand-made object): parsed every time
            self.misses += 1
            return parse_pod_affinity_terms(pod)
        labels: tuple[tuple[str, str], ...] = ()
        if b"LabelKeys" in raw:  # matchLabelKeys / mismatchLabelKeys read the pod's labels
            pod_labels = meta.get("labels") if isinstance(meta, Mapping) else None
            if isinstance(pod_labels, Mapping):
                try:
                    labels = tuple(sorted(pod_labels.items()))
                except TypeError:  # labels that are not strings: not kept
                    self.misses += 1
                    return parse_pod_affinity_terms(pod)
        namespace = meta.get("namespace") if isinstance(meta, Mapping) else None
        key = (str(namespace or ""), raw, labels)
        terms = self._entries.get(key)
        if terms is not None:
            self.hits += 1
            return terms
        self.misses += 1
        terms = parse_pod_affinity_terms(pod)
        if not terms.errors:
            if len(self._entries) >= self._max_size:
                self._entries.clear()
            self._entries[key] = terms
        return terms

    def __len__(self) -> int:
        return len(self._entries)
