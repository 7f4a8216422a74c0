"""activeQ gives the same pods in the same order whether its heap is built by one
heapify over a burst of pushes (a backlog's initial list) or by pushes sifted in one by
one: checked against a plain sorted model over random pushes, updates, removals and pops."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.framework.types import QueuedPodInfo
from scheduler.objects.pod import PodInfo
from scheduler.plugins.queuesort import PrioritySort
from scheduler.queue import active_queue
from scheduler.queue.active_queue import ActiveQueue
from tests.builders import make_pod

SORT = PrioritySort()


def qpi(name: str, priority: int, timestamp: float) -> QueuedPodInfo:
    return QueuedPodInfo(PodInfo.from_pod(make_pod(name, priority=priority)), timestamp=timestamp)


# ("push", pod, priority, timestamp) | ("update", pod, priority) | ("remove", pod) | ("pop",)
OPS = st.lists(st.one_of(
    st.tuples(st.just("push"), st.integers(0, 30), st.integers(-2, 2),
              st.sampled_from([1.0, 2.0, 3.0])),
    st.tuples(st.just("burst"), st.integers(0, 60)),
    st.tuples(st.just("update"), st.integers(0, 30), st.integers(-2, 2)),
    st.tuples(st.just("remove"), st.integers(0, 30)),
    st.tuples(st.just("pop"),),
), min_size=1, max_size=80)


def _model_pop(model: dict[str, tuple[tuple[Any, ...], int, QueuedPodInfo]]) -> str | None:
    if not model:
        return None
    name = min(model, key=lambda n: (model[n][0], model[n][1]))
    del model[name]
    return name


@settings(max_examples=150, deadline=None)
@given(ops=OPS, keyed=st.booleans())
def test_pop_order_matches_a_sorted_model(ops: list[Any], keyed: bool) -> None:
    key = SORT.sort_key() if keyed else None
    queue = ActiveQueue(SORT.less, key=key)
    model: dict[str, tuple[tuple[Any, ...], int, QueuedPodInfo]] = {}
    seq = 0
    popped: list[str | None] = []
    expected: list[str | None] = []

    def push(name: str, priority: int, timestamp: float) -> None:
        nonlocal seq
        info = qpi(name, priority, timestamp)
        queue.push(info)
        model[name] = ((-priority, timestamp), seq, info)
        seq += 1

    for op in ops:
        if op[0] == "push":
            push(f"p{op[1]}", op[2], op[3])
        elif op[0] == "burst":  # more than _HEAPIFY_FROM at once: the heapify path
            for i in range(active_queue._HEAPIFY_FROM + op[1]):
                push(f"b{i}", i % 3 - 1, float(i % 2))
        elif op[0] == "update":
            name = f"p{op[1]}"
            if name in model:
                old = model[name]
                info = qpi(name, op[2], old[0][1])
                assert queue.update(info)
                model[name] = ((-op[2], old[0][1]), old[1], info)
            else:
                assert not queue.update(qpi(name, op[2], 1.0))
        elif op[0] == "remove":
            name = f"p{op[1]}"
            assert (queue.remove(name if "/" in name else f"default/{name}") is not None) == (
                name in model)
            model.pop(name, None)
        else:
            got = queue.pop()
            popped.append(None if got is None else got.pod_info.name)
            expected.append(_model_pop(model))
        assert len(queue) == len(model)
    while model:
        got = queue.pop()
        popped.append(None if got is None else got.pod_info.name)
        expected.append(_model_pop(model))
    assert queue.pop() is None
    assert popped == expected
