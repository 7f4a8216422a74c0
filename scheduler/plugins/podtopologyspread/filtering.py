"""PodTopologySpread's PreFilter and Filter: count the pods matching each ``DoNotSchedule``
constraint per domain once, keep per constraint the two smallest domains ("critical paths"),
so Filter is O(constraints) per node; adding and removing pods (preemption, nominated pods)
updates the counts in place.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import TYPE_CHECKING

from scheduler.framework.batching_kept import wrapped_slice
from scheduler.framework.cycle_state import CycleState, missing_state_for_nodes, read_state
from scheduler.framework.interfaces import (
    FilterPlugin,
    PreFilterPlugin,
)
from scheduler.framework.node_info import NodeInfo
from scheduler.framework.status import SKIP, Code, Status
from scheduler.framework.types import PreFilterResult
from scheduler.objects.errors import ObjectError
from scheduler.objects.pod import PodInfo
from scheduler.plugins.podtopologyspread.domains import KeptDomains
from scheduler.plugins.podtopologyspread.common import (
    DO_NOT_SCHEDULE,
    Constraint,
    NodeInclusion,
    _NO_FIELDS,
    _NO_LABELS,
    node_has_all_keys,
    node_labels,
)
from scheduler.plugins.helper import PodDeltaExtensions
from scheduler.plugins.podtopologyspread.common import NAME

if TYPE_CHECKING:
    from scheduler.framework.batching_kept import Snapshot as BatchSnapshot

PRE_FILTER_STATE_KEY = "PreFilter" + NAME

ERR_REASON_CONSTRAINTS_NOT_MATCH = "node(s) didn't match pod topology spread constraints"
ERR_REASON_NODE_LABEL_NOT_MATCH = ERR_REASON_CONSTRAINTS_NOT_MATCH + " (missing required label)"

_MAX_INT32 = 2**31 - 1

# Domains per constraint up to which Filter signs pods for opportunistic batching.
MAX_SIGNED_DOMAINS = 64

_NO_DOMAINS: frozenset[str] = frozenset()


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


class PreFilterState:
    """Per-constraint match counts by domain value, critical paths and domain counts.

    The critical paths are built from the counts when first asked (preemption and
    nominated pods ask, through ``update_with_pod``): a cycle that only filters needs the
    global minimum, which is ``min`` of the counts.  Built lazily from the same counts in the
    same order, they are the paths an eager build at PreFilter would have made.
    """

    __slots__ = ("constraints", "counts", "_paths", "_mins", "_checks", "domains", "inclusion",
                 "namespace", "self_match", "unmasked")

    def __init__(
        self,
        constraints: list[Constraint],
        counts: list[dict[str, int]],
        critical_paths: list[CriticalPaths] | None,
        domains: list[int],
        inclusion: NodeInclusion | None,
        namespace: str,
    ) -> None:
        self.constraints = constraints
        self.counts = counts
        self._paths = critical_paths
        # Per constraint, the smallest count (while the paths are not built).
        self._mins: list[int] | None = None
        # Filter's per-constraint checks for this state (see ``checks``); dropped whenever
        # the counts change.
        self._checks: list[tuple[str, dict[str, int], int, int, frozenset[str] | None,
                                 bool]] | None = None
        # Number of eligible domains per constraint; add/remove_pod do not change it.
        self.domains = domains
        self.inclusion = inclusion
        self.namespace = namespace
        # Per constraint, 1 when its selector matches the incoming pod (set by the first
        # Filter call: the walk filters in several chunks, the answer does not change).
        self.self_match: list[int] | None = None
        # While True, Filter rejects no domain for its skew, only nodes missing a key
        # (``DomainMask``: batching keeps those statuses and applies the skew on top).
        self.unmasked = False

    @property
    def critical_paths(self) -> list[CriticalPaths]:
        paths = self._paths
        if paths is None:
            paths = []
            for counts in self.counts:
                p = CriticalPaths()
                for value, num in counts.items():
                    p.update(value, num)
                paths.append(p)
            self._paths = paths
        return paths

    def min_match_num(self, i: int) -> int:
        """The global minimum for constraint ``i``, 0 while there are fewer than minDomains."""
        if self.domains[i] < self.constraints[i].min_domains:
            return 0
        if self._paths is not None:
            return self._paths[i].nums[0]
        mins = self._mins
        if mins is None:
            mins = self._mins = [min(c.values()) if c else _MAX_INT32 for c in self.counts]
        return mins[i]

    def update(self, i: int, value: str, delta: int) -> None:
        """Add ``delta`` matching pods to domain ``value`` of constraint ``i``."""
        paths = self.critical_paths
        counts = self.counts[i]
        num = counts.get(value, 0) + delta
        counts[value] = num
        paths[i].update(value, num)
        self._checks = None

    def self_matches(self, pod_info: PodInfo) -> list[int]:
        self_match = self.self_match
        if self_match is None:
            pod_labels = pod_info.labels
            self_match = self.self_match = [
                1 if c.selector.matches(pod_labels) else 0 for c in self.constraints]
        return self_match

    def checks(self, pod_info: PodInfo) -> list[tuple[str, dict[str, int], int, int,
                                                     frozenset[str] | None, bool]]:
        """Per constraint, what Filter compares a node's domain with: (topology key, counts,
        the offset ``self match - global minimum``, maxSkew, the domains over the skew
        (None past ``MAX_SIGNED_DOMAINS`` domains: the node's count is compared), whether a
        domain with no matching pod is over the skew).  Everything but the node's own
        domain is the same for every node of the cycle."""
        checks = self._checks
        if checks is None:
            self_match = self.self_matches(pod_info)
            checks = []
            for i, c in enumerate(self.constraints):
                counts = self.counts[i]
                offset = self_match[i] - self.min_match_num(i)
                limit = c.max_skew - offset  # a domain is over the skew above this count
                over = (frozenset([value for value, num in counts.items() if num > limit])
                        if len(counts) <= MAX_SIGNED_DOMAINS else None)
                checks.append((c.topology_key, counts, offset, c.max_skew, over, 0 > limit))
            self._checks = checks
        return checks

    def base_checks(self, pod_info: PodInfo) -> list[tuple[str, dict[str, int], int, int,
                                                          frozenset[str] | None, bool]]:
        """``checks`` with no domain over the skew (signed constraints only): a node is
        rejected only for a missing key."""
        return [(key, counts, offset, max_skew, _NO_DOMAINS, False)
                for key, counts, offset, max_skew, _, _ in self.checks(pod_info)]

    def clone(self) -> PreFilterState:
        copy = PreFilterState(
            self.constraints,
            [dict(c) for c in self.counts],
            None if self._paths is None else [p.clone() for p in self._paths],
            self.domains,
            self.inclusion,
            self.namespace,
        )
        copy._mins = self._mins
        copy.self_match = self.self_match
        return copy


class Filtering(KeptDomains, PodDeltaExtensions, PreFilterPlugin, FilterPlugin):
    """PreFilter, the PreFilter extensions and Filter of PodTopologySpread."""

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
            return None, SKIP
        inclusion = NodeInclusion(pod_info.required_node_affinity, pod_info.tolerations)
        namespace = pod_info.namespace
        if self._eligibility_is_pod_independent(constraints, pod_info):
            counts = self._incremental_counts(constraints, namespace)
        else:
            counts = self._fresh_counts(constraints, namespace, inclusion)
        state.write(
            PRE_FILTER_STATE_KEY,
            PreFilterState(
                constraints, counts, None, [len(c) for c in counts], inclusion, namespace
            ),
        )
        return None, None

    def _incremental_counts(
        self, constraints: list[Constraint], namespace: str
    ) -> list[dict[str, int]]:
        snapshot = self._handle.snapshot()
        nodes = snapshot.list()
        keys = tuple(c.topology_key for c in constraints)
        counts: list[dict[str, int]] = []
        for c in constraints:
            domains = self._domain_counts(c, namespace, keys)
            current = domains.refresh(
                nodes, topology_key=c.topology_key, required_keys=keys,
                count=domains.count, snapshot=snapshot,
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

    def update_with_pod(
        self, state: CycleState, pod: PodInfo, node_info: NodeInfo, delta: int
    ) -> Status | None:
        s = read_state(state, PRE_FILTER_STATE_KEY, PreFilterState)
        if isinstance(s, Status):
            return s
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
            s.update(i, labels[c.topology_key], delta)
        return None

    # --- opportunistic batching ---------------------------------------------------------------

    def sign_filter(self, state: CycleState, pod_info: PodInfo) -> Hashable | None:
        """The Filter signature (framework/batching.py): a node's status is a function of its
        labels and, per constraint, of which domains are over the skew for this pod, so
        the signature is those domains (and whether a domain with no matching pod is).
        Pods whose spread leaves the same domains open reuse each other's statuses on
        every unchanged node.  Not signed past ``MAX_SIGNED_DOMAINS`` domains (hostname
        spreading: the set changes with nearly every pod and costs a walk of them all)."""
        s = state.get(PRE_FILTER_STATE_KEY)
        if not isinstance(s, PreFilterState) or not s.constraints:
            return None
        if any(len(counts) > MAX_SIGNED_DOMAINS for counts in s.counts):
            return None
        return tuple((key, over, zero_over)
                     for key, _, _, _, over, zero_over in s.checks(pod_info))

    def filter_mask(self, state: CycleState, pod_info: PodInfo) -> DomainMask | None:
        """The domains this pod's skew rejects, as a mask batching applies on top of the
        statuses kept for the signature with none rejected (``DomainMask``); None when no
        domain is over the skew (the signature is that one already), when the pod is not
        signed, or when a domain with no matching pod is over (its answer depends on which
        domains the counts hold)."""
        s = state.get(PRE_FILTER_STATE_KEY)
        if not isinstance(s, PreFilterState) or not s.constraints:
            return None
        if any(len(counts) > MAX_SIGNED_DOMAINS for counts in s.counts):
            return None
        checks = s.checks(pod_info)
        if len(checks) != 1:
            return None
        key, _, _, _, over, zero_over = checks[0]
        if zero_over or not over:
            return None
        column = self._columns.get(key)
        if column is None:
            column = self._columns[key] = DomainColumn(key)
        return DomainMask(key=((key, over, zero_over),), base=((key, _NO_DOMAINS, False),),
                          over=over, column=column)

    # --- Filter -------------------------------------------------------------------------------

    def filter(self, state: CycleState, pod_info: PodInfo, node_info: NodeInfo) -> Status | None:
        return self.filter_nodes(state, pod_info, [node_info])[0]

    def filter_nodes(
        self, state: CycleState, pod_info: PodInfo, nodes: list[NodeInfo]
    ) -> list[Status | None]:
        s = state.get(PRE_FILTER_STATE_KEY)
        if not isinstance(s, PreFilterState):
            return missing_state_for_nodes(PRE_FILTER_STATE_KEY, nodes)
        checks = s.base_checks(pod_info) if s.unmasked else s.checks(pod_info)
        out: list[Status | None] = []
        append = out.append
        # A Status per rejected node: filter_nodes' contract (statuses are not shared).
        for node_info in nodes:
            node = node_info.node
            if node is None:
                append(Status(Code.ERROR, "node not found"))
                continue
            status: Status | None = None
            if checks:
                labels = (node.get("metadata") or _NO_FIELDS).get("labels") or _NO_LABELS
                for key, counts, offset, max_skew, over, zero_over in checks:
                    value = labels.get(key)
                    if value is None:
                        status = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                                        ERR_REASON_NODE_LABEL_NOT_MATCH)
                        break
                    if (value in over or (zero_over and value not in counts)
                            if over is not None else
                            counts.get(value, 0) + offset > max_skew):
                        status = Status(Code.UNSCHEDULABLE, ERR_REASON_CONSTRAINTS_NOT_MATCH)
                        break
            append(status)
        return out



def _label(node_info: NodeInfo, key: str) -> str | None:
    node = node_info.node
    if node is None:
        return None
    labels = (node.get("metadata") or _NO_FIELDS).get("labels") or _NO_LABELS
    return labels.get(key)


class DomainColumn:
    """One label's value on every node (None: missing, or no node object), by position in
    the snapshot's node list, kept in step with its change log: only the positions changed
    in place since are read again; a rebuilt list is read whole."""

    __slots__ = ("key", "list_version", "serial", "snapshot", "values")

    def __init__(self, key: str) -> None:
        self.key = key
        self.list_version = -1
        self.serial = -1
        # The snapshot the values were read from (another one's versions say nothing).
        self.snapshot: BatchSnapshot | None = None
        self.values: list[str | None] = []

    def sync(self, snapshot: BatchSnapshot) -> list[str | None]:
        nodes = snapshot.node_info_list
        key = self.key
        values = self.values
        if (self.snapshot is snapshot and self.list_version == snapshot.list_version
                and len(values) == len(nodes)):
            if self.serial == snapshot.change_serial:
                return values
            changed = snapshot.changed_positions_since(self.serial)
            if changed is not None:
                for position in changed:
                    values[position] = _label(nodes[position], key)
                self.serial = snapshot.change_serial
                return values
        values = self.values = [_label(node_info, key) for node_info in nodes]
        self.snapshot = snapshot
        self.list_version = snapshot.list_version
        self.serial = snapshot.change_serial
        return values


class DomainMask:
    """What opportunistic batching needs to keep one set of Filter statuses for pods whose
    spread rejects different domains (framework/batching.py ``FilterMask``), for a pod with
    one constraint: ``base`` is the Filter signature with no domain over the skew, ``key``
    this pod's (the domains over it).  Batching computes and keeps the statuses with the
    skew off (``unmask``: only a missing key rejects a node), then ``reject`` names the
    nodes whose domain is over the skew (a node missing the key keeps its own status), the
    ones ``Filtering.filter_nodes`` rejects with ``status()``; their domains are read from
    a ``DomainColumn`` by position, one comparison a node."""

    __slots__ = ("base", "column", "key", "over")

    def __init__(self, *, key: Hashable, base: Hashable, over: frozenset[str],
                 column: DomainColumn) -> None:
        self.key = key
        self.base = base
        self.over = over
        self.column = column

    def unmask(self, state: CycleState, on: bool) -> None:
        s = state.get(PRE_FILTER_STATE_KEY)
        if isinstance(s, PreFilterState):
            s.unmasked = on

    def reject(self, snapshot: BatchSnapshot, *, first: int, index: list[int] | None,
               size: int) -> list[int]:
        """Offsets, in the run of ``size`` nodes from position ``first`` of the snapshot's
        node list (wrapping; the positions ``index`` instead when given), of the nodes in a
        domain over the skew."""
        values = self.column.sync(snapshot)
        chunk = (wrapped_slice(values, first, size) if index is None
                 else list(map(values.__getitem__, index)))
        over = self.over
        if len(over) == 1:
            (domain,) = over
            return [i for i, value in enumerate(chunk) if value == domain]
        return [i for i, value in enumerate(chunk) if value in over]

    @staticmethod
    def status() -> Status:
        return Status(Code.UNSCHEDULABLE, ERR_REASON_CONSTRAINTS_NOT_MATCH, plugin=NAME)
