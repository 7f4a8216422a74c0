"""The scorer NodeResourcesFit (LeastAllocated / MostAllocated / RequestedToCapacityRatio) and
NodeResourcesBalancedAllocation share: per configured resource, the node's allocatable and what
would be requested with the pod on it, fed to a strategy function.

Fit scores with *non-zero* cpu/memory requests (100m / 200Mi for containers that request none)
so best-effort pods still spread; BalancedAllocation uses the real requests, as upstream.
Arithmetic is integer and truncating, as in Go, so scores match kube-scheduler's exactly.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import Any

from scheduler.dra.extended import class_devices, is_dra_extended_resource_name
from scheduler.dra.inventory import DeviceID, Inventory, device_ids_of
from scheduler.framework.interfaces import ObjectLister
from scheduler.framework.node_info import NodeInfo
from scheduler.framework.status import Code, Status
from scheduler.objects.pod import PodInfo
from scheduler.objects.resources import CPU, EPHEMERAL_STORAGE, MEMORY, is_scalar_resource_name
from scheduler.plugins.helper import args_error, device_class_cache

_ALLOCATABLE = attrgetter("allocatable")
_REQUESTED = attrgetter("requested")
_NON_ZERO_REQUESTED = attrgetter("non_zero_requested")
_MILLI_CPU = attrgetter("milli_cpu")
_MEMORY = attrgetter("memory")

ERR_RESOURCES_NOT_FOUND = "resources not found"

# fn(requested, allocatable) -> score in [0, MAX_NODE_SCORE]
ScorerFn = Callable[[Sequence[int], Sequence[int]], int]


@dataclass(frozen=True, slots=True)
class ResourceSpec:
    name: str
    weight: int


def parse_resource_specs(raw: Any, field: str, *, plugin: str) -> list[ResourceSpec]:
    """``[{name, weight}]`` -> ResourceSpecs; type errors name the field."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise args_error(plugin, field, f"must be a list, got {type(raw).__name__}")
    out: list[ResourceSpec] = []
    for i, item in enumerate(raw):
        path = f"{field}[{i}]"
        if not isinstance(item, Mapping):
            raise args_error(plugin, path, "must be an object with name and weight")
        name = item.get("name")
        if not isinstance(name, str) or not name:
            raise args_error(plugin, f"{path}.name", "required")
        weight = item.get("weight", 0)
        if weight is None:
            weight = 0
        if isinstance(weight, bool) or not isinstance(weight, int):
            raise args_error(plugin, f"{path}.weight", f"must be an integer, got {weight!r}")
        out.append(ResourceSpec(name, weight))
    return out


def validate_resource_weights(
    resources: Sequence[ResourceSpec], field: str, *, plugin: str
) -> None:
    """Upstream ``validateResources``: every weight in (0, 100]."""
    for i, spec in enumerate(resources):
        if spec.weight <= 0 or spec.weight > 100:
            raise args_error(
                plugin,
                f"{field}[{i}].weight",
                f"invalid value {spec.weight}: resource weight of {spec.name} not in valid "
                "range (0, 100]",
            )


def pod_resource_request(pod_info: PodInfo, resource: str, *, use_requested: bool) -> int:
    """The pod's request of ``resource`` (milli for cpu); non-zero defaults unless
    ``use_requested``."""
    if not use_requested:
        if resource == CPU:
            return pod_info.non_zero_cpu
        if resource == MEMORY:
            return pod_info.non_zero_memory
    return pod_info.requests.get(resource)


PairScorerFn = Callable[[int, int, int, int], int]
# (requested0s, allocatable0s, requested1s, allocatable1s) -> scores, one per node
ColumnScorerFn = Callable[[list[int], list[int], list[int], list[int]], list[int]]


