"""InterPodAffinity: pod affinity and anti-affinity between the incoming pod and existing pods.

Filter enforces three required rules, as kube-scheduler does:

* the incoming pod's required affinity: some existing pod matching *all* its terms must sit in
  the node's topology domain of every term (a pod whose terms select itself may start a group
  when no pod in the cluster matches yet);
* the incoming pod's required anti-affinity: no existing pod matching a term in the domain;
* existing pods' required anti-affinity: no existing pod whose term selects the incoming pod
  in the node's domain of that term.

PreFilter walks the cluster once and counts matches per topology pair, so Filter is a few dict
lookups per node.  Pods without affinity cost nothing: existing pods are only looked at through
the snapshot's lists of nodes holding pods with (required anti-)affinity.

Score sums, per topology pair, the weights of preferred terms (both the incoming pod's and the
existing pods'), plus ``hardPodAffinityWeight`` for existing pods' required affinity terms that
select the incoming pod, and NormalizeScore scales the sums linearly to [0, 100].
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.events import (
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    EventResource,
    QueueingHint,
)
from scheduler.framework.interfaces import (
    EnqueueExtensions,
    FilterPlugin,
    Handle,
    PreFilterExtensions,
    PreFilterPlugin,
    PreScorePlugin,
    ScoreExtensions,
    ScorePlugin,
)
from scheduler.framework.node_info import NodeInfo
from scheduler.framework.status import Code, Status
from scheduler.framework.types import MAX_NODE_SCORE, NodeScore, PreFilterResult
from scheduler.objects.labels import LabelSelector
from scheduler.objects.pod import PodInfo
from scheduler.plugins import names
from scheduler.plugins.helper import args_error, normalize_with_values
from scheduler.plugins.interpodaffinity.terms import (
    AffinityTerm,
    PodAffinityTerms,
    TermsCache,
    WeightedAffinityTerm,
)

NAME = names.INTER_POD_AFFINITY

PRE_FILTER_STATE_KEY = "PreFilter" + NAME
PRE_SCORE_STATE_KEY = "PreScore" + NAME

ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH = (
    "node(s) didn't satisfy existing pods anti-affinity rules"
)
ERR_REASON_AFFINITY_RULES_NOT_MATCH = "node(s) didn't match pod affinity rules"
ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH = "node(s) didn't match pod anti-affinity rules"

# PreFilter questions whose sums are kept (one per workload shape in flight).
MAX_REMEMBERED_QUERIES = 64

MIN_HARD_POD_AFFINITY_WEIGHT = 0
MAX_HARD_POD_AFFINITY_WEIGHT = 100
DEFAULT_HARD_POD_AFFINITY_WEIGHT = 1

_ARGS_FIELDS = frozenset(
    {"hardPodAffinityWeight", "ignorePreferredTermsOfExistingPods", "apiVersion", "kind"}
)
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


_Pairs = tuple[tuple[str, str, int], ...]


def _pairs(counts: TopologyCounts) -> _Pairs:
    return tuple((k, v, c) for k, values in counts.data.items() for v, c in values.items())


class PairSums:
    """Sums over nodes of per-node ``(key, value, count)`` pairs, kept across cycles.

    Replicas of one workload ask the same PreFilter question cycle after cycle, and between
    two cycles only the node the previous replica went to has changed.  Each node's answer is
    kept with the NodeInfo generation it was computed from (every change to a NodeInfo takes
    a fresh one), so a refresh recomputes and re-adds changed nodes only and subtracts nodes
    that are gone.  ``width`` sums are kept side by side for one question.
    """

    __slots__ = ("totals", "_per_node")

    def __init__(self, width: int) -> None:
        self.totals = [TopologyCounts() for _ in range(width)]
        self._per_node: dict[str, tuple[int, tuple[_Pairs, ...]]] = {}

    def refresh(
        self, node_infos: Sequence[NodeInfo], compute: Callable[[NodeInfo], tuple[_Pairs, ...]]
    ) -> list[TopologyCounts]:
        """The sums for exactly ``node_infos`` (read-only: clone before changing them)."""
        per_node = self._per_node
        for node_info in node_infos:
            name = node_info.name
            entry = per_node.get(name)
            if entry is not None and entry[0] == node_info.generation:
                continue
            if entry is not None:
                self._apply(entry[1], -1)
            answer = compute(node_info)
            per_node[name] = (node_info.generation, answer)
            self._apply(answer, 1)
        if len(per_node) != len(node_infos):  # some node left the set since last time
            current = {node_info.name for node_info in node_infos}
            for name in [n for n in per_node if n not in current]:
                self._apply(per_node.pop(name)[1], -1)
        return self.totals

    def _apply(self, answer: tuple[_Pairs, ...], sign: int) -> None:
        for total, pairs in zip(self.totals, answer):
            for key, value, count in pairs:
                total.add(key, value, sign * count)


class PreFilterState:
    """What Filter needs, computed once per cycle (and updated by add_pod/remove_pod)."""

    __slots__ = (
        "existing_anti_affinity_counts",
        "affinity_counts",
        "anti_affinity_counts",
        "pod_info",
        "required_affinity",
        "required_anti_affinity",
        "namespace_labels",
    )

    def __init__(
        self,
        *,
        pod_info: PodInfo,
        required_affinity: tuple[AffinityTerm, ...],
        required_anti_affinity: tuple[AffinityTerm, ...],
        namespace_labels: Mapping[str, str] | None,
        existing_anti_affinity_counts: TopologyCounts,
        affinity_counts: TopologyCounts,
        anti_affinity_counts: TopologyCounts,
    ) -> None:
        self.pod_info = pod_info
        # The incoming pod's terms, namespaceSelector already unrolled into namespaces.
        self.required_affinity = required_affinity
        self.required_anti_affinity = required_anti_affinity
        self.namespace_labels = namespace_labels
        # Existing pods whose required anti-affinity selects the incoming pod.
        self.existing_anti_affinity_counts = existing_anti_affinity_counts
        # Existing pods matching all of the incoming pod's required affinity terms.
        self.affinity_counts = affinity_counts
        # Existing pods matching one of the incoming pod's required anti-affinity terms.
        self.anti_affinity_counts = anti_affinity_counts

    def clone(self) -> PreFilterState:
        return PreFilterState(
            pod_info=self.pod_info,
            required_affinity=self.required_affinity,
            required_anti_affinity=self.required_anti_affinity,
            namespace_labels=self.namespace_labels,
            existing_anti_affinity_counts=self.existing_anti_affinity_counts.clone(),
            affinity_counts=self.affinity_counts.clone(),
            anti_affinity_counts=self.anti_affinity_counts.clone(),
        )

    def is_trivial(self) -> bool:
        """Nothing for Filter to check: the plugin is skipped for this cycle."""
        return (
            not self.existing_anti_affinity_counts
            and not self.required_affinity
            and not self.required_anti_affinity
        )


class PreScoreState:
    __slots__ = ("topology_score",)

    def __init__(self, topology_score: dict[str, dict[str, int]]) -> None:
        self.topology_score = topology_score

    def clone(self) -> PreScoreState:
        return self  # not mutated after PreScore


def _parse_args(args: Mapping[str, Any] | None) -> tuple[int, bool]:
    if args is None:
        args = {}
    if not isinstance(args, Mapping):
        raise args_error(NAME, "", f"must be an object, got {type(args).__name__}")
    for key in args:
        if key not in _ARGS_FIELDS:
            raise args_error(NAME, str(key), "unknown field")
    weight = args.get("hardPodAffinityWeight", DEFAULT_HARD_POD_AFFINITY_WEIGHT)
    if weight is None:
        weight = DEFAULT_HARD_POD_AFFINITY_WEIGHT
    if not isinstance(weight, int) or isinstance(weight, bool):
        raise args_error(NAME, "hardPodAffinityWeight", f"must be an integer, got {weight!r}")
    if not MIN_HARD_POD_AFFINITY_WEIGHT <= weight <= MAX_HARD_POD_AFFINITY_WEIGHT:
        raise args_error(
            NAME,
            "hardPodAffinityWeight",
            f"Invalid value: {weight}: not in valid range "
            f"[{MIN_HARD_POD_AFFINITY_WEIGHT}, {MAX_HARD_POD_AFFINITY_WEIGHT}]",
        )
    ignore = args.get("ignorePreferredTermsOfExistingPods", False)
    if ignore is None:
        ignore = False
    if not isinstance(ignore, bool):
        raise args_error(
            NAME, "ignorePreferredTermsOfExistingPods", f"must be a boolean, got {ignore!r}"
        )
    return weight, ignore


class InterPodAffinity(
    PreFilterPlugin, FilterPlugin, PreScorePlugin, ScorePlugin, EnqueueExtensions
):
    NAME = NAME

    def __init__(self, args: Mapping[str, Any] | None, handle: Handle) -> None:
        self.hard_pod_affinity_weight, self.ignore_preferred_terms_of_existing_pods = (
            _parse_args(args)
        )
        self._handle = handle
        self._terms = TermsCache()
        # PreFilter sums per question (the incoming pod's terms, or its labels for existing
        # pods' anti-affinity), least recently asked dropped first.
        self._sums_by_query: OrderedDict[Hashable, PairSums] = OrderedDict()
        # node name -> (NodeInfo generation, its pods whose terms score incoming pods)
        self._scoring_pods: dict[str, tuple[int, tuple[PodInfo, ...]]] = {}

    # --- helpers ----------------------------------------------------------------------------

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

    # --- PreFilter ----------------------------------------------------------------------------

    def pre_filter(
        self, state: CycleState, pod_info: PodInfo, nodes: list[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status | None]:
        terms = self.terms_of(pod_info.pod)
        if terms.errors:
            return None, Status(
                Code.UNSCHEDULABLE_AND_UNRESOLVABLE, f"parsing pod: {'; '.join(terms.errors)}"
            )
        snapshot = self._handle.snapshot()
        required_affinity = tuple(self._merge_namespaces(t) for t in terms.required_affinity)
        required_anti = tuple(self._merge_namespaces(t) for t in terms.required_anti_affinity)
        ns_labels = self._namespace_labels(pod_info.namespace)

        existing = self._existing_anti_affinity_counts(
            pod_info, ns_labels, snapshot.have_pods_with_required_anti_affinity()
        )
        if required_affinity or required_anti:
            affinity_counts, anti_counts = self._incoming_counts(
                required_affinity, required_anti, snapshot.list()
            )
        else:
            affinity_counts, anti_counts = TopologyCounts(), TopologyCounts()
        s = PreFilterState(
            pod_info=pod_info,
            required_affinity=required_affinity,
            required_anti_affinity=required_anti,
            namespace_labels=ns_labels,
            existing_anti_affinity_counts=existing,
            affinity_counts=affinity_counts,
            anti_affinity_counts=anti_counts,
        )
        # Written even when skipping, so add_pod/remove_pod keep working for preemption.
        state.write(PRE_FILTER_STATE_KEY, s)
        if s.is_trivial():
            return None, Status(Code.SKIP)
        return None, None

    def _sums(self, key: Hashable, width: int) -> PairSums:
        sums = self._sums_by_query.get(key)
        if sums is None:
            sums = self._sums_by_query[key] = PairSums(width)
            if len(self._sums_by_query) > MAX_REMEMBERED_QUERIES:
                self._sums_by_query.popitem(last=False)
        else:
            self._sums_by_query.move_to_end(key)
        return sums

    def _existing_anti_affinity_counts(
        self,
        pod_info: PodInfo,
        ns_labels: Mapping[str, str] | None,
        node_infos: Sequence[NodeInfo],
    ) -> TopologyCounts:
        namespace, labels = pod_info.namespace, pod_info.labels

        def compute(node_info: NodeInfo) -> tuple[_Pairs]:
            if node_info.node is None:
                return ((),)
            local = TopologyCounts()
            node_labels = _node_labels(node_info.node)
            for existing in node_info.pods_with_required_anti_affinity:
                anti = self._existing_terms(existing).required_anti_affinity
                if anti:
                    local.update_with_anti_affinity_terms(
                        anti, namespace, labels, ns_labels, node_labels, 1
                    )
            return (_pairs(local),)

        key = (
            "existing-anti",
            namespace,
            frozenset(labels.items()),
            None if ns_labels is None else frozenset(ns_labels.items()),
        )
        (total,) = self._sums(key, 1).refresh(node_infos, compute)
        return total.clone()

    def _incoming_counts(
        self,
        affinity: tuple[AffinityTerm, ...],
        anti: tuple[AffinityTerm, ...],
        node_infos: Sequence[NodeInfo],
    ) -> tuple[TopologyCounts, TopologyCounts]:
        """Existing pods matching all ``affinity`` terms and any ``anti`` term, per domain."""

        def compute(node_info: NodeInfo) -> tuple[_Pairs, _Pairs]:
            if node_info.node is None:
                return (), ()
            node_labels = _node_labels(node_info.node)
            local_affinity, local_anti = TopologyCounts(), TopologyCounts()
            for existing in node_info.pods:
                namespace, labels = existing.namespace, existing.labels
                if affinity:
                    local_affinity.update_with_affinity_terms(
                        affinity, namespace, labels, node_labels, 1
                    )
                if anti:
                    # The incoming pod's terms have their namespaceSelector unrolled, so the
                    # existing pod's namespace labels are not needed.
                    local_anti.update_with_anti_affinity_terms(
                        anti, namespace, labels, None, node_labels, 1
                    )
            return _pairs(local_affinity), _pairs(local_anti)

        key = ("incoming", tuple(t.key for t in affinity), tuple(t.key for t in anti))
        affinity_total, anti_total = self._sums(key, 2).refresh(node_infos, compute)
        return affinity_total.clone(), anti_total.clone()

    def pre_filter_extensions(self) -> PreFilterExtensions | None:
        return self

    def add_pod(
        self, state: CycleState, pod_to_schedule: PodInfo, pod_to_add: PodInfo, node_info: NodeInfo
    ) -> Status | None:
        return self._update_with_pod(state, pod_to_add, node_info, 1)

    def remove_pod(
        self,
        state: CycleState,
        pod_to_schedule: PodInfo,
        pod_to_remove: PodInfo,
        node_info: NodeInfo,
    ) -> Status | None:
        return self._update_with_pod(state, pod_to_remove, node_info, -1)

    def _update_with_pod(
        self, state: CycleState, pod: PodInfo, node_info: NodeInfo, delta: int
    ) -> Status | None:
        s = state.get(PRE_FILTER_STATE_KEY)
        if not isinstance(s, PreFilterState):
            return Status(
                Code.ERROR, f"reading {PRE_FILTER_STATE_KEY!r} from cycleState: not found"
            )
        node_labels = _node_labels(node_info.node)
        incoming = s.pod_info
        anti = self._existing_terms(pod).required_anti_affinity
        if anti:
            s.existing_anti_affinity_counts.update_with_anti_affinity_terms(
                anti, incoming.namespace, incoming.labels, s.namespace_labels, node_labels, delta
            )
        if s.required_affinity:
            s.affinity_counts.update_with_affinity_terms(
                s.required_affinity, pod.namespace, pod.labels, node_labels, delta
            )
        if s.required_anti_affinity:
            s.anti_affinity_counts.update_with_anti_affinity_terms(
                s.required_anti_affinity, pod.namespace, pod.labels, None, node_labels, delta
            )
        return None

    # --- Filter -------------------------------------------------------------------------------

    def filter(self, state: CycleState, pod_info: PodInfo, node_info: NodeInfo) -> Status | None:
        return self.filter_nodes(state, pod_info, [node_info])[0]

    def filter_nodes(
        self, state: CycleState, pod_info: PodInfo, nodes: list[NodeInfo]
    ) -> list[Status | None]:
        s = state.get(PRE_FILTER_STATE_KEY)
        if not isinstance(s, PreFilterState):
            return [
                Status(Code.ERROR, "node not found") if n.node is None
                else Status(Code.ERROR, f"reading {PRE_FILTER_STATE_KEY!r} from cycleState: "
                                        "not found")
                for n in nodes
            ]
        affinity = bool(s.required_affinity)
        # The anti-affinity checks as (topology key, {domain: count}) pairs, looked up once per
        # cycle: a node fails one when its domain for that key has a count (zero counts are
        # dropped from TopologyCounts, so presence with a count > 0 is the test).
        anti_data = s.anti_affinity_counts.data
        anti = [
            (t.topology_key, anti_data[t.topology_key])
            for t in s.required_anti_affinity if t.topology_key in anti_data
        ] if anti_data else []
        existing = list(s.existing_anti_affinity_counts.data.items())
        out: list[Status | None] = []
        for node_info in nodes:
            node = node_info.node
            if node is None:
                out.append(Status(Code.ERROR, "node not found"))
                continue
            node_labels = _node_labels(node)
            if affinity and not _satisfies_pod_affinity(s, node_labels):
                out.append(Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                                  ERR_REASON_AFFINITY_RULES_NOT_MATCH))
                continue
            status: Status | None = None
            for key, domains in anti:
                value = node_labels.get(key)
                if value is not None and domains.get(value, 0) > 0:
                    status = Status(Code.UNSCHEDULABLE, ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH)
                    break
            if status is None:
                for key, domains in existing:
                    value = node_labels.get(key)
                    if value is not None and domains.get(value, 0) > 0:
                        status = Status(Code.UNSCHEDULABLE,
                                        ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH)
                        break
            out.append(status)
        return out

    # --- PreScore / Score ---------------------------------------------------------------------

    def pre_score(
        self, state: CycleState, pod_info: PodInfo, nodes: list[NodeInfo]
    ) -> Status | None:
        if not nodes:
            return Status(Code.SKIP)
        has_constraints = pod_info.has_preferred_affinity or pod_info.has_preferred_anti_affinity
        if self.ignore_preferred_terms_of_existing_pods and not has_constraints:
            return Status(Code.SKIP)
        snapshot = self._handle.snapshot()
        # Unless the incoming pod has preferences, only pods with affinity can contribute.
        node_infos = snapshot.list() if has_constraints else snapshot.have_pods_with_affinity()

        terms = self.terms_of(pod_info.pod)
        if terms.errors:
            return Status(Code.ERROR, f"parsing pod: {'; '.join(terms.errors)}")
        preferred_affinity = tuple(
            WeightedAffinityTerm(self._merge_namespaces(w.term), w.weight)
            for w in terms.preferred_affinity
        )
        preferred_anti = tuple(
            WeightedAffinityTerm(self._merge_namespaces(w.term), w.weight)
            for w in terms.preferred_anti_affinity
        )
        ns_labels = self._namespace_labels(pod_info.namespace)
        hard_weight = self.hard_pod_affinity_weight
        namespace, labels = pod_info.namespace, pod_info.labels

        score: dict[str, dict[str, int]] = {}

        def process(term: AffinityTerm, weight: int, ns: str, lbls: Mapping[str, str],
                    nsl: Mapping[str, str] | None, node_labels: Mapping[str, str]) -> None:
            if term.matches(ns, lbls, nsl):
                value = node_labels.get(term.topology_key)
                if value is not None:
                    values = score.get(term.topology_key)
                    if values is None:
                        values = score[term.topology_key] = {}
                    values[value] = values.get(value, 0) + weight

        # Without preferred terms of its own, the incoming pod is scored only by existing pods
        # with scoring terms; a node's list of those is kept until the node changes.
        own_terms = bool(preferred_affinity or preferred_anti)
        if len(self._scoring_pods) > 2 * len(snapshot.list()) + 64:
            self._scoring_pods.clear()  # nodes come and go; forget the departed
        for node_info in node_infos:
            if node_info.node is None:
                continue
            node_labels = _node_labels(node_info.node)
            if not node_labels:
                continue  # no topology key can match
            pods: Sequence[PodInfo]
            if own_terms:
                pods = node_info.pods if has_constraints else node_info.pods_with_affinity
            else:
                pods = self._pods_with_scoring_terms(node_info)
            for existing in pods:
                # The incoming pod's preferred terms against the existing pod.
                for w in preferred_affinity:
                    process(w.term, w.weight, existing.namespace, existing.labels, None,
                            node_labels)
                for w in preferred_anti:
                    process(w.term, -w.weight, existing.namespace, existing.labels, None,
                            node_labels)
                # The existing pod's scoring terms against the incoming pod; a pod with only
                # required anti-affinity (the common replica-spreading case) has none, and
                # skipping it here saves a terms lookup per existing pod per cycle.
                if not self._has_scoring_terms(existing):
                    continue
                et = self._existing_terms(existing)
                if hard_weight > 0:
                    for term in et.required_affinity:
                        process(term, hard_weight, namespace, labels, ns_labels, node_labels)
                for w in et.preferred_affinity:
                    process(w.term, w.weight, namespace, labels, ns_labels, node_labels)
                for w in et.preferred_anti_affinity:
                    process(w.term, -w.weight, namespace, labels, ns_labels, node_labels)

        if not score:
            return Status(Code.SKIP)
        state.write(PRE_SCORE_STATE_KEY, PreScoreState(score))
        return None

    def _has_scoring_terms(self, pod: PodInfo) -> bool:
        return (
            (self.hard_pod_affinity_weight > 0 and pod.has_required_affinity)
            or pod.has_preferred_affinity
            or pod.has_preferred_anti_affinity
        )

    def _pods_with_scoring_terms(self, node_info: NodeInfo) -> tuple[PodInfo, ...]:
        """The node's pods whose own terms score other pods, kept per NodeInfo generation."""
        cache = self._scoring_pods
        entry = cache.get(node_info.name)
        if entry is None or entry[0] != node_info.generation:
            entry = (node_info.generation,
                     tuple(p for p in node_info.pods_with_affinity if self._has_scoring_terms(p)))
            cache[node_info.name] = entry
        return entry[1]

    def score(
        self, state: CycleState, pod_info: PodInfo, node_info: NodeInfo
    ) -> tuple[int, Status | None]:
        s = state.get(PRE_SCORE_STATE_KEY)
        if not isinstance(s, PreScoreState):
            return 0, Status(
                Code.ERROR, f"reading {PRE_SCORE_STATE_KEY!r} from cycleState: not found"
            )
        node_labels = _node_labels(node_info.node)
        total = 0
        for key, values in s.topology_score.items():
            value = node_labels.get(key)
            if value is not None:
                total += values.get(value, 0)
        return total, None

    def score_extensions(self) -> ScoreExtensions | None:
        return self

    def normalize_score(
        self, state: CycleState, pod_info: PodInfo, scores: list[NodeScore]
    ) -> Status | None:
        return normalize_with_values(
            lambda names, values: self.normalize_score_values(state, pod_info, names, values),
            scores,
        )

    def normalize_score_values(
        self, state: CycleState, pod_info: PodInfo, names: list[str], values: list[int]
    ) -> tuple[list[int], Status | None]:
        s = state.get(PRE_SCORE_STATE_KEY)
        if not isinstance(s, PreScoreState):
            return values, Status(
                Code.ERROR, f"reading {PRE_SCORE_STATE_KEY!r} from cycleState: not found"
            )
        if not s.topology_score or not values:
            return values, None
        lowest = min(values)
        spread = max(values) - lowest
        if spread <= 0:
            return [0] * len(values), None
        # Float math and truncation, as upstream computes it.
        m = float(MAX_NODE_SCORE)
        return [int(m * (float(v - lowest) / float(spread))) for v in values], None

    # --- events -------------------------------------------------------------------------------

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            # A new assigned pod may satisfy affinity; a deleted one may lift anti-affinity;
            # a label change may do either.
            ClusterEventWithHint(
                ClusterEvent(
                    EventResource.POD,
                    ActionType.ADD | ActionType.UPDATE_POD_LABEL | ActionType.DELETE,
                    "Pod/Add|UpdatePodLabel|Delete",
                ),
                self.is_schedulable_after_pod_change,
            ),
            # A node joining (or changing) a topology domain.  Taint updates are listed as
            # upstream does, for nodes that were added not ready.
            ClusterEventWithHint(
                ClusterEvent(
                    EventResource.NODE,
                    ActionType.ADD | ActionType.UPDATE_NODE_LABEL | ActionType.UPDATE_NODE_TAINT,
                    "Node/Add|UpdateNodeLabel|UpdateNodeTaint",
                ),
                self.is_schedulable_after_node_change,
            ),
        ]

    def is_schedulable_after_pod_change(
        self, pod: dict[str, Any], old: Any, new: Any
    ) -> QueueingHint:
        original = _as_pod(old) if old is not None else None
        modified = _as_pod(new) if new is not None else None
        if (modified is not None and not _node_name(modified)) or (
            original is not None and not _node_name(original)
        ):
            return QueueingHint.SKIP
        terms = self.terms_of(pod)
        affinity, anti = terms.required_affinity, terms.required_anti_affinity

        if original is not None and modified is not None:
            if not _matches_all(affinity, original) and _matches_all(affinity, modified):
                return QueueingHint.QUEUE
            if _matches_any(anti, original) and not _matches_any(anti, modified):
                return QueueingHint.QUEUE
            if self._blocks_by_anti_affinity(original, pod) and not self._blocks_by_anti_affinity(
                modified, pod
            ):
                return QueueingHint.QUEUE
            return QueueingHint.SKIP

        if modified is not None:
            return QueueingHint.QUEUE if _matches_all(affinity, modified) else QueueingHint.SKIP

        assert original is not None
        # A deleted pod frees the domain if the waiting pod's anti-affinity selected it, or if
        # its own anti-affinity selected the waiting pod.
        if _matches_any(anti, original) or self._blocks_by_anti_affinity(original, pod):
            return QueueingHint.QUEUE
        return QueueingHint.SKIP

    def _blocks_by_anti_affinity(self, existing: Mapping[str, Any], pod: Mapping[str, Any]
                                 ) -> bool:
        """Whether ``existing``'s required anti-affinity selects ``pod``."""
        anti = self.terms_of(existing).required_anti_affinity
        if not anti:
            return False
        meta = pod.get("metadata") or _NO_FIELDS
        namespace = str(meta.get("namespace") or "")
        labels = meta.get("labels") or _EMPTY
        ns_labels = self._namespace_labels(namespace)
        return any(t.matches(namespace, labels, ns_labels) for t in anti)

    def is_schedulable_after_node_change(
        self, pod: dict[str, Any], old: Any, new: Any
    ) -> QueueingHint:
        modified = _as_node(new)
        original = _as_node(old) if old is not None else None
        modified_labels = _node_labels(modified)
        original_labels = None if original is None else _node_labels(original)
        if original_labels is not None and original_labels == modified_labels:
            # A taint-only update stands in for an add that arrived while the node was not
            # ready: judge the node as if it had just been added.
            original_labels = None
        terms = self.terms_of(pod)
        affinity, anti = terms.required_affinity, terms.required_anti_affinity
        if not affinity and not anti:
            # Rejected because of existing pods' anti-affinity: any node that joins or leaves a
            # topology domain may be free of them.
            return QueueingHint.QUEUE
        for term in affinity:
            key = term.topology_key
            if original_labels is None:
                if key in modified_labels:
                    return QueueingHint.QUEUE
                continue
            if key in modified_labels and original_labels.get(key) != modified_labels[key]:
                return QueueingHint.QUEUE
        for term in anti:
            if original_labels is None:
                # A new node without the key always accepts the pod; with the key, its domain
                # may be free.  Either way it is worth a try.
                return QueueingHint.QUEUE
            key = term.topology_key
            if key in original_labels and original_labels.get(key) != modified_labels.get(key):
                return QueueingHint.QUEUE
        return QueueingHint.SKIP


