"""Node sampling, host selection and the FailedScheduling message, as upstream computes them."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from scheduler.framework.status import Code, Status
from scheduler.framework.types import Diagnosis, FitError
from scheduler.schedule_one import (
    effective_percentage,
    failure_message,
    num_feasible_nodes_to_find,
    rejected_on_node,
    select_host,
)


@pytest.mark.parametrize(
    ("percentage", "nodes", "expected"),
    [
        pytest.param(None, 10, 10, id="fewer-than-100-nodes-all"),
        pytest.param(0, 99, 99, id="99-nodes-all"),
        pytest.param(0, 100, 100, id="100-nodes-min-100"),
        pytest.param(0, 1000, 420, id="1000-nodes-adaptive-42pct"),
        pytest.param(0, 5000, 500, id="5000-nodes-adaptive-10pct"),
        pytest.param(0, 6000, 300, id="6000-nodes-floor-5pct"),
        pytest.param(0, 250, 120, id="250-nodes-48pct"),
        pytest.param(50, 1000, 500, id="explicit-50pct"),
        pytest.param(1, 1000, 100, id="explicit-1pct-min-100"),
        pytest.param(100, 1000, 1000, id="explicit-100pct"),
    ],
)
def test_num_feasible_nodes_to_find(percentage: int | None, nodes: int, expected: int) -> None:
    assert num_feasible_nodes_to_find(percentage, nodes) == expected


def test_select_host_picks_the_highest_score() -> None:
    rng = random.Random(1)
    assert select_host([("a", 10), ("b", 30), ("c", 20)], rng) == "b"


def test_select_host_breaks_ties_uniformly() -> None:
    rng = random.Random(7)
    picks = Counter(
        select_host([("a", 5), ("b", 9), ("c", 9), ("d", 9), ("e", 1)], rng) for _ in range(3000)
    )
    assert set(picks) == {"b", "c", "d"}
    for node in ("b", "c", "d"):
        assert 850 < picks[node] < 1150, picks


def _status(*reasons: str, plugin: str = "P") -> Status:
    return Status(Code.UNSCHEDULABLE, *reasons, plugin=plugin)


@pytest.mark.parametrize(
    ("num_nodes", "diagnosis", "expected"),
    [
        pytest.param(
            3,
            Diagnosis(node_to_status={
                "n1": _status("Insufficient cpu"),
                "n2": _status("Insufficient cpu", "Insufficient memory"),
                "n3": _status("node(s) had untolerated taint {dedicated: gpu}"),
            }),
            "0/3 nodes are available: 1 Insufficient memory, 1 node(s) had untolerated taint "
            "{dedicated: gpu}, 2 Insufficient cpu.",
            id="histogram-sorted-as-strings",
        ),
        pytest.param(
            2,
            Diagnosis(
                node_to_status={"n1": _status("x"), "n2": _status("x")},
                pre_filter_msg="pod has unbound immediate PersistentVolumeClaims",
            ),
            "0/2 nodes are available: pod has unbound immediate PersistentVolumeClaims.",
            id="prefilter-message-not-repeated-per-node",
        ),
        pytest.param(
            1,
            Diagnosis(
                node_to_status={"n1": _status("Insufficient cpu")},
                post_filter_msg="preemption: 0/1 nodes are available: 1 No preemption victims "
                "found for incoming pod.",
            ),
            "0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: "
            "1 No preemption victims found for incoming pod.",
            id="postfilter-appended",
        ),
    ],
)
def test_fit_error_message(num_nodes: int, diagnosis: Diagnosis, expected: str) -> None:
    assert str(FitError(pod_key="ns/p", num_all_nodes=num_nodes, diagnosis=diagnosis)) == expected


@pytest.mark.parametrize(
    ("profile", "global_", "expected"),
    [(None, 0, 0), (None, 10, 10), (30, 10, 30), (0, 10, 0), (None, None, None)],
    ids=["both-adaptive", "global-only", "profile-wins", "profile-adaptive-wins", "unset"],
)
def test_effective_percentage(profile: int | None, global_: int | None, expected: int | None) -> None:
    assert effective_percentage(profile, global_) == expected


@pytest.mark.parametrize(
    ("status", "message", "unschedulable", "pending"),
    [
        pytest.param(Status(Code.UNSCHEDULABLE, "volume already bound", plugin="VolumeBinding"),
                     "0/1 nodes are available: 1 volume already bound.",
                     {"VolumeBinding"}, set(), id="reserve-rejects"),
        pytest.param(Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "PodGroup default/g not found",
                            plugin="Coscheduling"),
                     "0/1 nodes are available: 1 PodGroup default/g not found.",
                     {"Coscheduling"}, set(), id="permit-rejects"),
        pytest.param(Status(Code.PENDING, "waiting for the volume", plugin="P"),
                     "0/1 nodes are available: 1 waiting for the volume.",
                     {"P"}, {"P"}, id="pending"),
    ],
)
def test_reserve_and_permit_rejections_read_as_a_fit_error_over_one_node(
    status: Status, message: str, unschedulable: set[str], pending: set[str]
) -> None:
    """upstream schedulingCycle / bindingCycle wrap a Reserve, Permit or WaitOnPermit
    rejection in a FitError with NumAllNodes 1 and the assumed node's status."""
    wrapped = rejected_on_node(status, pod_key="default/p", node_name="n1")
    assert (wrapped.code, wrapped.plugin, failure_message(wrapped)) == (
        status.code, status.plugin, message)
    assert isinstance(wrapped.error, FitError)
    assert wrapped.error.diagnosis.node_to_status == {"n1": status}
    assert wrapped.error.diagnosis.unschedulable_plugins == unschedulable
    assert wrapped.error.diagnosis.pending_plugins == pending


def test_an_error_at_reserve_is_not_wrapped() -> None:
    error = Status(Code.ERROR, "etcd down", plugin="VolumeBinding")
    assert rejected_on_node(error, pod_key="default/p", node_name="n1") is error
