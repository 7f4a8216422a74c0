"""Alike pods' requests computed once: PodInfo's shared parse gives pods whose spec reads
the same one requests object, and the allocation scorers and batching's signature keep
the last pod's answer for it."""

from __future__ import annotations

import pytest

from scheduler.framework.batching import sign_requests
from scheduler.objects.pod import PodInfo
from scheduler.plugins.noderesources.resource_allocation import (
    DRAScoring,
    ResourceAllocationScorer,
    ResourceSpec,
)
from tests.builders import PodBuilder
from tests.fakes import FakeHandle

RESOURCES = [ResourceSpec("cpu", 1), ResourceSpec("memory", 1),
             ResourceSpec("example.com/gpu", 1)]


def _pod(name: str, cpu: str, gpu: int = 0) -> PodInfo:
    builder = PodBuilder(name).req(cpu=cpu, memory="1Gi")
    if gpu:
        builder.req(**{"example.com/gpu": gpu})
    return PodInfo.from_pod(builder.obj())


@pytest.mark.parametrize("use_requested", [False, True])
def test_alike_pods_share_one_answer_and_others_get_theirs(use_requested: bool) -> None:
    scorer = ResourceAllocationScorer(name="LeastAllocated", scorer=lambda r, a: 0,
                                      resources=RESOURCES, use_requested=use_requested)
    first, alike, other, gpu = _pod("a", "100m"), _pod("b", "100m"), _pod("c", "200m"), \
        _pod("d", "100m", gpu=2)
    assert first.requests is alike.requests  # the shared parse the memo relies on
    got = scorer.pod_requests(first)
    assert got == [100, 1 << 30, 0]
    assert scorer.pod_requests(alike) is got
    assert scorer.pod_requests(other) == [200, 1 << 30, 0]
    assert scorer.pod_requests(gpu) == [100, 1 << 30, 2]
    assert scorer.pod_requests(first) == got  # back to the first pod: recomputed, equal


def test_sign_requests_follows_the_pod() -> None:
    pods = [_pod("a", "100m"), _pod("b", "100m"), _pod("c", "200m"), _pod("d", "100m", 1),
            _pod("e", "100m")]
    signs = [sign_requests(p) for p in pods]
    assert signs[0] == signs[1] == signs[4]
    assert len({signs[0], signs[2], signs[3]}) == 3
    assert signs[2][0] == 200 and signs[3][4] == (("example.com/gpu", 1),)


def test_dra_backed_looks_only_at_extended_resources_asked_for() -> None:
    dra = DRAScoring(FakeHandle().listers)
    assert dra._extended(RESOURCES) == [2]
    assert dra.backed(RESOURCES, [100, 1 << 30, 0]) == {}
