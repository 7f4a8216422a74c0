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
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from scheduler.config.errors import ConfigError
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
from scheduler.objects.errors import ObjectError
from scheduler.objects.labels import LabelSelectorError, validate_label_key
from scheduler.objects.pod import PodInfo
from scheduler.plugins import names
from scheduler.plugins.helper import args_error, normalize_with_values
from scheduler.plugins.node_memo import NodeMemo
from scheduler.plugins.podtopologyspread.domains import DomainCounts
from scheduler.plugins.podtopologyspread.common import (
    DO_NOT_SCHEDULE,
    HONOR,
    LABEL_HOSTNAME,
    SCHEDULE_ANYWAY,
    SYSTEM_DEFAULT_CONSTRAINTS,
    Constraint,
    NodeInclusion,
    count_pods_match_selector,
    default_selector,
    filter_constraints,
    node_has_all_keys,
    node_labels,
)

NAME = names.POD_TOPOLOGY_SPREAD

PRE_FILTER_STATE_KEY = "PreFilter" + NAME
PRE_SCORE_STATE_KEY = "PreScore" + NAME

ERR_REASON_CONSTRAINTS_NOT_MATCH = "node(s) didn't match pod topology spread constraints"
ERR_REASON_NODE_LABEL_NOT_MATCH = ERR_REASON_CONSTRAINTS_NOT_MATCH + " (missing required label)"

SYSTEM_DEFAULTING = "System"
LIST_DEFAULTING = "List"

_MAX_INT32 = 2**31 - 1
_ARGS_FIELDS = frozenset({"defaultConstraints", "defaultingType", "apiVersion", "kind"})
_NO_FIELDS: Mapping[str, Any] = {}


class CriticalPaths:
    """The two domains with the fewest matching pods, for one constraint.

    ``paths[0]`` always holds the minimum; ``paths[1]`` is >= it but, after incremental
    updates, not necessarily the second smallest.  That is enough because preemption only
    updates one node (one domain per constraint) on each cloned state.
    """

    __slots__ = ("values", "nums")

    def __init__(self) -> None:
        self.values = ["", ""]
        self.nums = [_MAX_INT32, _MAX_INT32]

    def update(self, value: str, num: int) -> None:
        values, nums = self.values, self.nums
        if value == values[0]:
            i = 0
        elif value == values[1]:
            i = 1
        else:
            i = -1
        if i >= 0:
            nums[i] = num
            if nums[0] > nums[1]:
                values.reverse()
                nums.reverse()
        elif num < nums[0]:
            values[1], nums[1] = values[0], nums[0]
            values[0], nums[0] = value, num
        elif num < nums[1]:
            values[1], nums[1] = value, num

    def clone(self) -> CriticalPaths:
        copy = CriticalPaths()
        copy.values = list(self.values)
        copy.nums = list(self.nums)
        return copy

    def __repr__(self) -> str:
        return f"CriticalPaths({list(zip(self.values, self.nums))!r})"


# Distinct (selector, namespace, topology key) tables kept at once; oldest dropped first.
MAX_DOMAIN_TABLES = 64


class PreFilterState:
    """Per-constraint match counts by domain value, critical paths and domain counts."""

    __slots__ = ("constraints", "counts", "critical_paths", "domains", "inclusion", "namespace")

    def __init__(
        self,
        constraints: list[Constraint],
        counts: list[dict[str, int]],
        critical_paths: list[CriticalPaths],
        domains: list[int],
        inclusion: NodeInclusion | None,
        namespace: str,
    ) -> None:
        self.constraints = constraints
        self.counts = counts
        self.critical_paths = critical_paths
        # Number of eligible domains per constraint; add/remove_pod do not change it.
        self.domains = domains
        self.inclusion = inclusion
        self.namespace = namespace

    def min_match_num(self, i: int) -> int:
        """The global minimum for constraint ``i``, 0 while there are fewer than minDomains."""
        if self.domains[i] < self.constraints[i].min_domains:
            return 0
        return self.critical_paths[i].nums[0]

    def clone(self) -> PreFilterState:
        return PreFilterState(
            self.constraints,
            [dict(c) for c in self.counts],
            [p.clone() for p in self.critical_paths],
            self.domains,
            self.inclusion,
            self.namespace,
        )


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


