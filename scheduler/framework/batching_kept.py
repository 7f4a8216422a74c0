"""What opportunistic batching keeps by node position, and how it follows a node list that
changes: the signed plugins' results per position (``KeptPositions``) and whole round-robin
windows (``KeptWindow``).  Split out of ``batching`` (which uses them) as the part that
answers for nodes added and removed: results follow their nodes by NodeInfo generation
across a rebuilt list, and a window is reused shifted when the round robin drifts.
"""

from __future__ import annotations

import operator
from collections.abc import Hashable, Mapping
from itertools import repeat
from operator import ne
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

if TYPE_CHECKING:
    from scheduler.framework.node_info import NodeInfo
    from scheduler.framework.status import Status

# A kept window is taken shifted by at most this share of its size (``KeptWindow.shifted``):
# when the node count is no multiple of the nodes examined per cycle (a node added: 5001
# nodes, 500 examined), the round robin starts each lap one node earlier than the last, so
# no start index comes back and only a shifted window can be reused.
MAX_SHIFT_SHARE = 8
# A node list rebuilt by one node added or removed is followed by splicing the kept results
# (``KeptPositions._follow_one``) when at most this many other nodes changed meanwhile.
MAX_SPLICE_CHANGES = 64

_NAME = operator.attrgetter("name")

# What kept results are held in: lists (statuses, scores, nodes) and known-masks.
_Seq = TypeVar("_Seq", list[Any], bytearray)


class Snapshot(Protocol):
    """What window reuse reads of the cycle's snapshot: the node list and its change log
    (the cache's Snapshot; the framework does not import the cache)."""

    node_info_list: list[NodeInfo]
    positions: dict[str, int]
    list_version: int
    change_serial: int

    @property
    def image_states(self) -> Mapping[str, object]: ...

    def changed_positions_since(self, serial: int) -> list[int] | None: ...

    def generations(self) -> list[int]: ...


def window_offsets(positions: list[int], *, start: int, size: int, num_all: int) -> list[int]:
    """The offsets into the window of ``size`` nodes from ``start`` (wrapping) of those
    ``positions`` that fall in it, ascending and without repeats.  (A comprehension and C
    loops: a generator resumed per position was a Python call per changed node.)"""
    if not positions:
        return []
    return sorted(set(filter(size.__gt__, [(p - start) % num_all for p in positions])))


