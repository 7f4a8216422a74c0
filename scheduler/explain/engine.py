"""One pod's scheduling cycle over every node, recorded instead of acted on.

The daemon's cycle stops filtering once it has enough feasible nodes and keeps only what it
needs to pick one; ``explain`` must answer "why not that node?" for every node.  So this
module runs the daemon's own pieces (its ``SchedulingCycle.find_nodes_that_fit`` with
``percentageOfNodesToScore`` at 100, the framework's PreScore/Score, its PostFilter with
DefaultPreemption in dry-run mode, ``FitError`` for the FailedScheduling line, and the
configured extenders' Filter and Prioritize; not their preempt verb) on a
Scheduler whose cache was filled by its own informers and event handlers, and records each
step.  Nothing here writes to the API server: Reserve, Permit and binding are not run.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from scheduler.extenders import EXTENDER_NAME
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.node_info import NodeInfo
from scheduler.framework.status import Code, Status
from scheduler.framework.types import NO_NODES_AVAILABLE, Diagnosis, FitError
from scheduler.objects.pod import PodInfo
from scheduler.plugins.capacityscheduling.quota import format_amount
from scheduler.plugins.defaultpreemption.plugin import DefaultPreemption
from scheduler.plugins.names import CAPACITY_SCHEDULING, COSCHEDULING, DEFAULT_PREEMPTION
from scheduler.find_nodes import effective_percentage, num_feasible_nodes_to_find
from scheduler.schedule_one import failure_message

if TYPE_CHECKING:
    from scheduler.framework.runtime import Framework
    from scheduler.scheduler import Scheduler

PASSED = "passed"
SUCCESS = "success"
SKIPPED = "skip"
# The pseudo-plugin of nodes a PreFilter result ruled out (upstream's absent-nodes status).
PRE_FILTER_RESULT = "PreFilterResult"
ALL_PERCENT = 100


@dataclass(slots=True)
class NodeVerdict:
    """One node: ``plugin`` is '' when it passed every Filter plugin."""

    node: str
    plugin: str = ""
    code: str = ""
    reasons: list[str] = field(default_factory=list)

    @property
    def feasible(self) -> bool:
        return not self.plugin and not self.code

    @property
    def reason(self) -> str:
        return ", ".join(self.reasons)


@dataclass(slots=True)
class PluginScore:
    raw: int
    normalized: int
    weighted: int


@dataclass(slots=True)
class Victim:
    pod: str
    priority: int


@dataclass(slots=True)
class PreemptionCandidate:
    node: str
    victims: list[Victim]
    pdb_violations: int


@dataclass(slots=True)
class GangPlacement:
    """One member in a gang's preemption plan: its node and the pods evicted there for it."""

    member: str
    node: str
    victims: list[Victim]


@dataclass(slots=True)
class PreemptionPlan:
    """What DefaultPreemption would do (a dry run: nothing is evicted or nominated)."""

    message: str
    candidates: list[PreemptionCandidate]
    chosen: str = ""
    # A gang member's plan for every member the gang still needs (empty for a plain pod).
    gang: list[GangPlacement] = field(default_factory=list)


@dataclass(slots=True)
class TopologyDomain:
    """One domain of a gang's topology key as Coscheduling's PreFilter judged it."""

    value: str
    nodes: list[str]
    free_cpu: str
    free_memory: str
    fits: int
    verdict: str  # "chosen", "fits" or why it was turned down


@dataclass(slots=True)
class GangTopology:
    key: str
    required: bool
    need: int  # members still to place in one domain
    chosen: str  # the domain's value, '' when none
    domains: list[TopologyDomain]
    unlabeled: int  # nodes without the label


@dataclass(slots=True)
class GangState:
    pod_group: str
    found: bool
    min_member: int = 0
    members: int = 0
    assigned: int = 0
    pending: list[str] = field(default_factory=list)
    missing: str = ""
    topology: GangTopology | None = None


@dataclass
class QuotaState:
    """The pod's ElasticQuota as CapacityScheduling counts it (quantities as strings)."""

    quota: str
    min: dict[str, str]
    max: dict[str, str]
    used: dict[str, str]
    # which PreFilter rule turned the pod away: "max", "min" (the sum of used over the sum
    # of mins) or "" when neither did
    rejected_by: str = ""


