"""One profile's plugin pipeline: builds the plugins a profile enables and runs them at each
extension point with kube-scheduler's semantics (``pkg/scheduler/framework/runtime``).

Why it exists as one class: the scheduling cycle, the binding cycle, the queue (PreEnqueue,
QueueSort, cluster-event registration) and preemption all need the same ordered plugin lists,
score weights and error mapping.  Every plugin call is guarded: an exception inside a plugin
becomes ``Status(ERROR)`` naming the plugin, so a plugin bug fails one pod, never the loop.

Split as upstream's runtime package: this module runs the plugins; ``builder`` builds a
profile's plugin lists (multiPoint expansion, weights, args); ``instrumentation`` records the
metrics and holds the one guarded, timed plugin-call skeleton every ``run_*`` uses.
"""

from __future__ import annotations

import functools
import operator
import random
import time
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any, cast

import structlog

from scheduler.config.types import Profile
from scheduler.framework.builder import ProfileBuilder
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.errors import FrameworkStatusError, PluginConfigError
from scheduler.framework.errors import guard_error as _guard_error
from scheduler.framework.errors import rejection_or_error as _rejection_or_error
from scheduler.framework.events import ActionType, ClusterEvent, EventResource, QueueingHintFn
from scheduler.framework.handle import FrameworkHandle
from scheduler.framework.instrumentation import (  # extension point labels, as upstream's
    BIND, FILTER, PERMIT, PLUGIN_METRICS_SAMPLE_PERCENT, POST_BIND, POST_FILTER, PRE_BIND,
    PRE_ENQUEUE, PRE_FILTER, PRE_FILTER_EXTENSION_ADD_POD, PRE_FILTER_EXTENSION_REMOVE_POD,
    PRE_SCORE, RESERVE, SCORE, SCORE_EXTENSION_NORMALIZE, UNRESERVE, Instrumentation,
    timeout_first,
)
from scheduler.framework.interfaces import (
    ApiClient, BindPlugin, EnqueueExtensions, EventRecorder, ExtenderPreemption, FilterPlugin,
    NodeInfoLister, ObjectLister, PermitPlugin, Plugin, PodGroupPlugin, PodNominator,
    PostBindPlugin, PostFilterPlugin, PreBindPlugin, PreEnqueuePlugin, PreFilterPlugin,
    PreScorePlugin, QueueSortPlugin, ReservePlugin, ScorePlugin,
)
from scheduler.framework.node_info import NodeInfo
from scheduler.framework.nominated import filter_with_nominated_pods
from scheduler.framework.registry import Registry
from scheduler.framework.status import Code, Status
from scheduler.framework.types import (
    MAX_NODE_SCORE, MIN_NODE_SCORE, NodeScore, NodeScoreResult, PostFilterResult,
    PreFilterResult, QueuedPodInfo, ScoreTable,
)
from scheduler.framework.waiting_pods import MAX_PERMIT_TIMEOUT_SECONDS, WaitingPod, WaitingPodsMap
from scheduler.metrics import SchedulerMetrics
from scheduler.objects.pod import PodInfo

__all__ = [
    "PLUGIN_METRICS_SAMPLE_PERCENT",
    "WILDCARD_EVENT",
    "Framework",
    "FrameworkStatusError",
    "PluginConfigError",
]

log = structlog.get_logger(__name__)

# Plugins of these kinds can reject a pod, so they must tell the queue which events to wait
# for; one that does not implement EnqueueExtensions gets every event (upstream
# shouldHaveEnqueueExtensions / defaultEnqueueExtension).
_REJECTING_KINDS: tuple[type[Plugin], ...] = (
    PreEnqueuePlugin,
    PreFilterPlugin,
    FilterPlugin,
    ReservePlugin,
    PermitPlugin,
)

WILDCARD_EVENT = ClusterEvent(EventResource.WILDCARD, ActionType.ALL, "*")


FilterFn = Callable[[CycleState, PodInfo, NodeInfo], "Status | None"]


_NODE_NAME = operator.attrgetter("name")
# Each Score plugin's values before NormalizeScore and weights: [(plugin, values per node)].
RawScores = list[tuple[str, list[int]]]
RawScorer = Callable[[CycleState, PodInfo, list[NodeInfo]], tuple[RawScores, Status | None]]