class KeptWindow:
    """A window of the node list (``size`` nodes from a start index, every one feasible for
    the signature) and its scores, as of change-log serials of the snapshot."""

    __slots__ = ("best", "entering", "filter_serial", "list_version", "names", "num_all",
                 "offset_of", "owned", "plugins", "positions", "raw", "rejected", "score_key",
                 "score_serial", "size", "span", "totals", "weighted")

    def __init__(self, *, list_version: int, num_all: int, size: int, serial: int) -> None:
        self.list_version = list_version
        self.num_all = num_all
        self.size = size
        self.filter_serial = serial
        self.score_key: Hashable = None
        self.score_serial = -1  # no scores kept
        self.names: list[str] = []
        self.plugins: list[str] = []
        self.raw: list[list[int]] = []  # per plugin, per node of the window
        self.weighted: list[list[int]] = []  # per plugin: normalized and weighted
        self.totals: list[int] = []
        # raw, weighted and totals are this window's own lists, handed to no score table
        # yet (``shifted`` made them): the next scoring changes them in place.
        self.owned = False
        self.best = (0, 0)  # the highest of totals and how many nodes have it
        # Offsets whose nodes joined when the window was shifted (``shifted``): scored as
        # changed nodes by the next cycle that scores the window.
        self.entering: list[int] = []
        # A scattered window (the walk met rejected nodes): the nodes the walk examined
        # from the start index (``span``), the feasible ones' positions in the node list
        # (``size`` of them, in walk order), each one's offset into them, and the rejected
        # ones' positions.  None: the window is the run of ``size`` nodes from the start.
        # (offset_of and rejected are built by ``index`` when the window is first reused:
        # most windows kept are never taken again, their walk costs nothing more.)
        self.span = size
        self.positions: list[int] | None = None
        self.offset_of: dict[int, int] | None = None
        self.rejected: list[int] = []

    @classmethod
    def scattered(cls, *, list_version: int, num_all: int, serial: int, span: int,
                  positions: list[int]) -> KeptWindow:
        """A window whose walk examined ``span`` nodes and found them feasible at
        ``positions`` (in the node list, in walk order)."""
        window = cls(list_version=list_version, num_all=num_all, size=len(positions),
                     serial=serial)
        window.span = span
        window.positions = positions
        return window

    def index(self, start: int) -> dict[int, int]:
        """A scattered window's offset of each feasible position (and its rejected
        positions, in walk order), built once."""
        if self.offset_of is None:
            positions = self.positions or []
            self.offset_of = offset_of = dict(zip(positions, range(len(positions))))
            num_all = self.num_all
            self.rejected = [p % num_all for p in range(start, start + self.span)
                             if p % num_all not in offset_of]
        return self.offset_of

    def offsets_of(self, changed: list[int], *, start: int) -> list[int]:
        """The offsets into the window's feasible nodes of the ``changed`` positions among
        them, ascending and without repeats."""
        if self.positions is None:
            return window_offsets(changed, start=start, size=self.size, num_all=self.num_all)
        offset_of = self.index(start)
        return sorted({offset_of[p] for p in changed if p in offset_of})

    def fits(self, snapshot: Snapshot, size: int) -> bool:
        return (self.list_version == snapshot.list_version and self.size == size
                and self.num_all == len(snapshot.node_info_list))

    def shifted(self, by: int, nodes: list[NodeInfo]) -> KeptWindow:
        """This window started ``by`` positions later than the window wanted now (negative:
        earlier), ``nodes`` the nodes of the one wanted: the kept scores of the nodes it
        still holds move with them, the nodes that join are ``entering`` (0 kept for
        them: the next scoring computes theirs and finishes every plugin's column again,
        so normalizing plugins normalize the window's new set of nodes).  The names of the
        nodes it still holds are its own, moved (the same node list: the same nodes)."""
        size = self.size
        window = KeptWindow(list_version=self.list_version, num_all=self.num_all, size=size,
                         serial=self.filter_serial)
        if self.score_serial < 0:
            return window
        # The node at old offset o is at offset o + by now.
        if by > 0:
            entering = list(range(by))
            raw = [[0] * by + c[:size - by] for c in self.raw]
            weighted = [[0] * by + c[:size - by] for c in self.weighted]
            totals = [0] * by + self.totals[:size - by]
            names = list(map(_NAME, nodes[:by])) + self.names[:size - by]
        else:
            entering = list(range(size + by, size))
            raw = [c[-by:] + [0] * -by for c in self.raw]
            weighted = [c[-by:] + [0] * -by for c in self.weighted]
            totals = self.totals[-by:] + [0] * -by
            names = self.names[-by:] + list(map(_NAME, nodes[size + by:]))
        window.score_key = self.score_key
        window.score_serial = self.score_serial
        window.names = names
        window.plugins = self.plugins
        window.raw = raw
        window.weighted = weighted
        window.totals = totals
        window.owned = True
        window.entering = sorted(set(self.entering_after(by)) | set(entering))
        return window

    def entering_after(self, by: int) -> list[int]:
        """Offsets still entering (not scored yet) once the window moved ``by``."""
        return [o + by for o in self.entering if 0 <= o + by < self.size]


