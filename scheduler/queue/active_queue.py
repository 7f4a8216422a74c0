"""activeQ: the pods ready to be scheduled, ordered by the QueueSort plugin.

A binary heap with lazy deletion (an update or a delete marks the old entry dead instead of
searching the heap), plus a map by pod key for lookups.  Ties keep first-in first-out order
through a sequence number, which an update keeps so a changed pod does not lose its place
among equals.  Pushes wait in a list until the next pop, which builds the heap with one
``heapify`` when many arrived at once (the informer's initial list hands the queue every
pending pod of a backlog) and sifts them in one by one otherwise; the order is a total
one (the key or ``less``, then the sequence number), so the pods come out the same.
Upstream: ``active_queue.go``.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable
from typing import Any

from scheduler.framework.types import QueuedPodInfo

__all__ = ["ActiveQueue", "Less", "SortKey"]

Less = Callable[[QueuedPodInfo, QueuedPodInfo], bool]
# The QueueSort plugin's order as a key (QueueSortPlugin.sort_key), computed once per entry.
SortKey = Callable[[QueuedPodInfo], tuple[Any, ...]]

# Compact the heap once more than this many dead entries outnumber the live ones.
_COMPACT_AFTER = 64
# Pending pushes heapified with the heap (O(n)) rather than sifted in one by one
# (O(k log n)) from this many, and when they are at least a quarter of the heap.
_HEAPIFY_FROM = 16


class _Entry:
    __slots__ = ("alive", "less", "order", "qpi", "seq")

    def __init__(self, qpi: QueuedPodInfo, seq: int, less: Less, key: SortKey | None) -> None:
        self.qpi = qpi
        self.seq = seq
        self.alive = True
        self.less = less
        # With a key, a comparison is one tuple comparison (the key, then first in, first
        # out among equals); without, two less() calls.
        self.order = None if key is None else (key(qpi), seq)

    def __lt__(self, other: _Entry) -> bool:
        order = self.order
        if order is not None:
            return order < other.order  # type: ignore[operator]
        if self.less(self.qpi, other.qpi):
            return True
        if self.less(other.qpi, self.qpi):
            return False
        return self.seq < other.seq  # stable: first in, first out among equals


class ActiveQueue:
    def __init__(self, less: Less, *, key: SortKey | None = None) -> None:
        self._less = less
        self._key = key
        self._seq = itertools.count()
        self._heap: list[_Entry] = []
        self._pending: list[_Entry] = []  # pushed since the last pop, not in the heap yet
        self._entries: dict[str, _Entry] = {}
        self._dead = 0

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: str) -> bool:
        return key in self._entries

    def get(self, key: str) -> QueuedPodInfo | None:
        entry = self._entries.get(key)
        return None if entry is None else entry.qpi

    def push(self, qpi: QueuedPodInfo) -> None:
        """Add the pod (replacing an entry it already has) behind its equals."""
        self._push(qpi, next(self._seq))

    def update(self, qpi: QueuedPodInfo) -> bool:
        """Re-insert a queued pod whose ordering may have changed (priority); keeps its
        place among equals.  False if the pod is not in activeQ."""
        entry = self._entries.get(qpi.key)
        if entry is None:
            return False
        self._push(qpi, entry.seq)
        return True

    def remove(self, key: str) -> QueuedPodInfo | None:
        entry = self._entries.pop(key, None)
        if entry is None:
            return None
        self._kill(entry)
        return entry.qpi

    def pop(self) -> QueuedPodInfo | None:
        """The head (the pod the QueueSort plugin orders first), or None if empty."""
        self._flush()
        heap = self._heap
        while heap:
            entry = heapq.heappop(heap)
            if not entry.alive:
                self._dead -= 1
                continue
            del self._entries[entry.qpi.key]
            return entry.qpi
        self._dead = 0
        return None

    def pods_in_order(self) -> list[QueuedPodInfo]:
        return [entry.qpi for entry in sorted(self._entries.values())]

    def _push(self, qpi: QueuedPodInfo, seq: int) -> None:
        key = qpi.pod_info.key  # (qpi.key is a property call: once per ADDED, not twice)
        old = self._entries.get(key)
        if old is not None:
            self._kill(old)
        entry = _Entry(qpi, seq, self._less, self._key)
        self._pending.append(entry)
        self._entries[key] = entry

    def _flush(self) -> None:
        """Move the pending pushes into the heap."""
        pending = self._pending
        if not pending:
            return
        heap = self._heap
        if len(pending) >= _HEAPIFY_FROM and 4 * len(pending) >= len(heap):
            heap.extend(pending)
            heapq.heapify(heap)
        else:
            for entry in pending:
                heapq.heappush(heap, entry)
        self._pending = []

    def _kill(self, entry: _Entry) -> None:
        """Lazy deletion; the heap is compacted when dead entries dominate."""
        entry.alive = False
        self._dead += 1
        if self._dead > _COMPACT_AFTER and self._dead > len(self._entries):
            self._flush()
            self._heap = [e for e in self._heap if e.alive]
            heapq.heapify(self._heap)
            self._dead = 0
