"""DefaultPreemption: when no node fits a pod, evict lower-priority pods from one node so that
it will fit there on a later cycle (kube-scheduler's DefaultPreemption PostFilter).

The scheduling cycle is synchronous, so the decision (which node, which victims) is made in
``post_filter`` on copies of the snapshot, and the API calls that carry it out run afterwards
in a named asyncio task (upstream's async preemption): mark each victim with the
``DisruptionTarget`` condition, delete it, record a ``Preempted`` event, and clear the
nomination of lower-priority pods nominated to the same node.  The preemptor leaves with
``nominatedNodeName`` set, so lower-priority pods cannot take the room while the victims
terminate.

While the task runs, the plugin's PreEnqueue keeps the preemptor out of activeQ and backoffQ
(no attempt, no Filter pass, no FailedScheduling event meanwhile); the victims' deletions
move it back as for any pod, and only a failed API call makes the plugin activate it.  For a
short while after (until the informer shows the victims terminating) the plugin remembers the
preemption so the preemptor does not preempt again and the same victims are not deleted
twice.
"""

from __future__ import annotations

import asyncio
import math
import random
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from itertools import compress, repeat
from operator import attrgetter
from typing import Any, Protocol, runtime_checkable

import structlog

from scheduler.config.errors import ConfigError
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.events import (
    ASSIGNED_POD_DELETE,
    ClusterEventWithHint,
    QueueingHint,
)
from scheduler.framework.interfaces import (
    EnqueueExtensions,
    Handle,
    PostFilterPlugin,
    PreEnqueuePlugin,
    PreemptionVictims,
)
from scheduler.framework.node_info import NodeInfo
from scheduler.framework.status import Code, Status
from scheduler.framework.types import (
    Diagnosis, FitError, PostFilterResult, PreFilterResult, ReprieveFilter,
)
from scheduler.objects.pod import PodInfo, is_being_deleted
from scheduler.plugins import names
from scheduler.plugins.defaultpreemption.evaluator import (
    PDB,
    Candidate,
    Summary,
    TopStart,
    candidate_summary,
    compile_pdbs,
    dry_run_preemption,
    filter_pods_with_pdb_violation,
    importance_key,
    pick_one_node_for_preemption,
    reprieve_victims,
    start_times,
    top_start,
)
from scheduler.plugins.defaultpreemption.gang import (
    GangMember,
    GangPlan,
    Placement,
    spend_pdbs,
    plan_gang_preemption,
    plan_in_one_domain,
)
from scheduler.plugins.helper import (
    GANG_TOPOLOGY_STATE_KEY,
    POD_GROUP_LABEL,
    RequiredGangTopology,
    bound_gang_companions,
    gang_shortfall_after_preemption,
)

__all__ = [
    "DryRun",
    "EXTENDER_CANDIDATES_KEY",
    "MIN_CANDIDATE_NODES_ABSOLUTE",
    "MIN_CANDIDATE_NODES_PERCENTAGE",
    "NAME",
    "DefaultPreemption",
    "PreemptionMetrics",
]

log = structlog.get_logger(__name__)

NAME = names.DEFAULT_PREEMPTION

MIN_CANDIDATE_NODES_PERCENTAGE = "minCandidateNodesPercentage"
MIN_CANDIDATE_NODES_ABSOLUTE = "minCandidateNodesAbsolute"
DEFAULT_MIN_CANDIDATE_NODES_PERCENTAGE = 10
DEFAULT_MIN_CANDIDATE_NODES_ABSOLUTE = 100
_TYPE_META_KEYS = frozenset({"apiVersion", "kind"})

# find_candidates' scan of every node's status: a node with none reads as this (not
# UNSCHEDULABLE, so never a potential node).
_NO_STATUS = Status(Code.SUCCESS)
_NODE_NAME = attrgetter("name")
_CODE = attrgetter("code")
_NODE = attrgetter("node")
_UID = attrgetter("uid")
_PRIORITY = attrgetter("priority")

# Upstream wording (users grep for these).
MESSAGE_PREFIX = "preemption: "
ERR_NOT_ELIGIBLE_POLICY_NEVER = "not eligible due to preemptionPolicy=Never."
ERR_NOT_ELIGIBLE_TERMINATING = "not eligible due to a terminating pod on the nominated node."
ERR_WAITING_FOR_PREEMPTION = "waiting for the preemption for this pod to be finished"
ERR_NO_VICTIMS = "No preemption victims found for incoming pod"
ERR_NOT_HELPFUL = "Preemption is not helpful for scheduling"
ERR_NO_NODES = "no nodes available"
ERR_NO_CANDIDATE = "no candidate node for preemption"
ERR_GANG_NOT_HELPFUL = (
    "Preemption is not helpful for scheduling: PodGroup {group} needs {needed} more "
    "member(s), room for {room} even without lower-priority pods")

ERR_GANG_CANNOT_COMPLETE = (
    "Preemption is not helpful for scheduling: PodGroup {group} needs {needed} more "
    "member(s), {pending} pending")

PREEMPT_NEVER = "Never"
DISRUPTION_TARGET = "DisruptionTarget"
REASON_PREEMPTION_BY_SCHEDULER = "PreemptionByScheduler"
DISRUPTION_MESSAGE = "{scheduler}: preempting to accommodate a higher priority pod"
EVENT_REASON_PREEMPTED = "Preempted"
EVENT_ACTION_PREEMPTING = "Preempting"
EVENT_MESSAGE = "Preempted by pod {uid} on node {node}"
WAITING_POD_REJECT_MESSAGE = "preempted"

STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"

# CycleState key: the candidates left after HTTP extenders' preempt verb (list[Candidate]),
# or the PostFilter answer itself (a (result, status) tuple: no candidates, or a failed,
# non-ignorable extender).
EXTENDER_CANDIDATES_KEY = "DefaultPreemption/extenderCandidates"
# CycleState key: a gang's plan offered to the extenders' preempt verb (_GangOffer).
EXTENDER_GANG_PLAN_KEY = "DefaultPreemption/extenderGangPlan"

ERR_EXTENDER_DROPPED_GANG_NODE = (
    "PodGroup {group}: an extender dropped node(s) {nodes} from the gang's preemption plan; "
    "nothing is preempted (never a part of a gang)")
ERR_EXTENDER_GANG_VICTIMS = (
    "PodGroup {group}: an extender named victim(s) {pods} on node {node} outside the "
    "gang's preemption plan; nothing is preempted")
ERR_EXTENDER_GANG_SHORT = (
    "PodGroup {group}: with the victims the extenders kept, member {pod} no longer fits "
    "node {node}; nothing is preempted")

# How long a victim counts as terminating after its deletion was sent, before the informer
# shows its deletionTimestamp; bridges the watch lag so it is not chosen (and deleted) twice.
VICTIM_MARK_SECONDS = 30.0


class _Counter(Protocol):
    def inc(self, amount: float = 1) -> None: ...


class _Histogram(Protocol):
    def observe(self, amount: float) -> None: ...


class PreemptionMetrics(Protocol):
    """The two upstream metrics (``scheduler.metrics.SchedulerMetrics`` has both)."""

    @property
    def preemption_attempts(self) -> _Counter: ...

    @property
    def preemption_victims(self) -> _Histogram: ...


@dataclass(slots=True)
class DryRun:
    """What a preemption would do, recorded instead of done when ``dry_run`` is set
    (``kube-py-scheduler explain``): the candidates found, the one chosen, and why each
    other examined node yielded none."""

    candidates: list[Candidate]
    chosen: Candidate | None
    node_statuses: dict[str, Status]
    # A gang member's whole plan (every member's node and victims), when it was one.
    gang_plan: GangPlan | None = None