class PairedScorer:
    """A scoring strategy's general formula plus the same formula for exactly two resources
    taken as plain arguments, which the scorer uses on its fast path, and optionally over
    whole columns of nodes (one comprehension, no call per node)."""

    __slots__ = ("general", "pair", "column")

    def __init__(self, general: ScorerFn, pair: PairScorerFn,
                 column: ColumnScorerFn | None = None) -> None:
        self.general = general
        self.pair = pair
        self.column: ColumnScorerFn = column or (
            lambda r0s, a0s, r1s, a1s: list(map(pair, r0s, a0s, r1s, a1s)))

    def __call__(self, requested: Sequence[int], allocatable: Sequence[int]) -> int:
        return self.general(requested, allocatable)


ResourceScoreFn = Callable[[int, int], int]  # (requested, capacity) -> [0, MAX_NODE_SCORE]
# (w0, w1, pair) -> the column form of ``pair`` for those weights
ColumnFactory = Callable[[int, int, PairScorerFn], ColumnScorerFn]


def weighted_resource_scorer(
    resources: Sequence[ResourceSpec],
    resource_score: ResourceScoreFn,
    *,
    column: ColumnFactory | None = None,
) -> ScorerFn:
    """Upstream's ``leastResourceScorer``/``mostResourceScorer`` skeleton, once: the weighted
    mean of ``resource_score`` over the resources the node has (allocatable > 0).  With
    exactly two resources it is a ``PairedScorer``; ``column`` gives the strategy's inlined
    formula over whole columns (the hot path), built for the weights."""
    weights = [spec.weight for spec in resources]

    def scorer(requested: Sequence[int], allocatable: Sequence[int]) -> int:
        node_score = 0
        weight_sum = 0
        for i, alloc in enumerate(allocatable):
            if alloc == 0:
                continue
            node_score += resource_score(requested[i], alloc) * weights[i]
            weight_sum += weights[i]
        if weight_sum == 0:
            return 0
        return node_score // weight_sum

    if len(weights) != 2:
        return scorer
    w0, w1 = weights

    def pair(r0: int, a0: int, r1: int, a1: int) -> int:
        score = weight_sum = 0
        if a0:
            score += resource_score(r0, a0) * w0
            weight_sum += w0
        if a1:
            score += resource_score(r1, a1) * w1
            weight_sum += w1
        return score // weight_sum if weight_sum else 0

    return PairedScorer(scorer, pair, column(w0, w1, pair) if column is not None else None)


# DRAExtendedResource: (node, resource) -> (devices of the backing class, allocated ones)
DRATotals = Callable[[NodeInfo, str], tuple[int, int]]


class PreScoreState:
    """What the allocation scorers' PreScore keeps for Score: the pod's request of each
    scored resource and, under DRAExtendedResource, the devices behind them."""

    __slots__ = ("pod_requests", "dra")

    def __init__(self, pod_requests: list[int], dra: DRATotals | None = None) -> None:
        self.pod_requests = pod_requests
        self.dra = dra

    def clone(self) -> PreScoreState:
        return self  # read-only once written


