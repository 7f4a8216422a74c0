"""The PodGroup status controller: the phase/count computation, the reconciler's patches,
and the kopf operator against the sandbox API server following pod status changes."""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import structlog
import structlog.testing
import yaml

from scheduler.controllers.podgroup import (
    ASYNCGEN_CLOSE_ERROR,
    on_loop_error,
    MemberFacts,
    StatusReconciler,
    compute_status,
    connection_info,
    member_facts,
    run_controller,
    status_patch,
)
from scheduler.client.connection import ConnectionConfig, StaticCredentials
from tests.fakes import FakeApiClient, FakeResponse

from tests.unit.plugins.coscheduling.helpers import member, pod_group

NOW = "2024-05-01T10:00:00Z"
CRD = Path(__file__).resolve().parents[3] / "manifests" / "crds" / "scheduling.x-k8s.io_podgroups.yaml"


def _m(phase: str = "Pending", node: str = "", owners: tuple[str, ...] = ()) -> MemberFacts:
    return MemberFacts(uid=f"u-{id(object())}", phase=phase, node_name=node, owners=owners)


def _pg(min_member: int = 3, status: Mapping[str, Any] | None = None) -> dict[str, Any]:
    pg = pod_group("g", min_member)
    if status is not None:
        pg["status"] = dict(status)
    return pg


@pytest.mark.parametrize(
    ("name", "members", "previous", "phase", "counts"),
    [
        ("no pods", [], None, "Pending", (0, 0, 0)),
        ("too few pods", [_m(node="n1"), _m(node="n1")], None, "Pending", (0, 0, 0)),
        ("enough pods, none scheduled", [_m(), _m(), _m()], None, "Pending", (0, 0, 0)),
        ("being scheduled", [_m(node="n1"), _m(), _m()], None, "Scheduling", (0, 0, 0)),
        ("partly running", [_m("Running", "n1"), _m("Running", "n1"), _m(node="n2")], None,
         "Scheduling", (2, 0, 0)),
        ("running", [_m("Running", "n1")] * 3, None, "Running", (3, 0, 0)),
        ("running and succeeded", [_m("Running", "n1"), _m("Succeeded", "n1"),
                                   _m("Succeeded", "n1")], None, "Running", (1, 2, 0)),
        ("finished", [_m("Succeeded", "n1")] * 3, None, "Finished", (0, 3, 0)),
        ("failed", [_m("Running", "n1"), _m("Running", "n1"), _m("Failed", "n1")], None,
         "Failed", (2, 0, 1)),
        ("one failed, enough still running", [_m("Running", "n1")] * 3 + [_m("Failed", "n1")],
         None, "Running", (3, 0, 1)),
        ("finished is final", [_m("Running", "n1")], {"phase": "Finished", "succeeded": 3},
         "Finished", None),
        ("failed is final", [], {"phase": "Failed", "failed": 1}, "Failed", None),
        ("back to pending when pods vanish", [_m("Running", "n1")],
         {"phase": "Running", "running": 3}, "Pending", (1, 0, 0)),
    ],
)
def test_compute_status(name: str, members: list[MemberFacts],
                        previous: dict[str, Any] | None, phase: str,
                        counts: tuple[int, int, int] | None) -> None:
    status = compute_status(_pg(3, previous), members, now=lambda: NOW)
    assert status["phase"] == phase
    if counts is not None:
        assert (status["running"], status["succeeded"], status["failed"]) == counts
    else:
        assert status == previous


def test_compute_status_schedule_start_time_and_occupied_by() -> None:
    members = [_m(node="n1", owners=("default/job-b",)), _m(owners=("default/job-a",)), _m()]
    status = compute_status(_pg(3), members, now=lambda: NOW)
    assert status["scheduleStartTime"] == NOW
    assert status["occupiedBy"] == "default/job-a,default/job-b"
    # Once set, both stay as they are.
    again = compute_status(_pg(3, status), members, now=lambda: "2030-01-01T00:00:00Z")
    assert again["scheduleStartTime"] == NOW
    assert status_patch(status, again) == {}
    # Nothing scheduled yet: no start time.
    assert "scheduleStartTime" not in compute_status(_pg(3), [_m()], now=lambda: NOW)


