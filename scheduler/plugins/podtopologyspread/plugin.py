"""PodTopologySpread: spread matching pods evenly over topology domains.

Filter enforces the pod's ``DoNotSchedule`` constraints: placing the pod in the node's domain
must keep ``matching pods there + 1 (if the pod matches itself) - global minimum <= maxSkew``,
where the global minimum is taken over the eligible domains (nodes that carry every topology
key and pass nodeAffinityPolicy / nodeTaintsPolicy), and counts as 0 while fewer than
``minDomains`` domains exist.  PreFilter counts matching pods per domain once and keeps, per
constraint, the two smallest domains ("critical paths"), so Filter is O(constraints) per node
and preemption can update the counts as it adds or removes pods.

Score handles ``ScheduleAnyway`` constraints (and the system default constraints for pods owned
by a Service or a controller): a node scores the matching pods in its domains, weighted by
log(number of domains + 2) so small topologies are not drowned by big ones; NormalizeScore
turns "fewer is better" into [0, 100].

The plugin is split as upstream's (plugin.go / filtering.go / scoring.go): this module has
the args and the cluster events, ``filtering`` PreFilter/Filter and the PreFilter
extensions, ``scoring`` PreScore/Score; ``common`` the constraints and the shared state.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scheduler.config.errors import ConfigError
from scheduler.framework.events import (
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    EventResource,
    QueueingHint,
)
from scheduler.framework.interfaces import (
    EnqueueExtensions,
    Handle,
)
from scheduler.objects.labels import validate_label_key
from scheduler.plugins.helper import args_error
from scheduler.plugins.node_memo import NodeMemo
from scheduler.plugins.podtopologyspread.domains import DomainCounts
from scheduler.plugins.podtopologyspread.common import (
    DO_NOT_SCHEDULE,
    HONOR,
    SCHEDULE_ANYWAY,
    SYSTEM_DEFAULT_CONSTRAINTS,
    Constraint,
    node_has_all_keys,
    node_labels,
    OwnKey,
)
from scheduler.plugins.podtopologyspread.common import NAME
from scheduler.plugins.podtopologyspread.filtering import Filtering
from scheduler.plugins.podtopologyspread.scoring import Scoring
from scheduler.plugins.podtopologyspread.selectors import DefaultSelectors

SYSTEM_DEFAULTING = "System"
LIST_DEFAULTING = "List"

_ARGS_FIELDS = frozenset({"defaultConstraints", "defaultingType", "apiVersion", "kind"})
_NO_FIELDS: Mapping[str, Any] = {}


def _validate_default_constraints(raw: Any) -> list[Mapping[str, Any]]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise args_error(NAME, "defaultConstraints", "must be a list")
    problems: list[tuple[str, str]] = []
    seen: set[tuple[str, str]] = set()
    for i, c in enumerate(raw):
        p = f"defaultConstraints[{i}]"
        if not isinstance(c, Mapping):
            problems.append((p, "must be an object"))
            continue
        skew = c.get("maxSkew")
        if not isinstance(skew, int) or isinstance(skew, bool) or skew <= 0:
            problems.append((f"{p}.maxSkew", f"Invalid value: {skew!r}: not in valid range (0, inf)"))
        key = c.get("topologyKey")
        if not key:
            problems.append((f"{p}.topologyKey", "Required value: can not be empty"))
        else:
            err = validate_label_key(key) if isinstance(key, str) else "must be a string"
            if err:
                problems.append((f"{p}.topologyKey", f"Invalid value: {key!r}: {err}"))
        action = c.get("whenUnsatisfiable")
        if not action:
            problems.append((f"{p}.whenUnsatisfiable", "Required value: can not be empty"))
        elif action not in (DO_NOT_SCHEDULE, SCHEDULE_ANYWAY):
            problems.append(
                (
                    f"{p}.whenUnsatisfiable",
                    f'Unsupported value: {action!r}: supported values: "{DO_NOT_SCHEDULE}", '
                    f'"{SCHEDULE_ANYWAY}"',
                )
            )
        if c.get("labelSelector") is not None:
            problems.append(
                (
                    f"{p}.labelSelector",
                    "Forbidden: constraint must not define a selector, as they deduced for "
                    "each pod",
                )
            )
        pair = (str(key), str(action))
        if pair in seen:
            problems.append((f"defaultConstraints[{i}]", f"Duplicate value: \"{{{key}, {action}}}\""))
        seen.add(pair)
    if problems:
        raise ConfigError("", [(f"{NAME}.args.{f}", m) for f, m in problems])
    return list(raw)


def _parse_args(args: Mapping[str, Any] | None) -> tuple[list[Mapping[str, Any]], str]:
    if args is None:
        args = {}
    if not isinstance(args, Mapping):
        raise args_error(NAME, "", f"must be an object, got {type(args).__name__}")
    for key in args:
        if key not in _ARGS_FIELDS:
            raise args_error(NAME, str(key), "unknown field")
    constraints = _validate_default_constraints(args.get("defaultConstraints"))
    defaulting = args.get("defaultingType") or (LIST_DEFAULTING if constraints else SYSTEM_DEFAULTING)
    if defaulting not in (SYSTEM_DEFAULTING, LIST_DEFAULTING):
        raise args_error(
            NAME,
            "defaultingType",
            f'Unsupported value: {defaulting!r}: supported values: "{SYSTEM_DEFAULTING}", '
            f'"{LIST_DEFAULTING}"',
        )
    if defaulting == SYSTEM_DEFAULTING and constraints:
        raise args_error(
            NAME, "defaultingType", f"Invalid value: {defaulting!r}: when .defaultConstraints are "
            "not empty"
        )
    return constraints, defaulting


class PodTopologySpread(Filtering, Scoring, EnqueueExtensions):
    NAME = NAME

    def __init__(self, args: Mapping[str, Any] | None, handle: Handle) -> None:
        constraints, defaulting = _parse_args(args)
        self.defaulting_type = defaulting
        self.system_defaulted = defaulting == SYSTEM_DEFAULTING
        self.default_constraints: tuple[Mapping[str, Any], ...] = (
            SYSTEM_DEFAULT_CONSTRAINTS if self.system_defaulted else tuple(constraints)
        )
        self._handle = handle
        # Matching-pod counts per node, reused across cycles while a node is unchanged.
        self._counts: NodeMemo[int] = NodeMemo()
        # Per-domain sums kept incrementally, per (selector, namespace, key, required keys).
        self._domains: dict[tuple[Any, ...], DomainCounts] = {}
        self._domains_by_id: dict[
            tuple[int, str, tuple[str, ...]], tuple[Constraint, DomainCounts]] = {}
        self._compiled_defaults: dict[str, list[Constraint]] = {}
        self._default_selectors = DefaultSelectors(handle.listers)
        self._last_own: tuple[list[Any], Any, OwnKey] | None = None
        self._columns: dict[str, Any] = {}

    # --- events -------------------------------------------------------------------------------

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            # Assigned pods coming, going or relabelled change the counts per domain.
            ClusterEventWithHint(
                ClusterEvent(
                    EventResource.POD,
                    ActionType.ADD | ActionType.UPDATE_POD_LABEL | ActionType.DELETE,
                    "Pod/Add|UpdatePodLabel|Delete",
                ),
                self.is_schedulable_after_pod_change,
            ),
            # Nodes change the set of domains (and, with nodeTaintsPolicy Honor, taints do).
            ClusterEventWithHint(
                ClusterEvent(
                    EventResource.NODE,
                    ActionType.ADD
                    | ActionType.DELETE
                    | ActionType.UPDATE_NODE_LABEL
                    | ActionType.UPDATE_NODE_TAINT,
                    "Node/Add|Delete|UpdateNodeLabel|UpdateNodeTaint",
                ),
                self.is_schedulable_after_node_change,
            ),
            # The waiting pod's own tolerations decide which domains count under Honor.
            ClusterEventWithHint(
                ClusterEvent(
                    EventResource.UNSCHEDULED_POD,
                    ActionType.UPDATE_POD_TOLERATION,
                    "UnscheduledPod/UpdatePodToleration",
                ),
                self.is_schedulable_after_own_toleration_change,
            ),
        ]

    def is_schedulable_after_pod_change(
        self, pod: dict[str, Any], old: Any, new: Any
    ) -> QueueingHint:
        original = _as_dict(old, "Pod") if old is not None else None
        modified = _as_dict(new, "Pod") if new is not None else None
        for changed in (original, modified):
            if changed is not None and not _involved(changed, pod):
                return QueueingHint.SKIP
        constraints = self.constraints_for(pod, DO_NOT_SCHEDULE)
        if original is not None and modified is not None:
            old_labels, new_labels = _labels(original), _labels(modified)
            if old_labels == new_labels:
                return QueueingHint.SKIP
            for c in constraints:
                if c.selector.matches(old_labels) != c.selector.matches(new_labels):
                    return QueueingHint.QUEUE
            return QueueingHint.SKIP
        changed = modified if modified is not None else original
        assert changed is not None
        labels = _labels(changed)
        if any(c.selector.matches(labels) for c in constraints):
            return QueueingHint.QUEUE
        return QueueingHint.SKIP

    def is_schedulable_after_node_change(
        self, pod: dict[str, Any], old: Any, new: Any
    ) -> QueueingHint:
        original = _as_dict(old, "Node") if old is not None else None
        modified = _as_dict(new, "Node") if new is not None else None
        constraints = self.constraints_for(pod, DO_NOT_SCHEDULE)
        original_matching = original is not None and node_has_all_keys(
            node_labels(original), constraints
        )
        modified_matching = modified is not None and node_has_all_keys(
            node_labels(modified), constraints
        )
        if original is not None and modified is not None:
            if original_matching != modified_matching:
                return QueueingHint.QUEUE
            if modified_matching:
                old_labels, new_labels = node_labels(original), node_labels(modified)
                if any(
                    old_labels.get(c.topology_key) != new_labels.get(c.topology_key)
                    for c in constraints
                ):
                    return QueueingHint.QUEUE
                if _taints_of(original) != _taints_of(modified):
                    return QueueingHint.QUEUE
            return QueueingHint.SKIP
        if modified is not None:
            return QueueingHint.QUEUE if modified_matching else QueueingHint.SKIP
        return QueueingHint.QUEUE if original_matching else QueueingHint.SKIP

    def is_schedulable_after_own_toleration_change(
        self, pod: dict[str, Any], old: Any, new: Any
    ) -> QueueingHint:
        modified = _as_dict(new, "Pod")
        if _uid(modified) != _uid(pod):
            return QueueingHint.SKIP
        constraints = self.constraints_for(modified, DO_NOT_SCHEDULE)
        if any(c.node_taints_policy == HONOR for c in constraints):
            return QueueingHint.QUEUE
        return QueueingHint.SKIP


def _as_dict(obj: Any, what: str) -> dict[str, Any]:
    if not isinstance(obj, dict):
        raise TypeError(f"{NAME}: expected a {what} object, got {type(obj).__name__}")
    return obj


def _labels(obj: Mapping[str, Any]) -> Mapping[str, str]:
    labels = (obj.get("metadata") or _NO_FIELDS).get("labels")
    return labels if labels else {}


def _uid(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or _NO_FIELDS).get("uid") or "")


def _taints_of(node: Mapping[str, Any]) -> Any:
    return (node.get("spec") or _NO_FIELDS).get("taints") or []


def _involved(changed: Mapping[str, Any], waiting: Mapping[str, Any]) -> bool:
    """The changed pod is the waiting pod itself, or an assigned pod in its namespace."""
    if _uid(changed) and _uid(changed) == _uid(waiting):
        return True
    node_name = (changed.get("spec") or _NO_FIELDS).get("nodeName")
    changed_ns = (changed.get("metadata") or _NO_FIELDS).get("namespace") or ""
    waiting_ns = (waiting.get("metadata") or _NO_FIELDS).get("namespace") or ""
    return bool(node_name) and changed_ns == waiting_ns


__all__ = ["NAME", "PodTopologySpread"]