class KeptPositions:
    """The signed plugins' Filter statuses and raw scores by position in the snapshot's node
    list, kept in step with its change log: a cycle reads the results of the nodes it
    examines as slices, and the positions that changed since are the only ones computed
    again.  Known-masks are bytearrays (``find(0)`` is a C scan) because statuses compare
    through ``Status.__eq__``.

    When the change log cannot say what changed (the node list was rebuilt: a node added
    or removed; or the log no longer reaches back), the kept results follow their nodes by
    generation: NodeInfo generations come from one global counter and every change takes a
    new one, so a node listed now with the generation kept for some old position is that
    node, unchanged since, and its results move to its new position; every other position
    is unknown.  A node churned every second then costs the nodes that changed, not a
    Filter and Score of every node."""

    __slots__ = ("gens", "list_version", "num_all", "raw", "raw_known", "score_key",
                 "score_plugins", "serial", "status", "status_known")

    def __init__(self) -> None:
        self.list_version = -1
        self.num_all = -1
        self.serial = -1
        # The generation of the NodeInfo at each position, as of the last sync.
        self.gens: list[int] = []
        self.status: list[Status | None] = []
        self.status_known = bytearray()
        self.score_key: Hashable = None
        self.score_plugins: list[str] = []
        self.raw: list[list[int]] = []  # per plugin (score_plugins order), per position
        self.raw_known = bytearray()

    def sync(self, snapshot: Snapshot) -> None:
        num_all = len(snapshot.node_info_list)
        if self.list_version == snapshot.list_version and self.num_all == num_all:
            if self.serial == snapshot.change_serial:
                return
            changed = snapshot.changed_positions_since(self.serial)
            if changed is not None:
                status_known, raw_known, gens = self.status_known, self.raw_known, self.gens
                nodes = snapshot.node_info_list
                for position in changed:
                    status_known[position] = 0
                    raw_known[position] = 0
                    gens[position] = nodes[position].plugin_generation
                self.serial = snapshot.change_serial
                return
        generations = snapshot.generations()
        kept = len(self.gens) == self.num_all and (
            self.status_known.find(1) >= 0 or self.raw_known.find(1) >= 0)
        self.num_all = num_all
        if kept:
            self._follow(generations)
        else:
            self.status = [None] * num_all
            self.status_known = bytearray(num_all)
            self.reset_scores(None)
        self.gens = list(generations)
        self.list_version = snapshot.list_version
        self.serial = snapshot.change_serial

    def _follow(self, generations: list[int]) -> None:
        """Move every kept result to the position its node (same generation) holds now;
        the rest unknown.  C loops only (``map`` over lists and bytearrays)."""
        if self._follow_one(generations):
            return
        old = len(self.gens)
        at = dict(zip(self.gens, range(old)))
        # old position per new position; ``old`` (one past the end) for none
        index = list(map(at.get, generations, repeat(old, len(generations))))
        self.status = list(map([*self.status, None].__getitem__, index))
        self.status_known = bytearray(map((self.status_known + b"\0").__getitem__, index))
        self.raw = [list(map([*column, 0].__getitem__, index)) for column in self.raw]
        self.raw_known = (bytearray(map((self.raw_known + b"\0").__getitem__, index))
                          if self.raw else bytearray(len(generations)))

    def _follow_one(self, generations: list[int]) -> bool:
        """``_follow`` when one node was added or removed and the others kept their order
        (a node churned: the list is the old one with one position inserted or deleted),
        a few of them changed in place (the nodes pods went to since the last sync): the
        kept results are spliced, and the changed nodes' marked unknown, never gathered
        one by one.  A changed node's results are unknown even if its generation is kept
        at some other position (never so for a list rebuilt by one node: the fallback
        would move them; unknown is only recomputed).  False: not that case."""
        gens = self.gens
        grown = len(generations) - len(gens)
        if grown not in (1, -1):
            return False
        shorter = gens if grown > 0 else generations
        longer = generations if grown > 0 else gens
        at = _common_prefix(shorter, longer)
        differ = bytes(map(ne, shorter[at:], longer[at + 1:]))
        if differ.count(1) > MAX_SPLICE_CHANGES:
            return False
        if grown > 0:  # a node at ``at``: its results unknown
            self.status[at:at] = [None]
            self.status_known[at:at] = b"\0"
            for column in self.raw:
                column[at:at] = [0]
            if self.raw:
                self.raw_known[at:at] = b"\0"
            first = at + 1  # new positions of ``differ``
        else:  # the node at ``at`` left
            del self.status[at]
            del self.status_known[at]
            for column in self.raw:
                del column[at]
            if self.raw:
                del self.raw_known[at]
            first = at
        if not self.raw:
            self.raw_known = bytearray(len(generations))
        i = differ.find(1)
        while i >= 0:
            position = first + i
            self.status[position] = None
            self.status_known[position] = 0
            for column in self.raw:
                column[position] = 0
            self.raw_known[position] = 0
            i = differ.find(1, i + 1)
        return True

    def reset_scores(self, key: Hashable) -> None:
        self.score_key = key
        self.score_plugins = []
        self.raw = []
        self.raw_known = bytearray(max(self.num_all, 0))


