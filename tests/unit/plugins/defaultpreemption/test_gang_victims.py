"""A victim in a gang takes its whole gang down (issue 22): its bound, live siblings on any
node are preempted with it, never half of the gang."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.objects.pod import PodInfo
from scheduler.plugins.defaultpreemption.plugin import DefaultPreemption
from scheduler.plugins.helper import POD_GROUP_LABEL, bound_gang_companions
from tests.builders import PodBuilder
from tests.fakes import FakeHandle


def _pod(name: str, group: str | None, *, node: str | None = "n1", ns: str = "default",
         phase: str | None = None, deleting: bool = False) -> dict[str, Any]:
    b = PodBuilder(name, ns).req(cpu="1")
    if group:
        b.labels({POD_GROUP_LABEL: group})
    if node:
        b.node(node)
    pod = b.obj()
    if phase:
        pod.setdefault("status", {})["phase"] = phase
    if deleting:
        pod["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return pod


CLUSTER = [
    _pod("g-0", "g"), _pod("g-1", "g", node="n2"), _pod("g-2", "g", node="n3"),
    _pod("g-pending", "g", node=None), _pod("g-done", "g", phase="Succeeded"),
    _pod("g-leaving", "g", deleting=True), _pod("g-elsewhere", "g", ns="other"),
    _pod("h-0", "h"), _pod("plain", None),
]


@pytest.mark.parametrize(
    ("victim", "expected"),
    [
        ("g-0", ["g-1", "g-2"]),  # bound and live, on any node, same namespace
        ("h-0", []),              # a gang of one
        ("plain", []),            # no gang
    ],
)
def test_bound_gang_companions(victim: str, expected: list[str]) -> None:
    handle = FakeHandle(objects={"pods": CLUSTER})
    [pod] = [p for p in CLUSTER if p["metadata"]["name"] == victim]
    got = bound_gang_companions(handle.listers, pod)
    assert sorted(p["metadata"]["name"] for p in got) == expected


def test_preemption_takes_the_victims_whole_gang_once() -> None:
    handle = FakeHandle(objects={"pods": CLUSTER})
    plugin = DefaultPreemption({}, handle)
    victims = [PodInfo.from_assigned_pod(p)[0] for p in CLUSTER
               if p["metadata"]["name"] in ("g-0", "g-1", "plain")]
    extra = plugin._gang_companions(victims)
    # g-1 is a victim already: only g-2 is added, once.
    assert [v.name for v in extra] == ["g-2"]
