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

from scheduler.cache.comparer import NODE_REQUESTED, POD_MISSING, POD_NOT_QUEUED
from scheduler.explain.debug import COMPARE_ROUTE, SchedulerIntrospection, cache_debugger
from scheduler.logging import configure_logging
from scheduler.server import HealthServer, HealthState, ServingOptions, prepare_serving
from tests.builders import make_node
from scheduler.sandbox import Sandbox
from tests.integration.harness import for_api, running_scheduler, user_client, wait_until
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
    sandbox_factory: Any, tmp_path: Path, debug_server: HealthServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sb: Sandbox = await sandbox_factory(nodes=0, simulate_kubelet=False)
    kc = sb.write_kubeconfig(tmp_path / "kc")
    async with user_client(kc) as cluster:
        for n in (make_node("a", cpu="2"), make_node("b", cpu="2")):
            await cluster.create_node(for_api(n))
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
        # The fresh LISTs page (limit/continue) as the informers do: pages of 2 give the same.
        monkeypatch.setattr("scheduler.explain.debug.FRESH_LIST_PAGE", 2)
        requests_before = sb.faults.requests.get("list pods", 0)
        assert await fetch(debug_server, "?fresh=true") == (200, {
            "differences": [], "nodes": 2, "pods": PODS, "assumed": 0})
        assert sb.faults.requests.get("list pods", 0) - requests_before >= PODS // 2
        monkeypatch.undo()
        status, body = await fetch(debug_server, "?fresh=maybe")
        assert status == 400 and "fresh" in body["message"]
        # The API server refuses the fresh LIST: 502 with its answer; the informers' answer
        # is still served.
        sb.faults.fail("list", "pods", code=403, times=1, message="not today")
        status, body = await fetch(debug_server, "?fresh=true")
        assert status == 502 and body["message"].startswith("LIST /api/v1/pods: HTTP 403")
        assert "not today" in body["message"]
        assert (await fetch(debug_server))[0] == 200

        # A pod that fits nowhere waits in the queue: expected there, clean; dropped from the
        # queue behind its back, it is a pod the scheduler would never try again.
        await cluster.create_pod(pod("too-big", cpu="8"))
        await wait_until(lambda: sched.diagnoses.get("default", "too-big") is not None,
                         timeout=15, message="too-big tried")
        assert await fetch(debug_server, "?fresh=true") == (200, {
            "differences": [], "nodes": 2, "pods": PODS, "assumed": 0})
        too_big = await cluster.get_pod("too-big")
        assert too_big is not None
        sched.queue.delete(too_big)
        status, body = await fetch(debug_server)
        assert [(d["kind"], d["object"]) for d in body["differences"]] == [
            (POD_NOT_QUEUED, "default/too-big")]
        await cluster.delete_pod("too-big")
        pods_store = sched.informers.informers["pods"].store
        await wait_until(lambda: pods_store.get("too-big", "default") is None, timeout=10,
                         message="the informer saw too-big deleted")

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
            assert debugger.last_comparison is not None and debugger.last_comparison.clean
            runs = await cluster.get_pod("runs")
            assert runs is not None
            sched.cache.remove_pod(runs)
            with capture_logs() as drift_logs:
                async with cache_debugger(sched) as debugger:
                    os.kill(os.getpid(), signal.SIGUSR2)
                    await wait_until(lambda: debugger.dumps == 1, timeout=10, message="a dump")
            assert debugger.last_comparison is not None
            assert len(debugger.last_comparison.differences) == 2
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