@dataclass
class Explanation:
    """Everything ``explain`` found for one pod; ``render`` turns it into text or the
    simulator's keys."""

    pod: str
    profile: str
    num_nodes: int
    # How many feasible nodes the daemon looks for per cycle (its percentageOfNodesToScore).
    daemon_nodes_to_find: int
    filter_plugins: list[str]
    prefilter_status: dict[str, str]
    prefilter_result: dict[str, list[str]]
    verdicts: list[NodeVerdict]
    prescore_status: dict[str, str] = field(default_factory=dict)
    score_plugins: list[str] = field(default_factory=list)
    # Scores as columns (a node per index, best total first): cheap for 5000 nodes; the
    # per-node view is built only for the nodes shown.
    scored_nodes: list[str] = field(default_factory=list)
    score_columns: dict[str, tuple[list[int], list[int], list[int]]] = field(default_factory=dict)
    totals: dict[str, int] = field(default_factory=dict)
    score_weights: dict[str, int] = field(default_factory=dict)
    _index: dict[str, int] = field(default_factory=dict, repr=False)
    selected: str = ""
    ties: list[str] = field(default_factory=list)
    nominated_node: str = ""
    # The FailedScheduling message the daemon would post ('' when the pod fits).
    message: str = ""
    error: str = ""
    preemption: PreemptionPlan | None = None
    gang: GangState | None = None
    quota: QuotaState | None = None
    # Set when a PreEnqueue plugin keeps the pod out of the active queue (scheduling gates,
    # a missing PodGroup ...): the daemon does not even try it.
    gated_by: str = ""
    gated_message: str = ""
    elapsed_seconds: float = 0.0

    @property
    def feasible(self) -> list[str]:
        return [v.node for v in self.verdicts if v.feasible]

    def node_scores(self, node: str) -> dict[str, PluginScore]:
        """plugin -> (raw, normalized, weighted) for one scored node."""
        if not self.scored_nodes:
            return {}
        if not self._index:
            self._index = {n: i for i, n in enumerate(self.scored_nodes)}
        i = self._index.get(node)
        if i is None:
            return {}
        return {plugin: PluginScore(raw[i], norm[i], weighted[i])
                for plugin, (raw, norm, weighted) in self.score_columns.items()}

    def nodes_sampled_note(self) -> str:
        if self.daemon_nodes_to_find >= self.num_nodes:
            return ""
        return (f"(the daemon stops at {self.daemon_nodes_to_find} feasible nodes and scores only "
                "those: percentageOfNodesToScore)")


async def explain_pod(sched: Scheduler, fwk: Framework, pod: dict[str, Any]) -> Explanation:
    """Run ``pod``'s scheduling cycle over every node of ``sched``'s cache with ``fwk``, with
    the configured extenders' Filter and Prioritize when they are interested in the pod.

    ``sched`` must be a Scheduler used only for this (its percentages are raised to 100)."""
    started = time.perf_counter()
    pod_info = PodInfo.from_pod(pod)
    nominated = str((pod.get("status") or {}).get("nominatedNodeName") or "")

    sched.cache.update_snapshot(sched.snapshot)
    all_nodes = sched.snapshot.list()
    daemon_to_find = num_feasible_nodes_to_find(
        effective_percentage(
            fwk.percentage_of_nodes_to_score, sched.config.percentage_of_nodes_to_score
        ),
        len(all_nodes),
    )
    plugins = fwk.list_plugins()
    result = Explanation(
        pod=pod_info.key, profile=fwk.profile_name, num_nodes=len(all_nodes),
        daemon_nodes_to_find=daemon_to_find, filter_plugins=[], prefilter_status={},
        prefilter_result={}, verdicts=[], nominated_node=nominated,
    )
    result.gang = gang_state(fwk, pod_info)
    result.quota = quota_state(fwk, pod_info)
    gate = fwk.run_pre_enqueue_plugins(pod_info)
    if gate is not None and not gate.is_success():
        result.gated_by, result.gated_message = gate.plugin, gate.message()
    if not all_nodes:
        result.message = NO_NODES_AVAILABLE
        return _done(result, started)

    # Every node, not a sample: the daemon's walk with nothing left unexamined.
    fwk.percentage_of_nodes_to_score = ALL_PERCENT
    sched.config.percentage_of_nodes_to_score = ALL_PERCENT
    sched.cycle.next_start_node_index = 0
    state = fwk.new_cycle_state()
    extenders = sched.extenders
    with_extenders = bool(extenders.all) and extenders.in_cycle_for(pod)
    by_extenders: set[str] = set()
    try:
        # Not the nominated-node shortcut: every node is walked (whether the nominated one
        # passes is read from the walk).
        feasible, diagnosis = sched.cycle.find_nodes_that_fit(
            fwk, state, pod_info, all_nodes, try_nominated=False
        )
        if with_extenders and feasible:
            before = {n.name for n in feasible}
            feasible = await extenders.filter(pod_info, feasible, diagnosis)
            by_extenders = before - {n.name for n in feasible}
    except Exception as exc:
        status = getattr(exc, "status", None)
        result.error = status.message() if isinstance(status, Status) else str(exc) or repr(exc)
        return _done(result, started)

    _record_filter(result, fwk, plugins, state, all_nodes, feasible, diagnosis,
                   by_extenders=by_extenders)
    if feasible:
        added = await extenders.prioritize(pod_info, feasible) if with_extenders else None
        _score(result, fwk, state, pod_info, feasible, plugins, extender_scores=added)
        if nominated and nominated in {n.name for n in feasible}:
            # The daemon tries the nominated node first and takes it when it passes.
            result.selected, result.ties = nominated, [nominated]
        return _done(result, started)

    _post_filter(result, sched, fwk, state, pod_info, diagnosis)
    return _done(result, started)


