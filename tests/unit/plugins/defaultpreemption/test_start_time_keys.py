"""The start-time reads preemption does for every pod of every candidate node (the victims'
sort key, the pick's last criterion) go through a cache of their own: they must answer as
``pod_start_time`` does for every value a pod can carry, malformed and unhashable ones
included (those parse as "not started", never raise)."""

from __future__ import annotations

from typing import Any

import hypothesis.strategies as st
import pytest
from hypothesis import given, settings

from scheduler.objects.pod import PodInfo
from scheduler.plugins.defaultpreemption.evaluator import (
    Candidate,
    earliest_start_of_highest_priority,
    importance_key,
    pick_one_node_for_preemption,
    pod_start_time,
)
from scheduler.plugins.helper import parse_rfc3339
from tests.unit.plugins.defaultpreemption.harness import pod

NOW = 2e9
START_VALUES: list[Any] = [
    None, "", "2024-01-01T00:00:00Z", "2024-01-01T00:00:01Z", "2024-01-01T00:00:01+00:00",
    "yesterday", 17, {"seconds": 3}, ["2024-01-01T00:00:00Z"], True,
]


def _with_start(name: str, priority: int, start: Any) -> PodInfo:
    obj = pod(name, priority=priority)
    if start is not None:
        obj.setdefault("status", {})["startTime"] = start
    return PodInfo.from_pod(obj)


def _reference_start(info: PodInfo, now: float) -> float:
    """What the key read before it was cached: the plain parse of ``status.startTime``."""
    started = parse_rfc3339((info.pod.get("status") or {}).get("startTime"))
    return now if started is None else started


@pytest.mark.parametrize("start", START_VALUES, ids=repr)
def test_every_value_reads_as_the_plain_parse(start: Any) -> None:
    info = _with_start("p", 5, start)
    want = _reference_start(info, NOW)
    assert pod_start_time(info, NOW) == want
    assert importance_key(NOW)(info) == (-5, want)
    assert earliest_start_of_highest_priority([info], NOW) == want


@pytest.mark.parametrize(
    ("victims", "want"),
    [
        pytest.param([(1, {"bad": 1}), (1, "2024-01-01T00:00:00Z")], parse_rfc3339(
            "2024-01-01T00:00:00Z"), id="unhashable-counts-as-now"),
        pytest.param([(1, ["x"])], NOW, id="only-unhashable"),
        pytest.param([(0, "2024-01-01T00:00:00Z"), (3, "2024-01-01T00:00:05Z"),
                      (3, "2024-01-01T00:00:02Z")], parse_rfc3339("2024-01-01T00:00:02Z"),
                     id="lower-priority-ignored"),
    ],
)
def test_earliest_start_of_highest_priority(victims: list[tuple[int, Any]], want: float) -> None:
    infos = [_with_start(f"v{i}", prio, start) for i, (prio, start) in enumerate(victims)]
    assert earliest_start_of_highest_priority(infos, NOW) == want


@settings(max_examples=150, deadline=None)
@given(st.lists(st.lists(st.tuples(st.integers(-3, 3), st.sampled_from(START_VALUES)),
                         min_size=1, max_size=4), min_size=1, max_size=6),
       st.lists(st.integers(0, 2), min_size=6, max_size=6))
def test_pick_and_sort_equal_the_plain_reads(nodes: list[list[tuple[int, Any]]],
                                             violations: list[int]) -> None:
    candidates = [
        Candidate(f"n{n}", [_with_start(f"n{n}-v{i}", prio, start)
                            for i, (prio, start) in enumerate(victims)], violations[n])
        for n, victims in enumerate(nodes)
    ]

    def plain_key(info: PodInfo) -> tuple[int, float]:
        return (-info.priority, _reference_start(info, NOW))

    def plain_pick() -> Candidate:
        def criteria(c: Candidate) -> tuple[float, ...]:
            top = max(v.priority for v in c.victims)
            earliest = min(_reference_start(v, NOW) for v in c.victims if v.priority == top)
            return (-c.num_pdb_violations, -top, -sum(v.priority + 2**31 for v in c.victims),
                    -len(c.victims), earliest)
        best = max(map(criteria, candidates))
        return next(c for c in candidates if criteria(c) == best)

    every = [v for c in candidates for v in c.victims]
    assert sorted(every, key=importance_key(NOW)) == sorted(every, key=plain_key)
    picked = pick_one_node_for_preemption(candidates, now=NOW)
    assert picked is plain_pick()