class ResourceAllocationScorer:
    """Upstream ``resourceAllocationScorer``."""

    __slots__ = ("name", "resources", "use_requested", "_scorer", "column_scorer", "_last",
                 "_columns", "_cpu_first")

    def __init__(
        self,
        *,
        name: str,
        scorer: ScorerFn,
        resources: Sequence[ResourceSpec],
        use_requested: bool,
    ) -> None:
        self.name = name
        self.resources = list(resources)
        self.use_requested = use_requested
        self._scorer = scorer
        # The same formula for exactly two resources over columns of nodes
        # (requested0s, allocatable0s, requested1s, allocatable1s): no call per node.
        self.column_scorer: ColumnScorerFn | None = getattr(scorer, "column", None)
        # Whether score_many takes the column path (exactly CPU and memory, a column
        # scorer), and whether CPU comes first: the resources never change, so once.
        names = [spec.name for spec in self.resources]
        self._columns = (self.column_scorer is not None and len(names) == 2
                         and set(names) == {CPU, MEMORY})
        self._cpu_first = bool(names) and names[0] == CPU
        # The last pod's answer: (its requests object, non-zero cpu, non-zero memory, the
        # list).  Pods parsed alike share one requests object (PodInfo's shared parse), so
        # a backlog of alike pods computes the list once; the list is never changed.
        self._last: tuple[object, int, int, list[int]] | None = None

    def pod_requests(self, pod_info: PodInfo) -> list[int]:
        """The pod's request of each scored resource (a list the caller must not change)."""
        requests = pod_info.requests
        last = self._last
        if (last is not None and last[0] is requests and last[1] == pod_info.non_zero_cpu
                and last[2] == pod_info.non_zero_memory):
            return last[3]
        values = [
            pod_resource_request(pod_info, spec.name, use_requested=self.use_requested)
            for spec in self.resources
        ]
        self._last = (requests, pod_info.non_zero_cpu, pod_info.non_zero_memory, values)
        return values

    @staticmethod
    def is_best_effort(pod_requests: Sequence[int]) -> bool:
        return not any(pod_requests)

    def allocatable_and_requested(
        self, node_info: NodeInfo, resource: str, pod_request: int,
        dra: DRATotals | None = None,
    ) -> tuple[int, int]:
        """(allocatable, requested including the pod); (0, 0) means "do not score this".
        ``dra`` answers, for a resource the node does not advertise, the devices of the class
        that backs it and how many are allocated (DRAExtendedResource)."""
        if pod_request == 0 and is_scalar_resource_name(resource):
            return 0, 0
        requested = node_info.requested if self.use_requested else node_info.non_zero_requested
        allocatable = node_info.allocatable
        if resource == CPU:
            return allocatable.milli_cpu, requested.milli_cpu + pod_request
        if resource == MEMORY:
            return allocatable.memory, requested.memory + pod_request
        if resource == EPHEMERAL_STORAGE:
            return (
                allocatable.ephemeral_storage,
                node_info.requested.ephemeral_storage + pod_request,
            )
        if dra is not None and not allocatable.scalar_resources.get(resource):
            total, used = dra(node_info, resource)
            if total > 0:
                return total, used + pod_request
        if resource in allocatable.scalar_resources:
            return (
                allocatable.scalar_resources[resource],
                node_info.requested.scalar_resources.get(resource, 0) + pod_request,
            )
        return 0, 0

    def score_many(
        self, nodes: Sequence[NodeInfo], pod_requests: Sequence[int],
        dra: DRATotals | None = None,
    ) -> tuple[list[int], Status | None]:
        """``score`` for every node; two native resources (the default) take a fast path."""
        if not self.resources:
            return [], Status(Code.ERROR, ERR_RESOURCES_NOT_FOUND)
        column = self.column_scorer
        if not self._columns or column is None:
            return [self.score(node_info, pod_requests, dra)[0] for node_info in nodes], None
        cpu_first = self._cpu_first
        cpu_request, mem_request = (
            (pod_requests[0], pod_requests[1]) if cpu_first else (pod_requests[1], pod_requests[0])
        )
        # The columns by attrgetter over the nodes (C loops: a comprehension is a Python
        # call each, and a kept window scores one or two changed nodes a cycle).
        allocs = list(map(_ALLOCATABLE, nodes))
        used = list(map(_REQUESTED if self.use_requested else _NON_ZERO_REQUESTED, nodes))
        a_cpu = list(map(_MILLI_CPU, allocs))
        a_mem = list(map(_MEMORY, allocs))
        u_cpu = list(map(_MILLI_CPU, used))
        u_mem = list(map(_MEMORY, used))
        if all(a_cpu) and all(a_mem):
            r_cpu = list(map(cpu_request.__add__, u_cpu))  # ints: C loops, no call each
            r_mem = list(map(mem_request.__add__, u_mem))
        else:
            # A resource the node does not have is not scored: requested 0, allocatable 0.
            r_cpu = [u + cpu_request if a else 0 for u, a in zip(u_cpu, a_cpu)]
            r_mem = [u + mem_request if a else 0 for u, a in zip(u_mem, a_mem)]
        if cpu_first:
            return column(r_cpu, a_cpu, r_mem, a_mem), None
        return column(r_mem, a_mem, r_cpu, a_cpu), None

    def score(self, node_info: NodeInfo, pod_requests: Sequence[int],
              dra: DRATotals | None = None) -> tuple[int, Status | None]:
        if not self.resources:
            return 0, Status(Code.ERROR, ERR_RESOURCES_NOT_FOUND)
        count = len(self.resources)
        requested = [0] * count
        allocatable = [0] * count
        for i, spec in enumerate(self.resources):
            alloc, req = self.allocatable_and_requested(node_info, spec.name, pod_requests[i],
                                                        dra)
            if alloc == 0:
                continue
            allocatable[i] = alloc
            requested[i] = req
        return self._scorer(requested, allocatable), None

