"""Opportunistic batching (KEP-5598): pods alike reuse the Filter and Score work done for
the pods before them, on every node that did not change since.

A plugin *signs* a pod (``sign(pod_info)``) when its Filter status and raw Score for that
pod on a node are a function of the signature and of that node's NodeInfo alone (plus the
cluster's node count and image spread, which the cache also keys on).  When every Filter
plugin that will run signs the pod, the per-node Filter statuses computed for earlier pods
of the same signature are reused for every node whose NodeInfo generation is unchanged;
only the other nodes (at least the one the previous pod went to) are filtered again.  Score
works the same way on raw per-plugin scores; NormalizeScore, weights and host selection run
over the whole feasible list each cycle as always.  So a batched cycle examines the same
nodes in the same order (the round robin is untouched), gets the same statuses and the same
scores, and picks the same host with the same random draw as an unbatched cycle: the
property tests check exactly that.  A plugin without ``sign``, or one that returns ``None``
(it reads something beyond the node, e.g. inter-pod affinity against other nodes' pods),
sends the pod down the normal path.  Upstream reuses one previous cycle's result only when
nothing but the last assignment changed; keeping results per node is what lets this go
further safely.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from scheduler.framework.node_info import changed_nodes
from scheduler.framework.status import Code, Status

if TYPE_CHECKING:
    from scheduler.framework.cycle_state import CycleState
    from scheduler.framework.node_info import NodeInfo
    from scheduler.framework.runtime import Framework, RawScores
    from scheduler.framework.types import ScoreTable
    from scheduler.objects.pod import PodInfo


@runtime_checkable
class SignPlugin(Protocol):
    """A Filter or Score plugin whose per-node answer for a pod depends only on ``sign``'s
    value and the node's NodeInfo.  ``None``: this pod cannot be signed (normal path)."""

    def sign(self, pod_info: PodInfo) -> Hashable | None: ...


def sign_requests(pod_info: PodInfo) -> Hashable:
    """What resource plugins read of a pod: its requests and the non-zero defaults."""
    r = pod_info.requests
    return (r.milli_cpu, r.memory, r.ephemeral_storage, r.allowed_pod_number,
            tuple(sorted(r.scalar_resources.items())), pod_info.non_zero_cpu,
            pod_info.non_zero_memory)


