"""KeptPositions follows its nodes across a rebuilt node list: the spliced path for one node
added or removed against a move of every result by generation, node by node."""

from __future__ import annotations

import random
from typing import Any

import pytest

from scheduler.framework.batching_kept import KeptPositions, _common_prefix
from scheduler.framework.status import Code, Status


def kept(gens: list[int], rng: random.Random, *, scores: bool) -> KeptPositions:
    k = KeptPositions()
    k.num_all = len(gens)
    k.gens = list(gens)
    k.status = [None if rng.random() < 0.5 else Status(Code.UNSCHEDULABLE, f"r{g}")
                for g in gens]
    k.status_known = bytearray(rng.random() < 0.7 for _ in gens)
    if scores:
        k.score_plugins = ["A", "B"]
        k.raw = [[rng.randrange(100) for _ in gens] for _ in range(2)]
        k.raw_known = bytearray(rng.random() < 0.7 for _ in gens)
    else:
        k.raw_known = bytearray(len(gens))
    return k


def moved(k: KeptPositions, generations: list[int]) -> tuple[Any, ...]:
    """Each kept result at its node's new position, node by node; unknown elsewhere."""
    old = {g: i for i, g in enumerate(k.gens)}
    where = [old.get(g) for g in generations]
    status = [None if i is None else k.status[i] for i in where]
    known = bytes(0 if i is None else k.status_known[i] for i in where)
    raw = [[0 if i is None else column[i] for i in where] for column in k.raw]
    raw_known = bytes(0 if i is None or not k.raw else k.raw_known[i] for i in where)
    return status, known, raw, raw_known


def state(k: KeptPositions) -> tuple[Any, ...]:
    return k.status, bytes(k.status_known), k.raw, bytes(k.raw_known)


@pytest.mark.parametrize("seed", range(40))
def test_following_one_added_or_removed_node_keeps_only_results_of_unchanged_nodes(
        seed: int) -> None:
    rng = random.Random(seed)
    gens = rng.sample(range(1000), rng.randrange(1, 40))
    k = kept(gens, rng, scores=rng.random() < 0.7)
    generations = list(gens)
    change = rng.choice(["add", "remove", "add-and-change", "remove-and-change", "swap",
                         "remove-two"])
    at = rng.randrange(len(generations) + 1)
    if change.startswith("add"):
        generations.insert(at, 5000 + seed)
    elif change.startswith("remove") and len(generations) > 2:
        if change == "remove-two":
            del generations[:2]
        else:
            del generations[min(at, len(generations) - 1)]
    elif len(generations) > 2:  # swap
        i, j = rng.sample(range(len(generations)), 2)
        generations[i], generations[j] = generations[j], generations[i]
    if change.endswith("-and-change"):
        for _ in range(rng.randrange(1, 4)):  # nodes changed in place meanwhile
            generations[rng.randrange(len(generations))] = 6000 + rng.randrange(1000)
    want = moved(k, generations)
    k._follow(generations)
    status, known, raw, raw_known = state(k)
    assert len(status) == len(known) == len(raw_known) == len(generations)
    if change in ("add", "remove", "swap", "remove-two"):
        assert (status, known, raw, raw_known) == want
        return
    # Changed nodes are unknown; every result still known is its node's, as moved one by one.
    for p in range(len(generations)):
        if known[p]:
            assert want[1][p] and status[p] is want[0][p], p
        if raw and raw_known[p]:
            assert want[3][p] and [c[p] for c in raw] == [c[p] for c in want[2]], p


@pytest.mark.parametrize(
    ("shorter", "longer", "want"),
    [([], [1], 0), ([1, 2, 3], [1, 2, 3, 4], 3), ([1, 2, 3], [1, 9, 2, 3], 1),
     ([1, 2, 3], [9, 1, 2, 3], 0), ([1, 2], [1, 2], 2), ([5] * 7 + [1], [5] * 7 + [2, 1], 7)],
)
def test_common_prefix(shorter: list[int], longer: list[int], want: int) -> None:
    assert _common_prefix(shorter, longer) == want
