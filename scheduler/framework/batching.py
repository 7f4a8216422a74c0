"""Opportunistic batching (KEP-5598): pods alike reuse the Filter and Score work done for
the pods before them, on every node that did not change since.

A plugin *signs* a pod (``sign(pod_info)``) when its Filter status and raw Score for that
pod on a node are a function of the signature and of that node's NodeInfo alone (plus, once
some node holds an image, the cluster's node count and image spread, which the cache also
keys on: ImageLocality's share of nodes holding an image; a plugin reading the node count
otherwise must not sign).  The signing plugins'
Filter statuses and raw scores computed for earlier pods of the same signature are kept by
position in the snapshot's node list (``KeptPositions``); the snapshot's change log says which
positions changed since the last look, only those (at least the node the previous pod went
to) are filtered and scored again, and a chunk of the walk reads the rest as slices.
NormalizeScore, weights and host selection run over the whole feasible list each cycle as
always.  So a batched cycle examines the same nodes in the same order (the round robin is
untouched), gets the same statuses and the same scores, and picks the same host with the
same random draw as an unbatched cycle: the property tests check exactly that.  A plugin
without ``sign``, or one that returns ``None`` (it reads something beyond the node, e.g.
inter-pod affinity against other nodes' pods), runs afresh every cycle while the plugins
that did sign are still answered from the kept results (partial batching): a node's status
is still its first rejecting plugin's in the Filter order, and the unsigned plugins' raw
scores join the kept ones before NormalizeScore.  Upstream reuses one previous cycle's
result only when nothing but the last assignment changed, and not at all for inter-pod
affinity or spreading; keeping results per node and per plugin is what lets this go
further safely.  A Filter plugin whose statuses depend on what its PreFilter computed
for the pod signs the Filter through ``sign_filter(state, pod_info)`` instead
(PodTopologySpread: the domains over the skew), read after PreFilter.  (The signature's
parts and the protocols plugins implement: ``batching_sign``.)

When every plugin signs, a cycle whose walk found every node of its window feasible also
keeps the window whole (``KeptWindow``: the round robin's start index, the nodes, the raw,
final and total scores).  The next cycle of the signature that starts at that index asks
the change log which positions changed since, filters and scores only those, and re-runs a
plugin's NormalizeScore only when one of its raw scores moved.  The window also keeps its
highest total and how many nodes have it, updated from the changed nodes alone, so the host
pick needs no pass over the window to find them.  That needs NormalizeScore,
for a signed pod, to be a function of the raw scores (and node names) alone, as default
normalization is; a cycle that finds a changed node infeasible takes the walk above.
"""
from __future__ import annotations

import operator
import time
from collections import OrderedDict
from collections.abc import Collection, Hashable
from typing import TYPE_CHECKING, Any

from scheduler.framework.status import Code, Status
from scheduler.framework.batching_kept import MAX_SHIFT_SHARE, KeptPositions, KeptWindow
from scheduler.framework.batching_kept import Snapshot as Snapshot
from scheduler.framework.batching_kept import (  # the helpers over kept lists
    _best,
    _best_after,
    _gather,
    _missing,
    _positions_of,
    window_offsets,
)
from scheduler.framework.batching_kept import wrapped_slice as wrapped_slice
from scheduler.framework import batching_mask as masks
from scheduler.framework.batching_sign import FilterSignPlugin as FilterSignPlugin
from scheduler.framework.batching_sign import SignPlugin as SignPlugin
from scheduler.framework.batching_sign import freeze as freeze
from scheduler.framework.batching_sign import sign_requests as sign_requests
from scheduler.framework.batching_sign import _sign_parts as _sign_parts
from scheduler.framework.batching_sign import _Signer, _signers
from scheduler.framework.types import ScoreTable

_NODE_NAME = operator.attrgetter("name")
_SUCCESS = Code.SUCCESS
_ERROR = Code.ERROR

if TYPE_CHECKING:
    from scheduler.framework.cycle_state import CycleState
    from scheduler.framework.node_info import NodeInfo
    from scheduler.framework.runtime import Framework, RawScores
    from scheduler.framework.types import Diagnosis
    from scheduler.objects.pod import PodInfo

# scheduler_batch_attempts_total{result} and scheduler_batch_cache_flushed_total{reason}: upstream's
# values.  A "hint" here is the results kept for the pod's signature (used whenever present).
ATTEMPT_NO_HINT = "no_hint"
ATTEMPT_HINT_USED = "hint_used"
FLUSH_EXPIRED = "expired"
FLUSH_POD_INCOMPATIBLE = "pod_incompatible"

