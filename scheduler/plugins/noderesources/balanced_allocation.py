"""NodeResourcesBalancedAllocation: favour nodes whose resource utilizations (with the pod)
stay close to each other, scored as ``(1 - std) * MAX_NODE_SCORE`` over the utilization
fractions, as upstream.  Best-effort pods skip it (upstream #129138): they would otherwise all
land on the same balanced node."""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence

from scheduler.config import features
from scheduler.framework.batching import sign_requests
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import Handle, PluginArgs, PreScorePlugin, ScorePlugin
from scheduler.framework.node_info import NodeInfo
from scheduler.framework.status import SKIP, Status
from scheduler.framework.types import MAX_NODE_SCORE
from scheduler.objects.pod import PodInfo
from scheduler.plugins import names
from scheduler.plugins.helper import args_error
from scheduler.plugins.noderesources.resource_allocation import (
    DRAScoring,
    PairedScorer,
    PreScoreState,
    ResourceAllocationScorer,
    ResourceSpec,
    parse_resource_specs,
)

NAME = names.NODE_RESOURCES_BALANCED_ALLOCATION

PRE_SCORE_STATE_KEY = "PreScore" + NAME

DEFAULT_RESOURCES = (ResourceSpec("cpu", 1), ResourceSpec("memory", 1))


def balanced_resource_scorer(requested: Sequence[int], allocatable: Sequence[int]) -> int:
    fractions: list[float] = []
    total = 0.0
    for req, alloc in zip(requested, allocatable):
        if alloc == 0:
            continue
        fraction = min(req / alloc, 1.0)
        total += fraction
        fractions.append(fraction)
    std = 0.0
    if len(fractions) == 2:
        std = abs((fractions[0] - fractions[1]) / 2)
    elif len(fractions) > 2:
        mean = total / len(fractions)
        std = math.sqrt(sum((f - mean) * (f - mean) for f in fractions) / len(fractions))
    return int((1 - std) * MAX_NODE_SCORE)


def balanced_pair_scorer(r0: int, a0: int, r1: int, a1: int) -> int:
    """``balanced_resource_scorer`` for exactly two resources."""
    if a0 and a1:
        f0 = min(r0 / a0, 1.0)
        f1 = min(r1 / a1, 1.0)
        return int((1 - abs((f0 - f1) / 2)) * MAX_NODE_SCORE)
    return MAX_NODE_SCORE  # one fraction (or none): no spread


def balanced_column_scorer(
    r0s: list[int], a0s: list[int], r1s: list[int], a1s: list[int]
) -> list[int]:
    """``balanced_pair_scorer`` over columns, inlined (``x if x < 1.0 else 1.0`` is min)."""
    m = MAX_NODE_SCORE
    return [
        int((1 - abs(((r0 / a0 if r0 < a0 else 1.0) - (r1 / a1 if r1 < a1 else 1.0)) / 2)) * m)
        if a0 and a1 else m
        for r0, a0, r1, a1 in zip(r0s, a0s, r1s, a1s)
    ]


class BalancedAllocation(PreScorePlugin, ScorePlugin):
    NAME = NAME

    def __init__(self, args: PluginArgs | None, handle: Handle | None = None) -> None:
        args = args or {}
        resources = parse_resource_specs(args.get("resources"), "resources", plugin=NAME)
        if not resources:
            resources = list(DEFAULT_RESOURCES)
        seen: set[str] = set()
        for i, spec in enumerate(resources):
            if spec.name in seen:
                raise args_error(NAME, f"resources[{i}].name", f"duplicate value {spec.name!r}")
            seen.add(spec.name)
            if spec.weight != 1:
                raise args_error(
                    NAME, f"resources[{i}].weight", f"invalid value {spec.weight}: must be 1"
                )
        self.scorer = ResourceAllocationScorer(
            name=NAME,
            scorer=PairedScorer(balanced_resource_scorer, balanced_pair_scorer,
                                balanced_column_scorer),
            resources=resources,
            use_requested=True,
        )
        self._handle = handle
        self._dra_scoring = (DRAScoring(handle.listers) if handle is not None
                             and features.DEFAULT.enabled("DRAExtendedResource") else None)
        if self._dra_scoring is not None and not self._dra_scoring.can_back(self.resources):
            self._dra_scoring = None  # no scored resource a DeviceClass can back

    @property
    def resources(self) -> list[ResourceSpec]:
        return self.scorer.resources

    def pre_score(
        self, state: CycleState, pod_info: PodInfo, nodes: list[NodeInfo]
    ) -> Status | None:
        requests = self.scorer.pod_requests(pod_info)
        if self.scorer.is_best_effort(requests):
            return SKIP
        dra = self._dra_scoring.totals(self.resources, requests) if self._dra_scoring else None
        state.write(PRE_SCORE_STATE_KEY, PreScoreState(requests, dra))
        return None

    def sign(self, pod_info: PodInfo) -> Hashable | None:
        """The fields Score reads of the pod (opportunistic batching); None (not signed)
        when a scored resource it asks for is backed by a DeviceClass (Score then reads
        slices and claims)."""
        if self._dra_scoring is not None and self._dra_scoring.backed(
                self.resources, self.scorer.pod_requests(pod_info)):
            return None
        return sign_requests(pod_info)

    def score(
        self, state: CycleState, pod_info: PodInfo, node_info: NodeInfo
    ) -> tuple[int, Status | None]:
        s = state.get(PRE_SCORE_STATE_KEY)
        if s is None:
            requests = self.scorer.pod_requests(pod_info)
            if self.scorer.is_best_effort(requests):
                return 0, None
        else:
            requests = s.pod_requests
        return self.scorer.score(node_info, requests, s.dra if s is not None else None)

    def score_nodes(
        self, state: CycleState, pod_info: PodInfo, nodes: list[NodeInfo]
    ) -> tuple[list[int], Status | None]:
        s = state.get(PRE_SCORE_STATE_KEY)
        if s is None:
            requests = self.scorer.pod_requests(pod_info)
            if self.scorer.is_best_effort(requests):
                return [0] * len(nodes), None
        else:
            requests = s.pod_requests
        return self.scorer.score_many(nodes, requests, s.dra if s is not None else None)
