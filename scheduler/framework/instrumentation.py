"""Metrics recording and instrumented plugin calls for the runtime (upstream
``metrics_recorder.go`` and ``instrumented_plugins.go``).

Metrics follow upstream: ``scheduler_framework_extension_point_duration_seconds`` for every
extension point except the per-node Filter, and per-plugin durations only for sampled cycles
(``CycleState.record_plugin_metrics``, ~10%), so the per-node Filter path stays cheap.
Labelled children are cached: ``labels()`` per call costs more than the observation.

``call``/``call_with_result``/``call_async``/``call_quietly`` are the one skeleton of every
``run_*`` loop: time the plugin in sampled cycles, and turn an exception inside the plugin
into ``Status(ERROR)`` naming it, so a plugin bug fails one pod, never the loop.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import structlog

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.status import Code, Status
from scheduler.metrics import BulkHistogramChild, SchedulerMetrics
from scheduler.objects.pod import PodInfo

log = structlog.get_logger("scheduler.framework.runtime")

# Upstream pluginMetricsSamplePercent.
PLUGIN_METRICS_SAMPLE_PERCENT = 10

# Extension point labels, spelled as upstream's metrics package.
PRE_ENQUEUE = "PreEnqueue"
PRE_FILTER = "PreFilter"
PRE_FILTER_EXTENSION_ADD_POD = "PreFilterExtensionAddPod"
PRE_FILTER_EXTENSION_REMOVE_POD = "PreFilterExtensionRemovePod"
FILTER = "Filter"
POST_FILTER = "PostFilter"
PRE_SCORE = "PreScore"
SCORE = "Score"
SCORE_EXTENSION_NORMALIZE = "ScoreExtensionNormalize"
RESERVE = "Reserve"
UNRESERVE = "Unreserve"
PERMIT = "Permit"
PRE_BIND = "PreBind"
PRE_BIND_PRE_FLIGHT = "PreBindPreFlight"
BIND = "Bind"
POST_BIND = "PostBind"

R = TypeVar("R")


class Instrumentation:
    """One profile's metric children and the instrumented call of a plugin method."""

    def __init__(self, metrics: SchedulerMetrics, profile_name: str) -> None:
        self.metrics = metrics
        self.profile_name = profile_name
        self._ep_children: dict[tuple[str, Code], BulkHistogramChild] = {}
        self._plugin_children: dict[tuple[str, str, Code], BulkHistogramChild] = {}
        self._evaluation_children: dict[tuple[str, str], Any] = {}
        self.unrun = _UnrunCounts(self)

    # --- recording -------------------------------------------------------------------------

    def _point_child(self, point: str, status: Status | None) -> BulkHistogramChild:
        code = Code.SUCCESS if status is None else status.code
        child = self._ep_children.get((point, code))
        if child is None:
            child = self.metrics.framework_extension_point_duration.labels(
                point, code.label, self.profile_name
            )
            self._ep_children[(point, code)] = child
        return child

    def observe_point(self, point: str, status: Status | None, start: float) -> None:
        # The child looked up here (``_point_child`` only to make one): every cycle
        # observes three or four points.
        child = self._ep_children.get((point, Code.SUCCESS if status is None else status.code))
        if child is None:
            child = self._point_child(point, status)
        child.observe(time.perf_counter() - start)

    def _plugin_child(self, plugin: str, point: str, code: Code) -> BulkHistogramChild:
        key = (plugin, point, code)
        child = self._plugin_children.get(key)
        if child is None:
            child = self.metrics.plugin_execution_duration.labels(plugin, point, code.label)
            self._plugin_children[key] = child
        return child

    def observe_plugin(self, point: str, plugin: str, status: Status | None, start: float) -> None:
        code = Code.SUCCESS if status is None else status.code
        self._plugin_child(plugin, point, code).observe(time.perf_counter() - start)

    def observe_filter_batch(
        self, plugin: str, results: list[Status | None], seconds: float
    ) -> None:
        """A batch Filter call as that many node-by-node calls lasting the batch's mean."""
        if not results:
            return
        per_node = seconds / len(results)
        counts: dict[Code, int] = {}
        for status in results:
            code = Code.SUCCESS if status is None else status.code
            counts[code] = counts.get(code, 0) + 1
        for code, count in counts.items():
            self._plugin_child(plugin, FILTER, code).observe_many(per_node, count)

    def count_evaluation(self, point: str, plugin: str, count: int = 1) -> None:
        if count:
            # labels() builds and looks up a label tuple each call: keep the child per pair.
            child = self._evaluation_children.get((point, plugin))
            if child is None:
                child = self.metrics.plugin_evaluation_total.labels(
                    plugin, point, self.profile_name)
                self._evaluation_children[(point, plugin)] = child
            child.inc(count)

    def observe_permit_wait(self, status: Status | None, seconds: float) -> None:
        code = Code.SUCCESS if status is None else status.code
        self.metrics.permit_wait_duration.labels(code.label).observe(seconds)

    # --- instrumented calls ----------------------------------------------------------------

    def call(
        self, point: str, name: str, sampled: bool, pod_key: str,
        fn: Callable[..., Status | None], *args: Any,
    ) -> Status | None:
        """A plugin method answering a Status."""
        t0 = time.perf_counter() if sampled else 0.0
        try:
            status = fn(*args)
        except Exception as exc:
            log.exception(f"{point} plugin raised", plugin=name, pod=pod_key)
            status = Status.from_error(exc, plugin=name)
        if sampled:
            self.observe_plugin(point, name, status, t0)
        return status

    def call_with_result(
        self, point: str, name: str, sampled: bool, pod_key: str,
        fn: Callable[..., tuple[R | None, Status | None]], *args: Any,
    ) -> tuple[R | None, Status | None]:
        """A plugin method answering (result, Status); (None, Error) when it raises."""
        t0 = time.perf_counter() if sampled else 0.0
        result: R | None
        try:
            result, status = fn(*args)
        except Exception as exc:
            log.exception(f"{point} plugin raised", plugin=name, pod=pod_key)
            result, status = None, Status.from_error(exc, plugin=name)
        if sampled:
            self.observe_plugin(point, name, status, t0)
        return result, status

    async def call_async(
        self, point: str, name: str, sampled: bool, pod_key: str,
        fn: Callable[..., Awaitable[Status | None]], *args: Any,
    ) -> Status | None:
        """An async plugin method (PreBind, Bind) answering a Status."""
        t0 = time.perf_counter() if sampled else 0.0
        try:
            status = await fn(*args)
        except Exception as exc:
            log.exception(f"{point} plugin raised", plugin=name, pod=pod_key)
            status = Status.from_error(exc, plugin=name)
        if sampled:
            self.observe_plugin(point, name, status, t0)
        return status

    def call_quietly(
        self, point: str, name: str, sampled: bool, pod_key: str,
        fn: Callable[..., None], *args: Any,
    ) -> None:
        """A plugin method that must not fail (Unreserve, PostBind): errors are logged."""
        t0 = time.perf_counter() if sampled else 0.0
        try:
            fn(*args)
        except Exception:
            log.exception(f"{point} plugin raised", plugin=name, pod=pod_key)
        if sampled:
            self.observe_plugin(point, name, None, t0)