def _done(result: Explanation, started: float) -> Explanation:
    result.elapsed_seconds = time.perf_counter() - started
    return result


def _record_filter(
    result: Explanation,
    fwk: Framework,
    plugins: dict[str, list[str]],
    state: CycleState,
    all_nodes: list[NodeInfo],
    feasible: list[NodeInfo],
    diagnosis: Diagnosis,
    *,
    by_extenders: set[str],
) -> None:
    skipped = state.skip_filter_plugins
    result.filter_plugins = [p for p in plugins.get("filter", []) if p not in skipped]
    pre_status = diagnosis.pre_filter_status
    for name in plugins.get("preFilter", []):
        if pre_status is not None and pre_status.plugin == name:
            result.prefilter_status[name] = pre_status.message() or pre_status.code.label
        elif name in skipped:
            result.prefilter_status[name] = SKIPPED
        else:
            result.prefilter_status[name] = SUCCESS
    feasible_names = {n.name for n in feasible}
    excluded: list[str] = []
    for node_info in all_nodes:
        name = node_info.name
        if name in feasible_names:
            result.verdicts.append(NodeVerdict(name))
            continue
        status = diagnosis.node_to_status.get(name)
        if status is None:
            # Ruled out by a PreFilter result while other nodes were feasible: the daemon
            # never looks at it.
            excluded.append(name)
            result.verdicts.append(NodeVerdict(
                name, PRE_FILTER_RESULT, Code.UNSCHEDULABLE_AND_UNRESOLVABLE.label,
                ["node(s) not in the PreFilter result"],
            ))
            continue
        plugin = status.plugin or (EXTENDER_NAME if name in by_extenders else PRE_FILTER_RESULT)
        if plugin == PRE_FILTER_RESULT:
            excluded.append(name)
        reasons = list(status.reasons)
        # A plugin that knows more than its status says (DynamicResources: which request
        # of which claim, and why) adds it per node.
        node_details = getattr(fwk.get_plugin(plugin), "node_details", None)
        if callable(node_details):
            reasons += [r for r in node_details(state, name) if r not in reasons]
        result.verdicts.append(NodeVerdict(name, plugin, status.code.label, reasons))
    if excluded and pre_status is None:
        allowed = sorted(n.name for n in all_nodes if n.name not in set(excluded))
        for name in sorted(diagnosis.unschedulable_plugins):
            if name in plugins.get("preFilter", []):
                result.prefilter_result[name] = allowed


