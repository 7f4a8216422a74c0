"""NodeName: spec.nodeName pins the pod to one node."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.events import ActionType, EventResource, QueueingHint
from scheduler.framework.node_info import NodeInfo
from scheduler.framework.status import Code, Status
from scheduler.objects.pod import PodInfo
from scheduler.plugins.nodename import ERR_REASON, NAME, NodeName
from tests.builders import PodBuilder, make_node


def _pod(node_name: str = "") -> dict[str, Any]:
    b = PodBuilder("p").container()
    if node_name:
        b.set("spec.nodeName", node_name)
    return b.obj()


@pytest.mark.parametrize(
    ("pod_node", "node", "expected"),
    [
        ("", "n1", None),
        ("n1", "n1", None),
        ("n2", "n1", Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON)),
    ],
)
def test_filter(pod_node: str, node: str, expected: Status | None) -> None:
    plugin = NodeName({}, None)
    status = plugin.filter(
        CycleState(), PodInfo.from_pod(_pod(pod_node)), NodeInfo(make_node(node))
    )
    assert status == expected


def test_filter_without_node_is_error() -> None:
    status = NodeName({}, None).filter(CycleState(), PodInfo.from_pod(_pod()), NodeInfo())
    assert status is not None and status.code == Code.ERROR


def test_reason_wording() -> None:
    assert ERR_REASON == "node(s) didn't match the requested node name"
    assert NAME == "NodeName"


def test_events_and_hint() -> None:
    (registered,) = NodeName({}, None).events_to_register()
    assert registered.event.resource is EventResource.NODE
    assert registered.event.action_type == ActionType.ADD
    hint = registered.hint
    assert hint is not None
    assert hint(_pod("n1"), None, make_node("n1")) is QueueingHint.QUEUE
    assert hint(_pod("n1"), None, make_node("n2")) is QueueingHint.SKIP
    assert hint(_pod(), None, make_node("n2")) is QueueingHint.QUEUE
