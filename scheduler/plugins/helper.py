"""Small arithmetic shared by score plugins (upstream ``framework/plugins/helper``).

Scores have to come out bit-for-bit as kube-scheduler computes them or ties break differently,
so integer arithmetic follows Go: division truncates toward zero (Python's ``//`` floors).
Plugins import :func:`default_normalize_score` for NormalizeScore and
:func:`build_broken_linear_function` for shape-based scoring (RequestedToCapacityRatio).
"""

from __future__ import annotations

import abc
import functools
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from scheduler.config.errors import ConfigError
from scheduler.dra.extended import ClassCache
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import ObjectLister, ObjectWatcher, PreFilterExtensions
from scheduler.framework.node_info import NodeInfo
from scheduler.framework.status import Status
from scheduler.framework.types import MAX_NODE_SCORE, NodeScore
from scheduler.objects.pod import PodInfo

__all__ = [
    "DO_NOT_SCHEDULE_TAINT_EFFECTS",
    "FunctionShapePoint",
    "args_error",
    "build_broken_linear_function",
    "device_class_cache",
    "default_normalize_score",
    "go_div",
    "normalize_to_max_node_score",
    "validate_no_args",
]

# Taint effects that keep a pod off a node at scheduling time (upstream
# DoNotScheduleTaintsFilterFunc); PreferNoSchedule only lowers the score.
DO_NOT_SCHEDULE_TAINT_EFFECTS: frozenset[str] = frozenset({"NoSchedule", "NoExecute"})


