"""Finding feasible nodes: how many to look for, the round-robin walk that filters them in
chunks, and the random pick among the best-scored.

Split out of ``schedule_one`` (the cycle itself) because this is the part whose cost grows
with the nodes examined: it works on slices and columns, never on the whole node list, and
gives exactly the answers of a node-by-node walk (the tests compare the two).
"""

from __future__ import annotations

import random
from collections.abc import Collection, Iterable, Sequence
from itertools import chain, compress, repeat
from operator import attrgetter, is_
from typing import TYPE_CHECKING

from scheduler.framework.batching import Batch, wrapped_slice
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.node_info import NodeInfo
from scheduler.framework.status import Code, Status
from scheduler.framework.types import Diagnosis
from scheduler.objects.pod import PodInfo

if TYPE_CHECKING:
    from scheduler.framework.runtime import Framework

MIN_FEASIBLE_NODES_TO_FIND = 100
MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND = 5
# Smallest batch of nodes filtered at once when few feasible nodes are still wanted: a
# batch call costs a little more than one node, and the surplus is only wasted work.
MIN_FILTER_CHUNK = 16

_CODE = attrgetter("code")


class _StatusError(Exception):
    """A non-rejection failure status (Error) raised out of the cycle's inner steps."""

    def __init__(self, status: Status) -> None:
        super().__init__(status.message())
        self.status = status


def num_feasible_nodes_to_find(percentage: int | None, num_all_nodes: int) -> int:
    """How many feasible nodes are enough (upstream's adaptive percentageOfNodesToScore)."""
    if num_all_nodes < MIN_FEASIBLE_NODES_TO_FIND:
        return num_all_nodes
    adaptive = percentage or 0
    if adaptive <= 0:
        adaptive = 50 - num_all_nodes // 125
        if adaptive < MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND:
            adaptive = MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND
    num_nodes = num_all_nodes * adaptive // 100
    if num_nodes < MIN_FEASIBLE_NODES_TO_FIND:
        return MIN_FEASIBLE_NODES_TO_FIND
    return num_nodes


def effective_percentage(profile_value: int | None, global_value: int | None) -> int | None:
    """A profile's percentageOfNodesToScore wins; else the configuration's (0 = adaptive)."""
    return profile_value if profile_value is not None else global_value


def select_host(scores: Sequence[tuple[str, int]], rng: random.Random) -> str:
    """The highest-scored node; ties broken uniformly at random."""
    best = max(score for _, score in scores)
    ties = [name for name, score in scores if score == best]
    return ties[0] if len(ties) == 1 else ties[rng.randrange(len(ties))]


def select_host_from_columns(names: list[str], totals: list[int], rng: random.Random, *,
                             best: tuple[int, int] | None = None) -> str:
    """select_host over a score table's columns: the same host and the same random draw,
    without building a (name, score) pair per node.  ``best``: the highest total and how
    many nodes have it, when the caller knows them (a kept window's scores)."""
    if best is None:
        top = max(totals)
        count = totals.count(top)
    else:
        top, count = best
    if count == 1:
        return names[totals.index(top)]
    return names[nth_index(totals, top, rng.randrange(count))]


def nth_index(values: list[int], value: int, k: int) -> int:
    """The index of the ``k``-th (from 0) occurrence of ``value`` in ``values`` (which holds
    more than ``k``).  The ``k`` items before it are at least ``k`` long: count ``value``
    in the stretch still needed and advance by it, C loops only (one ``index`` hop per
    tie cost ~0.1 us each, and hundreds of nodes often tie)."""
    position = seen = 0
    while seen < k:
        need = k - seen
        seen += values[position:position + need].count(value)
        position += need
    return values.index(value, position)