def test_member_facts_from_a_pod() -> None:
    pod = member("p", node="n1", phase="Running")
    pod["metadata"]["ownerReferences"] = [{"kind": "Job", "name": "train", "uid": "x"}]
    facts = member_facts(pod)
    assert (facts.phase, facts.node_name, facts.owners) == ("Running", "n1", ("default/train",))


async def test_reconciler_patches_only_the_status_subresource_and_only_changes() -> None:
    client = FakeApiClient()
    reconciler = StatusReconciler(client, now=lambda: NOW, retry_delay=0)
    pg = _pg(2)
    members = [_m("Running", "n1"), _m("Running", "n1")]
    assert await reconciler.reconcile("default", "g", lambda: pg, lambda: members)
    method, path, body = client.requests[-1]
    assert method == "PATCH"
    assert path == "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/default/podgroups/g/status"
    assert body == {"status": {"phase": "Running", "running": 2, "succeeded": 0, "failed": 0,
                               "scheduleStartTime": NOW}}
    # Same answer before our update came back through the watch: not sent again.
    assert not await reconciler.reconcile("default", "g", lambda: pg, lambda: members)
    # The watch delivered our update: nothing to do.
    updated = _pg(2, body["status"])
    updated["metadata"]["resourceVersion"] = "2"
    assert not await reconciler.reconcile("default", "g", lambda: updated, lambda: members)
    # A pod finishes: only the changed fields are sent.
    members = [_m("Running", "n1"), _m("Succeeded", "n1")]
    assert await reconciler.reconcile("default", "g", lambda: updated, lambda: members)
    assert client.requests[-1][2] == {"status": {"running": 1, "succeeded": 1}}
    assert len(client.requests) == 2
    # A deleted group is not patched.
    assert not await reconciler.reconcile("default", "gone", lambda: None, lambda: members)


async def test_a_malformed_group_warns_once_and_is_forgotten_with_the_group() -> None:
    reconciler = StatusReconciler(FakeApiClient(), now=lambda: NOW, retry_delay=0)
    bad = _pg(2)
    bad["spec"]["minMember"] = "two"
    with structlog.testing.capture_logs() as logs:
        for _ in range(3):
            assert not await reconciler.reconcile("default", "g", lambda: bad, lambda: [])
        reconciler.forget("default", "g")  # deleted: nothing of it is kept
        # a new group of the same name, malformed too, is reported again
        assert not await reconciler.reconcile("default", "g", lambda: bad, lambda: [])
    warned = [e for e in logs if e["event"].startswith("PodGroup is malformed")]
    assert len(warned) == 2


async def test_reconciler_retries_server_errors_and_gives_up_on_404() -> None:
    path = "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/default/podgroups/g/status"
    client = FakeApiClient(responses={("PATCH", path): [FakeResponse(500, {}),
                                                        FakeResponse(200, {})]})
    reconciler = StatusReconciler(client, now=lambda: NOW, retry_delay=0)
    assert await reconciler.reconcile("default", "g", lambda: _pg(1), lambda: [_m()])
    assert len(client.requests) == 2

    client = FakeApiClient(responses={("PATCH", path): [FakeResponse(404, {})]})
    reconciler = StatusReconciler(client, now=lambda: NOW, retry_delay=0)
    assert not await reconciler.reconcile("default", "g", lambda: _pg(1), lambda: [_m()])
    assert len(client.requests) == 1


def test_connection_info_from_a_resolved_connection() -> None:
    conn = ConnectionConfig(host="https://api:6443",
                            credentials=StaticCredentials("Bearer s3cret"),
                            ca_file="/ca.crt", verify_ssl=True, namespace="jobs")
    info = connection_info(conn)
    assert (info.server, info.scheme, info.token) == ("https://api:6443", "Bearer", "s3cret")
    assert (info.ca_path, info.insecure, info.default_namespace) == ("/ca.crt", False, "jobs")


