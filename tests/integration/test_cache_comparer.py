"""The cache comparer against the sandbox over HTTP: after scheduling, ``/debug/cache/compare``
(the informers, and a fresh LIST with ``?fresh=true``) finds the cache clean; a cache made to
drift behind the informers' back is reported, by the route and by SIGUSR2's log lines."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from prometheus_client import CollectorRegistry
from structlog.testing import capture_logs

from scheduler.cache.comparer import NODE_REQUESTED, POD_MISSING
from scheduler.explain.debug import COMPARE_ROUTE, SchedulerIntrospection, cache_debugger
from scheduler.logging import configure_logging
from scheduler.server import HealthServer, HealthState, ServingOptions, prepare_serving
from tests.builders import make_node
from tests.integration.harness import running_scheduler, user_client, wait_until
from tests.integration.test_explain import _cluster, daemon_config, pod

PODS = 6


@pytest.fixture
async def debug_server() -> AsyncIterator[HealthServer]:
    """The daemon's endpoint server on loopback (debug routes served, no auth)."""
    options = ServingOptions(host="127.0.0.1", port=0, secure=False)
    server = HealthServer.serving(prepare_serving(options), registry=CollectorRegistry(),
                                  health=HealthState(synced=True), guard=None)
    try:
        yield server
    finally:
        await server.stop()


async def fetch(server: HealthServer, query: str = "") -> tuple[int, dict[str, Any]]:
    url = f"http://127.0.0.1:{server.bound_port}{COMPARE_ROUTE}{query}"
    async with aiohttp.ClientSession() as session, session.get(url) as resp:
        return resp.status, json.loads(await resp.text())


async def test_compare_route_is_clean_after_scheduling_and_reports_drift(
    sandbox_factory: Any, tmp_path: Path, debug_server: HealthServer
) -> None:
    kc = await _cluster(sandbox_factory, tmp_path, [make_node("a", cpu="2"),
                                                    make_node("b", cpu="2")])
    async with user_client(kc) as cluster, running_scheduler(kc, config=daemon_config()) as parts:
        sched = parts.scheduler
        SchedulerIntrospection(sched).register(debug_server)
        await debug_server.start()
        for i in range(PODS):
            await cluster.create_pod(pod(f"p{i}", cpu="500m"))
        for i in range(PODS):
            await wait_until(lambda i=i: cluster.node_name(f"p{i}"), timeout=20,
                             message=f"p{i} bound")
        await wait_until(lambda: sched.cache.assumed_pod_count() == 0, timeout=10,
                         message="every assumed pod confirmed")

        for query in ("", "?fresh=true", "?fresh=false"):
            status, body = await fetch(debug_server, query)
            assert status == 200, body
            assert body == {"differences": [], "nodes": 2, "pods": PODS, "assumed": 0}, query
        status, body = await fetch(debug_server, "?fresh=maybe")
        assert status == 400 and "fresh" in body["message"]

        # Drift: the cache loses a bound pod the informers (and the API) still hold.
        victim = await cluster.get_pod("p0")
        assert victim is not None
        node = victim["spec"]["nodeName"]
        sched.cache.remove_pod(victim)
        for query in ("", "?fresh=true"):
            status, body = await fetch(debug_server, query)
            assert status == 200
            assert body["pods"] == PODS - 1
            kinds = {(d["kind"], d["object"]) for d in body["differences"]}
            assert kinds == {(POD_MISSING, "default/p0"), (NODE_REQUESTED, node)}, query
            (requested,) = [d for d in body["differences"] if d["kind"] == NODE_REQUESTED]
            assert "cpu: cache" in requested["detail"] and "pods: cache" in requested["detail"]


async def test_sigusr2_logs_each_difference_and_a_summary(
    sandbox_factory: Any, tmp_path: Path
) -> None:
    kc = await _cluster(sandbox_factory, tmp_path, [make_node("a", cpu="2")])
    async with user_client(kc) as cluster, running_scheduler(kc, config=daemon_config()) as parts:
        sched = parts.scheduler
        await cluster.create_pod(pod("runs", cpu="500m"))
        await wait_until(lambda: cluster.node_name("runs"), timeout=15, message="runs bound")
        await wait_until(lambda: sched.cache.assumed_pod_count() == 0, timeout=10,
                         message="confirmed")
        configure_logging(fmt="console", level="info")
        try:
            with capture_logs() as clean_logs:
                async with cache_debugger(sched) as debugger:
                    os.kill(os.getpid(), signal.SIGUSR2)
                    await wait_until(lambda: debugger.dumps == 1, timeout=10, message="a dump")
            runs = await cluster.get_pod("runs")
            assert runs is not None
            sched.cache.remove_pod(runs)
            with capture_logs() as drift_logs:
                async with cache_debugger(sched) as debugger:
                    os.kill(os.getpid(), signal.SIGUSR2)
                    await wait_until(lambda: debugger.dumps == 1, timeout=10, message="a dump")
        finally:
            configure_logging(fmt="console", level="warning")
        (summary,) = [e for e in clean_logs if e["event"] == "cache comparison done"]
        assert summary["differences"] == 0 and summary["pods"] == 1
        assert summary["log_level"] == "info"
        assert not [e for e in clean_logs if e["event"] == "cache mismatch"]

        mismatches = [e for e in drift_logs if e["event"] == "cache mismatch"]
        assert {(e["kind"], e["object"]) for e in mismatches} == {
            (POD_MISSING, "default/runs"), (NODE_REQUESTED, "a")}
        assert all(e["log_level"] == "warning" and e["detail"] for e in mismatches)
        (summary,) = [e for e in drift_logs if e["event"] == "cache comparison done"]
        assert summary["differences"] == 2 and summary["log_level"] == "warning"