# Windows kept per signature: one per round-robin start index the walk comes back to
# (nodes / nodes examined of them: 10 at 5000 nodes, 20 at 10000).
MAX_WINDOWS = 64
# A walk's first chunk is at most this many times the feasible nodes it looks for.
MAX_FIRST_CHUNK_SHARE = 4


class _Results:
    """The kept results of one signature (and skip sets) on one profile."""

    __slots__ = ("epoch", "masked_windows", "positions", "score_key", "walked", "windows")

    def __init__(self, epoch: tuple[int, int]) -> None:
        self.epoch = epoch
        # The Score signature (and skip set) the kept raw scores were computed for.
        self.score_key: Hashable = None
        # Signed plugins' statuses and raw scores by position in the snapshot's node list.
        self.positions = KeptPositions()
        # round-robin start index -> the window found from it
        self.windows: dict[int, KeptWindow] = {}
        # The same per FilterMask key (batching_mask: the mask moves the feasible nodes).
        self.masked_windows: OrderedDict[Hashable, dict[int, KeptWindow]] = OrderedDict()
        # FilterMask key (None: no mask) -> (nodes examined, feasible found) by the last
        # walk that met rejected nodes (``Batch.first_chunk``); at most MAX_MASKS + 1.
        self.walked: dict[Hashable, tuple[int, int]] = {}


