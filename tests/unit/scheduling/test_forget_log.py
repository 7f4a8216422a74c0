"""A binding failure that forgets a pod the informer already confirmed on another node is one
error line naming the pod, the node it was assumed on and the node it is bound to (upstream
logs and goes on), not a traceback; the cache keeps the bound pod."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from structlog.testing import capture_logs

from scheduler.cache import Cache
from scheduler.metrics import SchedulerMetrics
from scheduler.objects.pod import PodInfo
from scheduler.schedule_one import SchedulingCycle
from tests.builders import make_node, make_pod


@dataclass
class _Sched:
    cache: Cache
    metrics: SchedulerMetrics = field(default_factory=SchedulerMetrics)


@pytest.mark.parametrize(
    ("informer_node", "assumed_node", "actual_node"),
    [
        pytest.param("n2", "n1", "n2", id="bound-elsewhere"),
        pytest.param("n1", "n1", "n1", id="bound-as-assumed"),
        pytest.param(None, "n1", "", id="deleted-meanwhile"),
    ],
)
def test_forget_failure_is_one_error_line(
    informer_node: str | None, assumed_node: str, actual_node: str
) -> None:
    cache = Cache()
    for n in ("n1", "n2"):
        cache.add_node(make_node(n))
    assumed = make_pod("web", cpu="1", node="n1")
    cache.assume_pod(PodInfo.from_pod(assumed))
    if informer_node is None:
        cache.remove_pod(assumed)
    else:
        cache.add_pod(PodInfo.from_pod(make_pod("web", cpu="1", node=informer_node)))
    cycle = SchedulingCycle(_Sched(cache))  # type: ignore[arg-type]
    with capture_logs() as logs:
        cycle._forget(assumed)
    [entry] = logs
    assert entry["log_level"] == "error"
    assert entry["event"] == "scheduler cache forget failed"
    assert "exc_info" not in entry
    assert (entry["pod"], entry["assumed_node"], entry["actual_node"]) == (
        "default/web", assumed_node, actual_node
    )
    assert cache.pod_count() == (0 if informer_node is None else 1)
    assert cache.assumed_pod_count() == 0