def _score(
    result: Explanation,
    fwk: Framework,
    state: CycleState,
    pod_info: PodInfo,
    feasible: list[NodeInfo],
    plugins: dict[str, list[str]],
    *,
    extender_scores: list[int] | None = None,
) -> None:
    status = fwk.run_pre_score_plugins(state, pod_info, feasible)
    for name in plugins.get("preScore", []):
        if status is not None and status.plugin == name:
            result.prescore_status[name] = status.message()
        elif name in state.skip_score_plugins:
            result.prescore_status[name] = SKIPPED
        else:
            result.prescore_status[name] = SUCCESS
    if status is not None and not status.is_success():
        result.error = status.message()
        return
    table, status = fwk.score_table(state, pod_info, feasible)
    if status is not None and not status.is_success():
        result.error = status.message()
        return
    breakdown = score_breakdown(fwk, state, pod_info, feasible)
    if extender_scores is not None:
        # The extenders' weighted priorities, added to the totals as the daemon adds them.
        table.by_plugin[EXTENDER_NAME] = list(extender_scores)
        breakdown[EXTENDER_NAME] = (list(extender_scores), list(extender_scores))
        table.totals = [t + a for t, a in zip(table.totals, extender_scores)]
    result.score_plugins = list(table.by_plugin)
    order = sorted(range(len(table.names)), key=lambda i: (-table.totals[i], table.names[i]))
    result.scored_nodes = [table.names[i] for i in order]
    result.totals = {table.names[i]: table.totals[i] for i in order}
    for plugin, weighted in table.by_plugin.items():
        raw, normalized = breakdown[plugin]
        result.score_weights[plugin] = fwk.score_weights.get(plugin, 1)
        result.score_columns[plugin] = (
            [raw[i] for i in order], [normalized[i] for i in order], [weighted[i] for i in order]
        )
    if len(feasible) == 1:
        # The daemon does not even score a lone feasible node.
        result.selected, result.ties = feasible[0].name, [feasible[0].name]
        return
    best = max(table.totals)
    result.ties = sorted(n for n, t in zip(table.names, table.totals) if t == best)
    result.selected = result.ties[0] if len(result.ties) == 1 else ""


def score_breakdown(
    fwk: Framework, state: CycleState, pod_info: PodInfo, nodes: list[NodeInfo]
) -> dict[str, tuple[list[int], list[int]]]:
    """plugin -> (raw scores, normalized scores) per node, in ``nodes`` order.

    The framework keeps only weighted columns; explain shows the steps before it, through
    each plugin's public Score and NormalizeScore (the weighted column must equal
    normalized x weight, which the tests check against ``Framework.score_table``)."""
    from scheduler.framework.types import NodeScore

    names = [n.name for n in nodes]
    out: dict[str, tuple[list[int], list[int]]] = {}
    for name in fwk.list_plugins().get("score", []):
        if name in state.skip_score_plugins:
            continue
        plugin: Any = fwk.get_plugin(name)
        raw, status = plugin.score_nodes(state, pod_info, nodes)
        if status is not None and not status.is_success():
            continue
        raw = list(raw)
        normalized = list(raw)
        ext = plugin.score_extensions()
        if ext is not None:
            normalize_values = getattr(ext, "normalize_score_values", None)
            if normalize_values is not None:
                normalized, _ = normalize_values(state, pod_info, names, list(raw))
                normalized = list(normalized)
            else:
                node_scores = [NodeScore(n, v) for n, v in zip(names, raw)]
                ext.normalize_score(state, pod_info, node_scores)
                normalized = [ns.score for ns in node_scores]
        out[name] = (raw, normalized)
    return out


def _post_filter(
    result: Explanation,
    sched: Scheduler,
    fwk: Framework,
    state: CycleState,
    pod_info: PodInfo,
    diagnosis: Diagnosis,
) -> None:
    """The daemon's own PostFilter step, DefaultPreemption deciding without acting, and the
    FailedScheduling message it builds from the same diagnosis."""
    # DefaultPreemption, or CapacityScheduling (which preempts on its machinery) in its place
    preemptors = [p for p in (fwk.get_plugin(DEFAULT_PREEMPTION), fwk.get_plugin(CAPACITY_SCHEDULING))
                  if isinstance(p, DefaultPreemption)]
    for p in preemptors:
        p.dry_run = True
        p.last_dry_run = None
    fit_error = FitError(
        pod_key=pod_info.key, num_all_nodes=result.num_nodes, diagnosis=diagnosis
    )
    outcome, _, status = sched.cycle._post_filter(fwk, state, pod_info, fit_error)
    result.message = failure_message(status)
    ran = [p for p in preemptors if p.last_dry_run is not None] or preemptors
    if ran:
        dry = ran[0].last_dry_run
        result.preemption = PreemptionPlan(
            message=diagnosis.post_filter_msg,
            candidates=[] if dry is None else [
                PreemptionCandidate(
                    c.name, [Victim(v.key, v.priority) for v in c.victims], c.num_pdb_violations
                )
                for c in dry.candidates
            ],
            chosen=outcome.nominating or "",
            gang=[] if dry is None or dry.gang_plan is None else [
                GangPlacement(p.member.key, p.node,
                              [Victim(v.key, v.priority) for v in p.victims])
                for p in dry.gang_plan.placements
            ],
        )


