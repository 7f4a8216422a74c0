from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

import pytest

from scheduler.client.api import ApiClient, NotFound
from scheduler.client.pod_status import compute_condition, update_pod_condition
from tests.unit.client.conftest import FakeSleep
from tests.unit.client.fake_apiserver import FakeApiServer

MakeClient = Callable[..., ApiClient]
NOW = datetime(2024, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
STATUS_PATH = "/api/v1/namespaces/ns/pods/p/status"
UNSCHED = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/3 nodes are available"}


def pod(conditions: list[dict[str, Any]] | None = None, nnn: str | None = None) -> dict[str, Any]:
    status: dict[str, Any] = {"phase": "Pending", "conditions": conditions or []}
    if nnn:
        status["nominatedNodeName"] = nnn
    return {"metadata": {"name": "p", "namespace": "ns", "uid": "u"}, "status": status}


def existing(**over: Any) -> dict[str, Any]:
    return UNSCHED | {"lastTransitionTime": "2020-01-01T00:00:00Z", "lastProbeTime": None} | over


@pytest.mark.parametrize(
    ("current", "changed", "ltt"),
    [
        ([], True, "2024-01-02T03:04:05Z"),
        ([existing()], False, "2020-01-01T00:00:00Z"),
        ([existing(message="old")], True, "2020-01-01T00:00:00Z"),  # same status keeps transition time
        ([existing(reason="SchedulerError")], True, "2020-01-01T00:00:00Z"),
        ([existing(status="True")], True, "2024-01-02T03:04:05Z"),  # flip: new transition time
        ([{"type": "Ready", "status": "False"}], True, "2024-01-02T03:04:05Z"),
    ],
)
def test_compute_condition(current: list[dict[str, Any]], changed: bool, ltt: str) -> None:
    cond, did = compute_condition({"conditions": current}, UNSCHED, now=NOW)
    assert did is changed
    assert cond["lastTransitionTime"] == ltt
    assert cond["lastProbeTime"] is None


async def test_patches_only_when_changed(server: FakeApiServer, make_client: MakeClient) -> None:
    server.objects[STATUS_PATH] = {"metadata": {"name": "p"}}
    c = make_client()
    assert await update_pod_condition(c, pod([existing()]), condition=dict(UNSCHED), now=lambda: NOW) is None
    assert server.requests_for("PATCH") == []
    assert await update_pod_condition(c, pod(), condition=dict(UNSCHED), now=lambda: NOW) is not None
    (req,) = server.requests_for("PATCH")
    assert req.path == STATUS_PATH
    assert req.headers["Content-Type"] == "application/strategic-merge-patch+json"
    assert req.body == {"status": {"conditions": [UNSCHED | {"lastTransitionTime": "2024-01-02T03:04:05Z", "lastProbeTime": None}]}}


async def test_nominated_node_name_set_and_clear(server: FakeApiServer, make_client: MakeClient) -> None:
    server.objects[STATUS_PATH] = {"metadata": {"name": "p"}}
    c = make_client()
    await update_pod_condition(c, pod([existing()]), condition=dict(UNSCHED), nominated_node_name="n1", now=lambda: NOW)
    assert server.requests[-1].body == {"status": {"nominatedNodeName": "n1"}}
    await update_pod_condition(c, pod([existing()], nnn="n1"), condition=dict(UNSCHED), nominated_node_name="", now=lambda: NOW)
    assert server.requests[-1].body == {"status": {"nominatedNodeName": None}}
    n = len(server.requests)
    # Unchanged nomination and condition: no write.
    await update_pod_condition(c, pod([existing()], nnn="n1"), condition=dict(UNSCHED), nominated_node_name="n1", now=lambda: NOW)
    await update_pod_condition(c, pod([existing()]), condition=dict(UNSCHED), nominated_node_name="", now=lambda: NOW)
    assert len(server.requests) == n


async def test_retries_server_errors_and_raises_not_found(server: FakeApiServer, make_client: MakeClient, fake_sleep: FakeSleep) -> None:
    server.objects[STATUS_PATH] = {"metadata": {"name": "p"}}
    server.fail("PATCH", STATUS_PATH, status=503, times=2)
    c = make_client()
    assert await update_pod_condition(c, pod(), condition=dict(UNSCHED), now=lambda: NOW, sleep=fake_sleep) is not None
    assert len(server.requests_for("PATCH")) == 3
    del server.objects[STATUS_PATH]
    with pytest.raises(NotFound):
        await update_pod_condition(c, pod(), condition=dict(UNSCHED), now=lambda: NOW, sleep=fake_sleep)


@pytest.mark.parametrize(
    ("current", "node", "always", "body"),
    [
        pytest.param(None, "n1", False, {"status": {"nominatedNodeName": "n1"}}, id="set"),
        pytest.param("n1", "n1", False, None, id="already-set-no-write"),
        pytest.param("n1", "", False, {"status": {"nominatedNodeName": None}}, id="clear"),
        pytest.param(None, "", False, None, id="already-clear-no-write"),
        pytest.param(None, "", True, {"status": {"nominatedNodeName": None}},
                     id="clear-always-for-a-stale-copy"),
    ],
)
async def test_update_nominated_node_name(server: FakeApiServer, make_client: MakeClient,
                                          current: str | None, node: str, always: bool,
                                          body: dict[str, Any] | None) -> None:
    from scheduler.client.pod_status import update_nominated_node_name

    server.objects[STATUS_PATH] = {"metadata": {"name": "p"}}
    result = await update_nominated_node_name(make_client(), pod(nnn=current), node,
                                              always=always)
    patches = server.requests_for("PATCH")
    if body is None:
        assert result is None and patches == []
    else:
        (req,) = patches
        assert req.path == STATUS_PATH and req.body == body
        assert req.headers["Content-Type"] == "application/strategic-merge-patch+json"