def test_main_reports_a_missing_kubeconfig(tmp_path: Path) -> None:
    # A process of its own: the command configures logging for the whole process.
    done = subprocess.run([sys.executable, "-m", "scheduler", "podgroup-controller",
                           "--kubeconfig", str(tmp_path / "nope")],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "podgroup-controller" in done.stderr


# --- against the sandbox -------------------------------------------------------------------


async def _eventually(check: Callable[[], Awaitable[bool]], *, timeout: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not await check():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.05)


async def test_controller_follows_pods_in_the_sandbox(tmp_path: Path) -> None:
    from scheduler.client.api import ApiClient
    from scheduler.client.connection import load_kubeconfig
    from scheduler.sandbox import Sandbox

    async with Sandbox(nodes=2, token=None, simulate_kubelet=True) as sb:
        kubeconfig = str(sb.write_kubeconfig(tmp_path / "kubeconfig"))
        async with ApiClient(load_kubeconfig(kubeconfig)) as api:
            crd = yaml.safe_load(CRD.read_text())
            resp = await api.request(
                "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", body=crd)
            assert resp.status == 201, resp.body
            pg_path = "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/default/podgroups"
            for name in ("train", "other"):
                body = pod_group(name, 2)
                for key in ("resourceVersion", "uid", "creationTimestamp"):
                    body["metadata"].pop(key)
                assert (await api.request("POST", pg_path, body=body)).status == 201

            async def status(name: str) -> dict[str, Any]:
                resp = await api.request("GET", f"{pg_path}/{name}")
                return dict(resp.body.get("status") or {})

            stop, ready = asyncio.Event(), asyncio.Event()
            controller = asyncio.create_task(
                run_controller(kubeconfig=kubeconfig, namespace="default", stop=stop,
                               ready=ready),
                name="test:podgroup-controller")
            try:
                await asyncio.wait_for(ready.wait(), 10)

                async def phase_is(name: str, phase: str, **counts: int) -> bool:
                    st = await status(name)
                    return st.get("phase") == phase and all(
                        st.get(k) == v for k, v in counts.items())

                await _eventually(lambda: phase_is("train", "Pending"))
                pods_path = "/api/v1/namespaces/default/pods"
                for i in range(2):
                    pod = member(f"train-{i}", "train", node="node-0000")
                    pod["metadata"].pop("uid")
                    pod["metadata"]["ownerReferences"] = [
                        {"apiVersion": "batch/v1", "kind": "Job", "name": "train",
                         "uid": "job-uid"}]
                    pod.pop("status")
                    assert (await api.request("POST", pods_path, body=pod)).status == 201
                # The simulated kubelet starts both pods.
                await _eventually(lambda: phase_is("train", "Running", running=2, succeeded=0))
                st = await status("train")
                assert st["occupiedBy"] == "default/train"
                assert st["scheduleStartTime"]

                async def set_phase(pod: str, phase: str) -> None:
                    resp = await api.request(
                        "PATCH", f"{pods_path}/{pod}/status", body={"status": {"phase": phase}},
                        content_type="application/merge-patch+json")
                    assert resp.status == 200, resp.body

                await set_phase("train-0", "Succeeded")
                await _eventually(lambda: phase_is("train", "Running", running=1, succeeded=1))
                await set_phase("train-1", "Succeeded")
                await _eventually(lambda: phase_is("train", "Finished", running=0, succeeded=2))
                # The other group never had pods and only its status was written.
                assert await phase_is("other", "Pending", running=0)
                resp = await api.request("GET", f"{pg_path}/other")
                assert resp.body["spec"] == {"minMember": 2}
                assert "annotations" not in resp.body["metadata"]
                assert "finalizers" not in resp.body["metadata"]
            finally:
                stop.set()
                await asyncio.wait_for(controller, 15)
            assert controller.exception() is None


async def test_controller_picks_up_a_crd_installed_after_it_started(tmp_path: Path) -> None:
    """kopf resolves resources once at start: the controller waits for the PodGroup resource
    to be served instead of running without it forever ("Unresolved resources")."""
    from scheduler.client.api import ApiClient
    from scheduler.client.connection import load_kubeconfig
    from scheduler.sandbox import Sandbox

    async with Sandbox(nodes=1, token=None, simulate_kubelet=False) as sb:
        kubeconfig = str(sb.write_kubeconfig(tmp_path / "kubeconfig"))
        stop, ready = asyncio.Event(), asyncio.Event()
        controller = asyncio.create_task(
            run_controller(kubeconfig=kubeconfig, namespace=None, stop=stop, ready=ready),
            name="test:podgroup-controller-late-crd")
        try:
            async with ApiClient(load_kubeconfig(kubeconfig)) as api:
                # Let the controller find the resource missing at least once.
                pg_list = "/apis/scheduling.x-k8s.io/v1alpha1/podgroups"
                assert (await api.request("GET", pg_list)).status == 404
                await asyncio.sleep(0.3)
                assert not ready.is_set() and not controller.done()
                crd = yaml.safe_load(CRD.read_text())
                resp = await api.request(
                    "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", body=crd)
                assert resp.status == 201, resp.body
                body = pod_group("late", 2)
                for key in ("resourceVersion", "uid", "creationTimestamp"):
                    body["metadata"].pop(key)
                pg_path = "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/default/podgroups"
                assert (await api.request("POST", pg_path, body=body)).status == 201
                await asyncio.wait_for(ready.wait(), 15)

                async def pending() -> bool:
                    resp = await api.request("GET", f"{pg_path}/late")
                    return (resp.body.get("status") or {}).get("phase") == "Pending"

                await _eventually(pending, timeout=15)
        finally:
            stop.set()
            await asyncio.wait_for(controller, 15)


# --- the controller loop's handler for a watch stream left open at shutdown ---------------


async def infinite_watch() -> AsyncIterator[int]:  # named as kopf's watch stream is
    yield 0


async def other_stream() -> AsyncIterator[int]:
    yield 0


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def asyncio_log() -> Iterator[list[logging.LogRecord]]:
    """What asyncio's logger says (its default exception handler logs there)."""
    handler = _Records()
    logger = logging.getLogger("asyncio")
    logger.addHandler(handler)
    try:
        yield handler.records
    finally:
        logger.removeHandler(handler)


def _report_close_failure(stream: Callable[[], AsyncIterator[int]]) -> list[dict[str, Any]]:
    """What asyncio's ``shutdown_asyncgens`` hands the handler when closing a stream left
    suspended fails inside kopf's pause block (as a soak saw it after a lost lease)."""
    loop = asyncio.new_event_loop()
    generator = stream()
    try:
        with structlog.testing.capture_logs() as logs:
            on_loop_error(loop, {
                "message": f"{ASYNCGEN_CLOSE_ERROR} {generator!r}",
                "exception": RuntimeError("generator didn't stop after athrow()"),
                "asyncgen": generator,
            })
        return logs
    finally:
        loop.close()


def test_a_watch_stream_left_open_at_shutdown_is_one_warning_not_an_error(
        asyncio_log: list[logging.LogRecord]) -> None:
    logs = _report_close_failure(infinite_watch)
    assert [entry["log_level"] for entry in logs] == ["warning"]
    assert "did not close cleanly" in logs[0]["event"]
    assert "didn't stop after athrow" in logs[0]["error"]
    assert asyncio_log == []


def test_any_other_loop_error_still_reaches_asyncio(
        asyncio_log: list[logging.LogRecord]) -> None:
    assert _report_close_failure(other_stream) == []
    assert [r.levelname for r in asyncio_log] == ["ERROR"]
    assert ASYNCGEN_CLOSE_ERROR in asyncio_log[0].getMessage()