@runtime_checkable
class _PreFilters(Protocol):
    """The runtime's PreFilter, for a gang member of another shape than the preemptor."""

    def run_pre_filter_plugins(
        self, state: CycleState, pod_info: PodInfo, nodes: list[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status | None, set[str]]: ...


# Filter plugins whose answer depends on the node object and the pod only, never on the
# pods the node holds nor on PreFilter state that AddPod/RemovePod change: once they pass
# on a node with every potential victim removed, they pass with any of them put back, so
# the dry run's reprieve loop does not run them again.
POD_INDEPENDENT_FILTERS = frozenset({
    names.NODE_UNSCHEDULABLE, names.NODE_NAME, names.TAINT_TOLERATION, names.NODE_AFFINITY})



@runtime_checkable
class _ReprieveFilters(Protocol):
    """The runtime's Filters for the dry run (``FilterSteps.reprieve_filter``)."""

    def reprieve_filter(
        self, state: CycleState, *, leave_out: Collection[str]
    ) -> ReprieveFilter: ...


@runtime_checkable
class _Nominates(Protocol):
    """The scheduler's nominator: a gang member is nominated in memory before its status
    write comes back, as the preemptor is by the failure handler."""

    def add_nominated_pod(self, pod_info: PodInfo, node_name: str | None = None) -> None: ...


# Spec fields that decide where a pod may go (besides its requests): members equal in
# these share the preemptor's PreFilter state.
_SHAPE_FIELDS = ("nodeSelector", "affinity", "tolerations", "topologySpreadConstraints",
                 "resourceClaims", "volumes", "nodeName", "priority", "overhead")


def _same_shape(a: PodInfo, b: PodInfo) -> bool:
    if a.requests != b.requests or a.namespace != b.namespace:
        return False
    spec_a = a.pod.get("spec") or {}
    spec_b = b.pod.get("spec") or {}
    return all(spec_a.get(f) == spec_b.get(f) for f in _SHAPE_FIELDS)


class PreemptionError(Exception):
    """An API call carrying out a preemption failed (the preemptor will retry)."""


@dataclass(slots=True)
class _Preemption:
    """One preemptor's preemption: while ``running`` it must not preempt again."""

    node: str
    victims: frozenset[str]
    running: bool = True
    # (namespace, name) of the victim deleted last, once only it is left: the preemption is
    # over as soon as the informer shows it terminating or gone (its event may arrive before
    # the DELETE call returns, and must not find the preemptor still held back).
    last_victim: tuple[str, str] | None = None
    # handle.clock() after which the finished record is forgotten
    expires: float = math.inf


def _int_arg(args: Mapping[str, Any], key: str, default: int,
             errors: list[tuple[str, str]]) -> int:
    value = args.get(key)
    if value is None:
        return default
    if not isinstance(value, int) or isinstance(value, bool):
        errors.append((f"{NAME}.args.{key}", f"must be an integer, got {value!r}"))
        return default
    return value


def parse_args(args: Mapping[str, Any] | None) -> tuple[int, int]:
    """(minCandidateNodesPercentage, minCandidateNodesAbsolute), validated as upstream's
    ValidateDefaultPreemptionArgs; missing fields take the v1 defaults."""
    if args is None:
        args = {}
    if not isinstance(args, Mapping):
        raise ConfigError("", [(f"{NAME}.args", f"must be an object, got {type(args).__name__}")])
    errors: list[tuple[str, str]] = []
    for key in sorted(str(k) for k in args):
        if key not in (MIN_CANDIDATE_NODES_PERCENTAGE, MIN_CANDIDATE_NODES_ABSOLUTE) and (
            key not in _TYPE_META_KEYS
        ):
            errors.append((f"{NAME}.args.{key}", "unknown field"))
    percentage = _int_arg(args, MIN_CANDIDATE_NODES_PERCENTAGE,
                          DEFAULT_MIN_CANDIDATE_NODES_PERCENTAGE, errors)
    absolute = _int_arg(args, MIN_CANDIDATE_NODES_ABSOLUTE,
                        DEFAULT_MIN_CANDIDATE_NODES_ABSOLUTE, errors)
    pct_path = f"{NAME}.args.{MIN_CANDIDATE_NODES_PERCENTAGE}"
    abs_path = f"{NAME}.args.{MIN_CANDIDATE_NODES_ABSOLUTE}"
    if not 0 <= percentage <= 100:
        errors.append((pct_path, f"invalid value {percentage}: not in valid range [0, 100]"))
    if absolute < 0:
        errors.append((abs_path, f"invalid value {absolute}: not in valid range [0, inf)"))
    if percentage == 0 and absolute == 0:
        both_zero = "invalid value 0: cannot be zero at the same time as {}"
        errors.append((pct_path, both_zero.format(MIN_CANDIDATE_NODES_ABSOLUTE)))
        errors.append((abs_path, both_zero.format(MIN_CANDIDATE_NODES_PERCENTAGE)))
    if errors:
        raise ConfigError("", errors)
    return percentage, absolute


def _pod_path(namespace: str, name: str) -> str:
    return f"/api/v1/namespaces/{namespace or 'default'}/pods/{name}"


def _ok(status: int) -> bool:
    return 200 <= status < 300


def _error_detail(body: Any) -> str:
    if isinstance(body, Mapping):
        return str(body.get("message") or body.get("reason") or "")
    return str(body or "")


def _has_preemption_condition(pod: Mapping[str, Any]) -> bool:
    """Whether the DisruptionTarget condition set by a scheduler's preemption is present."""
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if isinstance(condition, Mapping) and condition.get("type") == DISRUPTION_TARGET:
            return (condition.get("status") == "True"
                    and condition.get("reason") == REASON_PREEMPTION_BY_SCHEDULER)
    return False


@dataclass(frozen=True, slots=True)
class _SumsAnswer:
    """What the victims chosen from resource sums were on one node for one request (``key``:
    the node's generation, the preemptor's priority, cpu and memory): the same while the
    node and the request stay and every potential victim that started did so before the
    attempt's ``now`` (``latest_start``: the latest such start, -inf if none), as a pod
    that has not started sorts as starting ``now`` (after those, in the node's order)."""

    key: tuple[int, int, int, int]
    # None: not answered from sums (``no_victims``: no lower-priority pod on the node)
    victims: tuple[PodInfo, ...] | None
    num_violating: int = 0
    latest_start: float = -math.inf
    top_start: TopStart = (math.inf, False)
    summary: Summary = (0, 0, 0, 0)
    no_victims: bool = False


def _answer_from_sums(key: tuple[int, int, int, int], pod_info: PodInfo, node_info: NodeInfo,
                      pdbs: Sequence[PDB], now: float) -> _SumsAnswer:
    """``_select_victims_by_resources``' answer for the node alone (not the plugins
    independent of its pods, which depend on the preemptor)."""
    pods = node_info.pods
    priority = pod_info.priority
    potential = [p for p in pods if p.priority < priority]
    if not potential:
        return _SumsAnswer(key, None, no_victims=True)
    uids = set(map(_UID, pods))
    if len(uids) != len(pods) or "" in uids:
        return _SumsAnswer(key, None)  # NodeInfo.remove_pod finds pods by UID: let it say
    request = pod_info.requests
    cpu, memory = request.milli_cpu, request.memory
    allocatable = node_info.allocatable
    allowed_pods = allocatable.allowed_pod_number
    cpu_room = allocatable.milli_cpu - node_info.requested.milli_cpu
    memory_room = allocatable.memory - node_info.requested.memory
    for p in potential:
        cpu_room += p.requests.milli_cpu
        memory_room += p.requests.memory
    count = len(pods) - len(potential)
    # NodeResourcesFit's Filter for a cpu/memory-only request (fit.py's inline check)
    if not (count < allowed_pods and (cpu <= 0 or cpu <= cpu_room)
            and (memory <= 0 or memory <= memory_room)):
        return _SumsAnswer(key, None)

    # Most important first (importance_key's order: a pod that has not started sorts as
    # starting now), each start read once.
    starts = start_times(potential)
    unstarted = starts[0] is None and starts.count(None) == len(starts)
    if unstarted:
        # None started (the bench's pods: no kubelet): the order is by priority alone, a
        # stable sort in C (reverse keeps equal keys in the node's order).
        potential.sort(key=_PRIORITY, reverse=True)
        order: list[int] = []
        latest_start = -math.inf
    else:
        keys = [(-p.priority, now if s is None else s) for p, s in zip(potential, starts)]
        order = sorted(range(len(potential)), key=keys.__getitem__)
        potential = list(map(potential.__getitem__, order))
        latest_start = max([s for s in starts if s is not None], default=-math.inf)
    if pdbs:
        violating, non_violating = filter_pods_with_pdb_violation(potential, pdbs)
    else:
        violating, non_violating = [], potential
    # reprieve_victims' loop on the sums, inline (no call per reprieve): put each pod
    # back, PDB-protected ones first, keeping it when the pod still fits, else it is a
    # victim (fits() after the add, as NodeResourcesFit's inline check).
    victims: list[PodInfo] = []
    num_violating = 0
    for group, violates in ((violating, 1), (non_violating, 0)):
        for victim in group:
            requests = victim.requests
            cpu_left = cpu_room - requests.milli_cpu
            memory_left = memory_room - requests.memory
            if (count + 1 < allowed_pods and (cpu <= 0 or cpu <= cpu_left)
                    and (memory <= 0 or memory <= memory_left)):
                count += 1
                cpu_room, memory_room = cpu_left, memory_left
            else:
                victims.append(victim)
                num_violating += violates
    if violating and non_violating:
        victims.sort(key=importance_key(now))
    if not victims:
        return _SumsAnswer(key, (), latest_start=latest_start)
    if unstarted:
        top: TopStart = (math.inf, True)
    else:
        start_of = dict(zip(map(id, potential), map(starts.__getitem__, order)))
        top = top_start(victims, list(map(start_of.__getitem__, map(id, victims))))
    return _SumsAnswer(key, tuple(victims), num_violating, latest_start, top,
                       candidate_summary(victims, num_violating))


class DefaultPreemption(PostFilterPlugin, PreEnqueuePlugin, EnqueueExtensions):
    NAME = NAME

    def __init__(
        self,
        args: Mapping[str, Any] | None,
        handle: Handle,
        *,
        rng: random.Random | None = None,
        wall_clock: Callable[[], datetime] | None = None,
    ) -> None:
        self.min_candidate_nodes_percentage, self.min_candidate_nodes_absolute = parse_args(args)
        self._handle = handle
        self._rng = rng if rng is not None else random.Random()
        self._wall_clock = wall_clock or (lambda: datetime.now(UTC))
        # The scheduler's metrics, handed to plugins through the handle.
        self.metrics: PreemptionMetrics = handle.metrics
        # PostFilter calls so far, and the victims of the last chosen node (for the metrics).
        self.attempts = 0
        self.last_victims: int | None = None
        self._preemptions: dict[str, _Preemption] = {}  # preemptor uid -> its preemption
        self._marked_victims: dict[str, float] = {}  # victim uid -> handle.clock() expiry
        self._tasks: set[asyncio.Task[None]] = set()
        # Set by ``explain``: decide as usual, record the decision in ``last_dry_run``, and
        # neither evict nor nominate anything (no API call, no task).
        self.dry_run = False
        self.last_dry_run: DryRun | None = None
        # While find_candidates' dry run runs: the runtime's split of the Filter plugins
        # (None: the plain path, every plugin each time).
        self._reprieve: ReprieveFilter | None = None
        # ... and the cycle's Filter statuses of the nodes (which plugin rejected each).
        self._rejected: Mapping[str, Status] = {}
        # Filled by the by-resources dry run of the last find_candidates: per candidate node,
        # the earliest start among its highest-priority victims (the pick's last criterion)
        # and the pick's first four criteria, as the victims it chose give them.
        self._top_starts: dict[str, TopStart] = {}
        self._summaries: dict[str, Summary] = {}
        # The by-resources answer per node, kept across attempts: a preemptor like the last
        # one on a node unchanged since (its generation) finds the same victims
        # (PreemptionAsync's preemptors each answer 500 nodes, most of them unchanged).
        self._from_sums: dict[str, _SumsAnswer] = {}

    # --- enqueue -----------------------------------------------------------------------------

    def events_to_register(self) -> list[ClusterEventWithHint]:
        # A pod held back by PreEnqueue may be let in after a victim's deletion; whether it
        # then fits is for the plugins that rejected it to say, so this hint always answers
        # Skip (upstream isPodSchedulableAfterAssignedPodDeletion).
        return [ClusterEventWithHint(ASSIGNED_POD_DELETE, self.is_schedulable_after_pod_deletion)]

    def is_schedulable_after_pod_deletion(
        self, pod: dict[str, Any], old: Any, new: Any
    ) -> QueueingHint:
        return QueueingHint.SKIP

    def pre_enqueue(self, pod_info: PodInfo) -> Status | None:
        """Keep the preemptor out of the queue while its preemption's API calls run."""
        if self.is_pod_running_preemption(_uid_of(pod_info)):
            return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_WAITING_FOR_PREEMPTION)
        return None

    def is_pod_running_preemption(self, uid: str) -> bool:
        """Whether the pod's victims are still being preempted (upstream
        IsPodRunningPreemption): the API calls are in flight, unless only the last victim is
        left and the informer already shows it terminating or gone."""
        record = self._preemptions.get(uid)
        if record is None or not record.running:
            return False
        if record.last_victim is None:
            return True
        namespace, name = record.last_victim
        victim = self._handle.listers.get("pods", namespace, name)
        return victim is not None and not is_being_deleted(victim)

    # --- PostFilter --------------------------------------------------------------------------

    def post_filter(
        self,
        state: CycleState,
        pod_info: PodInfo,
        node_to_status: Mapping[str, Status],
    ) -> tuple[PostFilterResult | None, Status | None]:
        self.attempts += 1
        self.metrics.preemption_attempts.inc()
        self._forget_expired()
        result, status = self._preempt(state, pod_info, node_to_status)
        if status is not None and status.reasons and status.message():
            status = Status(status.code, MESSAGE_PREFIX + status.message(), plugin=NAME,
                            error=status.error)
        return result, status

    def _preempt(
        self, state: CycleState, pod_info: PodInfo, node_to_status: Mapping[str, Status]
    ) -> tuple[PostFilterResult | None, Status | None]:
        # With HTTP extenders that preempt, the scheduling cycle ran the dry run and the
        # extenders (their calls are I/O) before PostFilter, through preemption_victims and
        # narrow_preemption: use that outcome instead of a second dry run.
        self.last_dry_run = None
        narrowed = state.get(EXTENDER_CANDIDATES_KEY)
        if isinstance(narrowed, tuple):
            return narrowed
        if isinstance(narrowed, _GangPlanned):
            return self._carry_out_gang_plan(pod_info, narrowed.group, narrowed.plan)
        known_starts: Mapping[str, TopStart] | None = None
        known_summaries: Mapping[str, Summary] | None = None
        if narrowed is not None:
            # the extenders' narrowing may have changed the victims: no known start times
            candidates: list[Candidate] = narrowed
        else:
            shortfall = bound_gang_shortfall(self._handle, pod_info)
            if shortfall is not None:
                return None, shortfall
            gang = self._gang_to_place(pod_info)
            if isinstance(gang, Status):
                return None, gang
            if gang is not None:
                return self._preempt_gang(state, pod_info, node_to_status, *gang)
            topology = state.get(GANG_TOPOLOGY_STATE_KEY)
            if isinstance(topology, RequiredGangTopology):
                # The gang's last member: only the nodes of its domain may help.
                node_to_status = _within_domains(node_to_status, topology)
            candidates, early = self.find_candidates(state, pod_info, node_to_status)
            if early is not None:
                return early
            # the candidates as the dry run chose them: its start times hold
            known_starts, known_summaries = self._top_starts, self._summaries
        best = pick_one_node_for_preemption(candidates, now=time.time(),
                                            known_starts=known_starts,
                                            known_summaries=known_summaries)
        if best is None or not best.name:
            return None, Status(Code.UNSCHEDULABLE, ERR_NO_CANDIDATE)
        if self.dry_run:
            # explain: record the decision instead of carrying it out.
            statuses: dict[str, Status] = (
                self.last_dry_run.node_statuses if self.last_dry_run else {})
            self.last_dry_run = DryRun(candidates, best, statuses)
            return PostFilterResult(nominated_node_name=best.name), Status(Code.SUCCESS)
        log.info("preempting", pod=pod_info.key, node=best.name,
                 victims=[v.key for v in best.victims])
        status = self._prepare_candidate_async(best, pod_info)
        if status is not None:
            return None, status
        return PostFilterResult(nominated_node_name=best.name), Status(Code.SUCCESS)

    # --- gangs: one plan for every member (gang.py) ----------------------------------------

    def _gang_to_place(self, pod_info: PodInfo) -> tuple[str, list[PodInfo]] | Status | None:
        """(``namespace/group``, the members to place: the preemptor first, then pending
        siblings) when the pod is one of several members its PodGroup still needs; None for
        a pod outside a gang (or the last member missing: the one-pod path serves it); a
        Status when the gang cannot complete whatever is preempted."""
        group = pod_info.labels.get(POD_GROUP_LABEL) or ""
        if not group:
            return None
        handle = self._handle
        pg = handle.listers.get("podgroups", pod_info.namespace, group)
        spec = pg.get("spec") if isinstance(pg, Mapping) else None
        min_member = spec.get("minMember") if isinstance(spec, Mapping) else None
        if not isinstance(min_member, int) or isinstance(min_member, bool) or min_member <= 1:
            return None
        full = f"{pod_info.namespace}/{group}"
        holding = {
            wp.pod_info.uid for wp in handle.iterate_waiting_pods()
            if wp.pod_info.namespace == pod_info.namespace
            and wp.pod_info.labels.get(POD_GROUP_LABEL) == group
        }
        holding.discard(pod_info.uid)
        bound = bound_gang_companions(handle.listers, pod_info.pod)
        holding |= {str((p.get("metadata") or {}).get("uid") or "") for p in bound}
        needed = min_member - len(holding)
        if needed <= 1:
            return None
        pending: list[PodInfo] = []
        for pod in handle.listers.list("pods", pod_info.namespace):
            meta = pod.get("metadata") or {}
            if ((meta.get("labels") or {}).get(POD_GROUP_LABEL) != group
                    or meta.get("uid") == pod_info.uid or meta.get("uid") in holding
                    or meta.get("deletionTimestamp")
                    or (pod.get("spec") or {}).get("nodeName")
                    or (pod.get("spec") or {}).get("schedulerName") != (
                        pod_info.pod.get("spec") or {}).get("schedulerName")
                    or (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")):
                continue
            try:
                pending.append(PodInfo.from_pod(pod))
            except Exception:  # a malformed sibling is reported by the scheduler, not here
                continue
        if len(pending) + 1 < needed:
            return Status(Code.UNSCHEDULABLE, ERR_GANG_CANNOT_COMPLETE.format(
                group=full, needed=needed, pending=len(pending) + 1))
        pending.sort(key=lambda p: p.key)
        return full, [pod_info] + pending[:needed - 1]

    def _gang_members(
        self, state: CycleState, pod_info: PodInfo, members: list[PodInfo],
        node_to_status: Mapping[str, Status], nodes: list[NodeInfo],
    ) -> list[GangMember] | Status:
        """Each member with a cycle state PreFilter filled for it and the nodes it may use:
        the preemptor's shape shares its state and its Filter statuses; another shape runs
        PreFilter (a rejection there that preemption cannot fix ends the plan)."""
        runner = self._handle if isinstance(self._handle, _PreFilters) else None
        preemptor_nodes = {
            name for name, status in node_to_status.items()
            if status.code == Code.UNSCHEDULABLE}
        out: list[GangMember] = []
        shapes: list[tuple[PodInfo, CycleState, set[str] | None]] = []
        for member in members:
            if member is pod_info or _same_shape(member, pod_info):
                out.append(GangMember(member, state, preemptor_nodes, scan_untouched=False))
                continue
            known = next((s for s in shapes if _same_shape(s[0], member)), None)
            if known is None:
                if runner is None:
                    return Status(Code.UNSCHEDULABLE, ERR_GANG_CANNOT_COMPLETE.format(
                        group=member.labels.get(POD_GROUP_LABEL, ""), needed=len(members),
                        pending=0) + " (members of another shape need the runtime's PreFilter)")
                member_state = CycleState()
                result, status, _ = runner.run_pre_filter_plugins(member_state, member, nodes)
                if status is not None and status.code not in (Code.SUCCESS, Code.UNSCHEDULABLE):
                    if status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                        return Status(Code.UNSCHEDULABLE, status.message(), plugin=status.plugin)
                    return status
                allowed = None if result is None or result.all_nodes() else set(
                    result.node_names or ())
                known = (member, member_state, allowed)
                shapes.append(known)
            out.append(GangMember(member, known[1], known[2]))
        return out

    def _preempt_gang(
        self, state: CycleState, pod_info: PodInfo, node_to_status: Mapping[str, Status],
        group: str, members: list[PodInfo],
    ) -> tuple[PostFilterResult | None, Status | None]:
        """Plan for every member the gang still needs, on copies of the snapshot; preempt
        nothing unless the whole gang gets a node; nominate every member."""
        planned = self._plan_gang(state, pod_info, node_to_status, group, members)
        if isinstance(planned, tuple):
            return planned
        return self._carry_out_gang_plan(pod_info, group, planned.plan)

    def _plan_gang(
        self, state: CycleState, pod_info: PodInfo, node_to_status: Mapping[str, Status],
        group: str, members: list[PodInfo],
    ) -> _GangPlanned | tuple[PostFilterResult | None, Status | None]:
        """The gang's plan (with each member's cycle state, to check it again after the
        extenders), or PostFilter's answer when there is none."""
        if any(self.is_pod_running_preemption(_uid_of(m)) for m in members):
            return None, Status(Code.UNSCHEDULABLE, ERR_WAITING_FOR_PREEMPTION)
        eligible, reason = self.pod_eligible_to_preempt_others(pod_info, node_to_status)
        if not eligible:
            return None, Status(Code.UNSCHEDULABLE, reason)
        nodes = self._handle.snapshot().list()
        if not nodes:
            return None, Status(Code.ERROR, ERR_NO_NODES)
        try:
            pdbs = compile_pdbs(self._handle.listers.list("poddisruptionbudgets"))
        except Exception as exc:
            return None, Status.from_error(exc)
        gang = self._gang_members(state, pod_info, members, node_to_status, nodes)
        if isinstance(gang, Status):
            return PostFilterResult(nominated_node_name=""), gang
        handle = self._handle

        def replay(member_state: CycleState, member: PodInfo, other: PodInfo,
                   node_info: NodeInfo, added: bool) -> Status | None:
            if added:
                return handle.run_pre_filter_extension_add_pod(
                    member_state, member, other, node_info)
            return handle.run_pre_filter_extension_remove_pod(
                member_state, member, other, node_info)

        def plan_on(members: list[GangMember],
                    on: list[NodeInfo]) -> tuple[GangPlan | None, Status | None]:
            return plan_gang_preemption(
                members, on, pdbs, group=group, select_victims=self.select_victims_on_node,
                fits=self._member_fits, companions=self._gang_companions, replay=replay,
                num_candidates=self.calculate_num_candidates)

        topology = state.get(GANG_TOPOLOGY_STATE_KEY)
        if isinstance(topology, RequiredGangTopology):
            plan, why = plan_in_one_domain(gang, nodes, topology, group=group, plan=plan_on)
        else:
            plan, why = plan_on(gang, nodes)
        if plan is None:
            status = why or Status(Code.UNSCHEDULABLE, ERR_NO_CANDIDATE)
            if self.dry_run:
                self.last_dry_run = DryRun([], None, {}, None)
            # An empty nomination clears a stale one: the gang holds nothing.
            return PostFilterResult(nominated_node_name=""), status
        return _GangPlanned(plan, gang, group, pdbs)

    def _member_fits(self, member_state: CycleState, member: PodInfo,
                     node_info: NodeInfo) -> bool:
        status = self._handle.run_filter_plugins_with_nominated_pods(
            member_state, member, node_info)
        return status is None or status.is_success()

    def _carry_out_gang_plan(
        self, pod_info: PodInfo, group: str, plan: GangPlan,
    ) -> tuple[PostFilterResult | None, Status | None]:
        node = plan.node_of(pod_info.uid)
        own = next(p for p in plan.placements if p.member.uid == pod_info.uid)
        chosen = Candidate(node, own.victims, plan.num_pdb_violations)
        if self.dry_run:
            self.last_dry_run = DryRun(
                [Candidate(p.node, p.victims, 0) for p in plan.placements], chosen, {}, plan)
            return PostFilterResult(nominated_node_name=node), Status(Code.SUCCESS)
        log.info("preempting for a gang", pod=pod_info.key, group=group,
                 placements={p.member.key: p.node for p in plan.placements},
                 victims=[v.key for v in plan.victims],
                 pdb_violations=plan.num_pdb_violations)
        started = self._prepare_gang_async(plan, pod_info)
        if started is not None:
            return None, started
        return PostFilterResult(nominated_node_name=node), Status(Code.SUCCESS)

    # --- a gang's plan and the extenders' preempt verb ----------------------------------------

    def _offer_gang_plan(
        self, state: CycleState, pod_info: PodInfo, node_to_status: Mapping[str, Status],
    ) -> PreemptionVictims | None | bool:
        """For a gang member: the plan's victims per node for the extenders (as upstream's
        ProcessPreemption receives a node's victims and their PDB violations), the plan kept
        in the cycle state; None with PostFilter's answer kept when there is nothing to
        offer; False for a pod outside a gang (the one-pod path serves it)."""
        answer: tuple[PostFilterResult | None, Status | None] | None = None
        shortfall = bound_gang_shortfall(self._handle, pod_info)
        if shortfall is not None:
            answer = (None, shortfall)
        else:
            gang = self._gang_to_place(pod_info)
            if gang is None:
                return False
            if isinstance(gang, Status):
                answer = (None, gang)
            else:
                planned = self._plan_gang(state, pod_info, node_to_status, *gang)
                if isinstance(planned, tuple):
                    answer = planned
                else:
                    offered = _victims_by_node(planned.plan)
                    state.write(EXTENDER_GANG_PLAN_KEY, _GangOffer(planned, offered))
                    budgets = list(planned.pdbs)
                    out: PreemptionVictims = {}
                    for node_name, victims in offered.items():
                        budgets, violated = spend_pdbs(budgets, victims)
                        out[node_name] = (victims, violated)
                    return out
        state.write(EXTENDER_CANDIDATES_KEY, answer)
        return None

    def _narrow_gang_plan(
        self, offer: _GangOffer, kept: Mapping[str, tuple[list[PodInfo], int]],
    ) -> _GangPlanned | tuple[PostFilterResult | None, Status | None]:
        """The gang's plan as the extenders left it: every node of the plan kept (a node
        dropped abandons the whole plan: never part of a gang), each node's victims those
        the extenders kept (fewer are fine when every member still fits, checked again on
        the plan's nodes; a victim the plan did not offer abandons it)."""
        planned, group = offer.planned, offer.planned.group
        dropped = sorted(set(offer.offered) - set(kept))
        if dropped:
            return PostFilterResult(nominated_node_name=""), Status(
                Code.UNSCHEDULABLE, ERR_EXTENDER_DROPPED_GANG_NODE.format(
                    group=group, nodes=", ".join(dropped)))
        kept_uids: set[str] = set()
        for node_name, (victims, _) in kept.items():
            offered = {v.uid for v in offer.offered.get(node_name, [])}
            extra = sorted(v.key for v in victims if v.uid not in offered)
            if extra:
                return PostFilterResult(nominated_node_name=""), Status(
                    Code.UNSCHEDULABLE, ERR_EXTENDER_GANG_VICTIMS.format(
                        group=group, node=node_name, pods=", ".join(extra)))
            kept_uids |= {v.uid for v in victims}
        plan = planned.plan
        if kept_uids == {v.uid for v in plan.victims}:
            return planned
        # Fewer victims: the kept ones, their gangs whole, and every member checked again.
        victims = [v for v in plan.victims if v.uid in kept_uids]
        victims += [c for c in self._gang_companions(victims)
                    if c.uid not in kept_uids and c.uid not in {v.uid for v in victims}]
        gone = {v.uid for v in victims}
        states = {m.pod_info.uid: m.state for m in planned.members}
        snapshot = self._handle.snapshot()
        for node_name in dict.fromkeys(p.node for p in plan.placements):
            real = snapshot.get(node_name)
            if real is None:
                continue
            info = real.clone()
            for pod in list(info.pods):
                if pod.uid in gone:
                    info.remove_pod(pod.pod)
            for placement in plan.placements:
                if placement.node != node_name:
                    continue
                member = placement.member
                member_state = states.get(member.uid)
                if member_state is None or not self._member_fits(
                        member_state.clone(), member, info):
                    return PostFilterResult(nominated_node_name=""), Status(
                        Code.UNSCHEDULABLE, ERR_EXTENDER_GANG_SHORT.format(
                            group=group, pod=member.key, node=node_name))
                info.add_pod(member)
        _, violations = spend_pdbs(planned.pdbs, victims)
        placements = [Placement(p.member, p.node, [v for v in p.victims if v.uid in gone])
                      for p in plan.placements]
        return _GangPlanned(GangPlan(placements, victims, violations), planned.members, group,
                            planned.pdbs)

    def _prepare_gang_async(self, plan: GangPlan, preemptor: PodInfo) -> Status | None:
        """Start the task carrying out a gang's plan: nominate every member (in memory now,
        then its status), clear lower-priority nominations on the plan's nodes, evict."""
        self.last_victims = len(plan.victims)
        self.metrics.preemption_victims.observe(len(plan.victims))
        to_preempt = [
            v for v in plan.victims
            if not is_being_deleted(v.pod) and v.uid not in self._marked_victims
        ]
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return Status(Code.ERROR, "preemption needs a running event loop")
        nominator = self._handle.nominator
        members = {p.member.uid for p in plan.placements}
        others = [p for p in plan.placements if p.member.uid != preemptor.uid]
        if isinstance(nominator, _Nominates):
            for placement in others:
                nominator.add_nominated_pod(placement.member, placement.node)
        nominated: list[PodInfo] = []
        seen: set[str] = set()
        for node in dict.fromkeys(p.node for p in plan.placements):
            for p in nominator.nominated_pods_for_node(node):
                if p.priority < preemptor.priority and p.uid not in members and p.uid not in seen:
                    seen.add(p.uid)
                    nominated.append(p)
        victims = frozenset(v.uid for v in to_preempt)
        records = []
        for placement in plan.placements:
            record = _Preemption(placement.node, victims)
            self._preemptions[_uid_of(placement.member)] = record
            records.append(record)
        for victim in to_preempt:
            self._marked_victims[victim.uid] = math.inf
        task = loop.create_task(
            self._run_gang_preemption(records, preemptor, others, to_preempt, nominated),
            name=f"preemption:{preemptor.key}@gang")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return None

    async def _run_gang_preemption(
        self, records: list[_Preemption], preemptor: PodInfo, others: list[Any],
        victims: list[PodInfo], nominated: list[PodInfo],
    ) -> None:
        cancelled = False
        failed = False
        try:
            # The members' nominations land before any victim leaves: the pods watch then
            # shows them holding their nodes before the room is free.
            results = await asyncio.gather(
                *(self._set_nomination(p.member, p.node) for p in others),
                return_exceptions=True)
            for placement, result in zip(others, results):
                if isinstance(result, BaseException):
                    failed = True  # the in-memory nomination still holds the room
                    log.warning("cannot nominate a gang member", pod=placement.member.key,
                                node=placement.node, error=str(result))
            for pod in nominated:
                try:
                    await self._clear_nomination(pod)
                except Exception as exc:
                    failed = True
                    log.warning("cannot clear nominatedNodeName", pod=pod.key, error=str(exc))
            if victims:
                if not await self._preempt_victims(records[0], preemptor, victims[:-1]):
                    failed = True
                else:
                    last = victims[-1]
                    for record in records:
                        record.last_victim = (last.namespace, last.name)
                    if not await self._preempt_victims(records[0], preemptor, [last]):
                        failed = True
        except asyncio.CancelledError:
            cancelled = True
            raise
        finally:
            now = self._handle.clock()
            for record in records:
                record.running = False
                record.expires = now + VICTIM_MARK_SECONDS
            for victim in victims:
                if victim.uid in self._marked_victims:
                    self._marked_victims[victim.uid] = now + VICTIM_MARK_SECONDS
            if not cancelled:
                log.info("gang preemption finished", preemptor=preemptor.key,
                         members=len(records), victims=len(victims), failed=failed)
            if (failed or not victims) and not cancelled:
                try:
                    self._handle.activate([preemptor.pod] + [p.member.pod for p in others])
                except Exception:
                    log.exception("cannot activate the gang", pod=preemptor.key)

    async def _set_nomination(self, pod: PodInfo, node: str) -> None:
        response = await self._handle.client.request(
            "PATCH", _pod_path(pod.namespace, pod.name) + "/status",
            body={"status": {"nominatedNodeName": node}},
            content_type=STRATEGIC_MERGE_PATCH,
        )
        if not _ok(response.status):
            raise PreemptionError(
                f"nominating pod {pod.key} to {node}: HTTP {response.status} "
                f"{_error_detail(response.body)}".rstrip())

    # --- the HTTP extenders' preempt verb (the framework's ExtenderPreemption seam) ---------

    def preemption_victims(
        self, state: CycleState, pod_info: PodInfo, node_to_status: Mapping[str, Status]
    ) -> dict[str, tuple[list[PodInfo], int]] | None:
        """The dry run's candidates for the extenders to narrow; None (with PostFilter's
        answer kept in the cycle state) when there is nothing to offer them.  A gang
        member offers its gang's whole plan: each node's victims."""
        state.delete(EXTENDER_GANG_PLAN_KEY)
        offered = self._offer_gang_plan(state, pod_info, node_to_status)
        if offered is not False:
            return offered if isinstance(offered, dict) else None
        topology = state.get(GANG_TOPOLOGY_STATE_KEY)
        if isinstance(topology, RequiredGangTopology):
            node_to_status = _within_domains(node_to_status, topology)
        candidates, early = self.find_candidates(state, pod_info, node_to_status)
        if early is not None:
            state.write(EXTENDER_CANDIDATES_KEY, early)
            return None
        return {c.name: (c.victims, c.num_pdb_violations) for c in candidates}

    def narrow_preemption(
        self, state: CycleState, kept: Mapping[str, tuple[list[PodInfo], int]] | Status
    ) -> None:
        """What the extenders kept (or why they failed), for PostFilter to choose from."""
        offer = state.get(EXTENDER_GANG_PLAN_KEY)
        if isinstance(offer, _GangOffer):
            state.delete(EXTENDER_GANG_PLAN_KEY)
            if isinstance(kept, Status):
                state.write(EXTENDER_CANDIDATES_KEY, (None, kept))
            else:
                state.write(EXTENDER_CANDIDATES_KEY, self._narrow_gang_plan(offer, kept))
            return
        if isinstance(kept, Status):
            state.write(EXTENDER_CANDIDATES_KEY, (None, kept))
            return
        state.write(EXTENDER_CANDIDATES_KEY,
                    [Candidate(name, victims, pdb) for name, (victims, pdb) in kept.items()])

    def find_candidates(
        self, state: CycleState, pod_info: PodInfo, node_to_status: Mapping[str, Status]
    ) -> tuple[list[Candidate], tuple[PostFilterResult | None, Status | None] | None]:
        """The dry run's candidates, or (as second item) the PostFilter answer when there is
        nothing to choose from (not eligible, no candidate)."""
        if self.is_pod_running_preemption(_uid_of(pod_info)):
            return [], (None, Status(Code.UNSCHEDULABLE, ERR_WAITING_FOR_PREEMPTION))
        eligible, reason = self.pod_eligible_to_preempt_others(pod_info, node_to_status)
        if not eligible:
            log.debug("pod is not eligible for preemption", pod=pod_info.key, reason=reason)
            return [], (None, Status(Code.UNSCHEDULABLE, reason))

        all_nodes = self._handle.snapshot().list()
        if not all_nodes:
            return [], (None, Status(Code.ERROR, ERR_NO_NODES))
        # Nodes without a status were never filtered: UnschedulableAndUnresolvable (_code).
        # C loops (``map``, ``compress``): every node of the cluster is read per preemptor.
        found = map(node_to_status.get, map(_NODE_NAME, all_nodes), repeat(_NO_STATUS))
        unschedulable = compress(all_nodes, map(Code.UNSCHEDULABLE.__eq__, map(_CODE, found)))
        potential = list(unschedulable)
        if potential and not all(map(_NODE, potential)):
            potential = [n for n in potential if n.node is not None]
        candidates: list[Candidate] = []
        statuses: dict[str, Status] = {}
        errors: list[Status] = []
        if potential:
            try:
                pdbs = compile_pdbs(self._handle.listers.list("poddisruptionbudgets"))
            except Exception as exc:
                return [], (None, Status.from_error(exc))
            offset, num_candidates = self.get_offset_and_num_candidates(len(potential))
            if self.dry_run:
                offset = 0  # a reproducible answer; the daemon starts at a random node
            reprieve = None
            if isinstance(self._handle, _ReprieveFilters):
                reprieve = self._handle.reprieve_filter(state, leave_out=POD_INDEPENDENT_FILTERS)
            self._reprieve = reprieve
            self._rejected = node_to_status
            self._top_starts = {}
            self._summaries = {}
            if len(self._from_sums) > 2 * len(all_nodes):
                self._from_sums.clear()  # nodes gone since: never asked about again
            try:
                candidates, statuses, errors = dry_run_preemption(
                    self.select_victims_on_node, state, pod_info, potential, pdbs,
                    offset=offset, num_candidates=num_candidates,
                    # No active AddPod/RemovePod: nothing the dry run does changes the state.
                    clone_state=reprieve is None or reprieve.extensions,
                    fast_select=(self._select_victims_by_resources
                                 if self._by_resources(reprieve, pod_info) else None),
                )
            finally:
                self._reprieve = None
                self._rejected = {}
        if self.dry_run:
            self.last_dry_run = DryRun(candidates, None, statuses)
        if not candidates:
            if errors:
                return [], (None, Status(Code.ERROR, ", ".join(e.message() for e in errors),
                                         error=errors[0].error))
            not_helpful = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_NOT_HELPFUL)
            diagnosis = Diagnosis()
            if statuses:
                diagnosis.node_to_status = {
                    n.name: statuses.get(n.name, not_helpful) for n in all_nodes}
            else:  # no dry run (MixedChurn's too-big pod): one bulk record, counted in C
                diagnosis.reject_all(all_nodes, not_helpful)
            fit_error = FitError(
                pod_key=pod_info.key, num_all_nodes=len(all_nodes), diagnosis=diagnosis
            )
            log.debug("no preemption candidate; preemption is not helpful", pod=pod_info.key)
            # An empty nomination asks the caller to clear a stale nominatedNodeName.
            return [], (PostFilterResult(nominated_node_name=""),
                        Status(Code.UNSCHEDULABLE, str(fit_error)))
        return candidates, None

    # --- eligibility -------------------------------------------------------------------------

    def pod_eligible_to_preempt_others(
        self, pod_info: PodInfo, node_to_status: Mapping[str, Status]
    ) -> tuple[bool, str]:
        """Not eligible: ``preemptionPolicy: Never``, or the pod already preempted on its
        nominated node and some lower-priority victim there is still terminating."""
        if (pod_info.pod.get("spec") or {}).get("preemptionPolicy") == PREEMPT_NEVER:
            return False, ERR_NOT_ELIGIBLE_POLICY_NEVER
        nominated = str((pod_info.pod.get("status") or {}).get("nominatedNodeName") or "")
        if not nominated:
            record = self._preemptions.get(_uid_of(pod_info))
            nominated = record.node if record is not None else ""
        if nominated:
            # If Filter says the nominated node can never work, preempting again elsewhere is
            # the only way forward (an absent node counts as UnschedulableAndUnresolvable).
            if _code(node_to_status.get(nominated)) == Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                return True, ""
            node_info = self._handle.snapshot().get(nominated)
            if node_info is not None:
                for other in node_info.pods:
                    if other.priority < pod_info.priority and self._terminating_by_preemption(
                        other
                    ):
                        return False, ERR_NOT_ELIGIBLE_TERMINATING
        return True, ""

    def _terminating_by_preemption(self, pod_info: PodInfo) -> bool:
        if pod_info.uid in self._marked_victims:
            return True
        return is_being_deleted(pod_info.pod) and _has_preemption_condition(pod_info.pod)

    # --- candidates --------------------------------------------------------------------------

    def calculate_num_candidates(self, num_nodes: int) -> int:
        """How many candidates the dry run should find: a percentage of the nodes, at least
        the absolute minimum, never more than there are nodes."""
        n = num_nodes * self.min_candidate_nodes_percentage // 100
        n = max(n, self.min_candidate_nodes_absolute)
        return min(n, num_nodes)

    def get_offset_and_num_candidates(self, num_nodes: int) -> tuple[int, int]:
        """A random start (so preemption spreads over the cluster) and the candidate count."""
        return self._rng.randrange(num_nodes), self.calculate_num_candidates(num_nodes)

    def select_victims_on_node(
        self,
        state: CycleState,
        pod_info: PodInfo,
        node_info: NodeInfo,
        pdbs: Sequence[PDB],
    ) -> tuple[list[PodInfo], int, Status | None]:
        """The fewest, least important pods to evict from ``node_info`` (a copy, as is
        ``state``) so that the pod fits; (victims, PDB violations among them, status).

        Remove every lower-priority pod; if the pod still does not fit, the node is no
        candidate.  Otherwise put pods back, most important first and PDB-protected ones
        before the others, keeping each that still leaves room for the pod.
        """
        handle = self._handle
        # In find_candidates' dry run, the reprieve loop runs only the Filter plugins that
        # depend on the node's pods (the others passed with every victim removed), and
        # AddPod/RemovePod only when some PreFilter extension is active.
        reprieve = self._reprieve
        fits_filter, extensions = (
            (handle.run_filter_plugins_with_nominated_pods, True) if reprieve is None
            else (reprieve.dependent, reprieve.extensions))

        def remove(victim: PodInfo) -> Status | None:
            node_info.remove_pod(victim.pod)
            if not extensions:
                return None
            status = handle.run_pre_filter_extension_remove_pod(state, pod_info, victim, node_info)
            return None if status is None or status.is_success() else _as_error(status)

        def add(victim: PodInfo) -> Status | None:
            node_info.add_pod(victim)
            if not extensions:
                return None
            status = handle.run_pre_filter_extension_add_pod(state, pod_info, victim, node_info)
            return None if status is None or status.is_success() else _as_error(status)

        potential = [p for p in node_info.pods if self._preemption_allowed(p, pod_info)]
        for victim in potential:
            error = remove(victim)
            if error is not None:
                return [], 0, error
        if not potential:
            return [], 0, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_NO_VICTIMS)

        # Inter-pod affinity of the preemptor to a victim is deliberately not considered
        # (as upstream): affinity to lower-priority pods is not a supported configuration.
        status = handle.run_filter_plugins_with_nominated_pods(state, pod_info, node_info)
        if status is not None and not status.is_success():
            return [], 0, status

        now = time.time()
        potential.sort(key=importance_key(now))
        violating, non_violating = filter_pods_with_pdb_violation(potential, pdbs)

        def fits() -> bool:
            status = fits_filter(state, pod_info, node_info)
            return status is None or status.is_success()

        victims, num_violating, error = reprieve_victims(
            violating, non_violating, add=add, remove=remove, fits=fits)
        if error is not None:
            return [], 0, error
        if violating and non_violating:
            victims.sort(key=importance_key(now))
        return victims, num_violating, None

    @staticmethod
    def _preemption_allowed(victim: PodInfo, preemptor: PodInfo) -> bool:
        return victim.priority < preemptor.priority

    def _by_resources(self, reprieve: ReprieveFilter | None, pod_info: PodInfo) -> bool:
        """Whether ``_select_victims_by_resources`` may answer for this attempt: only
        NodeResourcesFit depends on the node's pods, no AddPod/RemovePod is active, the pod
        asks for cpu and memory only (Fit's check is then three comparisons), the nominated
        nodes are known, and victims are chosen as here (not by a subclass)."""
        if reprieve is None or reprieve.extensions or reprieve.nominated_nodes is None:
            return False
        if reprieve.dependent_names != (names.NODE_RESOURCES_FIT,):
            return False
        cls = type(self)
        if (cls._preemption_allowed is not DefaultPreemption._preemption_allowed
                or cls.select_victims_on_node is not DefaultPreemption.select_victims_on_node):
            return False  # a subclass choosing victims its own way (CapacityScheduling)
        requests = pod_info.requests
        return not requests.ephemeral_storage and not requests.scalar_resources

    def _select_victims_by_resources(
        self,
        state: CycleState,
        pod_info: PodInfo,
        node_info: NodeInfo,
        pdbs: Sequence[PDB],
    ) -> tuple[list[PodInfo], int, Status | None] | None:
        """``select_victims_on_node``'s answer computed on the snapshot's node itself, with
        no copy, no pod removed or added and no Filter call per reprieve, when
        ``_by_resources`` holds: the plugins that do not depend on the node's pods run once,
        and NodeResourcesFit's verdict (pod count, cpu, memory against what is left) is
        kept as sums while the same reprieve loop runs.  None (the plain path decides) for a
        node holding nominated pods, pods without distinct UIDs, or where the pod does not
        fit even with every lower-priority pod gone (the plain path then names why)."""
        reprieve = self._reprieve
        assert reprieve is not None and reprieve.nominated_nodes is not None
        name = node_info.name
        if name in reprieve.nominated_nodes:
            return None
        now = time.time()
        request = pod_info.requests
        key = (node_info.generation, pod_info.priority, request.milli_cpu, request.memory)
        answer = None if pdbs else self._from_sums.get(name)
        if answer is None or answer.key != key or answer.latest_start >= now:
            answer = _answer_from_sums(key, pod_info, node_info, pdbs, now)
            if not pdbs and answer.latest_start < now:
                self._from_sums[name] = answer
        victims = answer.victims
        if victims is None:
            if answer.no_victims:
                return [], 0, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_NO_VICTIMS)
            return None
        # The plugins that do not depend on the node's pods: passed already when the
        # cycle's Filter rejected this node with a plugin placed after all of them (it
        # stops at the first rejection), else run once here.
        rejected = self._rejected.get(name)
        if rejected is None or rejected.plugin not in reprieve.after_independent:
            status = reprieve.independent(state, pod_info, node_info)
            if status is not None and not status.is_success():
                return None
        if victims:
            self._top_starts[name] = answer.top_start
            self._summaries[name] = answer.summary
        return list(victims), answer.num_violating, None

    # --- carrying it out ---------------------------------------------------------------------

    def _prepare_candidate_async(self, candidate: Candidate, preemptor: PodInfo) -> Status | None:
        """Start the task that evicts the victims; None when started (or nothing to do)."""
        self.last_victims = len(candidate.victims)
        self.metrics.preemption_victims.observe(len(candidate.victims))
        to_preempt = [
            v for v in candidate.victims
            if not is_being_deleted(v.pod) and v.uid not in self._marked_victims
        ]
        to_preempt += self._gang_companions(to_preempt)
        if not to_preempt:
            # Every victim is already terminating: just wait for them.
            return None
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return Status(Code.ERROR, "preemption needs a running event loop")
        nominated = [
            p for p in self._handle.nominator.nominated_pods_for_node(candidate.name)
            if p.priority < preemptor.priority and p.uid != preemptor.uid
        ]
        record = _Preemption(candidate.name, frozenset(v.uid for v in to_preempt))
        self._preemptions[_uid_of(preemptor)] = record
        for victim in to_preempt:
            self._marked_victims[victim.uid] = math.inf
        task = loop.create_task(
            self._run_preemption(record, preemptor, to_preempt, nominated),
            name=f"preemption:{preemptor.key}@{candidate.name}",
        )
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return None

    def _gang_companions(self, victims: Sequence[PodInfo]) -> list[PodInfo]:
        """A victim in a gang takes its whole gang down (on any node): a gang left below
        minMember is useless and would hold its nodes for nothing (issue 22)."""
        seen = {v.uid for v in victims}
        out: list[PodInfo] = []
        for victim in victims:
            for pod in bound_gang_companions(self._handle.listers, victim.pod):
                info, _problems = PodInfo.from_assigned_pod(pod)
                if info.uid in seen or info.uid in self._marked_victims:
                    continue
                seen.add(info.uid)
                out.append(info)
        return out

    async def _run_preemption(
        self,
        record: _Preemption,
        preemptor: PodInfo,
        victims: list[PodInfo],
        nominated: list[PodInfo],
    ) -> None:
        node = record.node
        cancelled = False
        failed = False
        try:
            # Lower-priority pods nominated here may no longer fit: let them look elsewhere.
            for pod in nominated:
                try:
                    await self._clear_nomination(pod)
                except Exception as exc:
                    failed = True  # not critical: the victims are still preempted
                    log.warning("cannot clear nominatedNodeName", pod=pod.key, node=node,
                                error=str(exc))
            # All victims but the last in parallel; the last one alone, once recorded, so
            # its deletion event lets the preemptor in even before this task ends (upstream
            # prepareCandidateAsync).  After a failure the last one is spared: the preemptor
            # retries sooner, and may choose differently.
            if not await self._preempt_victims(record, preemptor, victims[:-1]):
                failed = True
            else:
                last = victims[-1]
                record.last_victim = (last.namespace, last.name)
                if not await self._preempt_victims(record, preemptor, [last]):
                    failed = True
        except asyncio.CancelledError:
            cancelled = True
            raise
        finally:
            now = self._handle.clock()
            record.running = False
            record.expires = now + VICTIM_MARK_SECONDS
            for uid in record.victims:
                if uid in self._marked_victims:
                    self._marked_victims[uid] = now + VICTIM_MARK_SECONDS
            if not cancelled:
                log.info("preemption finished", preemptor=preemptor.key, node=node,
                         victims=len(victims), failed=failed)
            if failed and not cancelled:
                # An API call failed: the preemptor may have no event left to wait for, so
                # it must not sit in the unschedulable pool.  On success the victims'
                # deletions move it, as any pod.
                try:
                    self._handle.activate([preemptor.pod])
                except Exception:
                    log.exception("cannot activate the preemptor", pod=preemptor.key)

    async def _preempt_victims(
        self, record: _Preemption, preemptor: PodInfo, victims: list[PodInfo]
    ) -> bool:
        """Preempt these victims in parallel; False if any of them failed."""
        results = await asyncio.gather(
            # A gang's victims (and a victim's gang) are on several nodes: name each one's.
            *(self._preempt_victim(v.node_name or record.node, preemptor, v) for v in victims),
            return_exceptions=True,
        )
        ok = True
        for victim, result in zip(victims, results):
            if isinstance(result, BaseException):
                ok = False
                # Not deleted: it may be chosen (and deleted) by a later attempt.
                self._marked_victims.pop(victim.uid, None)
                log.error("preemption of a victim failed", preemptor=preemptor.key,
                          victim=victim.key, node=record.node, error=str(result))
        return ok

    async def _preempt_victim(self, node: str, preemptor: PodInfo, victim: PodInfo) -> None:
        waiting = self._handle.get_waiting_pod(victim.uid)
        if waiting is not None:
            # Still in Permit: rejecting it releases its reservation, nothing to delete.
            waiting.reject(NAME, WAITING_POD_REJECT_MESSAGE)
        else:
            client = self._handle.client
            path = _pod_path(victim.namespace, victim.name)
            if not _has_preemption_condition(victim.pod):
                condition = {
                    "type": DISRUPTION_TARGET,
                    "status": "True",
                    "reason": REASON_PREEMPTION_BY_SCHEDULER,
                    "message": DISRUPTION_MESSAGE.format(scheduler=preemptor.scheduler_name),
                    "lastTransitionTime": self._wall_clock()
                    .astimezone(UTC)
                    .strftime("%Y-%m-%dT%H:%M:%SZ"),
                }
                response = await client.request(
                    "PATCH", path + "/status",
                    body={"status": {"conditions": [condition]}},
                    content_type=STRATEGIC_MERGE_PATCH,
                )
                if response.status == 404:
                    log.debug("victim already deleted", victim=victim.key)
                    return
                if not _ok(response.status):
                    raise PreemptionError(
                        f"adding the {DISRUPTION_TARGET} condition to pod {victim.key}: "
                        f"HTTP {response.status} {_error_detail(response.body)}".rstrip()
                    )
            response = await client.request("DELETE", path)
            if response.status == 404:
                log.debug("victim already deleted", victim=victim.key)
                return
            if not _ok(response.status):
                raise PreemptionError(
                    f"deleting pod {victim.key}: HTTP {response.status} "
                    f"{_error_detail(response.body)}".rstrip()
                )
        log.info("preempted", preemptor=preemptor.key, victim=victim.key, node=node)
        self._handle.event_recorder.event(
            victim.pod,
            type="Normal",
            reason=EVENT_REASON_PREEMPTED,
            action=EVENT_ACTION_PREEMPTING,
            message=EVENT_MESSAGE.format(uid=preemptor.uid, node=node),
            related=preemptor.pod,
        )

    async def _clear_nomination(self, pod: PodInfo) -> None:
        response = await self._handle.client.request(
            "PATCH", _pod_path(pod.namespace, pod.name) + "/status",
            body={"status": {"nominatedNodeName": None}},
            content_type=STRATEGIC_MERGE_PATCH,
        )
        if response.status != 404 and not _ok(response.status):
            raise PreemptionError(
                f"clearing nominatedNodeName of pod {pod.key}: HTTP {response.status} "
                f"{_error_detail(response.body)}".rstrip()
            )

    # --- lifecycle ---------------------------------------------------------------------------

    def _forget_expired(self) -> None:
        now = self._handle.clock()
        for uid in [u for u, r in self._preemptions.items() if not r.running and r.expires <= now]:
            del self._preemptions[uid]
        for uid in [u for u, expiry in self._marked_victims.items() if expiry <= now]:
            del self._marked_victims[uid]

    @property
    def tasks(self) -> frozenset[asyncio.Task[None]]:
        """Preemption tasks still running."""
        return frozenset(self._tasks)

    async def wait_idle(self) -> None:
        """Wait until every preemption task started so far has finished."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def stop(self) -> None:
        """Cancel running preemptions (the scheduler's stop path); victims not yet deleted
        stay, and the preemptor retries when the scheduler runs again."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)


@dataclass(slots=True)
class _GangPlanned:
    """A gang's plan, with what checking it again needs."""

    plan: GangPlan
    members: list[GangMember]
    group: str
    pdbs: list[PDB]

    def clone(self) -> _GangPlanned:
        return self


@dataclass(slots=True)
class _GangOffer:
    """A gang's plan offered to the extenders: node -> the victims offered there."""

    planned: _GangPlanned
    offered: dict[str, list[PodInfo]]

    def clone(self) -> _GangOffer:
        return self


def _victims_by_node(plan: GangPlan) -> dict[str, list[PodInfo]]:
    """Every pod the plan evicts (its victims' gangs included), by node, most important
    first as the plan lists them."""
    out: dict[str, list[PodInfo]] = {}
    for victim in plan.victims:
        out.setdefault(victim.node_name, []).append(victim)
    return out


def _within_domains(
    node_to_status: Mapping[str, Status], topology: RequiredGangTopology
) -> dict[str, Status]:
    """The statuses with every node outside the gang's domains unresolvable."""
    allowed: set[str] = set().union(*topology.domains.values())
    outside = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                     f"node(s) outside the gang's {topology.key} domain")
    return {name: status if name in allowed else outside
            for name, status in node_to_status.items()}