class PodTopologySpread(
    PreFilterPlugin, FilterPlugin, PreScorePlugin, ScorePlugin, EnqueueExtensions
):
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

    def _counter(self, c: Constraint, namespace: str) -> Callable[[NodeInfo], int]:
        """Counts matching pods on a node, memoized by the NodeInfo generation."""
        table = self._counts.table((c.selector, namespace))
        selector = c.selector

        def count(node_info: NodeInfo) -> int:
            name = node_info.name
            entry = table.get(name)
            if entry is not None and entry[0] == node_info.generation:
                return entry[1]
            found = count_pods_match_selector(node_info.pods, selector, namespace)
            table[name] = (node_info.generation, found)
            return found

        return count

    # --- constraints --------------------------------------------------------------------------

    def constraints_for(self, pod: Mapping[str, Any], action: str) -> list[Constraint]:
        """The pod's constraints for ``action``, or the defaults when it has none.

        Raises ObjectError naming the pod and the field when a constraint is malformed.
        """
        meta = pod.get("metadata") or _NO_FIELDS
        labels: Mapping[str, str] = meta.get("labels") or {}
        spec = pod.get("spec") or _NO_FIELDS
        own = spec.get("topologySpreadConstraints")
        try:
            if own:
                if not isinstance(own, list):
                    raise LabelSelectorError("spec.topologySpreadConstraints: expected a list")
                return filter_constraints(own, labels, action)
            if not self.default_constraints:
                return []
            constraints = filter_constraints(
                self.default_constraints, labels, action, where="defaultConstraints"
            )
        except LabelSelectorError as exc:
            field, _, detail = str(exc).partition(": ")
            raise ObjectError.for_object(pod, field, detail or str(exc), kind="Pod") from None
        if not constraints:
            return []
        selector = default_selector(pod, self._handle.listers)
        if selector.is_empty():
            return []
        return [
            Constraint(
                max_skew=c.max_skew,
                topology_key=c.topology_key,
                selector=selector,
                min_domains=c.min_domains,
                node_affinity_policy=c.node_affinity_policy,
                node_taints_policy=c.node_taints_policy,
            )
            for c in constraints
        ]

    # --- PreFilter ----------------------------------------------------------------------------

    def pre_filter(
        self, state: CycleState, pod_info: PodInfo, nodes: list[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status | None]:
        try:
            constraints = self.constraints_for(pod_info.pod, DO_NOT_SCHEDULE)
        except ObjectError as exc:
            return None, Status.from_error(exc, plugin=NAME)
        if not constraints:
            state.write(
                PRE_FILTER_STATE_KEY, PreFilterState([], [], [], [], None, pod_info.namespace)
            )
            return None, Status(Code.SKIP)
        inclusion = NodeInclusion(pod_info.required_node_affinity, pod_info.tolerations)
        namespace = pod_info.namespace
        if self._eligibility_is_pod_independent(constraints, pod_info):
            counts = self._incremental_counts(constraints, namespace)
        else:
            counts = self._fresh_counts(constraints, namespace, inclusion)
        paths: list[CriticalPaths] = []
        for i in range(len(constraints)):
            p = CriticalPaths()
            for value, num in counts[i].items():
                p.update(value, num)
            paths.append(p)
        state.write(
            PRE_FILTER_STATE_KEY,
            PreFilterState(
                constraints, counts, paths, [len(c) for c in counts], inclusion, namespace
            ),
        )
        return None, None

    @staticmethod
    def _eligibility_is_pod_independent(
        constraints: list[Constraint], pod_info: PodInfo
    ) -> bool:
        """True when no constraint's node policies consult the incoming pod."""
        affinity_free = pod_info.required_node_affinity.is_empty()
        return all(
            (c.node_affinity_policy != HONOR or affinity_free) and c.node_taints_policy != HONOR
            for c in constraints
        )

    def _incremental_counts(
        self, constraints: list[Constraint], namespace: str
    ) -> list[dict[str, int]]:
        nodes = self._handle.snapshot().list()
        keys = tuple(c.topology_key for c in constraints)
        counts: list[dict[str, int]] = []
        for c in constraints:
            domain_key = (c.selector, namespace, c.topology_key, keys)
            domains = self._domains.get(domain_key)
            if domains is None:
                domains = self._domains[domain_key] = DomainCounts()
                if len(self._domains) > MAX_DOMAIN_TABLES:
                    self._domains.pop(next(iter(self._domains)))
            current = domains.refresh(
                nodes, topology_key=c.topology_key, required_keys=keys,
                count=self._counter(c, namespace),
            )
            # A copy: preemption's add/remove extensions change the counts in the state.
            counts.append(dict(current))
        return counts

    def _fresh_counts(
        self, constraints: list[Constraint], namespace: str, inclusion: NodeInclusion
    ) -> list[dict[str, int]]:
        counts: list[dict[str, int]] = [{} for _ in constraints]
        indexed = [(i, c, self._counter(c, namespace)) for i, c in enumerate(constraints)]
        for node_info in self._handle.snapshot().list():
            node = node_info.node
            if node is None:
                continue
            labels = node_labels(node)
            if not node_has_all_keys(labels, constraints):
                continue
            for i, c, count in indexed:
                if not inclusion.matches(c, node):
                    continue
                value = labels[c.topology_key]
                found = count(node_info)
                domain_counts = counts[i]
                domain_counts[value] = domain_counts.get(value, 0) + found
        return counts

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
        node = node_info.node
        if not s.constraints or node is None or pod.namespace != s.namespace:
            return None
        labels = node_labels(node)
        if not node_has_all_keys(labels, s.constraints):
            return None
        for i, c in enumerate(s.constraints):
            if not c.selector.matches(pod.labels):
                continue
            if s.inclusion is not None and not s.inclusion.matches(c, node):
                continue
            value = labels[c.topology_key]
            num = s.counts[i].get(value, 0) + delta
            s.counts[i][value] = num
            s.critical_paths[i].update(value, num)
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
        pod_labels = pod_info.labels
        # Per constraint, everything but the node's own domain is the same for every node.
        checks = [
            (c.topology_key, s.counts[i],
             (1 if c.selector.matches(pod_labels) else 0) - s.min_match_num(i), c.max_skew)
            for i, c in enumerate(s.constraints)
        ]
        out: list[Status | None] = []
        for node_info in nodes:
            node = node_info.node
            if node is None:
                out.append(Status(Code.ERROR, "node not found"))
                continue
            status: Status | None = None
            if checks:
                labels = node_labels(node)
                for key, counts, offset, max_skew in checks:
                    value = labels.get(key)
                    if value is None:
                        status = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                                        ERR_REASON_NODE_LABEL_NOT_MATCH)
                        break
                    if counts.get(value, 0) + offset > max_skew:
                        status = Status(Code.UNSCHEDULABLE, ERR_REASON_CONSTRAINTS_NOT_MATCH)
                        break
            out.append(status)
        return out

    # --- PreScore / Score ---------------------------------------------------------------------

    def pre_score(
        self, state: CycleState, pod_info: PodInfo, nodes: list[NodeInfo]
    ) -> Status | None:
        all_nodes = self._handle.snapshot().list()
        if not nodes or not all_nodes:
            return Status(Code.SKIP)
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
            return Status(Code.SKIP)

        ignored: set[str] = set()
        counts: list[dict[str, int]] = [{} for _ in constraints]
        sizes = [0] * len(constraints)
        for node_info in nodes:
            node = node_info.node
            if node is None:
                continue
            labels = node_labels(node)
            if require_all and not node_has_all_keys(labels, constraints):
                ignored.add(node_info.name)
                continue
            for i, c in enumerate(constraints):
                if c.topology_key == LABEL_HOSTNAME:
                    continue  # per-node counts are taken in Score
                value = labels.get(c.topology_key, "")
                if value not in counts[i]:
                    counts[i][value] = 0
                    sizes[i] += 1
        weights = []
        for i, c in enumerate(constraints):
            size = sizes[i]
            if c.topology_key == LABEL_HOSTNAME:
                size = len(nodes) - len(ignored)
            weights.append(topology_normalizing_weight(size))

        inclusion = NodeInclusion(pod_info.required_node_affinity, pod_info.tolerations)
        namespace = pod_info.namespace
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

    def score(
        self, state: CycleState, pod_info: PodInfo, node_info: NodeInfo
    ) -> tuple[int, Status | None]:
        s = state.get(PRE_SCORE_STATE_KEY)
        if not isinstance(s, PreScoreState):
            return 0, Status(
                Code.ERROR, f"reading {PRE_SCORE_STATE_KEY!r} from cycleState: not found"
            )
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
        s = state.get(PRE_SCORE_STATE_KEY)
        if not isinstance(s, PreScoreState):
            return [], Status(
                Code.ERROR, f"reading {PRE_SCORE_STATE_KEY!r} from cycleState: not found"
            )
        per_constraint = [
            (
                c.topology_key,
                self._counter(c, pod_info.namespace) if c.topology_key == LABEL_HOSTNAME
                else None,
                s.counts[i],
                c.max_skew,
                s.weights[i],
            )
            for i, c in enumerate(s.constraints)
        ]
        ignored = s.ignored_nodes
        out: list[int] = []
        for node_info in nodes:
            if node_info.name in ignored:
                out.append(0)
                continue
            labels = node_labels(node_info.node)
            total = 0.0
            for key, counter, counts, max_skew, weight in per_constraint:
                value = labels.get(key)
                if value is None:
                    continue
                count = counter(node_info) if counter is not None else counts.get(value, 0)
                total += score_for_count(count, max_skew, weight)
            out.append(int(math.floor(total + 0.5)))
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
        s = state.get(PRE_SCORE_STATE_KEY)
        if not isinstance(s, PreScoreState):
            return values, Status(
                Code.ERROR, f"reading {PRE_SCORE_STATE_KEY!r} from cycleState: not found"
            )
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


__all__ = [
    "NAME",
    "PodTopologySpread",
    "CriticalPaths",
    "PreFilterState",
    "PreScoreState",
    "ERR_REASON_CONSTRAINTS_NOT_MATCH",
    "ERR_REASON_NODE_LABEL_NOT_MATCH",
]