def _satisfies_pod_affinity(s: PreFilterState, node_labels: Mapping[str, str]) -> bool:
    pods_exist = True
    counts = s.affinity_counts
    for term in s.required_affinity:
        value = node_labels.get(term.topology_key)
        if value is None:
            # Every topology key must be present on the node.
            return False
        if counts.get(term.topology_key, value) <= 0:
            pods_exist = False
    if pods_exist:
        return True
    # The first pod of a group whose affinity selects itself: allowed when no pod in the
    # cluster matches the terms yet and the pod matches its own terms.
    pod = s.pod_info
    return not counts and pod_matches_all_terms(s.required_affinity, pod.namespace, pod.labels)


def _as_pod(obj: Any) -> dict[str, Any]:
    if not isinstance(obj, dict):
        raise TypeError(f"{NAME}: expected a Pod object, got {type(obj).__name__}")
    return obj


def _as_node(obj: Any) -> dict[str, Any]:
    if not isinstance(obj, dict):
        raise TypeError(f"{NAME}: expected a Node object, got {type(obj).__name__}")
    return obj


def _node_name(pod: Mapping[str, Any]) -> str:
    return str((pod.get("spec") or _NO_FIELDS).get("nodeName") or "")


def _ns_and_labels(pod: Mapping[str, Any]) -> tuple[str, Mapping[str, str]]:
    meta = pod.get("metadata") or _NO_FIELDS
    return str(meta.get("namespace") or ""), meta.get("labels") or _EMPTY


def _matches_all(terms: tuple[AffinityTerm, ...], pod: Mapping[str, Any]) -> bool:
    namespace, labels = _ns_and_labels(pod)
    return pod_matches_all_terms(terms, namespace, labels)


def _matches_any(terms: tuple[AffinityTerm, ...], pod: Mapping[str, Any]) -> bool:
    namespace, labels = _ns_and_labels(pod)
    return any(t.matches(namespace, labels, None) for t in terms)