def bound_gang_shortfall(handle: Any, pod_info: PodInfo) -> Status | None:
    """A gang member preempts nothing when its gang would not fit even after preemption:
    its victims would die for a gang that still cannot run (issue 22)."""
    gang = gang_shortfall_after_preemption(handle, pod_info)
    if gang is None or gang[1] >= gang[0]:
        return None
    group = f"{pod_info.namespace}/{pod_info.labels.get(POD_GROUP_LABEL, '')}"
    return Status(Code.UNSCHEDULABLE,
                  ERR_GANG_NOT_HELPFUL.format(group=group, needed=gang[0], room=gang[1]))


def _uid_of(pod_info: PodInfo) -> str:
    return pod_info.uid or pod_info.key


def _uid(pod: Mapping[str, Any]) -> str:
    meta = pod.get("metadata") or {}
    return str(meta.get("uid") or f"{meta.get('namespace') or ''}/{meta.get('name') or ''}")


def _code(status: Status | None) -> Code:
    # Nodes missing from the map were never filtered (PreFilter narrowed them out):
    # upstream treats them as UnschedulableAndUnresolvable.
    return Code.UNSCHEDULABLE_AND_UNRESOLVABLE if status is None else status.code


def _as_error(status: Status) -> Status:
    if status.code == Code.ERROR:
        return status
    return Status(Code.ERROR, status.message() or status.code.label, plugin=status.plugin,
                  error=status.error)