def go_div(a: int, b: int) -> int:
    """Integer division truncating toward zero, like Go's ``/`` on int64."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def default_normalize_score(
    max_priority: int, reverse: bool, scores: Sequence[NodeScore]
) -> None:
    """Scale scores in place from [0, max(scores)] to [0, max_priority].

    With ``reverse`` the scaled score is subtracted from ``max_priority`` (fewer is better).
    When every score is 0 (or there are none) scores stay 0, or all become ``max_priority``
    when reversed.  Scores are assumed non-negative, as upstream assumes.
    """
    values = default_normalize_values(max_priority, reverse, [s.score for s in scores])
    for s, value in zip(scores, values):
        s.score = value


def normalize_with_values(
    normalize_values: Callable[[list[str], list[int]], tuple[list[int], Status | None]],
    scores: Sequence[NodeScore],
) -> Status | None:
    """``normalize_score`` in place through a plugin's ``normalize_score_values``, so the
    plugin has one implementation of its normalization."""
    values, status = normalize_values([ns.name for ns in scores], [ns.score for ns in scores])
    if status is None:
        for ns, value in zip(scores, values):
            ns.score = value
    return status


def default_normalize_values(max_priority: int, reverse: bool, values: list[int]) -> list[int]:
    """``default_normalize_score`` on bare scores, returning the normalized list."""
    highest = max(values, default=0)
    if highest <= 0:
        return [max_priority] * len(values) if reverse else list(values)
    if reverse:
        return [max_priority - go_div(max_priority * v, highest) for v in values]
    return [go_div(max_priority * v, highest) for v in values]


@dataclass(frozen=True, slots=True)
class FunctionShapePoint:
    """A corner of a broken-line function: ``score`` at ``utilization``."""

    utilization: int
    score: int


def build_broken_linear_function(
    shape: Sequence[FunctionShapePoint],
) -> Callable[[int], int]:
    """A piecewise-linear function through ``shape`` (sorted by utilization, non-empty).

    Below the first point it is the first score, above the last point the last score, and
    linear (Go integer arithmetic) in between.
    """
    if not shape:
        raise ValueError("function shape must have at least one point")
    points = tuple(shape)

    def f(p: int) -> int:
        for i, point in enumerate(points):
            if p <= point.utilization:
                if i == 0:
                    return points[0].score
                prev = points[i - 1]
                return prev.score + go_div(
                    (point.score - prev.score) * (p - prev.utilization),
                    point.utilization - prev.utilization,
                )
        return points[-1].score

    return f


def normalize_to_max_node_score(scores: Sequence[NodeScore], *, reverse: bool = False) -> None:
    """:func:`default_normalize_score` with ``MAX_NODE_SCORE`` (the usual call)."""
    default_normalize_score(MAX_NODE_SCORE, reverse, scores)


# Keys a decoded args object may carry besides its fields (the config loader usually strips them).
_TYPE_META_KEYS = frozenset({"apiVersion", "kind"})


def args_error(plugin: str, field: str, message: str) -> ConfigError:
    """A ConfigError naming ``<plugin>.args.<field>``, raised from plugin constructors."""
    path = f"{plugin}.args" + (f".{field}" if field else "")
    return ConfigError("", [(path, message)])


def validate_no_args(plugin: str, args: Mapping[str, Any] | None) -> None:
    """For plugins without an args type: accept nothing but an empty mapping.

    Upstream silently ignores args given to such plugins; a field there is always a mistake
    in the configuration, so we name it instead of dropping it.
    """
    if args is None:
        return
    if not isinstance(args, Mapping):
        raise args_error(plugin, "", f"must be an object, got {type(args).__name__}")
    unknown = sorted(str(k) for k in args if k not in _TYPE_META_KEYS)
    if unknown:
        raise args_error(plugin, unknown[0], "unknown field (this plugin takes no args)")


class PodDeltaExtensions(abc.ABC):
    """PreFilterExtensions where adding and removing a pod are one update with a delta of +1
    or -1 on the PreFilter state (InterPodAffinity and PodTopologySpread count pods)."""

    def pre_filter_extensions(self) -> PreFilterExtensions | None:
        return self

    def add_pod(
        self, state: CycleState, pod_to_schedule: PodInfo, pod_to_add: PodInfo, node_info: NodeInfo
    ) -> Status | None:
        return self.update_with_pod(state, pod_to_add, node_info, 1)

    def remove_pod(
        self,
        state: CycleState,
        pod_to_schedule: PodInfo,
        pod_to_remove: PodInfo,
        node_info: NodeInfo,
    ) -> Status | None:
        return self.update_with_pod(state, pod_to_remove, node_info, -1)

    @abc.abstractmethod
    def update_with_pod(
        self, state: CycleState, pod: PodInfo, node_info: NodeInfo, delta: int
    ) -> Status | None:
        """Count ``pod`` on ``node_info`` ``delta`` more times in the PreFilter state."""


def parse_rfc3339(value: Any) -> float | None:
    """POSIX seconds of a Kubernetes timestamp (``2024-05-01T10:00:00Z``); None when missing
    or unparseable."""
    if not isinstance(value, str) or not value:
        return None
    return _parse_rfc3339(value)


@functools.lru_cache(maxsize=4096)
def _parse_rfc3339(value: str) -> float | None:
    # Cached: preemption sorts every candidate node's pods by start time, and timestamps
    # have one-second resolution, so many pods share one.
    text = value[:-1] + "+00:00" if value.endswith(("Z", "z")) else value
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        return None


# --- gangs (a well-known API label, shared by Coscheduling and preemption) -------------------

# scheduler-plugins' label naming a pod's PodGroup (same namespace).
POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"


def bound_gang_companions(listers: Any, pod: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The other bound, live members of ``pod``'s gang (none for a pod outside any gang):
    a gang below minMember is useless, so a member evicted takes them with it (issue 22)."""
    meta = pod.get("metadata") or {}
    labels = meta.get("labels") or {}
    group = labels.get(POD_GROUP_LABEL) if isinstance(labels, Mapping) else None
    if not isinstance(group, str) or not group:
        return []
    namespace = meta.get("namespace") or ""
    uid = meta.get("uid")
    out = []
    for other in listers.list("pods", namespace):
        other_meta = other.get("metadata") or {}
        if other_meta.get("uid") == uid or other_meta.get("deletionTimestamp"):
            continue
        if ((other_meta.get("labels") or {}).get(POD_GROUP_LABEL) != group
                or not (other.get("spec") or {}).get("nodeName")
                or (other.get("status") or {}).get("phase") in ("Succeeded", "Failed")):
            continue
        out.append(other)
    return out


