"""One profile's plugin pipeline: builds the plugins a profile enables and runs them at each
extension point with kube-scheduler's semantics (``pkg/scheduler/framework/runtime``).

Why it exists as one class: the scheduling cycle, the binding cycle, the queue (PreEnqueue,
QueueSort, cluster-event registration) and preemption all need the same ordered plugin lists,
score weights and error mapping.  Every plugin call is guarded: an exception inside a plugin
becomes ``Status(ERROR)`` naming the plugin, so a plugin bug fails one pod, never the loop.

Split as upstream's runtime package: this module holds a profile's plugins (construction,
introspection, the queue's PreEnqueue and QueueSort, cluster-event registration) and runs
them through its steps, one module per stretch of the cycle: ``runtime_filter`` (PreFilter,
Filter, PostFilter), ``runtime_score`` (PreScore, Score, NormalizeScore, weights) and
``runtime_binding`` (Reserve, Permit, PreBind, Bind, PostBind), typed against the state
they share in ``runtime_base``; ``builder`` builds a profile's plugin lists (multiPoint
expansion, weights, args); ``instrumentation`` records the metrics and holds the one guarded,
timed plugin-call skeleton every ``run_*`` uses.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterable
from typing import Any, cast

import structlog

from scheduler.config.types import Profile
from scheduler.framework.builder import ProfileBuilder
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.errors import FrameworkStatusError, PluginConfigError
from scheduler.framework.events import ActionType, ClusterEvent, EventResource, QueueingHintFn
from scheduler.framework.handle import FrameworkHandle
from scheduler.framework.instrumentation import (  # extension point labels, as upstream's
    FILTER, PLUGIN_METRICS_SAMPLE_PERCENT, PRE_ENQUEUE, PRE_FILTER, PRE_SCORE, SCORE,
    Instrumentation,
)
from scheduler.framework.interfaces import (
    ApiClient, BindPlugin, EnqueueExtensions, EventRecorder, ExtenderPreemption, FilterPlugin,
    NodeInfoLister, ObjectLister, PermitPlugin, Plugin, PodGroupPlugin, PodNominator,
    PostBindPlugin, PostFilterPlugin, PreBindPlugin, PreEnqueuePlugin, PreFilterPlugin,
    PreScorePlugin, QueueSortPlugin, ReservePlugin, ScorePlugin,
)
from scheduler.framework.registry import Registry
from scheduler.framework.runtime_base import FilterFn
from scheduler.framework.runtime_binding import BindingSteps
from scheduler.framework.runtime_filter import FilterSteps
from scheduler.framework.runtime_score import RawScorer, RawScores, ScoreSteps
from scheduler.framework.status import Code, Status
from scheduler.framework.types import QueuedPodInfo
from scheduler.framework.waiting_pods import WaitingPod, WaitingPodsMap
from scheduler.metrics import SchedulerMetrics
from scheduler.objects.pod import PodInfo

__all__ = [
    "PLUGIN_METRICS_SAMPLE_PERCENT",
    "WILDCARD_EVENT",
    "FilterFn",
    "Framework",
    "FrameworkStatusError",
    "PluginConfigError",
    "RawScorer",
    "RawScores",
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


class Framework(FilterSteps, ScoreSteps, BindingSteps):
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
        # Asked once per scheduled pod: the ABC isinstance walk is done here, once.
        self._pod_group_plugins: list[tuple[str, PodGroupPlugin]] = [
            (name, plugin) for name, plugin in self.plugins.items()
            if isinstance(plugin, PodGroupPlugin)]
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
        # The heaps' key function when the QueueSort plugin has one (PrioritySort does).
        self.queue_sort_key = self._queue_sort[0][1].sort_key()
        # Per-plugin evaluation counts, flushed to scheduler_plugin_evaluation_total in bulk
        # (incrementing a labelled prometheus counter per node per plugin is too slow).
        self._filter_evals = [0] * len(self._filter)
        evaluations = self.metrics.plugin_evaluation_total
        self._pre_filter_evaluations = [evaluations.labels(name, PRE_FILTER, self.profile_name)
                                        for name, _ in self._pre_filter]
        self._pre_score_evaluations = [evaluations.labels(name, PRE_SCORE, self.profile_name)
                                       for name, _ in self._pre_score]
        # What the PreFilter and PreScore loops call, bound once: (name, method, its
        # evaluation counter).
        self._pre_filter_calls = [
            (name, plugin.pre_filter, counter)
            for (name, plugin), counter in zip(self._pre_filter, self._pre_filter_evaluations)]
        self._pre_score_calls = [
            (name, plugin.pre_score, counter)
            for (name, plugin), counter in zip(self._pre_score, self._pre_score_evaluations)]
        self._filter_evaluations = [evaluations.labels(name, FILTER, self.profile_name)
                                    for name, _ in self._filter]
        self._score_evaluations = {name: evaluations.labels(name, SCORE, self.profile_name)
                                   for name, _ in self._score}
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
        for name, plugin in self._pod_group_plugins:
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
        """upstream's rand.Intn(100) < percent.  ``randrange(100)``'s own draw, inlined (its
        two Python-level calls were a visible part of a cycle): the same bits taken from the
        generator, which the scheduler shares with host selection, so ties are broken as
        before."""
        if self._sample_percent <= 0:
            return False
        getrandbits = self._rng.getrandbits
        r = getrandbits(7)
        while r >= 100:
            r = getrandbits(7)
        return r < self._sample_percent

    def new_cycle_state(self) -> CycleState:
        """A CycleState for one scheduling attempt; ~10% of them record per-plugin metrics."""
        state = CycleState()
        state.record_plugin_metrics = self._sample()
        return state

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

    def __repr__(self) -> str:
        return f"Framework({self.profile_name!r})"