def filter_nodes_from(
    fwk: Framework,
    state: CycleState,
    pod_info: PodInfo,
    nodes: list[NodeInfo],
    *,
    start: int,
    to_find: int,
    diagnosis: Diagnosis,
    with_nominated_pods: bool = False,
    batch: Batch | None = None,
) -> tuple[list[NodeInfo], int]:
    """Walk ``nodes`` from ``start`` (wrapping) until ``to_find`` pass every Filter plugin;
    rejected nodes go into ``diagnosis``.  Returns the feasible nodes and how many nodes the
    walk examined (the next cycle starts after them, upstream's round robin)."""
    num_all = len(nodes)
    feasible: list[NodeInfo] = []
    processed = 0
    nominated: Collection[str] | None = ()
    if with_nominated_pods:
        nominated = fwk.nodes_with_nominated_pods()
        if nominated is None:
            # The nominator cannot say which nodes: every node takes the two-pass run.
            for i in range(num_all):
                node_info = nodes[(start + i) % num_all]
                processed += 1
                status = fwk.run_filter_plugins_with_nominated_pods(state, pod_info, node_info)
                if status is None or status.code == Code.SUCCESS:
                    feasible.append(node_info)
                    if len(feasible) >= to_find:
                        break
                    continue
                _record_rejection(diagnosis, node_info, status)
            return feasible, processed

    # Nodes holding nominated pods take the two-pass Filter, which kept windows do not
    # cover: a window may be reused (or kept) only when none of them lies in it.
    windowed = batch is not None and to_find <= num_all and not (
        nominated and batch.window_holds_any(nominated, start=start, size=to_find))
    if windowed:
        assert batch is not None
        # The window this walk found from ``start`` last time, if it is still all feasible.
        # A window found among rejected nodes covers more nodes than it keeps feasible:
        # taken only when no node holds a nominated pod (it is not checked past to_find).
        window = batch.filter_window(state, pod_info, nodes, start=start, size=to_find,
                                     diagnosis=None if nominated else diagnosis)
        if window is not None:
            return window

    # Filter in chunks sized to the feasible nodes still wanted, so the nodes examined,
    # their statuses and the next start index are those of the node-by-node walk; only a
    # small chunk's surplus (nodes past the last one needed) is filtered and dropped.
    # Chunks of the snapshot's own node list have positions: batching reads their kept
    # results as slices.
    positioned = batch is not None and batch.walks(nodes)
    # The feasible nodes' positions in the node list, for batching to read their kept
    # scores by (when rejected nodes lie between them, they are no one run of it).
    where: list[int] | None = [] if positioned else None
    while processed < num_all:
        ahead = to_find - len(feasible)
        if positioned and not processed:
            assert batch is not None
            ahead = batch.first_chunk(to_find)
        elif positioned and feasible:
            # Rejected nodes met so far (a spreading pod's zone over the skew: a third of
            # the nodes): the next chunk is sized by the share that passed, so the walk
            # takes two or three chunks, not one per halving of what is still wanted.
            # Statuses are read from batching's kept results: the surplus costs little.
            ahead = -(-ahead * processed // len(feasible)) + MIN_FILTER_CHUNK
        size = min(max(ahead, MIN_FILTER_CHUNK), num_all - processed)
        first = start + processed
        chunk = wrapped_slice(nodes, first, size)
        if nominated:
            statuses = _filter_with_nominated(fwk, state, pod_info, chunk, nominated, batch,
                                              first=first if positioned else None)
        elif batch is not None:
            statuses = batch.run_filter_plugins_on_nodes(
                state, pod_info, chunk, first=first if positioned else None)
        else:
            statuses = fwk.run_filter_plugins_on_nodes(state, pod_info, chunk)
        if not any(statuses):  # Status has no __bool__: truthy; count(None) called __eq__ per rejection
            # Every node passed (the common case): no per-node bookkeeping.
            wanted = to_find - len(feasible)
            if len(chunk) >= wanted:
                feasible.extend(chunk[:wanted])
                if batch is not None and processed == 0:
                    if positioned:
                        batch.note_contiguous(feasible, first=start)
                    if windowed:
                        batch.keep_window(nodes, feasible, start=start, size=to_find)
                if where is not None:
                    assert batch is not None
                    batch.note_walk(processed + wanted, to_find)
                    if processed:
                        where.extend(_run(first, wanted, num_all))
                        _note_positions(batch, feasible, where)
                        if windowed and not nominated:
                            _keep_scattered(batch, nodes, feasible, where, start=start,
                                            span=processed + wanted)
                return feasible, processed + wanted
            feasible.extend(chunk)
            if where is not None:
                where.extend(_run(first, len(chunk), num_all))
            processed += len(chunk)
            continue
        # Some node was rejected: which passed, in C loops (a TopologySpreading pod's walk
        # meets ~130 rejected nodes among ~630); the rejections go to the diagnosis in
        # bulk, expanded only if the cycle fails (a cycle that finds a host never reads it).
        codes = list(map(_CODE, filter(None, statuses)))  # Status has no __bool__: truthy
        if Code.SUCCESS in codes:
            statuses = [None if s is None or s.code == Code.SUCCESS else s for s in statuses]
        passed = list(map(is_, statuses, repeat(None)))
        wanted = to_find - len(feasible)
        if passed.count(True) >= wanted:
            # The walk stops at the wanted-th feasible node of the chunk.
            cut = nth_index(passed, True, wanted - 1) + 1  # type: ignore[arg-type]
            chunk, statuses, passed = chunk[:cut], statuses[:cut], passed[:cut]
        if Code.ERROR in codes:
            for status in statuses:
                if status is not None and status.code == Code.ERROR:
                    raise _StatusError(status)
        fits = list(compress(chunk, passed))
        feasible.extend(fits)
        if where is not None:
            where.extend(compress(_run(first, len(chunk), num_all), passed))
        processed += len(chunk)
        diagnosis.add_rejected(chunk, statuses, len(chunk) - len(fits))
        if len(feasible) >= to_find:
            break
    if where is not None and feasible:
        assert batch is not None
        batch.note_walk(processed, len(feasible))
        _note_positions(batch, feasible, where)
        if windowed and not nominated and len(feasible) == to_find:
            _keep_scattered(batch, nodes, feasible, where, start=start, span=processed)
    return feasible, processed


def _run(first: int, size: int, num_all: int) -> Iterable[int]:
    """The positions of ``size`` nodes of the node list from ``first`` on, wrapping."""
    first %= num_all
    end = first + size
    if end <= num_all:
        return range(first, end)
    return chain(range(first, num_all), range(end - num_all))


def _keep_scattered(batch: Batch | None, nodes: list[NodeInfo], feasible: list[NodeInfo],
                    where: list[int], *, start: int, span: int) -> None:
    if batch is not None:
        batch.keep_scattered(nodes, feasible, where, start=start % len(nodes), span=span)


def _note_positions(batch: Batch | None, feasible: list[NodeInfo], where: list[int]) -> None:
    if batch is not None and len(where) == len(feasible):
        batch.note_positions(feasible, where)


def _filter_with_nominated(
    fwk: Framework, state: CycleState, pod_info: PodInfo, chunk: list[NodeInfo],
    nominated: Collection[str], batch: Batch | None, *, first: int | None = None,
) -> list[Status | None]:
    """Nodes holding nominated pods take upstream's two-pass Filter one by one; the others
    (whose two-pass run is the plain run) are filtered as without nominations: the runs
    between the nominated nodes as batches, read from batching's kept results by position
    when the chunk has one (``first``).  A positioned chunk finds its nominated nodes by a
    lookup per nominated node, not a pass over the chunk."""
    if first is not None and batch is not None:
        two_pass = batch.offsets_in_run(nominated, first=first, size=len(chunk))
    else:
        two_pass = [i for i, node_info in enumerate(chunk) if node_info.name in nominated]
    if not two_pass:
        if batch is not None:
            return batch.run_filter_plugins_on_nodes(state, pod_info, chunk, first=first)
        return fwk.run_filter_plugins_on_nodes(state, pod_info, chunk)
    statuses: list[Status | None] = []
    done = 0
    for i in [*two_pass, len(chunk)]:
        if i > done:
            # the plain nodes between two nominated ones: one run, positioned if the chunk is
            run = chunk[done:i]
            if batch is not None:
                statuses.extend(batch.run_filter_plugins_on_nodes(
                    state, pod_info, run, first=None if first is None else first + done))
            else:
                statuses.extend(fwk.run_filter_plugins_on_nodes(state, pod_info, run))
        if i < len(chunk):
            status = fwk.run_filter_plugins_with_nominated_pods(state, pod_info, chunk[i])
            statuses.append(None if status is None or status.code == Code.SUCCESS else status)
        done = i + 1
    return statuses


def _record_rejection(diagnosis: Diagnosis, node_info: NodeInfo, status: Status) -> None:
    if status.code == Code.ERROR:
        raise _StatusError(status)
    diagnosis.node_to_status[node_info.name] = status
    if status.plugin:
        diagnosis.unschedulable_plugins.add(status.plugin)
        if status.code == Code.PENDING:
            diagnosis.pending_plugins.add(status.plugin)
