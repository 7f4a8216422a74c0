"""backoffQ: pods that failed an attempt and wait out their backoff before the next one.

The backoff doubles with each attempt (initial x 2^(attempts-1), capped at the maximum); a pod
never tried has none.  A heap ordered by expiry, with lazy deletion and a map by pod key, so
the periodic flush pops exactly the pods whose backoff is over.  Upstream:
``backoff_queue.go``.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Iterator

from scheduler.framework.types import QueuedPodInfo

__all__ = ["BackoffQueue"]


class _Entry:
    __slots__ = ("alive", "expiry", "qpi", "seq")

    def __init__(self, expiry: float, seq: int, qpi: QueuedPodInfo) -> None:
        self.expiry = expiry
        self.seq = seq
        self.qpi = qpi
        self.alive = True

    def __lt__(self, other: _Entry) -> bool:
        return (self.expiry, self.seq) < (other.expiry, other.seq)


class BackoffQueue:
    def __init__(
        self,
        *,
        initial: float,
        maximum: float,
        clock: Callable[[], float],
    ) -> None:
        if initial <= 0 or maximum < initial:
            raise ValueError(
                f"pod backoff: need 0 < initial <= max, got initial={initial} max={maximum}"
            )
        self._initial = initial
        self._max = maximum
        self._clock = clock
        self._seq = itertools.count()
        self._heap: list[_Entry] = []
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

    def is_backing_off(self, qpi: QueuedPodInfo) -> bool:
        if qpi.gated or qpi.attempts == 0:
            return False  # never tried: nothing to back off from
        return qpi.timestamp + self.backoff_duration(qpi) > self._clock()

    def add(self, qpi: QueuedPodInfo) -> None:
        """Add the pod (replacing an entry it already has)."""
        self.remove(qpi.key)
        entry = _Entry(qpi.timestamp + self.backoff_duration(qpi), next(self._seq), qpi)
        heapq.heappush(self._heap, entry)
        self._entries[qpi.key] = entry

    def remove(self, key: str) -> QueuedPodInfo | None:
        entry = self._entries.pop(key, None)
        if entry is None:
            return None
        entry.alive = False
        return entry.qpi

    def pop_completed(self) -> Iterator[QueuedPodInfo]:
        """Pop, in expiry order, every pod whose backoff is over."""
        now = self._clock()
        heap = self._heap
        while heap and heap[0].expiry <= now:
            entry = heapq.heappop(heap)
            if not entry.alive:
                continue
            del self._entries[entry.qpi.key]
            yield entry.qpi

    def pods_in_order(self) -> list[QueuedPodInfo]:
        return [entry.qpi for entry in sorted(self._entries.values())]
