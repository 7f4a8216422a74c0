"""The bench's creator process against a sandbox process: nothing is created before it is
released, every pod is after, its clock is the bench's, and failures are reported."""

from __future__ import annotations

import time

import pytest

from scheduler.bench.ceiling import create_namespace
from scheduler.bench.creator import CreatorProcess
from scheduler.client.api import ApiClient
from scheduler.client.connection import load_connection
from scheduler.sandbox.testing import SandboxProcess
from tests.builders import make_pod

PODS = 40


async def test_creator_creates_the_pods_only_once_released() -> None:
    async with SandboxProcess(nodes=1, simulate_kubelet=False) as sandbox:
        user = ApiClient(load_connection(kubeconfig=str(sandbox.kubeconfig_path)), qps=0)
        try:
            await create_namespace(user, "measured")
            pods = [make_pod(f"p{i}", "measured") for i in range(PODS)]
            creator = await CreatorProcess.start(str(sandbox.kubeconfig_path), pods,
                                                 concurrency=4)
            try:
                listed = await user.get("/api/v1/namespaces/measured/pods")
                assert listed["items"] == [], "ready, but nothing created before the release"
                released = time.monotonic()
                await creator.go()
                report = await creator.result(timeout=60)
                done = time.monotonic()
            finally:
                await creator.aclose()
            listed = await user.get("/api/v1/namespaces/measured/pods")
        finally:
            await user.close()
    assert (report.created, report.failed, report.error) == (PODS, 0, "")
    assert sorted(p["metadata"]["name"] for p in listed["items"]) == sorted(
        p["metadata"]["name"] for p in pods)
    # The child's monotonic clock is the bench's: its window lies inside ours.
    assert released <= report.started <= report.finished <= done


async def test_creator_reports_pods_it_could_not_create() -> None:
    async with SandboxProcess(nodes=1, simulate_kubelet=False) as sandbox:
        pods = [make_pod(f"p{i}", "no-such-namespace") for i in range(3)]
        creator = await CreatorProcess.start(str(sandbox.kubeconfig_path), pods, concurrency=2)
        try:
            await creator.go()
            report = await creator.result(timeout=60)
        finally:
            await creator.aclose()
    assert (report.created, report.failed) == (0, 3)
    assert "POST /api/v1/namespaces/no-such-namespace/pods: HTTP 404" in report.error


async def test_creator_refuses_a_pod_without_namespace_before_ready() -> None:
    async with SandboxProcess(nodes=1, simulate_kubelet=False) as sandbox:
        pod = make_pod("p")
        del pod["metadata"]["namespace"]
        with pytest.raises(RuntimeError, match=r"exited \(2\) without a report"):
            await CreatorProcess.start(str(sandbox.kubeconfig_path), [pod], concurrency=1)
