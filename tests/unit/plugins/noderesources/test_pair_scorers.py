"""The two-resource fast paths compute exactly what the general scoring formulas compute."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.plugins.noderesources.balanced_allocation import (
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
