"""PodTopologySpread's PreScore and Score: ``ScheduleAnyway`` constraints (and the system
defaults for pods owned by a Service or a controller) score the matching pods in a node's
domains, weighted by log(number of domains + 2); NormalizeScore turns "fewer is better" into
[0, 100].
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from scheduler.framework.cycle_state import CycleState, missing_state, read_state
from scheduler.framework.interfaces import (
    PreScorePlugin,
    ScoreExtensions,
    ScorePlugin,
)
from scheduler.framework.node_info import NodeInfo
from scheduler.framework.status import SKIP, Status
from scheduler.framework.types import MAX_NODE_SCORE, NodeScore
from scheduler.objects.errors import ObjectError
from scheduler.objects.pod import PodInfo
from scheduler.plugins.helper import normalize_with_values
from scheduler.plugins.podtopologyspread.common import (
    LABEL_HOSTNAME,
    SCHEDULE_ANYWAY,
    Constraint,
    NodeInclusion,
    _NO_LABELS,
    count_pods_match_selector,
    node_has_all_keys,
    node_labels,
)
from scheduler.plugins.podtopologyspread.common import NAME
from scheduler.plugins.podtopologyspread.domains import KeptDomains

PRE_SCORE_STATE_KEY = "PreScore" + NAME

_NO_FIELDS: Mapping[str, Any] = {}


class PreScoreState:
    __slots__ = ("constraints", "ignored_nodes", "counts", "weights")

    def __init__(
        self,
        constraints: list[Constraint],
        ignored_nodes: set[str],
        counts: list[dict[str, int]],
        weights: list[float],
    ) -> None:
        self.constraints = constraints
        # Nodes missing a topology key (when all keys are required); they score 0.
        self.ignored_nodes = ignored_nodes
        self.counts = counts
        self.weights = weights

    def clone(self) -> PreScoreState:
        return self  # not mutated after PreScore


def topology_normalizing_weight(size: int) -> float:
    """log(size + 2): the counts of a topology with few domains weigh more."""
    return math.log(size + 2)


def score_for_count(count: int, max_skew: int, weight: float) -> float:
    # maxSkew - 1 waters down differences, making the score tolerant of allowed skew.
    return float(count) * weight + float(max_skew - 1)


class Scoring(KeptDomains, PreScorePlugin, ScorePlugin):
    """PreScore, Score and NormalizeScore of PodTopologySpread."""

    def pre_score(
        self, state: CycleState, pod_info: PodInfo, nodes: list[NodeInfo]
    ) -> Status | None:
        all_nodes = self._handle.snapshot().list()
        if not nodes or not all_nodes:
            return SKIP
        pod = pod_info.pod
        has_own = bool((pod.get("spec") or _NO_FIELDS).get("topologySpreadConstraints"))
        # Only non-system-default constraints require every key: nodes without a zone label
        # can still be spread by hostname.
        require_all = has_own or not self.system_defaulted
        try:
            constraints = self.constraints_for(pod, SCHEDULE_ANYWAY)
        except ObjectError as exc:
            return Status.from_error(exc, plugin=NAME)
        if not constraints:
            return SKIP

        ignored: set[str] = set()
        counts: list[dict[str, int]] = [{} for _ in constraints]
        # The candidates' domains (at 0) per constraint but hostname's (per-node counts are
        # taken in Score); node_labels inlined: a pass over every feasible node.
        spread_over = [(c.topology_key, counts[i]) for i, c in enumerate(constraints)
                       if c.topology_key != LABEL_HOSTNAME]
        for node_info in nodes:
            node = node_info.node
            if node is None:
                continue
            labels = (node.get("metadata") or _NO_FIELDS).get("labels") or _NO_LABELS
            if require_all and not node_has_all_keys(labels, constraints):
                ignored.add(node_info.name)
                continue
            for key, domain_counts in spread_over:
                value = labels.get(key, "")
                if value not in domain_counts:
                    domain_counts[value] = 0
        weights = []
        for i, c in enumerate(constraints):
            size = len(counts[i])
            if c.topology_key == LABEL_HOSTNAME:
                size = len(nodes) - len(ignored)
            weights.append(topology_normalizing_weight(size))

        namespace = pod_info.namespace
        if self._eligibility_is_pod_independent(constraints, pod_info):
            self._kept_scoring_counts(constraints, namespace, counts, require_all)
            state.write(PRE_SCORE_STATE_KEY, PreScoreState(constraints, ignored, counts, weights))
            return None
        inclusion = NodeInclusion(pod_info.required_node_affinity, pod_info.tolerations)
        counters = [self._counter(c, namespace) for c in constraints]
        for node_info in all_nodes:
            node = node_info.node
            if node is None:
                continue
            labels = node_labels(node)
            if require_all and not node_has_all_keys(labels, constraints):
                continue
            for i, c in enumerate(constraints):
                if not inclusion.matches(c, node):
                    continue
                value = labels.get(c.topology_key, "")
                domain_counts = counts[i]
                if value not in domain_counts:
                    continue  # not a domain of any candidate node (or hostname)
                domain_counts[value] += counters[i](node_info)
        state.write(PRE_SCORE_STATE_KEY, PreScoreState(constraints, ignored, counts, weights))
        return None

    def _kept_scoring_counts(self, constraints: list[Constraint], namespace: str,
                             counts: list[dict[str, int]], require_all: bool) -> None:
        """Fill ``counts`` (the candidate nodes' domains, at 0) with the matching pods of
        every node of the snapshot in each domain, from per-domain sums kept across cycles
        (``DomainCounts``: only the nodes changed since are counted again).  The same sums as
        the walk over every node below, when no node is excluded for this pod (no Honor
        policy consulting its affinity or tolerations): a node counts when it has every
        constraint's key (``require_all``) or always, a missing key being the domain ""."""
        snapshot = self._handle.snapshot()
        nodes = snapshot.list()
        keys = tuple(c.topology_key for c in constraints) if require_all else ()
        for c, domain_counts in zip(constraints, counts):
            if c.topology_key == LABEL_HOSTNAME or not domain_counts:
                continue  # per-node counts are taken in Score
            domains = self._domain_counts(c, namespace, keys)
            kept = domains.refresh(nodes, topology_key=c.topology_key, required_keys=keys,
                                   count=domains.count, snapshot=snapshot)
            for value in domain_counts:
                domain_counts[value] = kept.get(value, 0)

    def score(
        self, state: CycleState, pod_info: PodInfo, node_info: NodeInfo
    ) -> tuple[int, Status | None]:
        s = state.get(PRE_SCORE_STATE_KEY)
        if not isinstance(s, PreScoreState):
            return 0, missing_state(PRE_SCORE_STATE_KEY)  # per node: no helper call
        if node_info.name in s.ignored_nodes:
            return 0, None
        labels = node_labels(node_info.node)
        total = 0.0
        for i, c in enumerate(s.constraints):
            value = labels.get(c.topology_key)
            if value is None:
                continue
            if c.topology_key == LABEL_HOSTNAME:
                count = self._counter(c, pod_info.namespace)(node_info)
            else:
                count = s.counts[i].get(value, 0)
            total += score_for_count(count, c.max_skew, s.weights[i])
        # Go's math.Round: half away from zero (scores are never negative).
        return int(math.floor(total + 0.5)), None

    def score_nodes(
        self, state: CycleState, pod_info: PodInfo, nodes: list[NodeInfo]
    ) -> tuple[list[int], Status | None]:
        """``score`` for every node, with the per-constraint counters built once."""
        s = read_state(state, PRE_SCORE_STATE_KEY, PreScoreState)
        if isinstance(s, Status):
            return [], s
        # Per constraint: its key, the memo of per-node counts (hostname: counted per node)
        # or the per-domain counts, and score_for_count's terms.  The loop inlines
        # node_labels, score_for_count and the memo's lookup: it runs for every feasible
        # node of every cycle (the sums are the same floats in the same order).
        namespace = pod_info.namespace
        per_constraint = [
            (
                c.topology_key,
                self._counts.table((c.selector, namespace))
                if c.topology_key == LABEL_HOSTNAME else None,
                c.selector,
                s.counts[i],
                s.weights[i],
                float(c.max_skew - 1),
            )
            for i, c in enumerate(s.constraints)
        ]
        ignored = s.ignored_nodes
        out: list[int] = []
        append = out.append
        floor = math.floor
        for node_info in nodes:
            if node_info.name in ignored:
                append(0)
                continue
            node = node_info.node
            labels = _NO_LABELS if node is None else (
                (node.get("metadata") or _NO_FIELDS).get("labels") or _NO_LABELS)
            total = 0.0
            for key, table, selector, counts, weight, tolerance in per_constraint:
                value = labels.get(key)
                if value is None:
                    continue
                if table is None:
                    count = counts.get(value, 0)
                else:
                    entry = table.get(node_info.name)
                    if entry is not None and entry[0] == node_info.plugin_generation:
                        count = entry[1]
                    else:
                        count = count_pods_match_selector(node_info.pods, selector, namespace)
                        table[node_info.name] = (node_info.plugin_generation, count)
                total += float(count) * weight + tolerance
            append(int(floor(total + 0.5)))
        return out, None

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
        # Nodes without the constraints' keys score 0; the rest are scaled, fewer matching
        # pods scoring higher, against the lowest and highest counts among them.
        ignored = s.ignored_nodes
        counted = [v for n, v in zip(names, values) if n not in ignored] if ignored else values
        if not counted:
            return [0] * len(values), None
        lowest, highest = min(counted), max(max(counted), 0)
        if highest == 0:
            return [0 if ignored and n in ignored else MAX_NODE_SCORE for n in names], None
        m = MAX_NODE_SCORE
        if not ignored:
            return [m * (highest + lowest - v) // highest for v in values], None
        return [
            0 if n in ignored else m * (highest + lowest - v) // highest
            for n, v in zip(names, values)
        ], None
