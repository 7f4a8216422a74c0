"""What the runtime's step modules share: the attributes ``Framework`` sets up, declared once
so each step (``runtime_filter``, ``runtime_score``, ``runtime_binding``) is typed against
them, and the flush of the Filter evaluation counts several steps start with."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import structlog

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.instrumentation import Instrumentation
from scheduler.framework.node_info import NodeInfo
from scheduler.framework.status import Status
from scheduler.objects.pod import PodInfo

if TYPE_CHECKING:
    from scheduler.framework.interfaces import (
        BindPlugin, FilterPlugin, PermitPlugin, PodNominator, PostBindPlugin, PostFilterPlugin,
        PreBindPlugin, PreFilterPlugin, PreScorePlugin, ReservePlugin, ScorePlugin,
    )
    from scheduler.framework.types import PreFilterResult
    from scheduler.framework.waiting_pods import WaitingPodsMap
    from scheduler.metrics import BulkCounterChild

FilterFn = Callable[[CycleState, PodInfo, NodeInfo], "Status | None"]

log = structlog.get_logger("scheduler.framework.runtime")


def plugin_raised(point: str, name: str, pod_key: str, exc: Exception) -> Status:
    """What an instrumented call makes of a plugin's exception (logged, an Error status
    naming the plugin), for the loops that call unsampled plugins directly."""
    log.exception(f"{point} plugin raised", plugin=name, pod=pod_key)
    return Status.from_error(exc, plugin=name)


class RuntimeBase:
    """The state of one profile's runtime (set by ``Framework.__init__``)."""

    profile_name: str
    score_weights: dict[str, int]
    waiting_pods: WaitingPodsMap
    _instr: Instrumentation
    _nominator: PodNominator
    _pre_filter: list[tuple[str, PreFilterPlugin]]
    _filter: list[tuple[str, FilterPlugin]]
    _post_filter: list[tuple[str, PostFilterPlugin]]
    _pre_score: list[tuple[str, PreScorePlugin]]
    _score: list[tuple[str, ScorePlugin]]
    _score_by_name: dict[str, ScorePlugin]
    _reserve: list[tuple[str, ReservePlugin]]
    _permit: list[tuple[str, PermitPlugin]]
    _pre_bind: list[tuple[str, PreBindPlugin]]
    _bind: list[tuple[str, BindPlugin]]
    _post_bind: list[tuple[str, PostBindPlugin]]
    # Per-plugin evaluation counts, flushed to scheduler_plugin_evaluation_total in bulk
    # (incrementing a labelled prometheus counter per node per plugin is too slow).
    _filter_evals: list[int]
    # scheduler_plugin_evaluation_total's children of each PreFilter and PreScore plugin, in
    # their run order (one plain increment per plugin run).
    _pre_filter_evaluations: list[BulkCounterChild]
    _pre_score_evaluations: list[BulkCounterChild]
    # (name, bound pre_filter / pre_score, its evaluation counter) in run order.
    _pre_filter_calls: list[tuple[str, Callable[..., tuple[PreFilterResult | None, Status | None]],
                                  BulkCounterChild]]
    _pre_score_calls: list[tuple[str, Callable[..., Status | None], BulkCounterChild]]
    _filter_evaluations: list[BulkCounterChild]  # Filter's, flushed from _filter_evals
    _score_evaluations: dict[str, BulkCounterChild]
    # The cycle's Filter plan (the Filter plugins its PreFilter did not skip), per state.
    _plan_state: CycleState | None
    _plan_skip: set[str] | None
    _plan: list[tuple[int, str, FilterFn]]

    def flush_metrics(self) -> None:
        """Publish the Filter evaluation counts gathered since the last flush."""
        counts = self._filter_evals
        if not any(counts):
            return  # nothing filtered since (every PreFilter after the last cycle's PreScore)
        for index, count in enumerate(counts):
            if count:
                counts[index] = 0
                self._filter_evaluations[index].inc(count)
