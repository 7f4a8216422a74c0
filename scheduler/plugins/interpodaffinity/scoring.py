"""InterPodAffinity's PreScore and Score: sum, per topology pair, the weights of preferred
terms (the incoming pod's and the existing pods') plus ``hardPodAffinityWeight`` for existing
pods' required affinity selecting the incoming pod; NormalizeScore scales linearly to [0, 100].
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from scheduler.framework.cycle_state import CycleState, missing_state, read_state
from scheduler.framework.interfaces import (
    NodeInfoLister,
    PreScorePlugin,
    ScoreExtensions,
    ScorePlugin,
)
from scheduler.framework.node_info import NodeInfo
from scheduler.framework.status import SKIP, Code, Status
from scheduler.framework.types import MAX_NODE_SCORE, NodeScore
from scheduler.objects.pod import PodInfo
from scheduler.plugins.helper import normalize_with_values
from scheduler.plugins.interpodaffinity.terms import (
    AffinityTerm,
    WeightedAffinityTerm,
)
from scheduler.plugins.interpodaffinity.common import (
    NAME,
    InterPodAffinityBase,
    TopologyCounts,
    _node_labels,
    _Pairs,
    _pairs,
)

PRE_SCORE_STATE_KEY = "PreScore" + NAME


class PreScoreState:
    __slots__ = ("topology_score",)

    def __init__(self, topology_score: dict[str, dict[str, int]]) -> None:
        self.topology_score = topology_score

    def clone(self) -> PreScoreState:
        return self  # not mutated after PreScore


class Scoring(InterPodAffinityBase, PreScorePlugin, ScorePlugin):
    """PreScore, Score and NormalizeScore of InterPodAffinity."""

    def pre_score(
        self, state: CycleState, pod_info: PodInfo, nodes: list[NodeInfo]
    ) -> Status | None:
        if not nodes:
            return SKIP
        has_constraints = pod_info.has_preferred_affinity or pod_info.has_preferred_anti_affinity
        if self.ignore_preferred_terms_of_existing_pods and not has_constraints:
            return SKIP
        snapshot = self._handle.snapshot()
        # Unless the incoming pod has preferences, only pods with affinity can contribute.
        node_infos = snapshot.list() if has_constraints else snapshot.have_pods_with_affinity()
        if not node_infos:
            return SKIP

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

        if not (preferred_affinity or preferred_anti):
            # Only existing pods' terms score the pod: sums kept across cycles.
            kept = self._existing_terms_score(pod_info, ns_labels, snapshot, node_infos)
            if not kept:
                return SKIP
            state.write(PRE_SCORE_STATE_KEY, PreScoreState(kept))
            return None

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

        for node_info in node_infos:
            if node_info.node is None:
                continue
            node_labels = _node_labels(node_info.node)
            if not node_labels:
                continue  # no topology key can match
            pods = node_info.pods if has_constraints else node_info.pods_with_affinity
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
            return SKIP
        state.write(PRE_SCORE_STATE_KEY, PreScoreState(score))
        return None

    def _has_scoring_terms(self, pod: PodInfo) -> bool:
        return (
            (self.hard_pod_affinity_weight > 0 and pod.has_required_affinity)
            or pod.has_preferred_affinity
            or pod.has_preferred_anti_affinity
        )

    def _existing_terms_score(
        self,
        pod_info: PodInfo,
        ns_labels: Mapping[str, str] | None,
        snapshot: NodeInfoLister,
        subset: Sequence[NodeInfo],
    ) -> dict[str, dict[str, int]]:
        """Per topology pair, the weights of existing pods' terms that select the incoming
        pod (``hardPodAffinityWeight`` for required affinity, the preferred terms' weights).

        Replicas ask this every cycle with the same labels, and it is not a question about
        the examined nodes but about every node holding pods with affinity: the per-node
        answers are kept (``PairSums``) and only changed nodes are asked again.  The sums
        are shared with later cycles: read-only (PreScoreState is never changed)."""
        namespace, labels = pod_info.namespace, pod_info.labels
        hard_weight = self.hard_pod_affinity_weight

        def compute(node_info: NodeInfo) -> tuple[_Pairs]:
            if node_info.node is None or not node_info.pods_with_affinity:
                return ((),)
            node_labels = _node_labels(node_info.node)
            if not node_labels:
                return ((),)  # no topology key can match
            local = TopologyCounts()

            def process(term: AffinityTerm, weight: int) -> None:
                if term.matches(namespace, labels, ns_labels):
                    value = node_labels.get(term.topology_key)
                    if value is not None:
                        local.add(term.topology_key, value, weight)

            for existing in node_info.pods_with_affinity:
                if not self._has_scoring_terms(existing):
                    continue
                et = self._existing_terms(existing)
                if hard_weight > 0:
                    for term in et.required_affinity:
                        process(term, hard_weight)
                for w in et.preferred_affinity:
                    process(w.term, w.weight)
                for w in et.preferred_anti_affinity:
                    process(w.term, -w.weight)
            return (_pairs(local),)

        key = self._incoming_pod_key("existing-scoring", pod_info, ns_labels)
        node_infos, log = self._counted_nodes(snapshot, subset)
        (total,) = self._sums(key, 1).refresh(node_infos, compute, snapshot=log)
        return total.data

    def score(
        self, state: CycleState, pod_info: PodInfo, node_info: NodeInfo
    ) -> tuple[int, Status | None]:
        s = state.get(PRE_SCORE_STATE_KEY)
        if not isinstance(s, PreScoreState):
            return 0, missing_state(PRE_SCORE_STATE_KEY)  # per node: no helper call
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
        s = read_state(state, PRE_SCORE_STATE_KEY, PreScoreState)
        if isinstance(s, Status):
            return values, s
        if not s.topology_score or not values:
            return values, None
        lowest = min(values)
        spread = max(values) - lowest
        if spread <= 0:
            return [0] * len(values), None
        # Float math and truncation, as upstream computes it.
        m = float(MAX_NODE_SCORE)
        return [int(m * (float(v - lowest) / float(spread))) for v in values], None
