"""NodeResourcesFit: does the node have room for the pod's requests (cpu, memory,
ephemeral-storage, extended resources and the pod count), and how good a fit it is under the
configured scoring strategy.

Filter reports every insufficient resource, not just the first, so the FailedScheduling
message counts each shortage the way kube-scheduler does.  The pod's requests come from its
PodInfo (computed once per resourceVersion), so Filter costs a few integer comparisons per node.
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Mapping, Sequence
from typing import Any, NamedTuple

from scheduler.config import features
from scheduler.dra.extended import CLASS_PREFIX, backed_resources
from scheduler.framework.batching import sign_requests
from scheduler.framework.cycle_state import CycleState, missing_state
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
    PluginArgs,
    PreFilterPlugin,
    PreScorePlugin,
    ScorePlugin,
)
from scheduler.framework.node_info import NodeInfo
from scheduler.framework.status import Code, Status
from scheduler.framework.types import PreFilterResult
from scheduler.objects.errors import ObjectError
from scheduler.objects.node import node_allocatable
from scheduler.objects.pod import PodInfo, is_assigned, is_terminal, pod_requests, pod_uid
from scheduler.objects.resources import (
    CPU,
    EPHEMERAL_STORAGE,
    MEMORY,
    PODS,
    Resource,
    is_extended_resource_name,
)
from scheduler.plugins import names
from scheduler.plugins.helper import args_error, device_class_cache
from scheduler.plugins.noderesources import least_allocated, most_allocated
from scheduler.plugins.noderesources import requested_to_capacity_ratio as rtcr
from scheduler.plugins.noderesources.resource_allocation import (
    DRAScoring,
    PreScoreState,
    ResourceAllocationScorer,
    ResourceSpec,
    parse_resource_specs,
    validate_resource_weights,
)

NAME = names.NODE_RESOURCES_FIT

PRE_FILTER_STATE_KEY = "PreFilter" + NAME
PRE_SCORE_STATE_KEY = "PreScore" + NAME

REASON_TOO_MANY_PODS = "Too many pods"
REASON_INSUFFICIENT_CPU = "Insufficient cpu"
REASON_INSUFFICIENT_MEMORY = "Insufficient memory"
REASON_INSUFFICIENT_EPHEMERAL_STORAGE = "Insufficient ephemeral-storage"
REASON_INSUFFICIENT = "Insufficient {}"
LEAST_ALLOCATED = least_allocated.NAME
MOST_ALLOCATED = most_allocated.NAME
REQUESTED_TO_CAPACITY_RATIO = rtcr.NAME
SCORING_STRATEGIES = (LEAST_ALLOCATED, MOST_ALLOCATED, REQUESTED_TO_CAPACITY_RATIO)

# metav1validation.ValidateLabelName: an optional DNS-subdomain prefix, then a name part.
_NAME_PART = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def _is_label_name(value: str) -> bool:
    prefix, sep, name = value.rpartition("/")
    if sep and (not prefix or len(prefix) > 253 or not _DNS_SUBDOMAIN.fullmatch(prefix)):
        return False
    return 0 < len(name) <= 63 and _NAME_PART.fullmatch(name) is not None


class InsufficientResource(NamedTuple):
    resource_name: str
    reason: str
    requested: int
    used: int
    capacity: int
    # The request exceeds the node's whole allocatable: evicting pods cannot make room, so
    # Filter says UnschedulableAndUnresolvable and preemption skips the node (upstream).
    unresolvable: bool = False


class _PreFilterState:
    __slots__ = ("requests", "dra_backed")

    def __init__(self, requests: Resource, dra_backed: frozenset[str] = frozenset()) -> None:
        self.requests = requests
        # DRAExtendedResource: the pod's extended resources a DeviceClass backs
        self.dra_backed = dra_backed

    def clone(self) -> _PreFilterState:
        return self  # read-only


def fits_request(
    request: Resource,
    node_info: NodeInfo,
    ignored_resources: frozenset[str] = frozenset(),
    ignored_groups: frozenset[str] = frozenset(),
    dra_backed: frozenset[str] = frozenset(),
) -> list[InsufficientResource]:
    """Every resource the node lacks for ``request`` (upstream ``fitsRequest``).  An extended
    resource a DeviceClass backs (``dra_backed``) that the node does not advertise is left to
    DynamicResources (DRAExtendedResource)."""
    out: list[InsufficientResource] = []
    allocatable = node_info.allocatable
    used = node_info.requested
    pod_count = len(node_info.pods)
    if pod_count + 1 > allocatable.allowed_pod_number:
        out.append(
            InsufficientResource(
                PODS, REASON_TOO_MANY_PODS, 1, pod_count, allocatable.allowed_pod_number
            )
        )
    cpu = request.milli_cpu
    memory = request.memory
    storage = request.ephemeral_storage
    scalars = request.scalar_resources
    if not cpu and not memory and not storage and not scalars:
        return out
    if cpu > 0 and cpu > allocatable.milli_cpu - used.milli_cpu:
        out.append(
            InsufficientResource(
                CPU, REASON_INSUFFICIENT_CPU, cpu, used.milli_cpu, allocatable.milli_cpu,
                cpu > allocatable.milli_cpu,
            )
        )
    if memory > 0 and memory > allocatable.memory - used.memory:
        out.append(
            InsufficientResource(
                MEMORY, REASON_INSUFFICIENT_MEMORY, memory, used.memory, allocatable.memory,
                memory > allocatable.memory,
            )
        )
    if storage > 0 and storage > allocatable.ephemeral_storage - used.ephemeral_storage:
        out.append(
            InsufficientResource(
                EPHEMERAL_STORAGE,
                REASON_INSUFFICIENT_EPHEMERAL_STORAGE,
                storage,
                used.ephemeral_storage,
                allocatable.ephemeral_storage,
                storage > allocatable.ephemeral_storage,
            )
        )
    for name, quantity in scalars.items():
        if quantity == 0:
            continue
        if (ignored_resources or ignored_groups) and is_extended_resource_name(name):
            if name in ignored_resources or name.split("/", 1)[0] in ignored_groups:
                continue
        have = allocatable.scalar_resources.get(name, 0)
        if not have and name in dra_backed:
            continue
        taken = used.scalar_resources.get(name, 0)
        if quantity > have - taken:
            out.append(
                InsufficientResource(name, REASON_INSUFFICIENT.format(name), quantity, taken, have,
                                     quantity > have)
            )
    return out


def insufficient_status(insufficient: Sequence[InsufficientResource]) -> Status:
    """Filter's status for these shortages: every reason, UnschedulableAndUnresolvable when
    one of them asks for more than the node's whole allocatable (preemption cannot help)."""
    code = (Code.UNSCHEDULABLE_AND_UNRESOLVABLE if any(r.unresolvable for r in insufficient)
            else Code.UNSCHEDULABLE)
    return Status(code, *(r.reason for r in insufficient))