async def test_dra_devices_held_match_the_claims_and_a_leak_is_reported(
    sandbox_factory: Any, tmp_path: Path, debug_server: HealthServer
) -> None:
    """Pods with ResourceClaims bound: the DRA plugin's claims tracker holds exactly the
    allocated devices; a device held for a claim that does not exist, and one the tracker
    lost, are each reported by name."""
    from scheduler.cache.comparer import DEVICE_MISSING, DEVICE_REDUNDANT
    from scheduler.plugins.dynamicresources.plugin import DynamicResources
    from scheduler.plugins.names import DYNAMIC_RESOURCES
    from tests.builders import PodBuilder
    from tests.integration.dra import API, strip
    from tests.unit.dra.builders import DRIVER, claim, device, exactly, gpu_class, resource_slice

    sb = await sandbox_factory(nodes=2, node_cpu="4", node_memory="16Gi")
    kc = sb.write_kubeconfig(tmp_path / "kc")
    async with user_client(kc) as cluster, running_scheduler(kc) as parts:
        sched = parts.scheduler
        SchedulerIntrospection(sched).register(debug_server)
        await debug_server.start()
        api = cluster.client
        gpu_node = sorted(n["metadata"]["name"] for n in await cluster.list_nodes())[0]
        await api.create(f"{API}/deviceclasses", strip(gpu_class()))
        await api.create(f"{API}/resourceslices", strip(resource_slice(
            "gpus", node=gpu_node, devices=[device("gpu-0"), device("gpu-1"),
                                            device("gpu-2")])))
        for name in ("c0", "c1"):
            await api.create(f"{API}/namespaces/default/resourceclaims",
                             strip(claim(name, exactly("gpu", "gpu"))))
            p = for_api(PodBuilder(f"uses-{name}").scheduler_name("py-scheduler")
                        .req(cpu="100m", memory="64Mi").obj())
            p["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": name}]
            await cluster.create_pod(p)
        for name in ("c0", "c1"):
            await wait_until(lambda name=name: cluster.node_name(f"uses-{name}"), timeout=20,
                             message=f"uses-{name} bound")
        await wait_until(lambda: sched.cache.assumed_pod_count() == 0, timeout=10,
                         message="confirmed")

        async def allocated() -> bool:
            for name in ("c0", "c1"):
                got = await api.get(f"{API}/namespaces/default/resourceclaims/{name}")
                if not (got.get("status") or {}).get("allocation"):
                    return False
            return True

        await wait_until(allocated, timeout=10, message="both claims allocated")
        plugin = sched.profiles["py-scheduler"].get_plugin(DYNAMIC_RESOURCES)
        assert isinstance(plugin, DynamicResources) and plugin.follows_claim_events
        assert len(plugin.tracker.held()) == 2

        async def clean(query: str) -> bool:
            status, body = await fetch(debug_server, query)
            return status == 200 and body["differences"] == [] and body["pods"] == 2

        await wait_until(lambda: clean(""), timeout=10, message="clean against the informers")
        assert await clean("?fresh=true")

        # A leak: a device held for a claim no longer in the cluster; and a loss: the tracker
        # forgets c0's allocation while the cluster still shows it.
        claims = {n: await api.get(f"{API}/namespaces/default/resourceclaims/{n}")
                  for n in ("c0", "c1")}
        taken = {r["device"] for c in claims.values()
                 for r in c["status"]["allocation"]["devices"]["results"]}
        c0 = claims["c0"]
        lost = c0["status"]["allocation"]["devices"]["results"][0]["device"]
        (leaked,) = {"gpu-0", "gpu-1", "gpu-2"} - taken
        plugin.tracker.assume("default/gone", "uid-gone", {"devices": {"results": [
            {"request": "gpu", "driver": DRIVER, "pool": gpu_node, "device": leaked}]}})
        plugin.tracker.claim_deleted(c0)
        for query in ("", "?fresh=true"):
            status, body = await fetch(debug_server, query)
            assert status == 200
            assert {(d["kind"], d["object"]) for d in body["differences"]} == {
                (DEVICE_REDUNDANT, f"{DRIVER}/{gpu_node}/{leaked}"),
                (DEVICE_MISSING, f"{DRIVER}/{gpu_node}/{lost}"),
            }, query


async def test_churn_leaves_the_cache_equal_to_a_fresh_list(
    sandbox_factory: Any, tmp_path: Path, debug_server: HealthServer
) -> None:
    """Pods created and deleted while their bindings are in flight, pods relabelled, a node
    with pods removed and another added: once quiet, the cache equals a fresh LIST."""
    import asyncio

    sb = await sandbox_factory(nodes=3, node_cpu="2", node_memory="8Gi")
    kc = sb.write_kubeconfig(tmp_path / "kc")
    async with user_client(kc) as cluster, running_scheduler(kc, config=daemon_config()) as parts:
        sched = parts.scheduler
        SchedulerIntrospection(sched).register(debug_server)
        await debug_server.start()
        names = [f"c{i}" for i in range(24)]
        doomed = names[::4]  # deleted at once: some while their binding is in flight

        async def create_then_maybe_delete(name: str) -> None:
            await cluster.create_pod(pod(name, cpu="300m"))
            if name in doomed:
                await cluster.delete_pod(name)

        await asyncio.gather(*(create_then_maybe_delete(n) for n in names))
        survivors = [n for n in names if n not in doomed]

        async def settled() -> bool:
            bound = [await cluster.node_name(n) for n in survivors]
            waiting = [n for n, b in zip(survivors, bound) if not b]
            return all(sched.diagnoses.get("default", n) is not None for n in waiting) and \
                sched.cache.assumed_pod_count() == 0 and len(waiting) < len(survivors)

        await wait_until(settled, timeout=30, message="every survivor bound or diagnosed")
        for n in survivors[:4]:
            if await cluster.node_name(n):
                await cluster.client.patch(f"/api/v1/namespaces/default/pods/{n}",
                                           {"metadata": {"labels": {"relabelled": "yes"}}})
        nodes = sorted(n["metadata"]["name"] for n in await cluster.list_nodes())
        await cluster.client.delete(f"/api/v1/nodes/{nodes[0]}")
        await cluster.create_node(make_node("fresh-node", cpu="4"))

        async def clean() -> bool:
            status, body = await fetch(debug_server, "?fresh=true")
            return status == 200 and body["differences"] == [] \
                and sched.cache.assumed_pod_count() == 0
        await wait_until(clean, timeout=30, message="the cache equal to a fresh LIST")
        status, body = await fetch(debug_server)
        assert status == 200 and body["differences"] == []
        assert body["nodes"] == 3
