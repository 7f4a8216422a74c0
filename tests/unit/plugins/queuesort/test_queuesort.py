"""PrioritySort: higher priority first, then earlier queue timestamp."""

from __future__ import annotations

import pytest

from scheduler.framework.types import QueuedPodInfo
from scheduler.objects.pod import PodInfo
from scheduler.plugins.queuesort import NAME, PrioritySort
from tests.builders import make_pod


def _q(priority: int | None, timestamp: float, name: str = "p") -> QueuedPodInfo:
    return QueuedPodInfo(PodInfo.from_pod(make_pod(name, priority=priority)), timestamp=timestamp)


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ((10, 2.0), (1, 1.0), True),  # higher priority wins despite later timestamp
        ((1, 1.0), (10, 2.0), False),
        ((5, 1.0), (5, 2.0), True),  # same priority: earlier first
        ((5, 2.0), (5, 1.0), False),
        ((5, 1.0), (5, 1.0), False),  # equal: not less
        ((None, 1.0), (0, 2.0), True),  # unset priority is 0
        ((-1, 1.0), (None, 2.0), False),
    ],
)
def test_less(a: tuple[int | None, float], b: tuple[int | None, float], expected: bool) -> None:
    plugin = PrioritySort({}, None)
    assert plugin.name == NAME == "PrioritySort"
    assert plugin.less(_q(*a, name="a"), _q(*b, name="b")) is expected