def gang_state(fwk: Framework, pod_info: PodInfo) -> GangState | None:
    """The pod's PodGroup as Coscheduling sees it: members, minMember, what is missing."""
    plugin: Any = fwk.get_plugin(COSCHEDULING)
    manager = getattr(plugin, "manager", None)
    if manager is None:
        return None
    full, obj = manager.lookup(pod_info)
    if not full:
        return None
    if obj is None:
        return GangState(pod_group=full, found=False)
    try:
        info = manager.info(obj)
    except Exception as exc:  # a malformed PodGroup: say so rather than fail
        return GangState(pod_group=full, found=True, missing=f"malformed PodGroup: {exc}")
    name = info.name
    pending = sorted(
        f"{(p.get('metadata') or {}).get('namespace')}/{(p.get('metadata') or {}).get('name')}"
        for p in manager.pending_siblings(pod_info, name)
    )
    members = manager.count_members(pod_info, name)
    assigned = len(manager.assigned_uids(pod_info.namespace, name))
    missing: list[str] = []
    if members < info.min_member:
        missing.append(f"{info.min_member - members} more member pod(s) must exist")
    gaps = manager.resource_gaps(info)
    if gaps:
        missing.append(f"free capacity for minResources: {gaps}")
    return GangState(
        pod_group=full, found=True, min_member=info.min_member, members=members,
        assigned=assigned, pending=pending, missing="; ".join(missing),
        topology=_gang_topology(plugin, pod_info),
    )


def _gang_topology(plugin: Any, pod_info: PodInfo) -> GangTopology | None:
    """Coscheduling's view of the gang's topology domains, as a table's rows."""
    view_of = getattr(plugin, "topology_view", None)
    if view_of is None:
        return None
    view = view_of(pod_info)
    if view is None:
        return None
    chosen = view.chosen.value if view.chosen is not None else ""
    domains = []
    for d in view.considered:
        if d.value == chosen:
            verdict = "chosen" + ("" if len(view.considered) == 1 else " (tightest fit)")
        elif d.reason:
            verdict = f"rejected: {d.reason}"
        else:
            verdict = "fits (looser)"
        domains.append(TopologyDomain(
            value=d.value, nodes=list(d.nodes),
            free_cpu=format_amount("cpu", d.free_milli_cpu),
            free_memory=format_amount("memory", d.free_memory), fits=d.fits, verdict=verdict))
    return GangTopology(key=view.constraint.key, required=view.constraint.required,
                        need=view.need, chosen=chosen, domains=domains,
                        unlabeled=view.unlabeled)


def quota_state(fwk: Framework, pod_info: PodInfo) -> QuotaState | None:
    """The pod's ElasticQuota as CapacityScheduling counts it, and which rule (if any) its
    PreFilter applies to the pod; None without the plugin or a quota."""
    plugin: Any = fwk.get_plugin(CAPACITY_SCHEDULING)
    usage = getattr(plugin, "usage", None)
    if usage is None:
        return None
    quotas = usage()
    eq = quotas.get(pod_info.namespace)
    if eq is None:
        return None
    names = list(eq.resource_names) or ["cpu", "memory"]

    def show(amounts: Any) -> dict[str, str]:
        return {n: format_amount(n, amounts.get(n)) for n in names}

    rejected = ""
    if eq.used_over_max_with(pod_info.requests):
        rejected = "max"
    elif quotas.aggregated_used_over_min_with(pod_info.requests):
        rejected = "min"
    return QuotaState(quota=eq.key, min=show(eq.min), max=show(eq.max), used=show(eq.used),
                      rejected_by=rejected)