def gang_shortfall_after_preemption(handle: Any, pod_info: Any) -> tuple[int, int] | None:
    """For a gang member about to preempt: (members still needed, members of this pod's size
    that could fit if every pod of lower priority were gone), or None when the pod is in no
    gang with a PodGroup.  An upper bound on the room (filters other than resources are not
    asked): when even it falls short, preempting anything is useless (issue 22)."""
    group = pod_info.labels.get(POD_GROUP_LABEL) or ""
    if not group:
        return None
    pg = handle.listers.get("podgroups", pod_info.namespace, group)
    # A malformed PodGroup (its spec not an object) is reported by Coscheduling; here it
    # only means no gang bound to reason about.
    spec = pg.get("spec") if isinstance(pg, Mapping) else None
    if not isinstance(spec, Mapping):
        return None
    min_member = spec.get("minMember")
    if not isinstance(min_member, int) or isinstance(min_member, bool) or min_member <= 0:
        return None
    bound = bound_gang_companions(handle.listers, {
        "metadata": {"namespace": pod_info.namespace, "labels": {POD_GROUP_LABEL: group}}})
    needed = max(min_member - len(bound), 1)
    bound_uids = {(p.get("metadata") or {}).get("uid") for p in bound}
    req = pod_info.requests
    priority = pod_info.priority
    room = 0
    for node in handle.snapshot().list():
        if node.node is None:
            continue
        # Lower-priority pods could go; the gang's own members (waiting at Permit) count
        # as room too, as they are counted in ``needed``.
        lower = [p for p in node.pods if p.priority < priority or (
            p.namespace == pod_info.namespace and p.labels.get(POD_GROUP_LABEL) == group
            and p.uid not in bound_uids)]
        used_cpu = node.requested.milli_cpu - sum(p.requests.milli_cpu for p in lower)
        used_mem = node.requested.memory - sum(p.requests.memory for p in lower)
        fits = node.allocatable.allowed_pod_number - (len(node.pods) - len(lower))
        if req.milli_cpu > 0:
            fits = min(fits, max(node.allocatable.milli_cpu - used_cpu, 0) // req.milli_cpu)
        if req.memory > 0:
            fits = min(fits, max(node.allocatable.memory - used_mem, 0) // req.memory)
        room += max(fits, 0)
        if room >= needed:
            break
    return needed, room


# Cycle-state key under which Coscheduling's PreFilter leaves a RequiredGangTopology.
GANG_TOPOLOGY_STATE_KEY = "Coscheduling/required-topology"


@dataclass(frozen=True, slots=True)
class RequiredGangTopology:
    """What Coscheduling's PreFilter tells preemption about a gang whose PodGroup requires
    one topology domain: the node label key, the domains the gang may use (value -> node
    names: every domain, or only the one its placed members hold, or the one PreFilter
    chose), and ``rejected`` when none fits the members as the cluster is (PreFilter turned
    the pod down, so Filter never ran).  Preemption then plans within one domain."""

    key: str
    domains: Mapping[str, frozenset[str]]
    rejected: bool

    def clone(self) -> RequiredGangTopology:
        return self  # immutable


# DRAExtendedResource: one class-by-resource cache per set of listers, shared by the plugins
# that read it (NodeResourcesFit's skip, DynamicResources' special claim)
_CLASS_CACHES: weakref.WeakKeyDictionary[Any, tuple[ClassCache, bool]] = (
    weakref.WeakKeyDictionary())


def device_class_cache(listers: ObjectLister) -> ClassCache:
    """The extended resources DeviceClasses back, kept from the DeviceClass informer's events
    (subscribed on first use) or, for listers without events, from a listing."""
    try:
        entry = _CLASS_CACHES.get(listers)
    except TypeError:  # listers that cannot be weakly referenced: no sharing
        entry = None
    if entry is None:
        cache, watching = ClassCache(), False
        if isinstance(listers, ObjectWatcher):
            try:
                listers.watch("deviceclasses", on_add=cache.class_added,
                              on_update=cache.class_updated, on_delete=cache.class_deleted)
                watching = True
            except KeyError:  # no informer (an API without resource.k8s.io)
                pass
        entry = (cache, watching)
        try:
            _CLASS_CACHES[listers] = entry
        except TypeError:
            pass
    cache, watching = entry
    if not watching:
        try:
            cache.replace(listers.list("deviceclasses"))
        except KeyError:
            cache.replace([])
    return cache