class DRAScoring:
    """DRAExtendedResource's part of scoring: an extended resource a DeviceClass backs, on a
    node that does not advertise it, is scored from the class's devices on the node
    (allocatable) and the allocated ones (requested), as upstream's scorer does."""

    def __init__(self, listers: ObjectLister) -> None:
        self._listers = listers
        self._inventory: tuple[tuple[tuple[int, str], ...], Inventory] | None = None
        # id(a plugin's resource list) -> (that list, the positions of extended resources)
        self._extended_at: dict[int, tuple[Sequence[ResourceSpec], list[int]]] = {}

    def _extended(self, resources: Sequence[ResourceSpec]) -> list[int]:
        """The positions in ``resources`` (a plugin's scored resources, never changed) of
        the names a DeviceClass can back, found once per list."""
        kept = self._extended_at.get(id(resources))
        if kept is None or kept[0] is not resources:
            kept = self._extended_at[id(resources)] = (resources, [
                i for i, spec in enumerate(resources)
                if is_dra_extended_resource_name(spec.name)])
        return kept[1]

    def can_back(self, resources: Sequence[ResourceSpec]) -> bool:
        """Whether a DeviceClass can back one of ``resources`` (else ``backed`` is always
        empty and ``totals`` None: a plugin scoring only CPU and memory, the default, need
        not ask every cycle)."""
        return bool(self._extended(resources))

    def backed(self, resources: Sequence[ResourceSpec], pod_requests: Sequence[int]
               ) -> dict[str, Mapping[str, Any]]:
        """The scored resources the pod asks for that a DeviceClass backs -> the class."""
        extended = self._extended(resources)
        if not extended or not any(map(pod_requests.__getitem__, extended)):
            return {}
        cache = device_class_cache(self._listers)
        out: dict[str, Mapping[str, Any]] = {}
        for spec, request in zip(resources, pod_requests):
            cls = cache.get(spec.name) if request else None
            if cls is not None:
                out[spec.name] = cls
        return out

    def totals(self, resources: Sequence[ResourceSpec], pod_requests: Sequence[int]
               ) -> DRATotals | None:
        """For the scored resources the pod asks for that a DeviceClass backs: per node, the
        class's devices and how many are allocated (upstream scores a node that does not
        advertise such a resource with these), else None."""
        backed = self.backed(resources, pod_requests)
        if not backed:
            return None
        try:
            slices = self._listers.list("resourceslices")
            claims = self._listers.list("resourceclaims")
        except KeyError:
            return None
        key = tuple((id(sl), str((sl.get("metadata") or {}).get("resourceVersion")))
                    for sl in slices)
        if self._inventory is None or key != self._inventory[0]:
            self._inventory = (key, Inventory(slices))
        inventory = self._inventory[1]
        allocated: set[DeviceID] = set()
        for c in claims:
            st = c.get("status")
            alloc = st.get("allocation") if isinstance(st, Mapping) else None
            if isinstance(alloc, Mapping):
                allocated.update(device_ids_of(alloc, include_shared=False))
        memo: dict[tuple[str, str], tuple[int, int]] = {}

        def totals(node_info: NodeInfo, resource: str) -> tuple[int, int]:
            cls = backed.get(resource)
            if cls is None or node_info.node is None:
                return 0, 0
            hit = memo.get((node_info.name, resource))
            if hit is None:
                hit = memo[(node_info.name, resource)] = class_devices(
                    cls, inventory.devices_for_node(node_info.node), allocated)
            return hit
        return totals
