"""The daemon's per-pod diagnosis store: what it keeps, its bounds, when it forgets."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from scheduler.client.informer import DeletedFinalStateUnknown
from scheduler.explain.diagnoses import DiagnosisStore
from scheduler.framework.status import Code, Status
from scheduler.framework.types import Diagnosis, FitError, QueuedPodInfo
from scheduler.objects.pod import PodInfo
from tests.builders import make_pod

NOW = datetime(2026, 11, 24, 3, 0, 0, tzinfo=UTC)


def qpi(name: str, attempts: int = 1) -> QueuedPodInfo:
    return QueuedPodInfo(PodInfo.from_pod(make_pod(name, cpu="1")), timestamp=0.0,
                         attempts=attempts)


def fit_status(nodes: int, *, reason: str = "Insufficient cpu") -> Status:
    diagnosis = Diagnosis(
        node_to_status={f"n-{i}": Status(Code.UNSCHEDULABLE, reason, plugin="NodeResourcesFit")
                        for i in range(nodes)},
        unschedulable_plugins={"NodeResourcesFit"},
    )
    fit = FitError(pod_key="default/p", num_all_nodes=nodes, diagnosis=diagnosis)
    return Status(Code.UNSCHEDULABLE, str(fit), error=fit)


def store(**kwargs: int) -> DiagnosisStore:
    return DiagnosisStore(wall_clock=lambda: NOW, **kwargs)


def test_keeps_the_last_attempt_with_nodes_reasons_plugins_time_and_attempts() -> None:
    s = store()
    s.record(qpi("p", attempts=1), fit_status(3), profile="py", message="first")
    s.record(qpi("p", attempts=2), fit_status(2, reason="Insufficient memory"), profile="py",
             message="0/2 nodes are available: 2 Insufficient memory.")
    entry = s.get("default", "p")
    assert entry is not None
    assert entry.to_dict() == {
        "pod": "default/p", "uid": entry.uid, "profile": "py", "time": "2026-11-24T03:00:00Z",
        "attempts": 2, "result": "unschedulable",
        "message": "0/2 nodes are available: 2 Insufficient memory.", "numNodes": 2,
        "unschedulablePlugins": ["NodeResourcesFit"], "pendingPlugins": [],
        "reasons": {"Insufficient memory": 2},
        "nodes": {"n-0": "NodeResourcesFit: Insufficient memory",
                  "n-1": "NodeResourcesFit: Insufficient memory"},
        "nodesOmitted": 0, "nominatedNode": "",
    }
    assert len(s) == 1


def test_the_node_map_is_capped_but_the_reason_counts_cover_every_node() -> None:
    s = store(max_nodes=10)
    s.record(qpi("p"), fit_status(5000), profile="py", message="m")
    entry = s.get("default", "p")
    assert entry is not None
    assert len(entry.nodes) == 10
    assert entry.nodes_omitted == 4990
    assert entry.reasons == {"Insufficient cpu": 5000}
    assert entry.num_nodes == 5000


def test_a_fit_errors_reasons_are_the_messages_histogram_counted_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import scheduler.explain.diagnoses as diagnoses_module
    import scheduler.framework.types as types_module

    counted: list[str] = []

    def counting(where: str, real: object) -> object:
        def count(statuses: object) -> dict[str, int]:
            counted.append(where)
            return real(statuses)  # type: ignore[operator,no-any-return]
        return count

    for module in (types_module, diagnoses_module):
        monkeypatch.setattr(module, "reason_counts",
                            counting(module.__name__, module.reason_counts))
    status = fit_status(50)  # its message (str of the FitError) counted the reasons
    s = store()
    s.record(qpi("p"), status, profile="py", message=status.message())
    entry = s.get("default", "p")
    assert entry is not None and entry.reasons == {"Insufficient cpu": 50}
    assert counted == ["scheduler.framework.types"]
    # A diagnosis other than the FitError's is counted for itself.
    other = Diagnosis(node_to_status={"n-0": Status(Code.UNSCHEDULABLE, "Insufficient memory")})
    s.record(qpi("q"), status, profile="py", message="m", diagnosis=other)
    entry = s.get("default", "q")
    assert entry is not None and entry.reasons == {"Insufficient memory": 1}
    assert counted == ["scheduler.framework.types", "scheduler.explain.diagnoses"]


def test_the_pod_count_is_capped_least_recently_failed_first() -> None:
    s = store(max_pods=3)
    for name in ("a", "b", "c"):
        s.record(qpi(name), fit_status(1), profile="py", message=name)
    s.record(qpi("a"), fit_status(1), profile="py", message="a again")  # a is now newest
    s.record(qpi("d"), fit_status(1), profile="py", message="d")
    assert [n for n in "abcd" if s.get("default", n) is not None] == ["a", "c", "d"]


def test_an_error_without_a_diagnosis_is_kept_as_an_error() -> None:
    s = store()
    s.record(qpi("p"), Status(Code.ERROR, "boom"), profile="py", message="boom")
    entry = s.get("default", "p")
    assert entry is not None and entry.result == "error" and entry.nodes == {}


@pytest.mark.parametrize(
    ("event", "dropped"),
    [
        ("bound", True),
        ("updated-still-pending", False),
        ("deleted", True),
        ("deleted-final-state-unknown", True),
    ],
)
def test_dropped_when_the_pod_is_bound_or_deleted(event: str, dropped: bool) -> None:
    s = store()
    s.record(qpi("p"), fit_status(1), profile="py", message="m")
    pod = make_pod("p", cpu="1")
    if event == "bound":
        s.on_pod_update(pod, make_pod("p", cpu="1", node="n-0"))
    elif event == "updated-still-pending":
        s.on_pod_update(pod, make_pod("p", cpu="2"))
    elif event == "deleted":
        s.on_pod_delete(pod)
    else:
        s.on_pod_delete(DeletedFinalStateUnknown("default/p", pod))
    assert (s.get("default", "p") is None) is dropped


def test_bounds_are_validated() -> None:
    with pytest.raises(ValueError):
        DiagnosisStore(max_pods=0)
