"""The two-resource fast paths (one node, and columns of nodes) compute exactly what the
general scoring formulas compute."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.plugins.noderesources.balanced_allocation import (
    balanced_column_scorer,
    balanced_pair_scorer,
    balanced_resource_scorer,
)
from scheduler.plugins.noderesources.least_allocated import least_resource_scorer
from scheduler.plugins.noderesources.most_allocated import most_resource_scorer
from scheduler.plugins.noderesources.resource_allocation import PairedScorer, ResourceSpec

allocatable = st.one_of(st.just(0), st.integers(min_value=1, max_value=10**12))
requested = st.integers(min_value=0, max_value=2 * 10**12)
weight = st.integers(min_value=1, max_value=100)


@settings(max_examples=400)
@given(w0=weight, w1=weight, a0=allocatable, a1=allocatable, r0=requested, r1=requested)
def test_least_and_most_allocated_pairs_match(
    w0: int, w1: int, a0: int, a1: int, r0: int, r1: int
) -> None:
    r0, r1 = (r0 if a0 else 0), (r1 if a1 else 0)
    specs = [ResourceSpec("cpu", w0), ResourceSpec("memory", w1)]
    for scorer in (least_resource_scorer(specs), most_resource_scorer(specs)):
        assert isinstance(scorer, PairedScorer)
        assert scorer.pair(r0, a0, r1, a1) == scorer([r0, r1], [a0, a1])


@settings(max_examples=400)
@given(a0=allocatable, a1=allocatable, r0=requested, r1=requested)
def test_balanced_pair_matches(a0: int, a1: int, r0: int, r1: int) -> None:
    r0, r1 = (r0 if a0 else 0), (r1 if a1 else 0)
    assert balanced_pair_scorer(r0, a0, r1, a1) == balanced_resource_scorer([r0, r1], [a0, a1])


def test_three_resources_have_no_pair_path() -> None:
    specs = [ResourceSpec("cpu", 1), ResourceSpec("memory", 1), ResourceSpec("example.com/x", 1)]
    assert not isinstance(least_resource_scorer(specs), PairedScorer)


nodes = st.lists(st.tuples(allocatable, allocatable, requested, requested), max_size=12)


def _columns(rows: list[tuple[int, int, int, int]]) -> tuple[list[int], ...]:
    rows = [(a0, a1, r0 if a0 else 0, r1 if a1 else 0) for a0, a1, r0, r1 in rows]
    return ([r[2] for r in rows], [r[0] for r in rows], [r[3] for r in rows],
            [r[1] for r in rows])


@settings(max_examples=300)
@given(w0=weight, w1=weight, rows=nodes)
def test_column_kernels_match_the_general_formulas(
    w0: int, w1: int, rows: list[tuple[int, int, int, int]]
) -> None:
    r0s, a0s, r1s, a1s = _columns(rows)
    specs = [ResourceSpec("cpu", w0), ResourceSpec("memory", w1)]
    for scorer in (least_resource_scorer(specs), most_resource_scorer(specs)):
        assert isinstance(scorer, PairedScorer)
        want = [scorer([r0, r1], [a0, a1]) for r0, a0, r1, a1 in zip(r0s, a0s, r1s, a1s)]
        assert scorer.column(r0s, a0s, r1s, a1s) == want
    want = [balanced_resource_scorer([r0, r1], [a0, a1])
            for r0, a0, r1, a1 in zip(r0s, a0s, r1s, a1s)]
    assert balanced_column_scorer(r0s, a0s, r1s, a1s) == want