class _UnrunCounts(dict[str, list[int]]):
    """Extension point -> the bucket counts of its duration histogram's child, for the
    points with no plugin to run (five a pod in the floor profile).  Such a point still
    counts an observation, as upstream's (which times an empty loop): zero seconds, so no
    clock is read, the first bucket counted (every bound is above zero) and 0.0 left out
    of the sum; ``instr.unrun[point][0] += 1`` makes no call.  The child is made on the
    point's first observation (a series appears once observed); its status is Skip for
    PreBindPreFlight (no plugin has work), Success for the others."""

    __slots__ = ("_instr",)

    def __init__(self, instr: Instrumentation) -> None:
        super().__init__()
        self._instr = instr

    def __missing__(self, point: str) -> list[int]:
        status = _SKIPPED if point == PRE_BIND_PRE_FLIGHT else None
        counts = self[point] = self._instr._point_child(point, status).counts
        return counts


_SKIPPED = Status(Code.SKIP)  # read for its code only


def timeout_first(
    permit: Callable[[CycleState, PodInfo, str], tuple[Status | None, float]],
) -> Callable[[CycleState, PodInfo, str], tuple[float, Status | None]]:
    """Permit answers (status, timeout); the instrumented call wants (result, status)."""

    def call(state: CycleState, pod_info: PodInfo, node_name: str) -> tuple[float, Status | None]:
        status, timeout = permit(state, pod_info, node_name)
        return timeout, status

    return call
