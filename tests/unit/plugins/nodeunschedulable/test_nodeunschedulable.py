"""NodeUnschedulable: cordoned nodes reject pods that do not tolerate the unschedulable taint."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.events import ActionType, EventResource, QueueingHint
from scheduler.framework.node_info import NodeInfo
from scheduler.framework.status import Code, Status
from scheduler.objects.pod import PodInfo
from scheduler.plugins.nodeunschedulable import (
    ERR_REASON_UNKNOWN_CONDITION,
    ERR_REASON_UNSCHEDULABLE,
    NodeUnschedulable,
)
from tests.builders import NodeBuilder, PodBuilder

UU = Code.UNSCHEDULABLE_AND_UNRESOLVABLE
KEY = "node.kubernetes.io/unschedulable"


def _pod(*tolerations: dict[str, Any], uid: str = "u1") -> dict[str, Any]:
    b = PodBuilder("p").uid(uid).container()
    for t in tolerations:
        b.toleration(**t)
    return b.obj()


def _node(unschedulable: bool | None) -> dict[str, Any]:
    b = NodeBuilder("n1").capacity(cpu="1", memory="1Gi", pods=10)
    if unschedulable is not None:
        b.unschedulable(unschedulable)
    return b.obj()


@pytest.mark.parametrize(
    ("tolerations", "unschedulable", "expected"),
    [
        ((), None, None),
        ((), False, None),
        ((), True, Status(UU, ERR_REASON_UNSCHEDULABLE)),
        (({"key": KEY, "operator": "Exists", "effect": "NoSchedule"},), True, None),
        (({"key": KEY, "operator": "Exists"},), True, None),  # any effect
        (({"operator": "Exists"},), True, None),  # tolerates everything
        (
            ({"key": KEY, "operator": "Exists", "effect": "NoExecute"},),
            True,
            Status(UU, ERR_REASON_UNSCHEDULABLE),
        ),
        (({"key": "other", "operator": "Exists"},), True, Status(UU, ERR_REASON_UNSCHEDULABLE)),
    ],
)
def test_filter(tolerations: Any, unschedulable: bool | None, expected: Status | None) -> None:
    plugin = NodeUnschedulable({}, None)
    pod = PodInfo.from_pod(_pod(*tolerations))
    assert plugin.filter(CycleState(), pod, NodeInfo(_node(unschedulable))) == expected


def test_node_less_node_info() -> None:
    status = NodeUnschedulable({}, None).filter(CycleState(), PodInfo.from_pod(_pod()), NodeInfo())
    assert status == Status(UU, ERR_REASON_UNKNOWN_CONDITION)


def test_reason_wording() -> None:
    assert ERR_REASON_UNSCHEDULABLE == "node(s) were unschedulable"
    assert ERR_REASON_UNKNOWN_CONDITION == "node(s) had unknown conditions"


def test_events() -> None:
    node_event, pod_event = NodeUnschedulable({}, None).events_to_register()
    assert node_event.event.resource is EventResource.NODE
    assert node_event.event.action_type == ActionType.ADD | ActionType.UPDATE_NODE_TAINT
    assert pod_event.event.resource is EventResource.UNSCHEDULED_POD
    assert pod_event.event.action_type == ActionType.UPDATE_POD_TOLERATION


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        (None, False, QueueingHint.QUEUE),  # added schedulable
        (None, True, QueueingHint.SKIP),  # added cordoned
        (True, False, QueueingHint.QUEUE),  # uncordoned
        (False, False, QueueingHint.SKIP),  # was already schedulable
        (False, True, QueueingHint.SKIP),  # cordoned
    ],
)
def test_node_hint(old: bool | None, new: bool, expected: QueueingHint) -> None:
    hint = NodeUnschedulable({}, None).is_schedulable_after_node_change
    old_node = None if old is None else _node(old)
    assert hint(_pod(), old_node, _node(new)) is expected


def test_pod_toleration_hint() -> None:
    hint = NodeUnschedulable({}, None).is_schedulable_after_pod_toleration_change
    pod = _pod()
    tolerating = _pod({"key": KEY, "operator": "Exists", "effect": "NoSchedule"})
    assert hint(pod, pod, tolerating) is QueueingHint.QUEUE
    assert hint(pod, pod, _pod({"key": "x", "operator": "Exists"})) is QueueingHint.SKIP
    other = _pod({"key": KEY, "operator": "Exists"}, uid="u2")
    assert hint(pod, other, other) is QueueingHint.SKIP
