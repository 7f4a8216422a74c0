"""The unschedulable pool: pods that failed and wait for a cluster event that may help, and the
pods a PreEnqueue plugin gated (scheduling gates, a missing PodGroup ...).

Both leave only through the scheduling queue's event handling (or the periodic flush of pods
unschedulable for too long), so they are kept apart from the heaps.  Upstream:
``unschedulable_pods.go`` (which keeps gated pods in the same map).  This module also keeps
``scheduler_unschedulable_pods{plugin,profile}`` counting each pod once per rejecting plugin.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from itertools import count
from typing import Any

from scheduler.framework.events import ClusterEvent
from scheduler.framework.types import QueuedPodInfo
from scheduler.metrics import Children, SchedulerMetrics
from scheduler.queue.requeue_index import RequeueIndex

__all__ = ["UnschedulablePods"]


class UnschedulablePods:
    def __init__(
        self,
        *,
        profile_of: Callable[[dict[str, Any]], str],
        metrics: SchedulerMetrics | None = None,
        index: RequeueIndex | None = None,
    ) -> None:
        self._profile_of = profile_of
        # The pods again by the keys their rejectors' hints name (None: every event scans).
        self._index = index if index is not None and index.enabled else None
        self._metrics = metrics if metrics is not None else SchedulerMetrics()
        # scheduler_unschedulable_pods' children by (plugin, profile), looked up once each:
        # every gated pod's ADDED counted itself with a labels() call.
        self._gauge = Children(self._metrics.unschedulable_pods)
        self.unschedulable: dict[str, QueuedPodInfo] = {}
        self.gated: dict[str, QueuedPodInfo] = {}
        # The gated pods again, by (profile, gating plugin): a cluster event is matched
        # against each group's plugin once and skips the groups it cannot open, so 10000
        # gated pods do not make every event cost 10000 steps.
        self.gated_groups: dict[tuple[str, str], dict[str, QueuedPodInfo]] = {}
        self._group_of: dict[str, tuple[str, str]] = {}
        # key -> (profile, plugins) counted in scheduler_unschedulable_pods
        self._counted: dict[str, tuple[str, frozenset[str]]] = {}
        # With an index: each pod's place in the order a scan visits them (unschedulable by
        # insertion, then gated by group then member), to give the index's pods that order.
        self._seq = count()
        self._order: dict[str, tuple[int, int, int]] = {}
        self._group_seq: dict[tuple[str, str], int] = {}

    @property
    def indexed(self) -> bool:
        return self._index is not None

    def __len__(self) -> int:
        return len(self.unschedulable) + len(self.gated)

    def put(self, qpi: QueuedPodInfo) -> bool:
        """Into the gated set for a gated pod, else the unschedulable pool; True if the pod
        was in neither before."""
        key = qpi.key
        target, other = (
            (self.gated, self.unschedulable) if qpi.gated else (self.unschedulable, self.gated)
        )
        other.pop(key, None)
        new = key not in target
        target[key] = qpi
        self._ungroup(key)
        index = self._index
        profile = self._profile_of(qpi.pod_info.pod)
        if qpi.gated:
            group = (profile, qpi.gating_plugin)
            members = self.gated_groups.get(group)
            if members is None:
                members = self.gated_groups[group] = {}
                if index is not None:
                    self._group_seq[group] = next(self._seq)
            members[key] = qpi
            self._group_of[key] = group
            if index is not None:
                self._order[key] = (1, self._group_seq[group], next(self._seq))
        elif index is not None and new:
            self._order[key] = (0, next(self._seq), 0)
        if index is not None:
            index.add(key, qpi, profile=profile)
        self._count(key, qpi, profile)
        return new

    def refresh(self, qpi: QueuedPodInfo) -> None:
        """The pod (held here) changed in place (its pod_info): index it anew."""
        if self._index is not None and qpi.key in self._order:
            self._index.add(qpi.key, qpi)

    def candidates(self, event: ClusterEvent, old: Any, new: Any
                   ) -> list[tuple[QueuedPodInfo, tuple[str, str] | None]] | None:
        """The pods the event may concern (the index's answer), each with its gated group
        (None for an unschedulable pod), in the order a scan of ``unschedulable`` then
        ``gated_groups`` visits them; None when every pod must be asked."""
        if self._index is None:
            return None
        keys = self._index.candidates(event, old, new)
        if keys is None:
            return None
        keys.sort(key=self._order.__getitem__)
        out: list[tuple[QueuedPodInfo, tuple[str, str] | None]] = []
        for key in keys:
            qpi = self.unschedulable.get(key)
            if qpi is not None:
                out.append((qpi, None))
            else:
                out.append((self.gated[key], self._group_of[key]))
        return out

    def remove(self, key: str) -> QueuedPodInfo | None:
        qpi = self.unschedulable.pop(key, None) or self.gated.pop(key, None)
        if qpi is not None:
            self._ungroup(key)
            self._uncount(key)
            if self._index is not None:
                self._index.discard(key)
                del self._order[key]
        return qpi

    def _ungroup(self, key: str) -> None:
        group = self._group_of.pop(key, None)
        if group is None:
            return
        members = self.gated_groups[group]
        del members[key]
        if not members:
            del self.gated_groups[group]
            self._group_seq.pop(group, None)

    def get(self, key: str) -> QueuedPodInfo | None:
        return self.unschedulable.get(key) or self.gated.get(key)

    def __iter__(self) -> Iterator[QueuedPodInfo]:
        """Every pod, unschedulable then gated."""
        yield from self.unschedulable.values()
        yield from self.gated.values()

    def stale(self, now: float, max_age: float) -> list[QueuedPodInfo]:
        """Unschedulable (not gated) pods that have waited longer than ``max_age``."""
        return [q for q in self.unschedulable.values() if now - q.timestamp > max_age]

    def _count(self, key: str, qpi: QueuedPodInfo, profile: str) -> None:
        self._uncount(key)
        plugins = frozenset(qpi.unschedulable_plugins | qpi.pending_plugins)
        gauge = self._gauge
        for plugin in plugins:
            gauge(plugin, profile).inc()
        self._counted[key] = (profile, plugins)

    def _uncount(self, key: str) -> None:
        counted = self._counted.pop(key, None)
        if counted is None:
            return
        profile, plugins = counted
        gauge = self._gauge
        for plugin in plugins:
            gauge(plugin, profile).dec()
