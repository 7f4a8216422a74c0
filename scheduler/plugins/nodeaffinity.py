"""NodeAffinity: ``spec.nodeSelector``, node affinity, and the profile's ``addedAffinity``.

Filter requires the node to satisfy the pod's nodeSelector and required node affinity (and the
scheduler-enforced ``addedAffinity.required`` when configured); both rejections are
UnschedulableAndUnresolvable because no preemption changes node labels.  PreFilter narrows the
cycle to the nodes named by ``matchFields`` on ``metadata.name`` when every required term pins
names, which is how DaemonSet pods skip filtering the whole cluster.  Score sums the weights of
the preferred terms (the pod's and ``addedAffinity``'s) a node matches, normalized to 0..100.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any

from scheduler.framework.batching import freeze
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
    PreFilterPlugin,
    PreScorePlugin,
    ScoreExtensions,
    ScorePlugin,
)
from scheduler.framework.node_info import NodeInfo
from scheduler.framework.status import SKIP, Code, Status
from scheduler.framework.types import MAX_NODE_SCORE, NodeScore, PreFilterResult
from scheduler.objects.errors import ObjectError
from scheduler.objects.node_affinity import (
    NodeSelector,
    PreferredSchedulingTerms,
    RequiredNodeAffinity,
)
from scheduler.objects.pod import PodInfo
from scheduler.plugins import names
from scheduler.plugins.helper import (
    args_error,
    default_normalize_score,
    default_normalize_values,
)

NAME = names.NODE_AFFINITY

PRE_FILTER_STATE_KEY = "PreFilter" + NAME
PRE_SCORE_STATE_KEY = "PreScore" + NAME

ERR_REASON_POD = "node(s) didn't match Pod's node affinity/selector"
ERR_REASON_ENFORCED = "node(s) didn't match scheduler-enforced node affinity"
ERR_REASON_CONFLICT = "pod affinity terms conflict"

_REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
_PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"
_OBJECT_NAME_FIELD = "metadata.name"
_ARGS_FIELDS = frozenset({"addedAffinity", "apiVersion", "kind"})


def _raw_node_affinity(pod: Mapping[str, Any]) -> Mapping[str, Any] | None:
    spec = pod.get("spec") or {}
    affinity = spec.get("affinity") or {}
    na = affinity.get("nodeAffinity")
    return na if isinstance(na, Mapping) else None


def _raw_required(pod: Mapping[str, Any]) -> Mapping[str, Any] | None:
    na = _raw_node_affinity(pod)
    req = None if na is None else na.get(_REQUIRED)
    return req if isinstance(req, Mapping) else None


def pinned_node_names(required: Mapping[str, Any]) -> set[str] | None:
    """Node names the required terms restrict the pod to, or None when any node may match.

    Terms are ORed, so a single term without a ``metadata.name In`` field leaves every node
    possible; within a term such fields are ANDed (intersection).  An empty set means the
    terms contradict each other.
    """
    terms = required.get("nodeSelectorTerms") or []
    if not terms:
        return None
    result: set[str] = set()
    for term in terms:
        term_names: set[str] | None = None
        for field in (term or {}).get("matchFields") or []:
            if field.get("key") == _OBJECT_NAME_FIELD and field.get("operator") == "In":
                values = set(field.get("values") or ())
                term_names = values if term_names is None else term_names & values
        if term_names is None:
            return None
        result |= term_names
    return result


class _PreFilterState:
    __slots__ = ("required",)

    def __init__(self, required: RequiredNodeAffinity) -> None:
        self.required = required

    def clone(self) -> _PreFilterState:
        return self  # unaffected by pods being added or removed


class _PreScoreState:
    __slots__ = ("preferred",)

    def __init__(self, preferred: PreferredSchedulingTerms | None) -> None:
        self.preferred = preferred

    def clone(self) -> _PreScoreState:
        return self


def _no_affinity(pod: Mapping[str, Any]) -> bool:
    """Whether the pod's spec is a plain dict with neither affinity nor nodeSelector: the
    common pod, answered without reading further (False also when that cannot be told
    this cheaply: the full reading then runs)."""
    spec = pod.get("spec")
    return (type(spec) is dict and spec.get("affinity") is None
            and spec.get("nodeSelector") is None)


# sign()'s value for a pod with neither nodeSelector nor node affinity.
_UNCONSTRAINED_SIGN: Hashable = (freeze(None), freeze(None))


def _pod_preferred(pod_info: PodInfo) -> PreferredSchedulingTerms | None:
    """The pod's preferred terms, None when the field is absent (upstream's nil)."""
    if _no_affinity(pod_info.pod):
        return None
    na = _raw_node_affinity(pod_info.pod)
    if na is None or na.get(_PREFERRED) is None:
        return None
    return pod_info.preferred_node_affinity


def _as_node(obj: Any) -> dict[str, Any]:
    if not isinstance(obj, dict):
        raise TypeError(f"{NAME}: expected a Node object, got {type(obj).__name__}")
    return obj


class NodeAffinity(
    PreFilterPlugin, FilterPlugin, PreScorePlugin, ScorePlugin, EnqueueExtensions
):
    NAME = NAME

    def __init__(self, args: Mapping[str, Any], handle: Handle) -> None:
        self._handle = handle
        self.added_node_selector: NodeSelector | None = None
        self.added_pref_sched_terms: PreferredSchedulingTerms | None = None
        if args is None:
            return
        if not isinstance(args, Mapping):
            raise args_error(NAME, "", f"must be an object, got {type(args).__name__}")
        for key in args:
            if key not in _ARGS_FIELDS:
                raise args_error(NAME, str(key), "unknown field")
        added = args.get("addedAffinity")
        if added is None:
            return
        if not isinstance(added, Mapping):
            raise args_error(NAME, "addedAffinity", "must be an object")
        for key in added:
            if key not in (_REQUIRED, _PREFERRED):
                raise args_error(NAME, f"addedAffinity.{key}", "unknown field")
        required = added.get(_REQUIRED)
        if required is not None:
            try:
                self.added_node_selector = NodeSelector.from_dict(
                    required, where=f"addedAffinity.{_REQUIRED}"
                )
            except ObjectError as exc:
                raise args_error(NAME, exc.field, exc.detail) from None
        preferred = added.get(_PREFERRED)
        if preferred:
            try:
                self.added_pref_sched_terms = PreferredSchedulingTerms(
                    preferred, where=f"addedAffinity.{_PREFERRED}"
                )
            except ObjectError as exc:
                raise args_error(NAME, exc.field, exc.detail) from None

    # --- enqueue ------------------------------------------------------------------------------

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            ClusterEventWithHint(
                ClusterEvent(
                    EventResource.NODE,
                    ActionType.ADD | ActionType.UPDATE_NODE_LABEL,
                    "Node/Add|UpdateNodeLabel",
                ),
                self.is_schedulable_after_node_change,
            )
        ]

    def is_schedulable_after_node_change(
        self, pod: dict[str, Any], old: Any, new: Any
    ) -> QueueingHint:
        """Queue for an added node that matches, or an update that turns no-match into match."""
        modified = _as_node(new)
        original = None if old is None else _as_node(old)
        if self.added_node_selector is not None and not self.added_node_selector.match(modified):
            return QueueingHint.SKIP
        required = RequiredNodeAffinity.from_pod(pod)
        if not required.match(modified):
            return QueueingHint.SKIP
        if original is None:
            return QueueingHint.QUEUE
        if required.match(original):
            return QueueingHint.SKIP
        return QueueingHint.QUEUE

    # --- filter -------------------------------------------------------------------------------

    def pre_filter(
        self, state: CycleState, pod_info: PodInfo, nodes: list[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status | None]:
        if self.added_node_selector is None and _no_affinity(pod_info.pod):
            return None, SKIP  # what the checks below answer such a pod
        required_raw = _raw_required(pod_info.pod)
        node_selector = (pod_info.pod.get("spec") or {}).get("nodeSelector")
        if required_raw is None and self.added_node_selector is None and node_selector is None:
            return None, SKIP
        state.write(PRE_FILTER_STATE_KEY, _PreFilterState(pod_info.required_node_affinity))
        if required_raw is None:
            return None, None
        pinned = pinned_node_names(required_raw)
        if pinned is None:
            return None, None
        if not pinned:
            return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON_CONFLICT)
        return PreFilterResult(pinned), None

    def sign(self, pod_info: PodInfo) -> Hashable:
        """The fields Filter and Score read of the pod (opportunistic batching)."""
        if _no_affinity(pod_info.pod):
            return _UNCONSTRAINED_SIGN
        spec = pod_info.pod.get("spec") or {}
        return freeze(spec.get("nodeSelector")), freeze(_raw_node_affinity(pod_info.pod))

    def filter(self, state: CycleState, pod_info: PodInfo, node_info: NodeInfo) -> Status | None:
        node = node_info.node
        if node is None:
            return Status(Code.ERROR, "node not found", plugin=NAME)
        if self.added_node_selector is not None and not self.added_node_selector.match(node):
            return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON_ENFORCED)
        s = state.get(PRE_FILTER_STATE_KEY)
        # Without PreFilter (disabled at that point) fall back to the pod's parsed affinity.
        required = s.required if isinstance(s, _PreFilterState) else pod_info.required_node_affinity
        if not required.match(node):
            return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON_POD)
        return None

    # --- score --------------------------------------------------------------------------------

    def pre_score(
        self, state: CycleState, pod_info: PodInfo, nodes: list[NodeInfo]
    ) -> Status | None:
        preferred = _pod_preferred(pod_info)
        if preferred is None and self.added_pref_sched_terms is None:
            return SKIP
        state.write(PRE_SCORE_STATE_KEY, _PreScoreState(preferred))
        return None

    def score(
        self, state: CycleState, pod_info: PodInfo, node_info: NodeInfo
    ) -> tuple[int, Status | None]:
        node = node_info.node
        if node is None:
            return 0, Status(Code.ERROR, "node not found", plugin=NAME)
        count = 0
        if self.added_pref_sched_terms is not None:
            count += self.added_pref_sched_terms.score(node)
        s = state.get(PRE_SCORE_STATE_KEY)
        preferred = s.preferred if isinstance(s, _PreScoreState) else _pod_preferred(pod_info)
        if preferred is not None:
            count += preferred.score(node)
        return count, None

    def score_extensions(self) -> ScoreExtensions | None:
        return self

    def normalize_score(
        self, state: CycleState, pod_info: PodInfo, scores: list[NodeScore]
    ) -> Status | None:
        default_normalize_score(MAX_NODE_SCORE, False, scores)
        return None

    def normalize_score_values(
        self, state: CycleState, pod_info: PodInfo, names: list[str], values: list[int]
    ) -> tuple[list[int], Status | None]:
        return default_normalize_values(MAX_NODE_SCORE, False, values), None