def _common_prefix(shorter: list[int], longer: list[int]) -> int:
    """The length of the longest common prefix of two lists (``shorter`` not longer than
    ``longer``), by halving with C slice comparisons."""
    low, high = 0, len(shorter)
    if shorter == longer[:high]:
        return high
    # shorter[:low] == longer[:low]; shorter[:high] != longer[:high]
    while high - low > 1:
        middle = (low + high) // 2
        if shorter[low:middle] == longer[low:middle]:
            low = middle
        else:
            high = middle
    return low


def _best(totals: list[int]) -> tuple[int, int]:
    """The highest total and how many nodes have it (``totals`` is not empty)."""
    top = max(totals)
    return top, totals.count(top)


def _best_after(best: tuple[int, int], old: list[int], new: list[int],
                offsets: list[int]) -> tuple[int, int]:
    """``_best(new)`` from ``_best(old)`` when the two lists differ at most at ``offsets``:
    the window's changed nodes, a few of hundreds (a count over the whole list only when
    every node that had the highest total lost it)."""
    top, count = best
    for o in offsets:
        if old[o] == top:
            count -= 1
    changed = [new[o] for o in offsets]
    high = max(changed)
    if high > top:
        return high, changed.count(high)
    if high == top:
        count += changed.count(top)
    return (top, count) if count > 0 else _best(new)


def _missing(known: bytes | bytearray) -> list[int]:
    """The offsets of the zero bytes of ``known`` (C scans from one to the next)."""
    missing: list[int] = []
    i = known.find(0)
    while i >= 0:
        missing.append(i)
        i = known.find(0, i + 1)
    return missing


def _positions_of(offsets: list[int], first: int, index: list[int] | None,
                  num_all: int) -> list[int]:
    """The node-list positions of these offsets into a run from ``first`` (``index`` None)
    or into the nodes at ``index``."""
    if index is None:
        return [(first + o) % num_all for o in offsets]
    return [index[o] for o in offsets]


def _gather(values: _Seq, first: int, index: list[int] | None, size: int) -> _Seq:
    """``size`` items of ``values`` from ``first`` (wrapping) when ``index`` is None, else
    the items at ``index``."""
    if index is None:
        return wrapped_slice(values, first, size)
    pick = _picker(index)
    if pick is None:  # one node or none
        return values.__class__(map(values.__getitem__, index))
    if isinstance(values, bytearray):
        return bytearray(pick(values))
    return list(pick(values))


# _picker's last answer: [the index list, its length, its itemgetter].  A cycle gathers
# the same positions from every kept list (statuses, known-masks, each plugin's raw scores):
# one ``itemgetter`` built, then a C loop per list (half of ``map(list.__getitem__)``).
_last_picker: list[Any] = [None, -1, None]


def _picker(index: list[int]) -> operator.itemgetter[Any] | None:
    """``itemgetter(*index)`` (None for fewer than two items: it would not answer a
    tuple), built once for the index list gathered from last (held here, so never another
    list at the same address; its length checked too)."""
    last = _last_picker
    if last[0] is not index or last[1] != len(index):
        last[:] = (index, len(index),
                   operator.itemgetter(*index) if len(index) > 1 else None)
    return last[2]  # type: ignore[no-any-return]  # the getter kept above


def wrapped_slice(values: _Seq, first: int, size: int) -> _Seq:
    """``size`` items (nodes, or batching's kept results) from index ``first`` on, wrapping
    past the end (``size`` <= len).

    Costs the slice, not the cluster: rotating the whole node list per cycle (as a
    ``nodes[start:] + nodes[:start]`` would) made every cycle proportional to the cluster.
    """
    num_all = len(values)
    if first >= num_all:
        first -= num_all
    end = first + size
    if end <= num_all:
        return values[first:end]
    return values[first:] + values[:end - num_all]
