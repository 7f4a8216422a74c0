"""InterPodAffinity's PreFilter and Filter: count the existing pods matching the incoming pod's
required (anti-)affinity terms, and the existing pods whose required anti-affinity selects it,
per topology pair once per cycle; Filter is then a few dict lookups per node.  Adding and
removing pods (preemption, nominated pods) updates the counts in place.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence

from scheduler.framework.cycle_state import CycleState, missing_state_for_nodes, read_state
from scheduler.framework.interfaces import (
    FilterPlugin,
    NodeInfoLister,
    PreFilterPlugin,
)
from scheduler.framework.node_info import NodeInfo
from scheduler.framework.status import SKIP, Code, Status
from scheduler.framework.types import PreFilterResult
from scheduler.objects.pod import PodInfo
from scheduler.plugins.interpodaffinity.terms import (
    AffinityTerm,
)
from scheduler.plugins.helper import PodDeltaExtensions
from scheduler.plugins.interpodaffinity.common import (
    _EMPTY,
    _NO_FIELDS,
    NAME,
    InterPodAffinityBase,
    PairSums,
    TopologyCounts,
    UniqueValues,
    _node_labels,
    _Pairs,
    _pairs,
    pod_matches_all_terms,
)

__all__ = ["PRE_FILTER_STATE_KEY", "Filtering", "PairSums", "PreFilterState"]

PRE_FILTER_STATE_KEY = "PreFilter" + NAME

# Topology keys whose uniqueness is tracked at once (the Filter signature's).
MAX_UNIQUE_INDEXES = 16

ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH = (
    "node(s) didn't satisfy existing pods anti-affinity rules"
)
ERR_REASON_AFFINITY_RULES_NOT_MATCH = "node(s) didn't match pod affinity rules"
ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH = "node(s) didn't match pod anti-affinity rules"


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
        "borrowed",
    )

    def __init__(
        self,
        *,
        borrowed: bool = False,
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
        # The three counts are shared (with the sums kept across cycles, or with a clone)
        # and must be copied before they are changed: copying per-domain sums over hostname
        # domains (thousands) every cycle cost more than the rest of PreFilter, while only
        # preemption and nominated pods ever change them.
        self.borrowed = borrowed

    def clone(self) -> PreFilterState:
        """A state sharing the counts; whichever of the two changes them first copies."""
        self.borrowed = True
        return PreFilterState(
            borrowed=True,
            pod_info=self.pod_info,
            required_affinity=self.required_affinity,
            required_anti_affinity=self.required_anti_affinity,
            namespace_labels=self.namespace_labels,
            existing_anti_affinity_counts=self.existing_anti_affinity_counts,
            affinity_counts=self.affinity_counts,
            anti_affinity_counts=self.anti_affinity_counts,
        )

    def own_counts(self) -> None:
        """Copy the counts if they are shared, before changing them."""
        if self.borrowed:
            self.existing_anti_affinity_counts = self.existing_anti_affinity_counts.clone()
            self.affinity_counts = self.affinity_counts.clone()
            self.anti_affinity_counts = self.anti_affinity_counts.clone()
            self.borrowed = False

    def is_trivial(self) -> bool:
        """Nothing for Filter to check: the plugin is skipped for this cycle."""
        return (
            not self.existing_anti_affinity_counts
            and not self.required_affinity
            and not self.required_anti_affinity
        )


class Filtering(InterPodAffinityBase, PodDeltaExtensions, PreFilterPlugin, FilterPlugin):
    """PreFilter, the PreFilter extensions and Filter of InterPodAffinity."""

    def pre_filter(
        self, state: CycleState, pod_info: PodInfo, nodes: list[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status | None]:
        terms = self.terms_of(pod_info.pod)
        if terms.errors:
            return None, Status(
                Code.UNSCHEDULABLE_AND_UNRESOLVABLE, f"parsing pod: {'; '.join(terms.errors)}"
            )
        snapshot = self._handle.snapshot()
        if not (terms.required_affinity or terms.required_anti_affinity
                or snapshot.have_pods_with_required_anti_affinity()):
            # Upstream's Skip without counting: no term of the pod's, and no existing pod
            # with required anti-affinity (the snapshot's list of their nodes is empty), so
            # all three counts are empty.  The state is written as below.
            state.write(PRE_FILTER_STATE_KEY, PreFilterState(
                borrowed=True, pod_info=pod_info, required_affinity=(),
                required_anti_affinity=(),
                namespace_labels=self._namespace_labels(pod_info.namespace),
                existing_anti_affinity_counts=TopologyCounts(),
                affinity_counts=TopologyCounts(), anti_affinity_counts=TopologyCounts()))
            return None, SKIP
        required_affinity = tuple(self._merge_namespaces(t) for t in terms.required_affinity)
        required_anti = tuple(self._merge_namespaces(t) for t in terms.required_anti_affinity)
        ns_labels = self._namespace_labels(pod_info.namespace)

        existing = self._existing_anti_affinity_counts(
            pod_info, ns_labels, *self._counted_nodes(
                snapshot, snapshot.have_pods_with_required_anti_affinity())
        )
        if required_affinity or required_anti:
            affinity_counts, anti_counts = self._incoming_counts(
                required_affinity, required_anti, snapshot.list(), snapshot=snapshot
            )
        else:
            affinity_counts, anti_counts = TopologyCounts(), TopologyCounts()
        s = PreFilterState(
            borrowed=True,  # the sums kept across cycles, read-only until own_counts()
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
            return None, SKIP
        return None, None

    def _existing_anti_affinity_counts(
        self,
        pod_info: PodInfo,
        ns_labels: Mapping[str, str] | None,
        node_infos: Sequence[NodeInfo],
        snapshot: NodeInfoLister | None,
    ) -> TopologyCounts:
        if not node_infos:
            return TopologyCounts()  # no pod with required anti-affinity anywhere (common)
        namespace, labels = pod_info.namespace, pod_info.labels

        def compute(node_info: NodeInfo) -> tuple[_Pairs]:
            if node_info.node is None or not node_info.pods_with_required_anti_affinity:
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

        key = self._incoming_pod_key("existing-anti", pod_info, ns_labels)
        (total,) = self._sums(key, 1).refresh(node_infos, compute, snapshot=snapshot)
        return total

    def _incoming_counts(
        self,
        affinity: tuple[AffinityTerm, ...],
        anti: tuple[AffinityTerm, ...],
        node_infos: Sequence[NodeInfo],
        *,
        snapshot: NodeInfoLister | None = None,
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
        affinity_total, anti_total = self._sums(key, 2).refresh(
            node_infos, compute, snapshot=snapshot)
        return affinity_total, anti_total

    def update_with_pod(
        self, state: CycleState, pod: PodInfo, node_info: NodeInfo, delta: int
    ) -> Status | None:
        s = read_state(state, PRE_FILTER_STATE_KEY, PreFilterState)
        if isinstance(s, Status):
            return s
        node_labels = _node_labels(node_info.node)
        incoming = s.pod_info
        s.own_counts()
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

    # --- opportunistic batching ---------------------------------------------------------------

    def sign_filter(self, state: CycleState, pod_info: PodInfo) -> Hashable | None:
        """The Filter signature (framework/batching.py), when a node's status is a function
        of its own NodeInfo: every topology key Filter reads (the incoming pod's required
        terms', and those of the existing pods' anti-affinity terms that select it) has
        values no two nodes share, e.g. hostname, so each domain holds one node's pods.
        The signature is then what decides that function: the incoming pod's terms (their
        namespaceSelector unrolled), what existing pods' terms can match of it (the key of
        the sums kept for them), and whether a pod matching its own affinity may be the
        first of its group.  Not signed otherwise (zone terms): a domain's count then
        gathers other nodes' pods."""
        s = state.get(PRE_FILTER_STATE_KEY)
        if not isinstance(s, PreFilterState):
            return None
        keys = {t.topology_key for t in s.required_affinity}
        keys.update(t.topology_key for t in s.required_anti_affinity)
        keys.update(s.existing_anti_affinity_counts.data)
        snapshot = self._handle.snapshot()
        unique = self._unique
        for key in keys:
            index = unique.get(key)
            if index is None:
                if len(unique) >= MAX_UNIQUE_INDEXES:
                    unique.clear()
                index = unique[key] = UniqueValues(key)
            if not index.refresh(snapshot):
                return None
        first_of_group = bool(s.required_affinity) and not s.affinity_counts and (
            pod_matches_all_terms(s.required_affinity, pod_info.namespace, pod_info.labels))
        return (
            tuple(t.key for t in s.required_affinity),
            tuple(t.key for t in s.required_anti_affinity),
            self._incoming_pod_key("existing-anti", pod_info, s.namespace_labels),
            first_of_group,
        )

    # --- Filter -------------------------------------------------------------------------------

    def filter(self, state: CycleState, pod_info: PodInfo, node_info: NodeInfo) -> Status | None:
        return self.filter_nodes(state, pod_info, [node_info])[0]

    def filter_nodes(
        self, state: CycleState, pod_info: PodInfo, nodes: list[NodeInfo]
    ) -> list[Status | None]:
        s = state.get(PRE_FILTER_STATE_KEY)
        if not isinstance(s, PreFilterState):
            return missing_state_for_nodes(PRE_FILTER_STATE_KEY, nodes)
        affinity = bool(s.required_affinity)
        # The anti-affinity checks as (topology key, {domain: count}) pairs, looked up once per
        # cycle: a node fails one when its domain for that key has a count (zero counts are
        # dropped from TopologyCounts, so presence with a count > 0 is the test).
        anti_data = s.anti_affinity_counts.data
        checks = [
            (t.topology_key, anti_data[t.topology_key], ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH)
            for t in s.required_anti_affinity if t.topology_key in anti_data
        ] if anti_data else []
        checks.extend(
            (key, domains, ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH)
            for key, domains in s.existing_anti_affinity_counts.data.items()
        )
        out: list[Status | None] = []
        append = out.append
        unschedulable = Code.UNSCHEDULABLE
        # Labels read inline and one loop over the checks: with hostname anti-affinity a
        # cycle walks (and rejects) more than a thousand nodes through here.
        for node_info in nodes:
            node = node_info.node
            if node is None:
                append(Status(Code.ERROR, "node not found"))
                continue
            node_labels = (node.get("metadata") or _NO_FIELDS).get("labels") or _EMPTY
            if affinity and not _satisfies_pod_affinity(s, node_labels):
                append(Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                              ERR_REASON_AFFINITY_RULES_NOT_MATCH))
                continue
            status: Status | None = None
            for key, domains, reason in checks:
                value = node_labels.get(key)
                if value is not None and domains.get(value, 0) > 0:
                    status = Status(unschedulable, reason)
                    break
            append(status)
        return out


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