def freeze(value: Any) -> Hashable:
    """A hashable copy of a JSON-like value (dicts by sorted key, lists in order)."""
    if isinstance(value, dict):
        return tuple(sorted((k, freeze(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return tuple(freeze(v) for v in value)
    return value  # type: ignore[no-any-return]  # str/int/float/bool/None are hashable


def _sign_all(plugins: Sequence[tuple[str, object]], skip: set[str],
              pod_info: PodInfo) -> tuple[Hashable, ...] | None:
    parts: list[Hashable] = []
    for name, plugin in plugins:
        if name in skip:
            continue
        sign = getattr(plugin, "sign", None)
        if sign is None:
            return None
        value = sign(pod_info)
        if value is None:
            return None
        parts.append((name, value))
    return tuple(parts)


class _Results:
    """Per-node results for one signature (and skip set) on one profile.

    Kept as parallel dicts by node name so a whole chunk is checked and answered with
    ``map`` and one list comparison (C loops), not a Python loop per node: at 500 nodes
    per cycle the per-node loop would cost as much as the cycle it saves.
    """

    __slots__ = ("epoch", "filter_gen", "filter_status", "score_columns", "score_gen",
                 "score_key", "scored_plugins")

    def __init__(self, epoch: tuple[int, int]) -> None:
        self.epoch = epoch
        # node name -> NodeInfo generation the result was computed on, and the result
        self.filter_gen: dict[str, int] = {}
        self.filter_status: dict[str, Status | None] = {}
        self.score_key: Hashable = None
        self.scored_plugins: list[str] = []
        # node name -> generation; per plugin (scored_plugins order): node name -> raw score
        self.score_gen: dict[str, int] = {}
        self.score_columns: list[dict[str, int]] = []


class Batch:
    """The reusable results a cycle found for its pod; used in place of the framework's
    Filter and Score runs (same answers, fewer plugin calls)."""

    __slots__ = ("_cache", "_fwk", "_results", "reused", "evaluated")

    def __init__(self, cache: BatchCache, fwk: Framework, results: _Results) -> None:
        self._cache = cache
        self._fwk = fwk
        self._results = results
        self.reused = 0
        self.evaluated = 0

    def run_filter_plugins_on_nodes(
        self, state: CycleState, pod_info: PodInfo, nodes: list[NodeInfo]
    ) -> list[Status | None]:
        results = self._results
        names, stale = changed_nodes(nodes, results.filter_gen)
        if stale:
            self.evaluated += len(stale)
            subset = [nodes[i] for i in stale] if len(stale) < len(nodes) else nodes
            statuses = self._fwk.run_filter_plugins_on_nodes(state, pod_info, subset)
            errors: list[str] = []
            for node_info, status in zip(subset, statuses):
                name = node_info.name
                results.filter_status[name] = status
                if status is None or status.code != Code.ERROR:
                    results.filter_gen[name] = node_info.generation
                else:  # an error is answered once, never kept
                    results.filter_gen.pop(name, None)
                    errors.append(name)
            out = list(map(results.filter_status.__getitem__, names))
            for name in errors:
                del results.filter_status[name]
        else:
            out = list(map(results.filter_status.__getitem__, names))
        reused = len(nodes) - len(stale)
        self.reused += reused
        self._cache.reused += reused
        return out

    def score_table(
        self, state: CycleState, pod_info: PodInfo, nodes: list[NodeInfo]
    ) -> tuple[ScoreTable, Status | None]:
        fwk = self._fwk
        score_sig = _sign_all(fwk.score_plugins, state.skip_score_plugins, pod_info)
        if score_sig is None:
            return fwk.score_table(state, pod_info, nodes)
        results = self._results
        key = (score_sig, frozenset(state.skip_score_plugins))
        if key != results.score_key:
            results.score_key = key
            results.score_gen = {}
            results.score_columns = []
            results.scored_plugins = []
        return fwk.score_table(state, pod_info, nodes, raw_scores=self._raw_scores)

    def _raw_scores(
        self, state: CycleState, pod_info: PodInfo, nodes: list[NodeInfo]
    ) -> tuple[RawScores, Status | None]:
        results = self._results
        names, stale = changed_nodes(nodes, results.score_gen)
        if stale:
            subset = [nodes[i] for i in stale] if len(stale) < len(nodes) else nodes
            raw, status = self._fwk.raw_scores(state, pod_info, subset)
            if status is not None:
                return raw, status
            plugins = [name for name, _ in raw]
            if results.score_gen and plugins != results.scored_plugins:
                # Cannot happen for one skip set; never worth a wrong answer either.
                return self._fwk.raw_scores(state, pod_info, nodes)
            if not results.score_gen:
                results.scored_plugins = plugins
                results.score_columns = [{} for _ in plugins]
            subset_names = [names[i] for i in stale]
            for column, (_, values) in zip(results.score_columns, raw):
                column.update(zip(subset_names, values))
            results.score_gen.update(zip(subset_names, (nodes[i].generation for i in stale)))
        return [(name, list(map(column.__getitem__, names)))
                for name, column in zip(results.scored_plugins, results.score_columns)], None


class BatchCache:
    """Results per (profile, signature, Filter skip set), the most recent few kept."""

    def __init__(self, *, max_signatures: int = 8) -> None:
        self._max = max_signatures
        self._entries: OrderedDict[Hashable, _Results] = OrderedDict()
        # Node Filter results reused instead of evaluated, over the cache's life.
        self.reused = 0

    def __len__(self) -> int:
        return len(self._entries)

    def begin(self, fwk: Framework, state: CycleState, pod_info: PodInfo, *,
              num_nodes: int, image_generation: int) -> Batch | None:
        """The batch for this cycle (after PreFilter), or None: take the normal path."""
        filter_sig = _sign_all(fwk.filter_plugins, state.skip_filter_plugins, pod_info)
        if filter_sig is None:
            return None
        key = (fwk.profile_name, filter_sig, frozenset(state.skip_filter_plugins))
        # ImageLocality scores by the share of nodes holding an image: a change in the
        # node count or image spread touches every node's score without touching the node.
        epoch = (num_nodes, image_generation)
        results = self._entries.get(key)
        if results is None or results.epoch != epoch:
            results = _Results(epoch)
            self._entries[key] = results
            while len(self._entries) > self._max:
                self._entries.popitem(last=False)
        self._entries.move_to_end(key)
        return Batch(self, fwk, results)
