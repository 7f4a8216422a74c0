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
