"""What InterPodAffinity's filtering and scoring halves share: the plugin's name, topology
counts, and the base class holding the plugin's caches and its namespace-aware term helpers.

The plugin is split as upstream's (plugin.go / filtering.go / scoring.go): ``plugin`` has the
args and the cluster events, ``filtering`` PreFilter/Filter and the PreFilter extensions,
``scoring`` PreScore/Score.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any

from scheduler.framework.interfaces import (
    Handle,
    NodeInfoLister,
)
from scheduler.framework.node_info import NodeInfo
from scheduler.objects.labels import LabelSelector
from scheduler.objects.pod import PodInfo
from scheduler.plugins import names
from scheduler.plugins.node_memo import NodeChanges
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


# PreFilter and PreScore questions whose sums are kept (one per workload shape in flight).
MAX_REMEMBERED_QUERIES = 64


_Pairs = tuple[tuple[str, str, int], ...]


def _pairs(counts: TopologyCounts) -> _Pairs:
    return tuple((k, v, c) for k, values in counts.data.items() for v, c in values.items())


class PairSums:
    """Sums over nodes of per-node ``(key, value, count)`` pairs, kept across cycles.

    Replicas of one workload ask the same PreFilter (or PreScore) question cycle after cycle, and between
    two cycles only the node the previous replica went to has changed.  Each node's answer is
    kept with the NodeInfo ``plugin_generation`` it was computed from (every change a
    plugin can read takes a fresh one; a binding's confirmation, which reads alike, does
    not), so a refresh recomputes and re-adds changed nodes only and subtracts nodes
    that are gone.  ``width`` sums are kept side by side for one question.
    """

    __slots__ = ("totals", "_changes", "_per_node")

    def __init__(self, width: int) -> None:
        self.totals = [TopologyCounts() for _ in range(width)]
        self._per_node: dict[str, tuple[_Pairs, ...]] = {}
        self._changes = NodeChanges()

    def refresh(
        self, node_infos: Sequence[NodeInfo], compute: Callable[[NodeInfo], tuple[_Pairs, ...]],
        *, snapshot: NodeInfoLister | None = None,
    ) -> list[TopologyCounts]:
        """The sums for exactly ``node_infos`` (read-only: clone before changing them);
        ``snapshot``: the lister whose ``list()`` ``node_infos`` is, if it is."""
        per_node = self._per_node
        changed, removed = self._changes.since_last(node_infos, snapshot=snapshot)
        for name in removed:
            self._apply(per_node.pop(name), -1)
        for node_info in map(node_infos.__getitem__, changed):
            name = node_info.name
            previous = per_node.get(name)
            if previous is not None:
                self._apply(previous, -1)
            answer = per_node[name] = compute(node_info)
            self._apply(answer, 1)
        return self.totals

    def _apply(self, answer: tuple[_Pairs, ...], sign: int) -> None:
        for total, pairs in zip(self.totals, answer):
            for key, value, count in pairs:
                total.add(key, value, sign * count)


class UniqueValues:
    """Whether every node of the snapshot that carries label ``key`` has a value no other
    node has (hostnames, in practice), kept across cycles through the change log.

    Under that condition a topology pair ``(key, value)`` gathers the pods of one node only,
    so a node's Filter status for terms on ``key`` is a function of its own NodeInfo.
    """

    __slots__ = ("key", "_changes", "_value_of", "_nodes_with", "duplicates")

    def __init__(self, key: str) -> None:
        self.key = key
        self._changes = NodeChanges()
        self._value_of: dict[str, str] = {}  # node name -> its value (nodes with the key)
        self._nodes_with: dict[str, int] = {}  # value -> nodes carrying it
        self.duplicates = 0  # values carried by more than one node

    def refresh(self, snapshot: NodeInfoLister) -> bool:
        """Bring the index up to date with ``snapshot.list()``; True when the values are
        unique."""
        nodes = snapshot.list()
        changed, removed = self._changes.since_last(nodes, snapshot=snapshot)
        for name in removed:
            self._set(name, None)
        key = self.key
        for i in changed:
            node_info = nodes[i]
            self._set(node_info.name, _node_labels(node_info.node).get(key))
        return self.duplicates == 0

    def _set(self, name: str, value: str | None) -> None:
        old = self._value_of.get(name)
        if old == value:
            return
        nodes_with = self._nodes_with
        if old is not None:
            n = nodes_with[old] - 1
            if n == 1:
                self.duplicates -= 1
            if n:
                nodes_with[old] = n
            else:
                del nodes_with[old]
            del self._value_of[name]
        if value is not None:
            n = nodes_with.get(value, 0) + 1
            if n == 2:
                self.duplicates += 1
            nodes_with[value] = n
            self._value_of[name] = value


class InterPodAffinityBase(Plugin):
    """The state the filtering and scoring halves share (set by the plugin's constructor)."""

    NAME = NAME
    hard_pod_affinity_weight: int
    ignore_preferred_terms_of_existing_pods: bool
    _handle: Handle
    _terms: TermsCache
    # Sums per question (the incoming pod's terms, or its labels for existing pods' terms),
    # least recently asked dropped first.
    _sums_by_query: OrderedDict[Hashable, PairSums]
    # topology key -> whether its values are unique per node (Filter's signature)
    _unique: dict[str, UniqueValues]

    def _sums(self, key: Hashable, width: int) -> PairSums:
        sums = self._sums_by_query.get(key)
        if sums is None:
            sums = self._sums_by_query[key] = PairSums(width)
            if len(self._sums_by_query) > MAX_REMEMBERED_QUERIES:
                self._sums_by_query.popitem(last=False)
        else:
            self._sums_by_query.move_to_end(key)
        return sums

    @staticmethod
    def _incoming_pod_key(kind: str, pod_info: PodInfo,
                          ns_labels: Mapping[str, str] | None) -> Hashable:
        """The key of a question about existing pods' terms against the incoming pod: what
        those terms can match of it (namespace, labels, namespace labels)."""
        return (
            kind,
            pod_info.namespace,
            frozenset(pod_info.labels.items()),
            None if ns_labels is None else frozenset(ns_labels.items()),
        )

    def _counted_nodes(self, snapshot: NodeInfoLister, subset: Sequence[NodeInfo]
                       ) -> tuple[Sequence[NodeInfo], NodeInfoLister | None]:
        """The nodes to keep sums over when only ``subset`` (the nodes holding pods with
        affinity) can contribute: the subset while it is small; the whole list once it
        holds a quarter of the nodes, since the snapshot's change log then says which nodes
        changed without a pass over the subset.  Nodes outside the subset contribute
        nothing, so both give the same sums."""
        everything = snapshot.list()
        if len(subset) * 4 >= len(everything):
            return everything, snapshot
        return subset, None

    def terms_of(self, pod: Mapping[str, Any]) -> PodAffinityTerms:
        """Parsed terms of a pod (memoized by what the parse reads: ``TermsCache``)."""
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
