"""What InterPodAffinity's filtering and scoring halves share: the plugin's name, topology
counts, and the base class holding the plugin's caches and its namespace-aware term helpers.

The plugin is split as upstream's (plugin.go / filtering.go / scoring.go): ``plugin`` has the
args and the cluster events, ``filtering`` PreFilter/Filter and the PreFilter extensions,
``scoring`` PreScore/Score.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scheduler.framework.interfaces import (
    Handle,
)
from scheduler.objects.labels import LabelSelector
from scheduler.objects.pod import PodInfo
from scheduler.plugins import names
from scheduler.plugins.interpodaffinity.terms import (
    AffinityTerm,
    PodAffinityTerms,
    TermsCache,
)
from scheduler.framework.interfaces import Plugin

NAME = names.INTER_POD_AFFINITY

_EMPTY: Mapping[str, str] = {}
_NO_FIELDS: Mapping[str, Any] = {}


def _node_labels(node: Mapping[str, Any] | None) -> Mapping[str, str]:
    if node is None:
        return _EMPTY
    labels = (node.get("metadata") or _NO_FIELDS).get("labels")
    return labels if labels else _EMPTY


class TopologyCounts:
    """Counts per topology pair, stored as ``{topologyKey: {value: count}}``.

    Pairs whose count drops to zero are removed (as upstream does), so an empty mapping means
    "no pair counted anywhere", which the self-affinity special case relies on.
    """

    __slots__ = ("data",)

    def __init__(self, data: dict[str, dict[str, int]] | None = None) -> None:
        self.data: dict[str, dict[str, int]] = data if data is not None else {}

    def add(self, key: str, value: str, delta: int) -> None:
        values = self.data.get(key)
        if values is None:
            values = self.data[key] = {}
        count = values.get(value, 0) + delta
        if count == 0:
            values.pop(value, None)
            if not values:
                del self.data[key]
        else:
            values[value] = count

    def get(self, key: str, value: str) -> int:
        values = self.data.get(key)
        return 0 if values is None else values.get(value, 0)

    def merge(self, other: TopologyCounts) -> None:
        for key, values in other.data.items():
            for value, count in values.items():
                self.add(key, value, count)

    def __bool__(self) -> bool:
        return bool(self.data)

    def clone(self) -> TopologyCounts:
        return TopologyCounts({k: dict(v) for k, v in self.data.items()})

    def as_pairs(self) -> dict[tuple[str, str], int]:
        """``{(key, value): count}``, for tests and debugging."""
        return {(k, v): c for k, values in self.data.items() for v, c in values.items()}

    def __repr__(self) -> str:
        return f"TopologyCounts({self.as_pairs()!r})"

    # --- updates with one pod on one node --------------------------------------------------

    def update_with_affinity_terms(
        self,
        terms: tuple[AffinityTerm, ...],
        namespace: str,
        labels: Mapping[str, str],
        node_labels: Mapping[str, str],
        delta: int,
    ) -> None:
        """Count the pod in every term's domain if it matches *all* terms."""
        if not terms:
            return
        for term in terms:
            if not term.matches(namespace, labels, None):
                return
        for term in terms:
            value = node_labels.get(term.topology_key)
            if value is not None:
                self.add(term.topology_key, value, delta)

    def update_with_anti_affinity_terms(
        self,
        terms: tuple[AffinityTerm, ...],
        namespace: str,
        labels: Mapping[str, str],
        ns_labels: Mapping[str, str] | None,
        node_labels: Mapping[str, str],
        delta: int,
    ) -> None:
        """Count the pod in the domain of every term it matches."""
        for term in terms:
            if term.matches(namespace, labels, ns_labels):
                value = node_labels.get(term.topology_key)
                if value is not None:
                    self.add(term.topology_key, value, delta)
def pod_matches_all_terms(terms: tuple[AffinityTerm, ...], namespace: str,
                          labels: Mapping[str, str]) -> bool:
    """True iff there is at least one term and the pod matches every one of them."""
    if not terms:
        return False
    for term in terms:
        if not term.matches(namespace, labels, None):
            return False
    return True


class InterPodAffinityBase(Plugin):
    """The state the filtering and scoring halves share (set by the plugin's constructor)."""

    NAME = NAME
    hard_pod_affinity_weight: int
    ignore_preferred_terms_of_existing_pods: bool
    _handle: Handle
    _terms: TermsCache

    def terms_of(self, pod: Mapping[str, Any]) -> PodAffinityTerms:
        """Parsed terms of a pod (memoized by uid + resourceVersion)."""
        return self._terms.get(pod)

    def _existing_terms(self, pod_info: PodInfo) -> PodAffinityTerms:
        return self._terms.get(pod_info.pod)

    def _namespace_labels(self, namespace: str) -> Mapping[str, str] | None:
        """A snapshot of the labels of ``namespace`` (None when it is not known)."""
        try:
            ns = self._handle.listers.get("namespaces", "", namespace)
        except Exception:  # noqa: BLE001 - an unavailable lister means "no labels known"
            return None
        if ns is None:
            return None
        return dict((ns.get("metadata") or _NO_FIELDS).get("labels") or _EMPTY)

    def _merge_namespaces(self, term: AffinityTerm) -> AffinityTerm:
        """Unroll a non-empty namespaceSelector into the namespaces it selects now."""
        selector = term.namespace_selector
        if selector.is_empty() or selector.is_nothing():
            # Empty selects every namespace (matched as is); nothing adds nothing.
            return term
        return term.with_namespaces(self._namespaces_matching(selector))

    def _namespaces_matching(self, selector: LabelSelector) -> frozenset[str]:
        try:
            namespaces = self._handle.listers.list("namespaces")
        except Exception:  # noqa: BLE001
            return frozenset()
        out = set()
        for ns in namespaces:
            meta = ns.get("metadata") or _NO_FIELDS
            if selector.matches(meta.get("labels") or _EMPTY):
                out.add(str(meta.get("name") or ""))
        return frozenset(out)