class Framework:
    """The plugins of one profile and the code that runs them."""

    def __init__(
        self,
        *,
        profile: Profile,
        registry: Registry,
        snapshot_provider: Callable[[], NodeInfoLister],
        listers: ObjectLister,
        client: ApiClient,
        event_recorder: EventRecorder,
        nominator: PodNominator,
        activate: Callable[[Iterable[dict[str, Any]]], None],
        clock: Callable[[], float] = time.monotonic,
        metrics: SchedulerMetrics | None = None,
        waiting_pods: WaitingPodsMap | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.profile_name = profile.scheduler_name
        self.percentage_of_nodes_to_score = profile.percentage_of_nodes_to_score
        self.waiting_pods = waiting_pods if waiting_pods is not None else WaitingPodsMap()
        # Always real metrics (a private registry when the caller has none): no None guards.
        # Per-plugin durations are sampled only into the caller's metrics: nobody reads a
        # private registry (offline validation, benchmarks), so those cycles skip the cost.
        self._sample_percent = PLUGIN_METRICS_SAMPLE_PERCENT if metrics is not None else 0
        self.metrics = metrics if metrics is not None else SchedulerMetrics()
        self._instr = Instrumentation(self.metrics, self.profile_name)
        self._nominator = nominator
        self._rng = rng if rng is not None else random.Random()
        self.handle = FrameworkHandle(
            profile_name=self.profile_name,
            snapshot_provider=snapshot_provider,
            listers=listers,
            client=client,
            event_recorder=event_recorder,
            nominator=nominator,
            activate=activate,
            clock=clock,
            waiting_pods=self.waiting_pods,
            metrics=self.metrics,
        )
        built = ProfileBuilder(profile, registry, self.handle).build()
        self.plugins: dict[str, Plugin] = built.plugins
        self.score_weights: dict[str, int] = built.score_weights
        self._points = points = built.points
        self.handle.attach(self)

        # The builder's isinstance checks guarantee each list holds its point's kind.
        self._pre_enqueue = cast(list[tuple[str, PreEnqueuePlugin]], points["preEnqueue"])
        self._queue_sort = cast(list[tuple[str, QueueSortPlugin]], points["queueSort"])
        self._pre_filter = cast(list[tuple[str, PreFilterPlugin]], points["preFilter"])
        self._filter = cast(list[tuple[str, FilterPlugin]], points["filter"])
        self._post_filter = cast(list[tuple[str, PostFilterPlugin]], points["postFilter"])
        self._pre_score = cast(list[tuple[str, PreScorePlugin]], points["preScore"])
        self._score = cast(list[tuple[str, ScorePlugin]], points["score"])
        self._score_by_name = dict(self._score)
        self._reserve = cast(list[tuple[str, ReservePlugin]], points["reserve"])
        self._permit = cast(list[tuple[str, PermitPlugin]], points["permit"])
        self._pre_bind = cast(list[tuple[str, PreBindPlugin]], points["preBind"])
        self._bind = cast(list[tuple[str, BindPlugin]], points["bind"])
        self._post_bind = cast(list[tuple[str, PostBindPlugin]], points["postBind"])
        self._queue_sort_less = self._queue_sort[0][1].less
        # Per-plugin evaluation counts, flushed to scheduler_plugin_evaluation_total in bulk
        # (incrementing a labelled prometheus counter per node per plugin is too slow).
        self._filter_evals = [0] * len(self._filter)
        self._plan_state: CycleState | None = None
        self._plan_skip: set[str] | None = None
        self._plan: list[tuple[int, str, FilterFn]] = []

    # --- introspection ---------------------------------------------------------------------

    def list_plugins(self) -> dict[str, list[str]]:
        """Enabled plugins per extension point, in run order (for logs and explain)."""
        return {point: [name for name, _ in entries] for point, entries in self._points.items()}

    def get_plugin(self, name: str) -> Plugin | None:
        return self.plugins.get(name)

    @property
    def filter_plugins(self) -> list[tuple[str, FilterPlugin]]:
        """(name, plugin) of every Filter plugin in run order (opportunistic batching)."""
        return self._filter

    @property
    def score_plugins(self) -> list[tuple[str, ScorePlugin]]:
        return self._score

    def extender_preemption(self) -> ExtenderPreemption | None:
        """The first PostFilter plugin whose preemption candidates HTTP extenders may narrow
        (the core calls it before PostFilter; it knows no concrete plugin)."""
        for _, plugin in self._post_filter:
            if isinstance(plugin, ExtenderPreemption):
                return plugin
        return None

    def has_filter_plugins(self) -> bool:
        return bool(self._filter)

    def has_post_filter_plugins(self) -> bool:
        return bool(self._post_filter)

    def has_score_plugins(self) -> bool:
        return bool(self._score)

    def has_permit_plugins(self) -> bool:
        return bool(self._permit)

    def pod_group_members(self, pod_info: PodInfo) -> tuple[str, list[dict[str, Any]]] | None:
        """(plugin, the other pending members to try in the same pass) if a PodGroupPlugin
        schedules the pod as part of a group, else None."""
        for name, plugin in self.plugins.items():
            if isinstance(plugin, PodGroupPlugin):
                members = plugin.pod_group_members(pod_info)
                if members is not None:
                    return name, members
        return None

    def pod_group_pass_done(self, plugin: str, pod_info: PodInfo) -> bool:
        group_plugin = self.plugins.get(plugin)
        if isinstance(group_plugin, PodGroupPlugin):
            return group_plugin.pod_group_pass_done(pod_info)
        return False

    def reject_waiting_pod(self, uid: str) -> bool:
        """Reject a pod waiting at Permit (it was deleted ...); False if it is not waiting."""
        return self.handle.reject_waiting_pod(uid)

    def get_waiting_pod(self, uid: str) -> WaitingPod | None:
        return self.waiting_pods.get(uid)

    def events_to_register(self) -> list[tuple[ClusterEvent, str, QueueingHintFn | None]]:
        """(event, plugin, hint) for every plugin that can reject pods.  A rejecting plugin
        without EnqueueExtensions is registered for every event."""
        out: list[tuple[ClusterEvent, str, QueueingHintFn | None]] = []
        for name, plugin in self.plugins.items():
            if not isinstance(plugin, _REJECTING_KINDS):
                continue
            if not isinstance(plugin, EnqueueExtensions):
                out.append((WILDCARD_EVENT, name, None))
                continue
            try:
                events = plugin.events_to_register()
            except Exception:
                log.exception("events_to_register failed; registering every event", plugin=name)
                out.append((WILDCARD_EVENT, name, None))
                continue
            for item in events:
                out.append((item.event, name, item.hint))
        return out

    def _sample(self) -> bool:
        return self._sample_percent > 0 and self._rng.randrange(100) < self._sample_percent

    def new_cycle_state(self) -> CycleState:
        """A CycleState for one scheduling attempt; ~10% of them record per-plugin metrics."""
        state = CycleState()
        state.record_plugin_metrics = self._sample()
        return state

    # --- metrics -----------------------------------------------------------------------------

    def flush_metrics(self) -> None:
        """Publish the Filter evaluation counts gathered since the last flush."""
        for index, (name, _) in enumerate(self._filter):
            count = self._filter_evals[index]
            if count:
                self._filter_evals[index] = 0
                self._instr.count_evaluation(FILTER, name, count)

    # --- queue -----------------------------------------------------------------------------

    def queue_sort_less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        return self._queue_sort_less(a, b)

    def run_pre_enqueue_plugins(self, pod_info: PodInfo) -> Status | None:
        """The first non-success status (plugin set), or None: the pod may enter activeQ."""
        sampled = self._sample()
        call = self._instr.call
        for name, plugin in self._pre_enqueue:
            status = call(PRE_ENQUEUE, name, sampled, pod_info.key, plugin.pre_enqueue, pod_info)
            if status is not None and status.code != Code.SUCCESS:
                status.plugin = name
                return status
        return None

    # --- PreFilter / Filter ----------------------------------------------------------------

    def run_pre_filter_plugins(
        self, state: CycleState, pod_info: PodInfo, nodes: list[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status | None, set[str]]:
        """Run PreFilter plugins.  Returns the merged node restriction, the status, and the
        plugins that rejected the pod or narrowed the node set (for requeueing)."""
        self.flush_metrics()
        start = time.perf_counter()
        sampled = state.record_plugin_metrics
        skip: set[str] = set()
        result: PreFilterResult | None = None
        plugins_with_nodes: list[str] = []
        rejectors: set[str] = set()
        return_status: Status | None = None
        final: tuple[PreFilterResult | None, Status | None, set[str]] | None = None
        instr = self._instr
        for name, plugin in self._pre_filter:
            r, s = instr.call_with_result(
                PRE_FILTER, name, sampled, pod_info.key, plugin.pre_filter, state, pod_info, nodes
            )
            instr.count_evaluation(PRE_FILTER, name)
            if s is not None and s.code == Code.SKIP:
                skip.add(name)
                continue
            if s is not None and s.code != Code.SUCCESS:
                s.plugin = name
                if s.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                    rejectors.add(name)
                    final = (None, s, rejectors)
                    break
                if s.code == Code.UNSCHEDULABLE:
                    # Keep going: preemption needs every PreFilter's state (upstream #119770).
                    rejectors.add(name)
                    return_status = s
                    continue
                final = (None, _guard_error(s, f"running PreFilter plugin {name!r}", name), set())
                break
            if r is not None and not r.all_nodes():
                plugins_with_nodes.append(name)
            result = r if result is None else result.merge(r)
            if result is not None and not result.all_nodes() and not result.node_names:
                if len(plugins_with_nodes) == 1:
                    msg = f"node(s) didn't satisfy plugin {plugins_with_nodes[0]}"
                else:
                    msg = (
                        "node(s) didn't satisfy plugin(s) "
                        f"[{' '.join(sorted(plugins_with_nodes))}] simultaneously"
                    )
                final = (
                    result,
                    Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, msg),
                    rejectors | set(plugins_with_nodes),
                )
                break
        if final is None:
            final = (result, return_status, rejectors | set(plugins_with_nodes))
        state.skip_filter_plugins = skip
        instr.observe_point(PRE_FILTER, final[1], start)
        return final

    def run_pre_filter_extension_add_pod(
        self, state: CycleState, pod_to_schedule: PodInfo, pod_to_add: PodInfo, node_info: NodeInfo
    ) -> Status | None:
        return self._run_pre_filter_extension(
            state, pod_to_schedule, pod_to_add, node_info, add=True
        )

    def run_pre_filter_extension_remove_pod(
        self,
        state: CycleState,
        pod_to_schedule: PodInfo,
        pod_to_remove: PodInfo,
        node_info: NodeInfo,
    ) -> Status | None:
        return self._run_pre_filter_extension(
            state, pod_to_schedule, pod_to_remove, node_info, add=False
        )

    def _run_pre_filter_extension(
        self,
        state: CycleState,
        pod_to_schedule: PodInfo,
        other: PodInfo,
        node_info: NodeInfo,
        *,
        add: bool,
    ) -> Status | None:
        point = PRE_FILTER_EXTENSION_ADD_POD if add else PRE_FILTER_EXTENSION_REMOVE_POD
        sampled = state.record_plugin_metrics
        skip = state.skip_filter_plugins
        for name, plugin in self._pre_filter:
            if name in skip:
                continue
            ext = plugin.pre_filter_extensions()
            if ext is None:
                continue
            status = self._instr.call(
                point, name, sampled, pod_to_schedule.key,
                ext.add_pod if add else ext.remove_pod,
                state, pod_to_schedule, other, node_info,
            )
            if status is not None and status.code != Code.SUCCESS:
                operation = "AddPod" if add else "RemovePod"
                return _guard_error(
                    status, f"running {operation} on PreFilter plugin {name!r}", name
                )
        return None

    def _filter_plan(self, state: CycleState) -> list[tuple[int, str, FilterFn]]:
        """The cycle's Filter plugins minus those its PreFilter skipped, computed once per
        cycle state (Filter runs for every node, so even a set lookup per plugin counts)."""
        if self._plan_state is not state:
            skip = state.skip_filter_plugins
            # Preemption filters each candidate node on its own clone of the state: the
            # same skip set, so the same plan.
            if skip != self._plan_skip:
                self._plan = [
                    (index, name, plugin.filter)
                    for index, (name, plugin) in enumerate(self._filter)
                    if name not in skip
                ]
                self._plan_skip = set(skip)
            self._plan_state = state
        return self._plan

    def run_filter_plugins(
        self, state: CycleState, pod_info: PodInfo, node_info: NodeInfo
    ) -> Status | None:
        """Stop at the first plugin that does not answer Success; the status names it."""
        sampled = state.record_plugin_metrics
        evals = self._filter_evals
        for index, name, filter_fn in self._filter_plan(state):
            evals[index] += 1
            if sampled:
                t0 = time.perf_counter()
            status = self._filter_one(name, filter_fn, state, pod_info, node_info)
            if sampled:
                self._instr.observe_plugin(FILTER, name, status, t0)
            if status is not None and status.code != Code.SUCCESS:
                if not status.is_rejected():
                    # Filter plugins may only answer Success or a rejection.
                    return _guard_error(status, f"running {name!r} filter plugin", name)
                status.plugin = name
                return status
        return None

    def run_filter_plugins_on_nodes(
        self, state: CycleState, pod_info: PodInfo, nodes: list[NodeInfo], *,
        only: Collection[str] | None = None,
    ) -> list[Status | None]:
        """``run_filter_plugins`` for many nodes: plugin by plugin over the nodes every
        earlier plugin passed, so each node's status names its first rejecting plugin.

        One ``filter_nodes`` call per plugin replaces one Python call per node and plugin,
        the dominant cost of a cycle on a large cluster.  In cycles sampled for the
        per-plugin duration metric, each node counts as one Filter call lasting the batch's
        mean, under its own status code.  ``only``: run just these of the cycle's plugins
        (opportunistic batching runs the ones that sign apart from the others).
        """
        sampled = state.record_plugin_metrics
        statuses: list[Status | None] = [None] * len(nodes)
        alive = list(range(len(nodes)))
        batch = nodes
        evals = self._filter_evals
        plan = self._filter_plan(state)
        if only is not None:
            plan = [entry for entry in plan if entry[1] in only]
        for index, name, _ in plan:
            evals[index] += len(batch)
            plugin = self._filter[index][1]
            t0 = time.perf_counter() if sampled else 0.0
            try:
                results = plugin.filter_nodes(state, pod_info, batch)
                if len(results) != len(batch):
                    raise RuntimeError(
                        f"filter_nodes answered {len(results)} statuses for {len(batch)} nodes"
                    )
            except Exception:
                # Find the node (or nodes) that made it raise, one Filter call each.
                results = [
                    self._filter_one(name, plugin.filter, state, pod_info, n) for n in batch
                ]
            if sampled:
                self._instr.observe_filter_batch(name, results, time.perf_counter() - t0)
            if not any(results):
                continue
            kept: list[int] = []
            for i, status in zip(alive, results):
                if status is None or status.code == Code.SUCCESS:
                    kept.append(i)
                    continue
                if not status.is_rejected():
                    status = _guard_error(status, f"running {name!r} filter plugin", name)
                else:
                    status.plugin = name
                statuses[i] = status
            if not kept:
                break
            alive = kept
            batch = [nodes[i] for i in kept]
        return statuses

    @staticmethod
    def _filter_one(
        name: str, filter_fn: FilterFn, state: CycleState, pod_info: PodInfo,
        node_info: NodeInfo,
    ) -> Status | None:
        """One Filter call; a plugin that raises answers an Error status naming it."""
        try:
            return filter_fn(state, pod_info, node_info)
        except Exception as exc:
            log.exception(
                "Filter plugin raised", plugin=name, pod=pod_info.key, node=node_info.name
            )
            return Status.from_error(exc, plugin=name)

    def run_filter_plugins_with_nominated_pods(
        self, state: CycleState, pod_info: PodInfo, node_info: NodeInfo
    ) -> Status | None:
        """Upstream's two-pass Filter with the node's nominated pods (``nominated.py``)."""
        return filter_with_nominated_pods(
            state, pod_info, node_info, nominator=self._nominator,
            run_filter=self.run_filter_plugins,
            add_pod_extension=self.run_pre_filter_extension_add_pod,
        )

    def nodes_with_nominated_pods(self) -> Collection[str] | None:
        """Names of the nodes holding nominated pods, or None when the nominator cannot
        tell (then every node takes the two-pass filter)."""
        names = getattr(self._nominator, "nominated_node_names", None)
        return None if names is None else cast("Collection[str]", names())

    def run_post_filter_plugins(
        self, state: CycleState, pod_info: PodInfo, node_to_status: Mapping[str, Status]
    ) -> tuple[PostFilterResult | None, Status | None]:
        """Run until one plugin succeeds, fails hard or answers UnschedulableAndUnresolvable;
        otherwise Unschedulable with every plugin's reasons."""
        self.flush_metrics()
        start = time.perf_counter()
        sampled = state.record_plugin_metrics
        result: PostFilterResult | None = None
        reasons: list[str] = []
        rejector = ""
        rejector_said = False
        final: tuple[PostFilterResult | None, Status | None] | None = None
        for name, plugin in self._post_filter:
            r, s = self._instr.call_with_result(
                POST_FILTER, name, sampled, pod_info.key, plugin.post_filter,
                state, pod_info, node_to_status,
            )
            if s is None or s.code == Code.SUCCESS:
                final = (r, s)
                break
            if s.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                s.plugin = name
                final = (r, s)
                break
            if not s.is_rejected():
                final = (None, _guard_error(s, f"running PostFilter plugin {name!r}", name))
                break
            if r is not None:
                # A result is a nomination to apply, an empty one included (it clears the
                # pod's); no result leaves it alone (upstream's ModeNoop).
                result = r
            reasons.extend(s.reasons)
            # A plugin that rejects without a reason (DynamicResources for a pod without
            # claims) does not name the rejection while a later one says why.
            if not rejector or (not rejector_said and s.reasons):
                rejector, rejector_said = name, bool(s.reasons)
        if final is None:
            final = (result, Status(Code.UNSCHEDULABLE, *reasons, plugin=rejector))
        self._instr.observe_point(POST_FILTER, final[1], start)
        return final

    # --- Score -----------------------------------------------------------------------------

    def run_pre_score_plugins(
        self, state: CycleState, pod_info: PodInfo, nodes: list[NodeInfo]
    ) -> Status | None:
        self.flush_metrics()
        start = time.perf_counter()
        sampled = state.record_plugin_metrics
        skip: set[str] = set()
        final: Status | None = None
        instr = self._instr
        for name, plugin in self._pre_score:
            s = instr.call(
                PRE_SCORE, name, sampled, pod_info.key, plugin.pre_score, state, pod_info, nodes
            )
            instr.count_evaluation(PRE_SCORE, name)
            if s is not None and s.code == Code.SKIP:
                skip.add(name)
                continue
            if s is not None and s.code != Code.SUCCESS:
                final = _guard_error(s, f"running PreScore plugin {name!r}", name)
                break
        state.skip_score_plugins = skip
        instr.observe_point(PRE_SCORE, final, start)
        return final

    def run_score_plugins(
        self, state: CycleState, pod_info: PodInfo, nodes: list[NodeInfo]
    ) -> list[NodeScoreResult]:
        """Score every node with every (non-skipped) plugin, normalize, check the range and
        apply weights.  Raises FrameworkStatusError (``.status`` names the plugin) on failure."""
        results, status = self.score_nodes(state, pod_info, nodes)
        if status is not None:
            raise FrameworkStatusError(status)
        return results

    def score_nodes(
        self, state: CycleState, pod_info: PodInfo, nodes: list[NodeInfo]
    ) -> tuple[list[NodeScoreResult], Status | None]:
        """``run_score_plugins`` without the exception: ([], Error status) on failure."""
        table, status = self.score_table(state, pod_info, nodes)
        if status is not None:
            return [], status
        results = [NodeScoreResult(n, total) for n, total in zip(table.names, table.totals)]
        for name, values in table.by_plugin.items():
            for result, value in zip(results, values):
                result.scores[name] = value
        return results, None

    def score_table(
        self, state: CycleState, pod_info: PodInfo, nodes: list[NodeInfo], *,
        raw_scores: RawScorer | None = None,
    ) -> tuple[ScoreTable, Status | None]:
        """Scores as columns (no per-node objects): what the scheduling cycle uses.

        ``raw_scores`` replaces the Score plugin calls (opportunistic batching reuses raw
        scores of unchanged nodes); NormalizeScore and weights always run on all ``nodes``.
        """
        start = time.perf_counter()
        raw, status = (raw_scores or self.raw_scores)(state, pod_info, nodes)
        names = list(map(_NODE_NAME, nodes))
        if status is not None:
            table = ScoreTable(names, [0] * len(nodes), {})
        else:
            table, status = self._finish_scores(state, pod_info, names, raw)
        self._instr.observe_point(SCORE, status, start)
        return table, status

    def raw_scores(
        self, state: CycleState, pod_info: PodInfo, nodes: list[NodeInfo], *,
        only: Collection[str] | None = None,
    ) -> tuple[RawScores, Status | None]:
        """Each Score plugin's values for ``nodes`` before NormalizeScore and weights, as
        upstream runs every Score plugin before normalizing any.  ``only``: just these of
        the cycle's plugins."""
        skip = state.skip_score_plugins
        sampled = state.record_plugin_metrics
        raw: RawScores = []
        for name, plugin in self._score:
            if name in skip or (only is not None and name not in only):
                continue
            t0 = time.perf_counter() if sampled else 0.0
            try:
                values, s = plugin.score_nodes(state, pod_info, nodes)
            except Exception as exc:
                log.exception("Score plugin raised", plugin=name, pod=pod_info.key)
                values, s = [], Status.from_error(exc, plugin=name)
            if sampled:
                self._instr.observe_plugin(SCORE, name, s, t0)
            if s is not None and s.code != Code.SUCCESS:
                return raw, _guard_error(
                    s, f"running Score plugins: plugin {name!r} failed with", name
                )
            self._instr.count_evaluation(SCORE, name, len(nodes))
            raw.append((name, values))
        return raw, None

    def _finish_scores(
        self, state: CycleState, pod_info: PodInfo, names: list[str], raw: RawScores
    ) -> tuple[ScoreTable, Status | None]:
        """NormalizeScore, the range check and the weights over every node's raw scores."""
        table = ScoreTable(names, [0] * len(names), {})
        for name, values in raw:
            weighted, status = self.finish_column(state, pod_info, names, name, values)
            if status is not None:
                return table, status
            table.by_plugin[name] = weighted
            table.totals = list(map(operator.add, table.totals, weighted))
        return table, None

    def normalizes(self, name: str) -> bool:
        """Whether Score plugin ``name`` has a NormalizeScore (its final scores then depend on
        every node's raw score, not on the node's alone)."""
        return self._score_by_name[name].score_extensions() is not None

    def finish_column(
        self, state: CycleState, pod_info: PodInfo, names: list[str], name: str,
        values: list[int],
    ) -> tuple[list[int], Status | None]:
        """One Score plugin's raw scores for ``names`` made final: NormalizeScore, the range
        check, the weight.  A new list; ``values`` is not changed."""
        sampled = state.record_plugin_metrics
        ext = self._score_by_name[name].score_extensions()
        if ext is not None:
            normalize_values = getattr(ext, "normalize_score_values", None)
            node_scores: list[NodeScore] | None = None
            t0 = time.perf_counter() if sampled else 0.0
            try:
                if normalize_values is not None:
                    values, s = normalize_values(state, pod_info, names, list(values))
                else:
                    node_scores = [NodeScore(n, v) for n, v in zip(names, values)]
                    s = ext.normalize_score(state, pod_info, node_scores)
            except Exception as exc:
                log.exception("NormalizeScore raised", plugin=name, pod=pod_info.key)
                s = Status.from_error(exc, plugin=name)
            if sampled:
                self._instr.observe_plugin(SCORE_EXTENSION_NORMALIZE, name, s, t0)
            if s is not None and s.code != Code.SUCCESS:
                return [], _guard_error(
                    s, f"running Normalize on Score plugins: plugin {name!r} failed with",
                    name,
                )
            if node_scores is not None:
                values = [ns.score for ns in node_scores]

        if values and (min(values) < MIN_NODE_SCORE or max(values) > MAX_NODE_SCORE):
            bad = next(v for v in values if v < MIN_NODE_SCORE or v > MAX_NODE_SCORE)
            return [], Status(
                Code.ERROR,
                "applying score defaultWeights on Score plugins: plugin "
                f"{name!r} returns an invalid score {bad}, it should in the range of "
                f"[{MIN_NODE_SCORE}, {MAX_NODE_SCORE}] after normalizing",
                plugin=name,
            )
        weight = self.score_weights.get(name, 1)
        if weight != 1:
            return list(map(functools.partial(operator.mul, weight), values)), None
        return list(values), None

    def observe_score(self, status: Status | None, start: float) -> None:
        """The Score extension point's duration, for a score table built outside
        ``score_table`` (opportunistic batching's window reuse)."""
        self._instr.observe_point(SCORE, status, start)

    # --- Reserve / Permit ------------------------------------------------------------------

    def run_reserve_plugins_reserve(
        self, state: CycleState, pod_info: PodInfo, node_name: str
    ) -> Status | None:
        start = time.perf_counter()
        sampled = state.record_plugin_metrics
        final: Status | None = None
        for name, plugin in self._reserve:
            s = self._instr.call(
                RESERVE, name, sampled, pod_info.key, plugin.reserve, state, pod_info, node_name
            )
            if s is not None and s.code != Code.SUCCESS:
                final = _rejection_or_error(s, "Reserve", name)
                break
        self._instr.observe_point(RESERVE, final, start)
        return final

    def run_reserve_plugins_unreserve(
        self, state: CycleState, pod_info: PodInfo, node_name: str
    ) -> None:
        """Unreserve every reserve plugin in reverse order; never raises."""
        start = time.perf_counter()
        sampled = state.record_plugin_metrics
        for name, plugin in reversed(self._reserve):
            self._instr.call_quietly(
                UNRESERVE, name, sampled, pod_info.key, plugin.unreserve,
                state, pod_info, node_name,
            )
        self._instr.observe_point(UNRESERVE, None, start)

    def run_permit_plugins(
        self, state: CycleState, pod_info: PodInfo, node_name: str
    ) -> Status | None:
        """None when every plugin allows; Wait (the pod is registered as waiting, with one
        timer per waiting plugin) when some asked to wait and none rejected; the rejection
        or an Error otherwise.  Must run on the event loop when a plugin may answer Wait."""
        start = time.perf_counter()
        sampled = state.record_plugin_metrics
        wait_times: dict[str, float] = {}
        final: Status | None = None
        for name, plugin in self._permit:
            timeout, s = self._instr.call_with_result(
                PERMIT, name, sampled, pod_info.key, timeout_first(plugin.permit),
                state, pod_info, node_name,
            )
            if s is None or s.code == Code.SUCCESS:
                continue
            if s.is_rejected():
                s.plugin = name
                final = s
                break
            if s.code == Code.WAIT:
                wait_times[name] = min(float(timeout or 0.0), MAX_PERMIT_TIMEOUT_SECONDS)
                continue
            final = _guard_error(s, f"running Permit plugin {name!r}", name)
            break
        if final is None and wait_times:
            try:
                self.waiting_pods.add(WaitingPod(pod_info, wait_times))
            except RuntimeError as exc:  # no running event loop to time the wait
                final = Status.from_error(exc)
        if final is None and wait_times:
            final = Status(
                Code.WAIT,
                f"one or more plugins asked to wait and no plugin rejected pod {pod_info.name!r}",
            )
        self._instr.observe_point(PERMIT, final, start)
        return final

    async def wait_on_permit(self, pod_info: PodInfo) -> Status | None:
        """Block until a waiting pod is allowed (None) or rejected; None if it is not waiting."""
        waiting_pod = self.waiting_pods.get(pod_info.uid)
        if waiting_pod is None:
            return None
        start = time.perf_counter()
        try:
            status = await waiting_pod.wait()
        finally:
            waiting_pod.cancel_timers()
            if self.waiting_pods.get(pod_info.uid) is waiting_pod:
                self.waiting_pods.remove(pod_info.uid)
        self._instr.observe_permit_wait(status, time.perf_counter() - start)
        if status is None or status.code == Code.SUCCESS:
            return None
        if status.is_rejected():
            return status
        return _guard_error(status, "waiting on permit for pod", status.plugin)

    # --- binding cycle ---------------------------------------------------------------------

    async def run_pre_bind_plugins(
        self, state: CycleState, pod_info: PodInfo, node_name: str
    ) -> Status | None:
        start = time.perf_counter()
        sampled = state.record_plugin_metrics
        final: Status | None = None
        for name, plugin in self._pre_bind:
            s = await self._instr.call_async(
                PRE_BIND, name, sampled, pod_info.key, plugin.pre_bind, state, pod_info, node_name
            )
            if s is not None and s.code != Code.SUCCESS:
                final = _rejection_or_error(s, "PreBind", name)
                break
        self._instr.observe_point(PRE_BIND, final, start)
        return final

    async def run_bind_plugins(
        self, state: CycleState, pod_info: PodInfo, node_name: str
    ) -> Status | None:
        """The first bind plugin that does not Skip decides; Skip when all of them skip.
        An Error keeps its ``error`` (AlreadyBoundError, PodGoneError) for the caller."""
        start = time.perf_counter()
        sampled = state.record_plugin_metrics
        final: Status | None = Status(Code.SKIP)
        for name, plugin in self._bind:
            s = await self._instr.call_async(
                BIND, name, sampled, pod_info.key, plugin.bind, state, pod_info, node_name
            )
            if s is not None and s.code == Code.SKIP:
                continue
            if s is None or s.code == Code.SUCCESS:
                final = None
            elif s.is_rejected():
                s.plugin = name
                final = s
            else:
                final = _guard_error(s, f"running Bind plugin {name!r}", name)
            break
        self._instr.observe_point(BIND, final, start)
        return final

    def run_post_bind_plugins(self, state: CycleState, pod_info: PodInfo, node_name: str) -> None:
        """Informational; never raises."""
        start = time.perf_counter()
        sampled = state.record_plugin_metrics
        for name, plugin in self._post_bind:
            self._instr.call_quietly(
                POST_BIND, name, sampled, pod_info.key, plugin.post_bind,
                state, pod_info, node_name,
            )
        self._instr.observe_point(POST_BIND, None, start)

    def __repr__(self) -> str:
        return f"Framework({self.profile_name!r})"