def fits(pod_info: PodInfo, node_info: NodeInfo) -> list[InsufficientResource]:
    """Whether the pod fits the node's free resources, for callers outside a cycle."""
    return fits_request(pod_info.requests, node_info)


def _string_list(raw: Any, field: str) -> list[str]:
    if raw is None:
        return []
    if not isinstance(raw, list) or not all(isinstance(x, str) for x in raw):
        raise args_error(NAME, field, "must be a list of strings")
    return list(raw)


def _nominated(pod: Mapping[str, Any]) -> bool:
    status = pod.get("status")
    return isinstance(status, Mapping) and bool(status.get("nominatedNodeName"))


class Fit(PreFilterPlugin, FilterPlugin, EnqueueExtensions, PreScorePlugin, ScorePlugin):
    NAME = NAME

    def __init__(self, args: PluginArgs | None, handle: Handle | None = None) -> None:
        args = args or {}
        ignored = _string_list(args.get("ignoredResources"), "ignoredResources")
        for i, name in enumerate(ignored):
            if not _is_label_name(name):
                raise args_error(
                    NAME,
                    f"ignoredResources[{i}]",
                    f"invalid value {name!r}: not a valid resource name",
                )
        groups = _string_list(args.get("ignoredResourceGroups"), "ignoredResourceGroups")
        for i, group in enumerate(groups):
            if "/" in group:
                raise args_error(
                    NAME,
                    f"ignoredResourceGroups[{i}]",
                    f"invalid value {group!r}: resource group name can't contain '/'",
                )
            if not _is_label_name(group):
                raise args_error(
                    NAME,
                    f"ignoredResourceGroups[{i}]",
                    f"invalid value {group!r}: not a valid resource group name",
                )
        self.ignored_resources = frozenset(ignored)
        self.ignored_resource_groups = frozenset(groups)
        self.scorer = self._build_scorer(args.get("scoringStrategy"))
        self._handle = handle
        self._classes = (handle.listers if handle is not None
                         and features.DEFAULT.enabled("DRAExtendedResource") else None)
        self._dra_scoring = DRAScoring(self._classes) if self._classes is not None else None
        if self._dra_scoring is not None and not self._dra_scoring.can_back(self.resources):
            self._dra_scoring = None  # no scored resource a DeviceClass can back

    @staticmethod
    def _build_scorer(raw: Any) -> ResourceAllocationScorer:
        if raw is None:
            raise args_error(NAME, "scoringStrategy", "scoring strategy not specified")
        if not isinstance(raw, Mapping):
            raise args_error(NAME, "scoringStrategy", "must be an object")
        strategy = raw.get("type") or LEAST_ALLOCATED
        if strategy not in SCORING_STRATEGIES:
            raise args_error(
                NAME,
                "scoringStrategy.type",
                f"unsupported value {strategy!r}: supported values: "
                + ", ".join(f'"{s}"' for s in sorted(SCORING_STRATEGIES)),
            )
        resources = parse_resource_specs(
            raw.get("resources"), "scoringStrategy.resources", plugin=NAME
        )
        validate_resource_weights(resources, "scoringStrategy.resources", plugin=NAME)
        ratio = raw.get("requestedToCapacityRatio")
        shape: list[rtcr.ShapePoint] | None = None
        if ratio is not None:
            if not isinstance(ratio, Mapping):
                raise args_error(
                    NAME, "scoringStrategy.requestedToCapacityRatio", "must be an object"
                )
            shape = rtcr.parse_shape(
                ratio.get("shape"), "scoringStrategy.requestedToCapacityRatio.shape", plugin=NAME
            )
        if strategy == LEAST_ALLOCATED:
            fn = least_allocated.least_resource_scorer(resources)
        elif strategy == MOST_ALLOCATED:
            fn = most_allocated.most_resource_scorer(resources)
        else:
            if shape is None:
                raise args_error(
                    NAME,
                    "scoringStrategy.requestedToCapacityRatio",
                    "required when type is RequestedToCapacityRatio",
                )
            fn = rtcr.requested_to_capacity_ratio_scorer(resources, shape)
        return ResourceAllocationScorer(
            name=strategy, scorer=fn, resources=resources, use_requested=False
        )

    @property
    def resources(self) -> list[ResourceSpec]:
        return self.scorer.resources

    # --- PreFilter / Filter ------------------------------------------------------------------

    def pre_filter(
        self, state: CycleState, pod_info: PodInfo, nodes: list[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status | None]:
        state.write(PRE_FILTER_STATE_KEY,
                    _PreFilterState(pod_info.requests, self._dra_backed(pod_info)))
        return None, None

    def _dra_backed(self, pod_info: PodInfo) -> frozenset[str]:
        """The pod's extended resources a DeviceClass backs (DRAExtendedResource): on a node
        that does not advertise one, DynamicResources allocates it, not Fit."""
        scalars = pod_info.requests.scalar_resources
        if not scalars or self._classes is None:
            return frozenset()
        return frozenset(backed_resources(scalars, device_class_cache(self._classes)))

    def sign(self, pod_info: PodInfo) -> Hashable | None:
        """The fields Filter and Score read of the pod (opportunistic batching); None (not
        signed) when a DeviceClass backs one of its resources."""
        if self._dra_backed(pod_info):
            return None  # Filter and Score read DeviceClasses, slices and claims: not signed
        return sign_requests(pod_info)

    def filter(self, state: CycleState, pod_info: PodInfo, node_info: NodeInfo) -> Status | None:
        return self.filter_nodes(state, pod_info, [node_info])[0]

    def filter_nodes(
        self, state: CycleState, pod_info: PodInfo, nodes: list[NodeInfo]
    ) -> list[Status | None]:
        s = state.get(PRE_FILTER_STATE_KEY)
        if s is None:
            return [missing_state(PRE_FILTER_STATE_KEY) for _ in nodes]
        request: Resource = s.requests
        ignored, groups = self.ignored_resources, self.ignored_resource_groups
        backed: frozenset[str] = s.dra_backed
        cpu, memory = request.milli_cpu, request.memory
        # Pods asking for cpu and memory only (nearly all) are checked inline; a node that
        # fails, and any other pod, goes through fits_request for the exact reasons.
        inline = not request.ephemeral_storage and not request.scalar_resources
        out: list[Status | None] = []
        for node_info in nodes:
            if inline:
                allocatable = node_info.allocatable
                used = node_info.requested
                if (
                    len(node_info.pods) < allocatable.allowed_pod_number
                    and (cpu <= 0 or cpu <= allocatable.milli_cpu - used.milli_cpu)
                    and (memory <= 0 or memory <= allocatable.memory - used.memory)
                ):
                    out.append(None)
                    continue
            insufficient = fits_request(request, node_info, ignored, groups, backed)
            out.append(insufficient_status(insufficient) if insufficient else None)
        return out

    # --- Score -------------------------------------------------------------------------------

    def pre_score(
        self, state: CycleState, pod_info: PodInfo, nodes: list[NodeInfo]
    ) -> Status | None:
        requests = self.scorer.pod_requests(pod_info)
        dra = self._dra_scoring.totals(self.resources, requests) if self._dra_scoring else None
        state.write(PRE_SCORE_STATE_KEY, PreScoreState(requests, dra))
        return None


    def score(
        self, state: CycleState, pod_info: PodInfo, node_info: NodeInfo
    ) -> tuple[int, Status | None]:
        s = state.get(PRE_SCORE_STATE_KEY)
        requests = s.pod_requests if s is not None else self.scorer.pod_requests(pod_info)
        return self.scorer.score(node_info, requests, s.dra if s is not None else None)

    def score_nodes(
        self, state: CycleState, pod_info: PodInfo, nodes: list[NodeInfo]
    ) -> tuple[list[int], Status | None]:
        s = state.get(PRE_SCORE_STATE_KEY)
        requests = s.pod_requests if s is not None else self.scorer.pod_requests(pod_info)
        return self.scorer.score_many(nodes, requests, s.dra if s is not None else None)

    # --- requeueing --------------------------------------------------------------------------

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            ClusterEventWithHint(
                ClusterEvent(
                    EventResource.POD, ActionType.DELETE | ActionType.UPDATE_POD_SCALE_DOWN
                ),
                self.is_schedulable_after_pod_event,
            ),
            # The pending pod itself shrinking its requests.
            ClusterEventWithHint(
                ClusterEvent(EventResource.UNSCHEDULED_POD, ActionType.UPDATE_POD_SCALE_DOWN),
                self.is_schedulable_after_pod_event,
            ),
            ClusterEventWithHint(
                ClusterEvent(
                    EventResource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_ALLOCATABLE
                ),
                self.is_schedulable_after_node_change,
            ),
        ] + ([
            # DRAExtendedResource: a class now backing a resource the pod asks for takes it
            # off Fit's hands on nodes that do not advertise it.
            ClusterEventWithHint(
                ClusterEvent(EventResource.DEVICE_CLASS, ActionType.ADD | ActionType.UPDATE),
                is_schedulable_after_class_change,
            ),
        ] if self._classes is not None else [])

    def is_schedulable_after_pod_event(
        self, pod: dict[str, Any], old: Any, new: Any
    ) -> QueueingHint:
        """A deleted assigned pod frees room; an updated one only if it shrank a resource the
        pending pod requests (or finished); the pending pod's own shrink always may help."""
        if not isinstance(new, dict):
            if isinstance(old, dict) and not is_assigned(old) and not _nominated(old):
                return QueueingHint.SKIP
            # An assigned pod, or a nominated one whose nomination held room (upstream).
            return QueueingHint.QUEUE
        if pod_uid(new) == pod_uid(pod):
            return QueueingHint.QUEUE
        if not is_assigned(new) or not isinstance(old, dict):
            return QueueingHint.SKIP
        if is_terminal(new) and not is_terminal(old):
            return QueueingHint.QUEUE
        try:
            original = pod_requests(old)
            modified = pod_requests(new)
            wanted = pod_requests(pod)
        except ObjectError:
            return QueueingHint.QUEUE
        if wanted.milli_cpu and original.milli_cpu > modified.milli_cpu:
            return QueueingHint.QUEUE
        if wanted.memory and original.memory > modified.memory:
            return QueueingHint.QUEUE
        if wanted.ephemeral_storage and original.ephemeral_storage > modified.ephemeral_storage:
            return QueueingHint.QUEUE
        for name, quantity in wanted.scalar_resources.items():
            if quantity and original.scalar_resources.get(name, 0) > modified.scalar_resources.get(
                name, 0
            ):
                return QueueingHint.QUEUE
        return QueueingHint.SKIP

    def is_schedulable_after_node_change(
        self, pod: dict[str, Any], old: Any, new: Any
    ) -> QueueingHint:
        """Queue only if the pod would fit the (empty) node and, for an update, a resource it
        requests (or the pod capacity) grew."""
        if not isinstance(new, dict):
            return QueueingHint.SKIP
        try:
            request = pod_requests(pod)
            if fits_request(
                request, NodeInfo(new), self.ignored_resources, self.ignored_resource_groups
            ):
                return QueueingHint.SKIP
            if not isinstance(old, dict):
                return QueueingHint.QUEUE
            before = node_allocatable(old)
            after = node_allocatable(new)
        except ObjectError:
            return QueueingHint.QUEUE
        if _any_requested_resource_increased(request, before, after):
            return QueueingHint.QUEUE
        return QueueingHint.SKIP


