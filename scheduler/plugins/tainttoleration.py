"""TaintToleration: keeps pods off nodes whose taints they do not tolerate.

Filter rejects a node carrying a NoSchedule or NoExecute taint that none of the pod's
tolerations matches (UnschedulableAndUnresolvable: preempting pods never removes a taint).
Score counts the PreferNoSchedule taints the pod does not tolerate; normalization is reversed,
so the node with the fewest such taints gets the maximum score.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
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
    PreScorePlugin,
    ScoreExtensions,
    ScorePlugin,
)
from scheduler.framework.node_info import NodeInfo
from scheduler.framework.status import Code, Status
from scheduler.framework.types import MAX_NODE_SCORE, NodeScore
from scheduler.objects.errors import ObjectError
from scheduler.objects.pod import PodInfo
from scheduler.objects.taints import (
    PREFER_NO_SCHEDULE,
    Taint,
    Toleration,
    find_untolerated_taint,
    format_taint,
    parse_taints,
    parse_tolerations,
    tolerates_all,
)
from scheduler.plugins import names
from scheduler.plugins.helper import (
    DO_NOT_SCHEDULE_TAINT_EFFECTS,
    default_normalize_score,
    default_normalize_values,
    validate_no_args,
)

NAME = names.TAINT_TOLERATION

PRE_SCORE_STATE_KEY = "PreScore" + NAME

# Upstream keeps this constant (older releases' wording); Filter now names the taint.
ERR_REASON_NOT_MATCH = "node(s) had taints that the pod didn't tolerate"
ERR_REASON_UNTOLERATED_TAINT = "node(s) had untolerated taint {taint}"


def untolerated_taint_reason(taint: Taint) -> str:
    """``node(s) had untolerated taint {key: value}``."""
    return ERR_REASON_UNTOLERATED_TAINT.format(taint=format_taint(taint))


class _PreScoreState:
    """Tolerations that can tolerate a PreferNoSchedule taint (its effect or every effect)."""

    __slots__ = ("tolerations",)

    def __init__(self, tolerations: list[Toleration]) -> None:
        self.tolerations = tolerations

    def clone(self) -> _PreScoreState:
        return self  # never mutated after PreScore


def count_intolerable_prefer_no_schedule(
    taints: list[Taint], tolerations: list[Toleration]
) -> int:
    """How many PreferNoSchedule taints none of ``tolerations`` tolerates."""
    count = 0
    for taint in taints:
        if taint.effect == PREFER_NO_SCHEDULE and not tolerates_all(taint, tolerations):
            count += 1
    return count


def _node_taints(node_info: NodeInfo) -> list[Taint]:
    if node_info.node is None:
        raise ValueError(f"{NAME}: node info has no node")
    return node_info.taints()


def _as_dict(obj: Any, what: str) -> dict[str, Any]:
    if not isinstance(obj, dict):
        raise TypeError(f"{NAME}: expected a {what} object, got {type(obj).__name__}")
    return obj


class TaintToleration(FilterPlugin, PreScorePlugin, ScorePlugin, EnqueueExtensions):
    NAME = NAME

    def __init__(self, args: Mapping[str, Any], handle: Handle) -> None:
        validate_no_args(NAME, args)
        self._handle = handle

    # --- enqueue ------------------------------------------------------------------------------

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            # A node appearing, or a node's taints changing, may remove the blocking taint.
            ClusterEventWithHint(
                ClusterEvent(
                    EventResource.NODE,
                    ActionType.ADD | ActionType.UPDATE_NODE_TAINT,
                    "Node/Add|UpdateNodeTaint",
                ),
                self.is_schedulable_after_node_change,
            ),
            # The waiting pod itself gained a toleration.
            ClusterEventWithHint(
                ClusterEvent(
                    EventResource.UNSCHEDULED_POD,
                    ActionType.UPDATE_POD_TOLERATION,
                    "UnscheduledPod/UpdatePodToleration",
                ),
                self.is_schedulable_after_pod_toleration_change,
            ),
        ]

    def is_schedulable_after_node_change(
        self, pod: dict[str, Any], old: Any, new: Any
    ) -> QueueingHint:
        """Queue only when the node goes from having an untolerated taint to having none."""
        new_node = _as_dict(new, "Node")
        tolerations = parse_tolerations(pod)
        was_untolerated = True
        if old is not None:
            old_node = _as_dict(old, "Node")
            was_untolerated = (
                find_untolerated_taint(
                    parse_taints(old_node), tolerations, effects=DO_NOT_SCHEDULE_TAINT_EFFECTS
                )
                is not None
            )
        is_untolerated = (
            find_untolerated_taint(
                parse_taints(new_node), tolerations, effects=DO_NOT_SCHEDULE_TAINT_EFFECTS
            )
            is not None
        )
        if was_untolerated and not is_untolerated:
            return QueueingHint.QUEUE
        return QueueingHint.SKIP

    def is_schedulable_after_pod_toleration_change(
        self, pod: dict[str, Any], old: Any, new: Any
    ) -> QueueingHint:
        """Queue when the updated pod is the waiting pod itself (its tolerations changed)."""
        if old is not None:
            _as_dict(old, "Pod")
        modified = _as_dict(new, "Pod")
        uid = (pod.get("metadata") or {}).get("uid")
        if uid == (modified.get("metadata") or {}).get("uid"):
            return QueueingHint.QUEUE
        return QueueingHint.SKIP

    # --- filter -------------------------------------------------------------------------------

    def sign(self, pod_info: PodInfo) -> Hashable:
        """The fields Filter and Score read of the pod (opportunistic batching)."""
        return tuple(pod_info.tolerations)

    def filter(self, state: CycleState, pod_info: PodInfo, node_info: NodeInfo) -> Status | None:
        return self.filter_nodes(state, pod_info, [node_info])[0]

    def filter_nodes(
        self, state: CycleState, pod_info: PodInfo, nodes: list[NodeInfo]
    ) -> list[Status | None]:
        tolerations = pod_info.tolerations
        out: list[Status | None] = []
        for node_info in nodes:
            try:
                taints = _node_taints(node_info)
            except (ObjectError, ValueError) as exc:
                out.append(Status.from_error(exc, plugin=NAME))
                continue
            taint = (
                find_untolerated_taint(taints, tolerations, effects=DO_NOT_SCHEDULE_TAINT_EFFECTS)
                if taints else None
            )
            out.append(
                None if taint is None
                else Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, untolerated_taint_reason(taint))
            )
        return out

    # --- score --------------------------------------------------------------------------------

    def pre_score(
        self, state: CycleState, pod_info: PodInfo, nodes: list[NodeInfo]
    ) -> Status | None:
        # An empty effect tolerates every effect, PreferNoSchedule included.
        prefer = [t for t in pod_info.tolerations if t.effect in ("", PREFER_NO_SCHEDULE)]
        state.write(PRE_SCORE_STATE_KEY, _PreScoreState(prefer))
        return None

    def score(
        self, state: CycleState, pod_info: PodInfo, node_info: NodeInfo
    ) -> tuple[int, Status | None]:
        s = state.get(PRE_SCORE_STATE_KEY)
        if not isinstance(s, _PreScoreState):
            return 0, Status(
                Code.ERROR, f"failed to read {PRE_SCORE_STATE_KEY!r} from cycleState", plugin=NAME
            )
        try:
            taints = _node_taints(node_info)
        except (ObjectError, ValueError) as exc:
            return 0, Status.from_error(exc, plugin=NAME)
        return count_intolerable_prefer_no_schedule(taints, s.tolerations), None

    def score_nodes(
        self, state: CycleState, pod_info: PodInfo, nodes: list[NodeInfo]
    ) -> tuple[list[int], Status | None]:
        s = state.get(PRE_SCORE_STATE_KEY)
        if not isinstance(s, _PreScoreState):
            return [], Status(
                Code.ERROR, f"failed to read {PRE_SCORE_STATE_KEY!r} from cycleState", plugin=NAME
            )
        tolerations = s.tolerations
        out: list[int] = []
        for node_info in nodes:
            try:
                taints = _node_taints(node_info)
            except (ObjectError, ValueError) as exc:
                return out, Status.from_error(exc, plugin=NAME)
            out.append(count_intolerable_prefer_no_schedule(taints, tolerations) if taints else 0)
        return out, None

    def score_extensions(self) -> ScoreExtensions | None:
        return self

    def normalize_score(
        self, state: CycleState, pod_info: PodInfo, scores: list[NodeScore]
    ) -> Status | None:
        default_normalize_score(MAX_NODE_SCORE, True, scores)
        return None

    def normalize_score_values(
        self, state: CycleState, pod_info: PodInfo, names: list[str], values: list[int]
    ) -> tuple[list[int], Status | None]:
        return default_normalize_values(MAX_NODE_SCORE, True, values), None