class Batch:
    """The reusable results a cycle found for its pod; used in place of the framework's
    Filter and Score runs (same answers, fewer plugin calls)."""

    __slots__ = ("_cache", "_changed", "_contiguous", "_fwk", "_mask", "_mask_after",
                 "_results", "_scattered", "_signed_filters", "_windows",
                 "_signs", "_snapshot", "_unsigned_before", "_unsigned_filters", "_window",
                 "reused", "evaluated")

    def __init__(self, cache: BatchCache, fwk: Framework, results: _Results, *,
                 snapshot: Snapshot, signed_filters: frozenset[str] = frozenset(),
                 unsigned_filters: frozenset[str] = frozenset(),
                 unsigned_before: dict[str, frozenset[str]] | None = None,
                 signs: dict[str, Hashable] | None = None, mask: masks.FilterMask | None = None,
                 mask_after: frozenset[str] = frozenset()) -> None:
        self._cache = cache
        # The FilterMask put on the kept statuses, the plugins whose rejection it overrides.
        self._mask, self._mask_after = mask, mask_after
        self._windows = masks.windows_for(results.windows, results.masked_windows, mask)
        # The plugins' ``sign`` values for this cycle's pod, by name (asked once a cycle).
        self._signs: dict[str, Hashable] = signs if signs is not None else {}
        self._fwk = fwk
        self._results = results
        # Filter plugins that do not sign the pod run on every cycle's nodes, after the
        # signed ones are answered from the kept results (partial batching); per signed
        # plugin, the unsigned ones that come before it in the Filter order.
        self._signed_filters = signed_filters
        self._unsigned_filters = unsigned_filters
        self._unsigned_before = unsigned_before or {}
        self._snapshot = snapshot
        # The feasible nodes as one run of the node list, when the walk found them so:
        # (that list, its first position); their scores are then read as slices.
        self._contiguous: tuple[list[NodeInfo], int] | None = None
        # Otherwise (the walk met rejected nodes): (that list, its nodes' positions).
        self._scattered: tuple[list[NodeInfo], list[int]] | None = None
        # This cycle's window, once the walk found one: (start, feasible nodes, window).
        self._window: tuple[int, list[NodeInfo], KeptWindow] | None = None
        # What the change log answered the kept window's Filter: (the serial asked about,
        # the positions changed since), for its Score asking about the same serial.
        self._changed: tuple[int, list[int]] | None = None
        self.reused = 0
        self.evaluated = 0

    # --- whole windows (the snapshot's change log) ----------------------------------------

    def window_holds_any(self, names: Collection[str], *, start: int, size: int) -> bool:
        """Whether any node of ``names`` (nodes holding nominated pods, which take the
        two-pass Filter) lies in the window of ``size`` nodes from ``start``; True when
        that cannot be told, so the caller walks as usual."""
        if self._unsigned_filters:
            return True  # no window is kept while some plugin answers afresh each cycle
        snapshot = self._snapshot
        positions = snapshot.positions
        num_all = len(snapshot.node_info_list)
        for name in names:
            position = positions.get(name)
            if position is not None and (position - start) % num_all < size:
                return True
        return False

    def offsets_in_run(self, names: Collection[str], *, first: int, size: int) -> list[int]:
        """The offsets, in ascending order, of the nodes of ``names`` that lie in the run of
        ``size`` nodes of the snapshot's node list from position ``first`` (wrapping): a
        lookup per name, no pass over the run (``names`` are few: nodes holding nominated
        pods)."""
        snapshot = self._snapshot
        positions = snapshot.positions
        num_all = len(snapshot.node_info_list)
        offsets = []
        for name in names:
            position = positions.get(name)
            if position is not None:
                offset = (position - first) % num_all
                if offset < size:
                    offsets.append(offset)
        offsets.sort()
        return offsets

    def filter_window(
        self, state: CycleState, pod_info: PodInfo, nodes: list[NodeInfo], *, start: int,
        size: int, diagnosis: Diagnosis | None = None,
    ) -> tuple[list[NodeInfo], int] | None:
        """The walk's answer from ``start`` when the window kept there still holds: its
        ``size`` feasible nodes and how many nodes the walk examined (exactly those).  A
        window the walk found among rejected nodes (scattered) is taken only with a
        ``diagnosis`` (its rejections go there) and when every changed node it examined
        passes or fails as before.  None: walk as usual."""
        snapshot = self._snapshot
        if self._unsigned_filters or nodes is not snapshot.node_info_list:
            return None
        windows = self._windows
        window = windows.get(start)
        if window is not None and window.positions is not None:
            if diagnosis is None or not window.fits(snapshot, size):
                return None
            return self._filter_scattered(state, pod_info, nodes, start, window, diagnosis)
        by = 0
        if window is None or not window.fits(snapshot, size):
            near = self._window_near(start, size)
            if near is None:
                return None
            by, window = near
        changed = snapshot.changed_positions_since(window.filter_serial)
        if changed is None:
            return None
        if not by:
            self._changed = (window.filter_serial, changed)
        num_all = len(nodes)
        offsets = window_offsets(changed, start=start, size=size, num_all=num_all)
        if by:
            # the nodes that join the shifted window are filtered as changed ones
            offsets = sorted(set(offsets).union(
                range(by) if by > 0 else range(size + by, size)))
        if offsets:
            index = [(start + o) % num_all for o in offsets]
            subset = [nodes[i] for i in index]
            statuses = self.run_filter_plugins_on_nodes(state, pod_info, subset, index=index)
            if any(statuses):
                return None
        feasible = wrapped_slice(nodes, start, size)
        if by:
            del windows[(start + by) % num_all]
            window = window.shifted(by, feasible)
            windows[start] = window
        window.filter_serial = snapshot.change_serial
        reused = size - len(offsets)
        self.reused += reused
        self._cache.reused += reused
        self._cache.windows_reused += 1
        self._window = (start, feasible, window)
        self._contiguous = (feasible, start)
        return feasible, size

    def _filter_scattered(
        self, state: CycleState, pod_info: PodInfo, nodes: list[NodeInfo], start: int,
        window: KeptWindow, diagnosis: Diagnosis,
    ) -> tuple[list[NodeInfo], int] | None:
        """``filter_window`` for a scattered window: the nodes the walk examined that
        changed since are filtered again; when each still passes or fails as it did, the
        walk would examine the same nodes and find the same ones feasible."""
        snapshot = self._snapshot
        changed = snapshot.changed_positions_since(window.filter_serial)
        if changed is None:
            return None
        self._changed = (window.filter_serial, changed)
        num_all = len(nodes)
        span = window.span
        index = sorted({p for p in changed if (p - start) % num_all < span})
        offset_of = window.index(start)
        if index:
            statuses = self.run_filter_plugins_on_nodes(
                state, pod_info, [nodes[p] for p in index], index=index)
            for position, status in zip(index, statuses):
                passed = status is None or status.code == _SUCCESS
                if passed != (position in offset_of) or (
                        status is not None and status.code == _ERROR):
                    return None
        kept = self._results.positions
        kept.sync(snapshot)
        rejected = window.rejected
        if rejected:
            known = kept.status_known
            if not all(map(known.__getitem__, rejected)):
                return None
            statuses = list(map(kept.status.__getitem__, rejected))
            if self._mask is not None:
                statuses = masks.apply_mask(self._mask, self._mask_after, snapshot, statuses,
                                      first=0, index=rejected)
            diagnosis.add_rejected(list(map(nodes.__getitem__, rejected)), statuses,
                                   len(rejected))
        assert window.positions is not None  # a scattered window
        feasible = list(map(nodes.__getitem__, window.positions))
        window.filter_serial = snapshot.change_serial
        reused = span - len(index)
        self.reused += reused
        self._cache.reused += reused
        self._cache.windows_reused += 1
        self._cache.scattered_windows_reused += 1
        self._window = (start, feasible, window)
        self._scattered = (feasible, window.positions)
        return feasible, span

    def _window_near(self, start: int, size: int) -> tuple[int, KeptWindow] | None:
        """A kept window of ``size`` nodes starting at most ``size / MAX_SHIFT_SHARE``
        positions from ``start``, as (its start minus ``start``, it); the nearest."""
        snapshot = self._snapshot
        num_all = len(snapshot.node_info_list)
        reach = size // MAX_SHIFT_SHARE
        best: tuple[int, KeptWindow] | None = None
        for kept_start, window in self._windows.items():
            if window.positions is not None or not window.fits(snapshot, size):
                continue
            by = (kept_start - start) % num_all
            if by > num_all - by:
                by -= num_all
            if by and abs(by) <= reach and (best is None or abs(by) < abs(best[0])):
                best = (by, window)
        return best

    def keep_window(self, nodes: list[NodeInfo], feasible: list[NodeInfo], *, start: int,
                    size: int) -> None:
        """The walk from ``start`` found its first ``size`` nodes all feasible: keep them."""
        snapshot = self._snapshot
        if self._unsigned_filters or nodes is not snapshot.node_info_list:
            return
        windows = self._windows
        window = windows.get(start)
        if window is None or window.positions is not None or not window.fits(snapshot, size):
            window = KeptWindow(list_version=snapshot.list_version, num_all=len(nodes),
                             size=size, serial=snapshot.change_serial)
            self._put_window(start, window)
        window.filter_serial = snapshot.change_serial
        self._window = (start, feasible, window)

    def keep_scattered(self, nodes: list[NodeInfo], feasible: list[NodeInfo],
                       where: list[int], *, start: int, span: int) -> None:
        """The walk from ``start`` examined ``span`` nodes and found ``feasible`` (all it
        wanted) at positions ``where``, rejected nodes among them: keep that window (its
        kept scores too when the same nodes were feasible last time)."""
        snapshot = self._snapshot
        if (self._unsigned_filters or nodes is not snapshot.node_info_list
                or len(where) != len(feasible)):
            return
        windows = self._windows
        window = windows.get(start)
        if (window is None or window.positions != where or window.span != span
                or not window.fits(snapshot, len(feasible))):
            window = KeptWindow.scattered(
                list_version=snapshot.list_version, num_all=len(nodes),
                serial=snapshot.change_serial, span=span, positions=where)
            self._put_window(start, window)
        window.filter_serial = snapshot.change_serial
        self._window = (start, feasible, window)

    def _put_window(self, start: int, window: KeptWindow) -> None:
        windows = self._windows
        windows[start] = window
        while len(windows) > MAX_WINDOWS:
            del windows[next(iter(windows))]

    def run_filter_plugins_on_nodes(
        self, state: CycleState, pod_info: PodInfo, nodes: list[NodeInfo], *,
        first: int | None = None, index: list[int] | None = None,
    ) -> list[Status | None]:
        """Each node's Filter status (its first rejecting plugin's, or None), the signed
        plugins' from the kept results where the node did not change.  ``first``: the
        nodes are the snapshot's node list from that position on (wrapping); ``index``:
        their positions in it."""
        signed = self._signed_statuses(state, pod_info, nodes, first=first, index=index)
        unsigned = self._unsigned_filters
        if not unsigned:
            return signed
        fwk = self._fwk
        out = list(signed)
        passed = [i for i, status in enumerate(signed) if status is None]
        if passed:
            subset = nodes if len(passed) == len(nodes) else [nodes[i] for i in passed]
            for i, status in zip(passed, fwk.run_filter_plugins_on_nodes(
                    state, pod_info, subset, only=unsigned)):
                out[i] = status
        # A node a signed plugin rejected still answers an unsigned plugin that comes
        # before it in the Filter order, if that one rejects it too.
        earlier: dict[str, list[int]] = {}
        for i, status in enumerate(signed):
            if status is not None and self._unsigned_before.get(status.plugin):
                earlier.setdefault(status.plugin, []).append(i)
        for plugin, indexes in earlier.items():
            statuses = fwk.run_filter_plugins_on_nodes(
                state, pod_info, [nodes[i] for i in indexes], only=self._unsigned_before[plugin])
            for i, status in zip(indexes, statuses):
                if status is not None:
                    out[i] = status
        return out

    def _locate(self, nodes: list[NodeInfo], first: int | None,
                index: list[int] | None = None) -> tuple[int, list[int] | None] | None:
        """Where ``nodes`` sit in the snapshot's node list: (``first``, None) for its run
        from ``first``; (0, their positions) for any other of its nodes (``index`` when
        the caller knows them); None when one of them is not in it (nothing kept
        applies)."""
        if first is not None:
            return first % len(self._snapshot.node_info_list), None
        if index is not None:
            return 0, index
        lookup = self._snapshot.positions
        index = [lookup.get(node_info.name, -1) for node_info in nodes]
        return None if -1 in index else (0, index)

    def _signed_statuses(
        self, state: CycleState, pod_info: PodInfo, nodes: list[NodeInfo], *,
        first: int | None, index: list[int] | None = None,
    ) -> list[Status | None]:
        only = self._signed_filters if self._unsigned_filters else None
        positions = self._results.positions
        positions.sync(self._snapshot)
        located = self._locate(nodes, first, index)
        if located is None:
            self.evaluated += len(nodes)
            return self._fwk.run_filter_plugins_on_nodes(state, pod_info, nodes, only=only)
        first, index = located
        size = len(nodes)
        out: list[Status | None] = _gather(positions.status, first, index, size)
        missing = _missing(_gather(positions.status_known, first, index, size))
        if missing:
            self.evaluated += len(missing)
            subset = nodes if len(missing) == size else [nodes[i] for i in missing]
            statuses = masks.run_unmasked(self._mask, state, self._fwk.run_filter_plugins_on_nodes,
                                          state, pod_info, subset, only=only)
            for position, i, status in zip(
                    _positions_of(missing, first, index, positions.num_all), missing, statuses):
                out[i] = status
                if status is None or status.code != Code.ERROR:  # errors are never kept
                    positions.status[position] = status
                    positions.status_known[position] = 1
        reused = size - len(missing)
        self.reused += reused
        self._cache.reused += reused
        return out if self._mask is None else masks.apply_mask(
            self._mask, self._mask_after, self._snapshot, out, first=first, index=index)

    def walks(self, nodes: list[NodeInfo]) -> bool:
        """Whether ``nodes`` is the snapshot's node list (its chunks have positions)."""
        return nodes is self._snapshot.node_info_list

    def note_contiguous(self, feasible: list[NodeInfo], *, first: int) -> None:
        """The walk's feasible nodes are the node list's run from ``first``."""
        self._contiguous = (feasible, first)

    def first_chunk(self, to_find: int) -> int:
        """How many nodes a walk for ``to_find`` feasible ones filters first: as many as
        the last walk of this signature and mask examined for as many, when that walk met
        rejected nodes (a zone over the skew rejects the same share of nodes from one
        cycle to the next: one chunk, not two or three); else ``to_find``.  Only while
        every status comes from the kept results (the surplus is then read, not
        filtered)."""
        if self._unsigned_filters:
            return to_find
        walked = self._results.walked.get(None if self._mask is None else self._mask.key)
        if walked is None:
            return to_find
        examined, found = walked
        return min(-(-to_find * examined // found), MAX_FIRST_CHUNK_SHARE * to_find)

    def note_walk(self, examined: int, found: int) -> None:
        """The walk examined ``examined`` nodes to find ``found`` feasible ones."""
        walked = self._results.walked
        key = None if self._mask is None else self._mask.key
        if examined <= found or not found:
            walked.pop(key, None)
            return
        walked[key] = (examined, found)
        while len(walked) > masks.MAX_MASKS + 1:
            del walked[next(iter(walked))]

    def note_positions(self, feasible: list[NodeInfo], positions: list[int]) -> None:
        """The walk's feasible nodes sit at ``positions`` of the node list (the walk met
        rejected nodes between them): their kept scores are read there, not looked up by
        name."""
        self._scattered = (feasible, positions)

    def score_table(
        self, state: CycleState, pod_info: PodInfo, nodes: list[NodeInfo]
    ) -> tuple[ScoreTable, Status | None]:
        fwk = self._fwk
        score_sig, unsigned = _sign_parts(fwk.score_plugins, state.skip_score_plugins, pod_info,
                                          memo=self._signs,
                                          signers=self._cache.signers(fwk.score_plugins))
        if not score_sig:
            return fwk.score_table(state, pod_info, nodes)
        results = self._results
        key = (score_sig, frozenset(state.skip_score_plugins), unsigned)
        results.score_key = key
        if unsigned:
            signed = frozenset(name for name, _ in score_sig)

            def partial(state: CycleState, pod_info: PodInfo,
                        nodes: list[NodeInfo]) -> tuple[RawScores, Status | None]:
                return self._partial_raw_scores(state, pod_info, nodes, signed=signed,
                                                unsigned=unsigned)

            return fwk.score_table(state, pod_info, nodes, raw_scores=partial)
        window = self._window
        if window is not None and nodes is window[1]:
            return self._score_window(state, pod_info, window[0], window[2], key, nodes)
        return fwk.score_table(state, pod_info, nodes, raw_scores=self._raw_scores)

    def _score_window(
        self, state: CycleState, pod_info: PodInfo, start: int, window: KeptWindow,
        key: Hashable, nodes: list[NodeInfo],
    ) -> tuple[ScoreTable, Status | None]:
        """Score the window's nodes from its kept scores: only the nodes changed since are
        scored again, and a plugin's column is normalized again only when a raw score in
        it moved.  The same table as scoring every node (the kept lists are never changed
        in place: a cycle's table stays as it was)."""
        snapshot = self._snapshot
        changed: list[int] | None = None
        if window.score_key == key and window.score_serial >= 0:
            asked = self._changed
            # the same question as the window's Filter (both serials move together) is
            # answered once
            changed = (asked[1] if asked is not None and asked[0] == window.score_serial
                       else snapshot.changed_positions_since(window.score_serial))
        if changed is None:
            return self._score_window_fully(state, pod_info, window, key, nodes)
        self._cache.score_windows_reused += 1
        fwk = self._fwk
        started = time.perf_counter()
        offsets = window.offsets_of(changed, start=start)
        # Nodes joined a shifted window: every column is finished again (a normalizing
        # plugin's over the window's new set of nodes).
        joined = bool(window.entering)
        if joined:
            offsets = sorted(set(offsets).union(window.entering))
        # The lists ``shifted`` made are no table's yet: changed in place, not copied.
        owned, window.owned = window.owned, False
        if offsets:
            raw, status = self._raw_scores(state, pod_info, [nodes[o] for o in offsets])
            if status is not None or [name for name, _ in raw] != window.plugins:
                return self._score_window_fully(state, pod_info, window, key, nodes)
            names = window.names
            totals = kept_totals = window.totals
            # a whole column's final scores may have moved (every one, when nodes joined;
            # an owned window's old totals are not kept apart: counted afresh)
            renormalized = joined or owned
            for i, (name, values) in enumerate(raw):
                column = window.raw[i]
                if not joined and list(map(column.__getitem__, offsets)) == values:
                    continue
                if not owned:
                    column = list(column)
                for o, v in zip(offsets, values):
                    column[o] = v
                window.raw[i] = column
                old = window.weighted[i]
                if fwk.normalizes(name):
                    weighted, status = fwk.finish_column(state, pod_info, names, name, column)
                    if status is None:
                        renormalized = True
                        totals = list(map(operator.add, map(operator.sub, totals, old),
                                          weighted))
                else:
                    part, status = fwk.finish_column(
                        state, pod_info, [names[o] for o in offsets], name, values)
                    weighted = old if owned else list(old)
                    if status is None:
                        if totals is kept_totals and not owned:
                            totals = list(totals)  # the last table's list stays as it was
                        for o, v in zip(offsets, part):
                            totals[o] += v - old[o]
                            weighted[o] = v
                if status is not None:
                    window.score_serial = -1
                    fwk.observe_score(status, started)
                    return ScoreTable(names, [0] * len(names), {}), status
                window.weighted[i] = weighted
            if totals is not kept_totals or owned:
                window.best = (_best(totals) if renormalized
                               else _best_after(window.best, kept_totals, totals, offsets))
            window.totals = totals
        window.score_serial = snapshot.change_serial
        window.entering = []
        fwk.observe_score(None, started)
        return ScoreTable(window.names, window.totals,
                          dict(zip(window.plugins, window.weighted)), window.best), None

    def _score_window_fully(
        self, state: CycleState, pod_info: PodInfo, window: KeptWindow, key: Hashable,
        nodes: list[NodeInfo],
    ) -> tuple[ScoreTable, Status | None]:
        kept: list[RawScores] = []

        def raw_scores(state: CycleState, pod_info: PodInfo,
                       nodes: list[NodeInfo]) -> tuple[RawScores, Status | None]:
            raw, status = self._raw_scores(state, pod_info, nodes)
            kept.append(raw)
            return raw, status

        table, status = self._fwk.score_table(state, pod_info, nodes, raw_scores=raw_scores)
        snapshot = self._snapshot
        if status is not None or not kept:
            window.score_serial = -1
            return table, status
        window.score_key = key
        window.names = table.names
        window.plugins = [name for name, _ in kept[0]]
        window.raw = [values for _, values in kept[0]]
        window.weighted = [table.by_plugin[name] for name in window.plugins]
        window.totals = table.totals
        window.best = table.best = _best(table.totals)
        window.score_serial = snapshot.change_serial
        window.entering = []
        return table, None

    def _partial_raw_scores(
        self, state: CycleState, pod_info: PodInfo, nodes: list[NodeInfo], *,
        signed: frozenset[str], unsigned: frozenset[str],
    ) -> tuple[RawScores, Status | None]:
        """Raw scores when some Score plugins do not sign the pod: the signed plugins'
        from the kept columns, the others computed afresh, in the plugins' order."""
        fwk = self._fwk
        kept, status = self._raw_scores(state, pod_info, nodes, only=signed)
        if status is not None:
            # Report the error the plain run meets first (an unsigned plugin may be earlier).
            return fwk.raw_scores(state, pod_info, nodes)
        fresh, status = fwk.raw_scores(state, pod_info, nodes, only=unsigned)
        if status is not None:
            return fresh, status
        columns = dict(kept)
        columns.update(fresh)
        return [(name, columns[name]) for name, _ in fwk.score_plugins if name in columns], None

    def _raw_scores(
        self, state: CycleState, pod_info: PodInfo, nodes: list[NodeInfo], *,
        only: frozenset[str] | None = None,
    ) -> tuple[RawScores, Status | None]:
        """The signed plugins' raw scores of ``nodes``, kept ones read, missing ones computed
        (and kept)."""
        positions = self._results.positions
        positions.sync(self._snapshot)
        key = (self._results.score_key, only)
        if key != positions.score_key:
            positions.reset_scores(key)
        contiguous = self._contiguous
        scattered = self._scattered
        located = ((contiguous[1] % positions.num_all, None)
                   if contiguous is not None and contiguous[0] is nodes
                   else (0, scattered[1]) if scattered is not None and scattered[0] is nodes
                   else self._locate(nodes, None))
        if located is None:
            return self._fwk.raw_scores(state, pod_info, nodes, only=only)
        first, index = located
        size = len(nodes)
        missing = _missing(_gather(positions.raw_known, first, index, size))
        if missing:
            subset = nodes if len(missing) == size else [nodes[i] for i in missing]
            raw, status = self._fwk.raw_scores(state, pod_info, subset, only=only)
            if status is not None:
                return raw, status
            plugins = [name for name, _ in raw]
            if not positions.score_plugins:
                positions.score_plugins = plugins
                positions.raw = [[0] * positions.num_all for _ in plugins]
            elif plugins != positions.score_plugins:
                # Cannot happen for one score key; never worth a wrong answer either.
                return self._fwk.raw_scores(state, pod_info, nodes, only=only)
            where = _positions_of(missing, first, index, positions.num_all)
            for column, (_, values) in zip(positions.raw, raw):
                for position, value in zip(where, values):
                    column[position] = value
            raw_known = positions.raw_known
            for position in where:
                raw_known[position] = 1
        return [(name, _gather(column, first, index, size))
                for name, column in zip(positions.score_plugins, positions.raw)], None


class BatchCache:
    """Results per (profile, signature, Filter skip set), the most recent few kept."""

    def __init__(self, *, max_signatures: int = 8) -> None:
        self._max = max_signatures
        self._entries: OrderedDict[Hashable, _Results] = OrderedDict()
        # id(a profile's Filter or Score plugin list) -> (that list, its signers)
        self._signers: dict[int, tuple[list[tuple[str, Any]], list[_Signer]]] = {}
        self._maskers: masks.MaskerMemo = {}  # a profile's Filter plugins -> their masking ones
        # Node Filter results reused instead of evaluated, over the cache's life.
        self.reused = 0
        # Cycles that took a whole kept window (checked through the change log only).
        self.windows_reused = 0
        # ... of which windows the walk had found among rejected nodes.
        self.scattered_windows_reused = 0
        # Cycles that scored a kept window from its kept scores (the change log's nodes only).
        self.score_windows_reused = 0
        # (id(metrics), profile) -> (those metrics, their hint_used attempts child)
        self._hint_children: dict[tuple[int, str], tuple[Any, Any]] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def _hint_used(self, metrics: Any, profile: str) -> Any:
        """``scheduler_batch_attempts{profile, hint_used}``'s child, looked up once per
        metrics and profile (prometheus_client's ``labels()`` costs ~2 us; nearly every
        batched cycle counts one)."""
        key = (id(metrics), profile)
        kept = self._hint_children.get(key)
        if kept is None or kept[0] is not metrics:
            kept = self._hint_children[key] = (
                metrics, metrics.batch_attempts.labels(profile, ATTEMPT_HINT_USED))
        return kept[1]

    def signers(self, plugins: list[tuple[str, Any]]) -> list[_Signer]:
        """``_signers(plugins)`` of a profile's (never changed) plugin list, found once."""
        kept = self._signers.get(id(plugins))
        if kept is None or kept[0] is not plugins:
            kept = self._signers[id(plugins)] = (plugins, _signers(plugins))
        return kept[1]

    def begin(self, fwk: Framework, state: CycleState, pod_info: PodInfo, *,
              num_nodes: int, image_generation: int, snapshot: Snapshot) -> Batch | None:
        """The batch for this cycle (after PreFilter), or None (no Filter plugin signs the
        pod): take the normal path."""
        skip = state.skip_filter_plugins
        signs: dict[str, Hashable] = {}
        filter_sig, unsigned = _sign_parts(fwk.filter_plugins, skip, pod_info, state,
                                           memo=signs, signers=self.signers(fwk.filter_plugins))
        if not filter_sig:
            return None
        mask, mask_after, filter_sig = masks.find_mask(  # batching_mask; every plugin signed
            self._maskers, fwk.filter_plugins, skip, state, pod_info, filter_sig,
        ) if not unsigned else (None, frozenset(), filter_sig)
        key = (fwk.profile_name, filter_sig, frozenset(skip), unsigned)
        # ImageLocality scores by the share of nodes holding an image: a change in the
        # node count or image spread touches every node's score without touching the node.
        # While no node holds an image that share is never taken (every such score is the
        # minimum), so a node added or removed then keeps the results (moved with their
        # nodes, ``KeptPositions``).
        epoch = (num_nodes if snapshot.image_states else 0, image_generation)
        results = self._entries.get(key)
        metrics, profile = fwk.metrics, fwk.profile_name
        if results is None or results.epoch != epoch:
            if results is not None:
                # the node count or image spread moved: every kept score may have (upstream's
                # reason for a hint that no longer holds)
                metrics.batch_cache_flushed.labels(profile, FLUSH_EXPIRED).inc()
            metrics.batch_attempts.labels(profile, ATTEMPT_NO_HINT).inc()
            results = _Results(epoch)
            self._entries[key] = results
            while len(self._entries) > self._max:
                # pods of other signatures pushed the oldest out
                metrics.batch_cache_flushed.labels(profile, FLUSH_POD_INCOMPATIBLE).inc()
                self._entries.popitem(last=False)
        else:
            self._hint_used(metrics, profile).inc()
        self._entries.move_to_end(key)
        if not unsigned:
            return Batch(self, fwk, results, snapshot=snapshot, signs=signs, mask=mask,
                         mask_after=mask_after)
        order = [name for name, _ in fwk.filter_plugins if name not in skip]
        signed = frozenset(name for name, _ in filter_sig)
        before = {name: frozenset(u for u in order[:k] if u in unsigned)
                  for k, name in enumerate(order) if name in signed}
        return Batch(self, fwk, results, snapshot=snapshot, signed_filters=signed,
                     unsigned_filters=unsigned, unsigned_before=before, signs=signs)
