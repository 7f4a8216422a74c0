"""PreScore, Score, NormalizeScore and the weights: the half of the runtime that ranks the
feasible nodes (upstream ``RunPreScorePlugins``, ``RunScorePlugins``), as score columns."""

from __future__ import annotations

import functools
import operator
import time
from collections.abc import Callable, Collection

import structlog

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.errors import FrameworkStatusError
from scheduler.framework.errors import guard_error as _guard_error
from scheduler.framework.instrumentation import (  # extension point labels, as upstream's
    PRE_SCORE, SCORE, SCORE_EXTENSION_NORMALIZE,
)
from scheduler.framework.node_info import NodeInfo
from scheduler.framework.runtime_base import RuntimeBase, plugin_raised
from scheduler.framework.status import Code, Status
from scheduler.framework.types import (
    MAX_NODE_SCORE, MIN_NODE_SCORE, NodeScore, NodeScoreResult, ScoreTable,
)
from scheduler.objects.pod import PodInfo

log = structlog.get_logger("scheduler.framework.runtime")

# Each Score plugin's values before NormalizeScore and weights: [(plugin, values per node)].
RawScores = list[tuple[str, list[int]]]
RawScorer = Callable[[CycleState, PodInfo, list[NodeInfo]], tuple[RawScores, Status | None]]
_NODE_NAME = operator.attrgetter("name")
# The codes the per-plugin loops compare with (an enum attribute costs a class lookup).
_SKIP = Code.SKIP
_SUCCESS = Code.SUCCESS


class ScoreSteps(RuntimeBase):
    """PreScore, Score, NormalizeScore and weights of ``Framework``."""

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
        for name, pre_score, evaluations in self._pre_score_calls:
            if sampled:
                s = instr.call(PRE_SCORE, name, sampled, pod_info.key, pre_score, state,
                               pod_info, nodes)
            else:  # the instrumented call without its timing: one call level less per plugin
                try:
                    s = pre_score(state, pod_info, nodes)
                except Exception as exc:
                    s = plugin_raised(PRE_SCORE, name, pod_info.key, exc)
            evaluations.value += 1  # BulkCounterChild.inc(1) without the call
            if s is None:
                continue
            if s.code == _SKIP:
                skip.add(name)
                continue
            if s.code != _SUCCESS:
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
            self._score_evaluations[name].inc(len(nodes))
            raw.append((name, values))
        return raw, None

    def _finish_scores(
        self, state: CycleState, pod_info: PodInfo, names: list[str], raw: RawScores
    ) -> tuple[ScoreTable, Status | None]:
        """NormalizeScore, the range check and the weights over every node's raw scores."""
        table = ScoreTable(names, [0] * len(names), {})
        totals: list[int] | None = None
        for name, values in raw:
            weighted, status = self.finish_column(state, pod_info, names, name, values)
            if status is not None:
                return table, status
            table.by_plugin[name] = weighted
            # the first column is the running total; columns of zeros add nothing
            if totals is None:
                totals = list(weighted)
            elif any(weighted):
                totals = list(map(operator.add, totals, weighted))
        if totals is not None:
            table.totals = totals
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
        if weight != 1 and any(values):  # a column of zeros stays one (C scans, no product)
            return list(map(functools.partial(operator.mul, weight), values)), None
        return list(values), None

    def observe_score(self, status: Status | None, start: float) -> None:
        """The Score extension point's duration, for a score table built outside
        ``score_table`` (opportunistic batching's window reuse)."""
        self._instr.observe_point(SCORE, status, start)