def _any_requested_resource_increased(request: Resource, before: Resource, after: Resource) -> bool:
    if after.allowed_pod_number > before.allowed_pod_number:
        return True
    if (
        (request.milli_cpu > 0 and after.milli_cpu > before.milli_cpu)
        or (request.memory > 0 and after.memory > before.memory)
        or (request.ephemeral_storage > 0 and after.ephemeral_storage > before.ephemeral_storage)
    ):
        return True
    return any(
        quantity and after.scalar_resources.get(name, 0) > before.scalar_resources.get(name, 0)
        for name, quantity in request.scalar_resources.items()
    )


def is_schedulable_after_class_change(pod: dict[str, Any], old: Any, new: Any) -> QueueingHint:
    """Queue when the class (now) backs, explicitly or implicitly, a resource the pod asks
    for and did not back it before."""
    if not isinstance(new, Mapping):
        return QueueingHint.SKIP
    try:
        wanted = pod_requests(pod).scalar_resources
    except ObjectError:
        return QueueingHint.QUEUE

    def backs(cls: Any) -> set[str]:
        if not isinstance(cls, Mapping):
            return set()
        name = str((cls.get("metadata") or {}).get("name") or "")
        out = {CLASS_PREFIX + name}
        ern = (cls.get("spec") or {}).get("extendedResourceName")
        if isinstance(ern, str):
            out.add(ern)
        return out

    now = {n for n in backs(new) - backs(old) if wanted.get(n)}
    return QueueingHint.QUEUE if now else QueueingHint.SKIP


def requests_of(specs: Sequence[ResourceSpec], pod_info: PodInfo) -> list[int]:
    """The pod's non-zero requests for ``specs`` (handy for tests and explain)."""
    return ResourceAllocationScorer(
        name="", scorer=lambda r, a: 0, resources=specs, use_requested=False
    ).pod_requests(pod_info)
