"""Cycle shortcuts that keep per-pod work independent of the cluster size give the answers
of the plain computations they replace."""

from __future__ import annotations

import random

import pytest

from scheduler.schedule_one import select_host, wrapped_slice


@pytest.mark.parametrize(
    ("num_nodes", "first", "size"),
    [
        pytest.param(10, 0, 10, id="whole-list"),
        pytest.param(10, 0, 3, id="head"),
        pytest.param(10, 7, 3, id="up-to-the-end"),
        pytest.param(10, 8, 5, id="wraps"),
        pytest.param(10, 9, 10, id="wraps-whole-list"),
        pytest.param(10, 13, 4, id="first-past-the-end"),
        pytest.param(1, 0, 1, id="one-node"),
        pytest.param(10, 4, 0, id="empty"),
    ],
)
def test_wrapped_slice_is_the_rotated_list_sliced(num_nodes: int, first: int, size: int) -> None:
    nodes = list(range(num_nodes))
    start = first % num_nodes
    rotated = nodes[start:] + nodes[:start]
    assert wrapped_slice(nodes, first, size) == rotated[:size]  # type: ignore[arg-type]


@pytest.mark.parametrize("seed", range(20))
@pytest.mark.parametrize("num_nodes", [2, 3, 100, 500])
def test_no_score_plugins_pick_is_select_hosts_tie_break(seed: int, num_nodes: int) -> None:
    """With no Score plugin every node scores 0; the cycle then draws one index instead of
    building a score column, and must land where select_host would with the same rng."""
    names = [f"node-{i}" for i in range(num_nodes)]
    expected = select_host([(n, 0) for n in names], random.Random(seed))
    assert names[random.Random(seed).randrange(num_nodes)] == expected


@pytest.mark.parametrize("seed", range(10))
@pytest.mark.parametrize(
    "totals",
    [[7], [1, 5, 3], [5, 5, 5, 5], [0, 9, 9, 2, 9], list(range(50)) + [49] * 7],
)
def test_select_host_from_columns_is_select_host(seed: int, totals: list[int]) -> None:
    from scheduler.schedule_one import select_host_from_columns

    names = [f"n{i}" for i in range(len(totals))]
    rng_a, rng_b = random.Random(seed), random.Random(seed)
    rng_c = random.Random(seed)
    best = (max(totals), totals.count(max(totals)))
    for _ in range(5):  # the draws stay in step too
        expected = select_host(list(zip(names, totals)), rng_b)
        assert select_host_from_columns(names, totals, rng_a) == expected
        assert select_host_from_columns(names, totals, rng_c, best=best) == expected


@pytest.mark.parametrize("seed", range(20))
def test_nth_index_finds_the_kth_occurrence(seed: int) -> None:
    from scheduler.find_nodes import nth_index

    rng = random.Random(seed)
    values = [rng.choice([3, 7, 7, 7, 9]) for _ in range(rng.randrange(1, 300))]
    for value in set(values):
        where = [i for i, v in enumerate(values) if v == value]
        assert [nth_index(values, value, k) for k in range(len(where))] == where
