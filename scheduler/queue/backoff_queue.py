"""backoffQ: pods that failed an attempt and wait out their backoff before the next one.

The backoff doubles with each attempt (initial x 2^(attempts-1), capped at the maximum); a pod
never tried has none.  As upstream's ``backoff_queue.go`` with SchedulerPopFromBackoffQ (on by
default since 1.33):

* expiries are truncated to 1-second ordering windows, and a pod counts as backing off until
  the window after its expiry begins;
* pods rejected by plugins are ordered by window, then as activeQ orders them (priority), so
  the scheduler may pop the head when activeQ is empty instead of idling until the flush;
* pods that failed with an error (no rejecting plugin) wait in their own heap, by window
  only, and are never popped early.

Heaps with lazy deletion and a map by pod key; the periodic flush pops exactly the pods whose
backoff is over.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Callable, Iterator
from typing import Any

from scheduler.framework.types import QueuedPodInfo
from scheduler.queue.active_queue import Less, SortKey

__all__ = ["ORDERING_WINDOW_SECONDS", "BackoffQueue"]

# upstream backoffQOrderingWindowDuration; also the flush interval.
ORDERING_WINDOW_SECONDS = 1.0


def align_to_window(t: float) -> float:
    """The start of the ordering window holding ``t``."""
    return math.floor(t / ORDERING_WINDOW_SECONDS) * ORDERING_WINDOW_SECONDS


class _Entry:
    __slots__ = ("alive", "expiry", "less", "order", "qpi", "seq")

    def __init__(self, expiry: float, seq: int, qpi: QueuedPodInfo, less: Less | None,
                 key: SortKey | None = None) -> None:
        self.expiry = expiry
        self.seq = seq
        self.qpi = qpi
        self.less = less
        self.alive = True
        # One tuple comparison when the order has a key (or no QueueSort part at all).
        self.order: tuple[Any, ...] | None = (
            (expiry, seq) if less is None else None if key is None else (expiry, key(qpi), seq))

    def __lt__(self, other: _Entry) -> bool:
        order = self.order
        if order is not None:
            return order < other.order  # type: ignore[operator]
        if self.expiry != other.expiry:
            return self.expiry < other.expiry
        if self.less is not None:
            if self.less(self.qpi, other.qpi):
                return True
            if self.less(other.qpi, self.qpi):
                return False
        return self.seq < other.seq


class _Heap:
    def __init__(self, less: Less | None, key: SortKey | None = None) -> None:
        self.less = less
        self.key = key
        self.items: list[_Entry] = []

    def push(self, entry: _Entry) -> None:
        heapq.heappush(self.items, entry)

    def head(self) -> _Entry | None:
        """The first live entry, dropping dead ones on the way."""
        items = self.items
        while items and not items[0].alive:
            heapq.heappop(items)
        return items[0] if items else None


class BackoffQueue:
    def __init__(
        self,
        *,
        initial: float,
        maximum: float,
        clock: Callable[[], float],
        less: Less,
        sort_key: SortKey | None = None,
    ) -> None:
        if initial <= 0 or maximum < initial:
            raise ValueError(
                f"pod backoff: need 0 < initial <= max, got initial={initial} max={maximum}"
            )
        self._initial = initial
        self._max = maximum
        self._clock = clock
        self._seq = itertools.count()
        self._rejected = _Heap(less, sort_key)  # rejected by plugins: window, then priority
        self._errored = _Heap(None)  # failed with an error: window only
        self._entries: dict[str, _Entry] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: str) -> bool:
        return key in self._entries

    def get(self, key: str) -> QueuedPodInfo | None:
        entry = self._entries.get(key)
        return None if entry is None else entry.qpi

    def backoff_duration(self, qpi: QueuedPodInfo) -> float:
        """initial x 2^(attempts-1), capped at max (attempts <= 1: initial)."""
        duration = self._initial
        for _ in range(1, qpi.attempts):
            if duration > self._max - duration:
                return self._max
            duration += duration
        return min(duration, self._max)

    def backoff_expiry(self, qpi: QueuedPodInfo) -> float:
        """The ordering window in which the pod's backoff ends (upstream getBackoffTime)."""
        return align_to_window(qpi.timestamp + self.backoff_duration(qpi))

    def backoff_remaining(self, qpi: QueuedPodInfo) -> float:
        """Seconds until the pod's own backoff (from its last failure) is over, unaligned to
        windows; 0 when it is over or the pod was never tried.  No pod may start an attempt
        before this is 0, whatever moved it."""
        if qpi.attempts == 0:
            return 0.0
        return max(0.0, qpi.timestamp + self.backoff_duration(qpi) - self._clock())

    def is_backing_off(self, qpi: QueuedPodInfo) -> bool:
        """Until the window after its expiry begins (upstream isPodBackingoff)."""
        if qpi.gated or qpi.attempts == 0:
            return False  # never tried: nothing to back off from
        return self.backoff_expiry(qpi) >= align_to_window(self._clock())

    def add(self, qpi: QueuedPodInfo) -> None:
        """Add the pod (replacing an entry it already has)."""
        self.remove(qpi.key)
        errored = not (qpi.unschedulable_plugins or qpi.pending_plugins)
        heap = self._errored if errored else self._rejected
        entry = _Entry(self.backoff_expiry(qpi), next(self._seq), qpi, heap.less, heap.key)
        heap.push(entry)
        self._entries[qpi.key] = entry

    def remove(self, key: str) -> QueuedPodInfo | None:
        entry = self._entries.pop(key, None)
        if entry is None:
            return None
        entry.alive = False
        return entry.qpi

    def pop_rejected(self) -> QueuedPodInfo | None:
        """The head of the rejected pods' heap once its own backoff is over, before the
        window-aligned flush would move it (upstream popBackoff: activeQ is empty, so it is
        the best pod to try).  Unlike upstream, a pod whose backoff is not over is never
        popped: events can move a rejected pod here many times a second (a gang's own
        rollback, churn), and backoff is the only brake on how often it is tried.  Pods that
        failed with an error wait for the flush."""
        entry = self._rejected.head()
        if entry is None or self.backoff_remaining(entry.qpi) > 0:
            return None
        return self._take(self._rejected, entry)

    def next_pop_in(self) -> float | None:
        """Seconds until ``pop_rejected`` may return the current head (None: empty)."""
        entry = self._rejected.head()
        return None if entry is None else self.backoff_remaining(entry.qpi)

    def pop_completed(self) -> Iterator[QueuedPodInfo]:
        """Pop every pod whose backoff is over, rejected ones first (each heap in order)."""
        window = align_to_window(self._clock())
        for heap in (self._rejected, self._errored):
            while (entry := heap.head()) is not None and entry.expiry < window:
                yield self._take(heap, entry)

    def pods_in_order(self) -> list[QueuedPodInfo]:
        return [
            entry.qpi
            for heap in (self._rejected, self._errored)
            for entry in sorted(e for e in heap.items if e.alive)
        ]

    def _take(self, heap: _Heap, entry: _Entry) -> QueuedPodInfo:
        heapq.heappop(heap.items)
        del self._entries[entry.qpi.key]
        return entry.qpi
