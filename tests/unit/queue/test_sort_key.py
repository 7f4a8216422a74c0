"""The heaps' sort key (QueueSortPlugin.sort_key): activeQ and the backoff queue pop pods in
the same order with PrioritySort's key as with its less(), and never call less() then."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.framework.types import QueuedPodInfo
from scheduler.objects.pod import PodInfo
from scheduler.plugins.queuesort import PrioritySort
from scheduler.queue.active_queue import ActiveQueue
from scheduler.queue.backoff_queue import BackoffQueue
from tests.builders import make_pod

SORT = PrioritySort()
KEY = SORT.sort_key()


class CountingLess:
    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        self.calls += 1
        return SORT.less(a, b)


def qpi(i: int, priority: int, timestamp: float, **kw: Any) -> QueuedPodInfo:
    return QueuedPodInfo(PodInfo.from_pod(make_pod(f"p{i}", priority=priority)),
                         timestamp=timestamp, **kw)


# (priority, timestamp) per pod: few distinct values, so ties (first in, first out) occur.
PODS = st.lists(st.tuples(st.integers(-2, 2), st.sampled_from([1.0, 2.0, 3.0])),
                min_size=1, max_size=40)


@settings(max_examples=60, deadline=None)
@given(pods=PODS, updates=st.lists(st.tuples(st.integers(0, 39), st.integers(-2, 2)),
                                   max_size=10),
       removals=st.lists(st.integers(0, 39), max_size=10))
def test_active_queue_pops_in_the_same_order_with_the_key(
    pods: list[tuple[int, float]], updates: list[tuple[int, int]], removals: list[int],
) -> None:
    orders = []
    for key in (None, KEY):
        less = CountingLess()
        queue = ActiveQueue(less, key=key)
        infos = [qpi(i, p, t) for i, (p, t) in enumerate(pods)]
        for info in infos:
            queue.push(info)
        for i, priority in updates:  # a priority change keeps the pod's place among equals
            if i < len(infos):
                infos[i] = qpi(i, priority, infos[i].timestamp)
                queue.update(infos[i])
        for i in removals:
            if i < len(infos):
                queue.remove(infos[i].key)
        orders.append([info.key for info in iter(queue.pop, None)])
        assert key is None or less.calls == 0
    assert orders[0] == orders[1]


@settings(max_examples=60, deadline=None)
@given(pods=st.lists(st.tuples(st.integers(-2, 2), st.sampled_from([1.0, 2.0, 3.0]),
                               st.integers(1, 3), st.booleans()), min_size=1, max_size=30))
def test_backoff_queue_pops_in_the_same_order_with_the_key(
    pods: list[tuple[int, float, int, bool]],
) -> None:
    orders = []
    for key in (None, KEY):
        less = CountingLess()
        queue = BackoffQueue(initial=1.0, maximum=10.0, clock=lambda: 100.0, less=less,
                             sort_key=key)
        for i, (priority, timestamp, attempts, rejected) in enumerate(pods):
            queue.add(qpi(i, priority, timestamp, attempts=attempts,
                          unschedulable_plugins={"NodeResourcesFit"} if rejected else set()))
        in_order = [info.key for info in queue.pods_in_order()]
        assert [info.key for info in queue.pop_completed()] == in_order
        orders.append(in_order)
        assert key is None or less.calls == 0
    assert orders[0] == orders[1] and len(orders[0]) == len(pods)


@given(a=st.tuples(st.integers(-3, 3), st.floats(0, 5)),
       b=st.tuples(st.integers(-3, 3), st.floats(0, 5)))
def test_priority_sort_key_orders_as_less(a: tuple[int, float], b: tuple[int, float]) -> None:
    x, y = qpi(0, *a), qpi(1, *b)
    assert SORT.less(x, y) == (KEY(x) < KEY(y))
    assert SORT.less(y, x) == (KEY(y) < KEY(x))
