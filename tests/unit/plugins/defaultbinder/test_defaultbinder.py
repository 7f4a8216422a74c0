"""DefaultBinder: POST v1.Binding; 409 / 404 carried as typed errors."""

from __future__ import annotations

import pytest

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.errors import AlreadyBoundError, PodGoneError
from scheduler.framework.status import Code
from scheduler.objects.pod import PodInfo
from scheduler.plugins.defaultbinder import NAME, DefaultBinder
from tests.builders import PodBuilder
from tests.fakes import FakeHandle, FakeResponse

PATH = "/api/v1/namespaces/ns1/pods/p/binding"


def _setup(*responses: FakeResponse) -> tuple[DefaultBinder, FakeHandle, PodInfo]:
    handle = FakeHandle()
    if responses:
        handle.client.responses[("POST", PATH)] = list(responses)
    pod = PodInfo.from_pod(PodBuilder("p", "ns1").uid("uid-123").container().obj())
    return DefaultBinder({}, handle), handle, pod


@pytest.mark.parametrize("code", [200, 201])
async def test_success_posts_binding(code: int) -> None:
    binder, handle, pod = _setup(FakeResponse(code, {}))
    assert binder.name == NAME == "DefaultBinder"
    assert await binder.bind(CycleState(), pod, "node-a") is None
    assert handle.client.requests == [
        (
            "POST",
            PATH,
            {
                "apiVersion": "v1",
                "kind": "Binding",
                "metadata": {"name": "p", "namespace": "ns1", "uid": "uid-123"},
                "target": {"apiVersion": "v1", "kind": "Node", "name": "node-a"},
            },
        )
    ]


async def test_conflict_is_already_bound() -> None:
    binder, _, pod = _setup(
        FakeResponse(409, {"kind": "Status", "message": 'pod p is already assigned to node "x"'})
    )
    status = await binder.bind(CycleState(), pod, "node-a")
    assert status is not None and status.code == Code.ERROR
    assert isinstance(status.error, AlreadyBoundError)
    assert "already assigned" in status.message()


async def test_not_found_is_pod_gone() -> None:
    binder, _, pod = _setup(FakeResponse(404, {"message": 'pods "p" not found'}))
    status = await binder.bind(CycleState(), pod, "node-a")
    assert status is not None and isinstance(status.error, PodGoneError)


async def test_other_failure_carries_api_message() -> None:
    binder, _, pod = _setup(FakeResponse(500, {"message": "etcd timeout"}))
    status = await binder.bind(CycleState(), pod, "node-a")
    assert status is not None and status.code == Code.ERROR and status.error is None
    assert "etcd timeout" in status.message() and "500" in status.message()
