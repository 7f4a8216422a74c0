"""The scheduler daemon against the sandbox over HTTP: the core behaviours of issue 3."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from scheduler.config.defaults import default_profile
from scheduler.metrics import SchedulerMetrics
from scheduler.objects.node import node_allocatable
from scheduler.sandbox import Sandbox
from tests.builders import NodeBuilder, PodBuilder
from tests.integration.harness import (
    for_api,
    requests_on,
    running_scheduler,
    scheduler_config,
    user_client,
    wait_until,
)


def pod(name: str, *, cpu: str = "100m", memory: str = "128Mi",
        scheduler: str = "py-scheduler", ns: str = "default") -> dict[str, Any]:
    return for_api(PodBuilder(name, ns).scheduler_name(scheduler).req(cpu=cpu, memory=memory).obj())


async def bound_count(cluster: Any, ns: str = "default") -> int:
    return sum(1 for p in await cluster.list_pods(ns) if p["spec"].get("nodeName"))


@pytest.mark.slow
async def test_2000_pods_on_100_nodes_all_bound_within_allocatable(
    sandbox_factory: Any, tmp_path: Path
) -> None:
    sb = await sandbox_factory(nodes=100, node_cpu="4", node_memory="16Gi", node_pods=30,
                               simulate_kubelet=False)
    kc = sb.write_kubeconfig(tmp_path / "kc")
    # No client rate limit: at the default 50 QPS the 2000 bindings and 2000 Scheduled events
    # alone take 80 s, which is the limiter's arithmetic, not what this test is about (the
    # limiter has its own tests in tests/unit/client).
    config = scheduler_config()
    config.client_connection.qps = 0
    async with user_client(kc) as cluster, running_scheduler(kc, config=config) as parts:
        # 2000 pods × 150m = 300 cores of 400; 30 pods per node caps at 3000 pods.
        await cluster.create_pods([pod(f"p-{i}", cpu="150m", memory="512Mi")
                                   for i in range(2000)], concurrency=32)
        # The sandbox's count of bindings, read in-process: listing 2000 pods every half
        # second would cost the scheduler's event loop, which it shares, more than it tells.
        await wait_until(lambda: sb.counters()["bindings"] >= 2000, timeout=240, interval=0.5,
                         message="2000 pods bound")
        assert await bound_count(cluster) == 2000
        pods = await cluster.list_pods("default")
        for node in await cluster.list_nodes():
            name = node["metadata"]["name"]
            alloc = node_allocatable(node)
            cpu, memory = requests_on(pods, name)
            on_node = sum(1 for p in pods if p["spec"].get("nodeName") == name)
            assert cpu <= alloc.milli_cpu, name
            assert memory <= alloc.memory, name
            assert on_node <= alloc.allowed_pod_number, name
        await wait_until(lambda: parts.scheduler.cache.assumed_pod_count() == 0, timeout=10,
                         message="every assumed pod confirmed by the informer")
        assert parts.scheduler.cache.pod_count() == 2000


async def test_too_big_pod_reports_upstream_message_and_runs_after_node_add(
    sandbox_factory: Any, tmp_path: Path
) -> None:
    sb = await sandbox_factory(nodes=3, node_cpu="4", node_memory="16Gi")
    kc = sb.write_kubeconfig(tmp_path / "kc")
    metrics = SchedulerMetrics()
    async with user_client(kc) as cluster, running_scheduler(kc, metrics=metrics):
        await cluster.create_pod(pod("big", cpu="16", memory="1Gi"))

        async def failed_event() -> list[dict[str, Any]]:
            return [e for e in await cluster.events_for("big") if e["reason"] == "FailedScheduling"]

        await wait_until(failed_event, timeout=10, message="FailedScheduling event")
        [event] = await failed_event()
        assert event["type"] == "Warning"
        assert event["action"] == "Scheduling"
        assert event["reportingController"] == "py-scheduler"
        assert event["note"].startswith("0/3 nodes are available: 3 Insufficient cpu."), event
        async def condition_set() -> bool:
            current = await cluster.get_pod("big")
            conds = {c["type"]: c for c in (current or {}).get("status", {}).get("conditions", [])}
            return conds.get("PodScheduled", {}).get("reason") == "Unschedulable"
        await wait_until(condition_set, timeout=5, message="PodScheduled=False condition")
        current = await cluster.get_pod("big")
        assert current is not None
        [cond] = [c for c in current["status"]["conditions"] if c["type"] == "PodScheduled"]
        assert cond["status"] == "False"
        assert cond["message"].startswith("0/3 nodes are available: 3 Insufficient cpu.")

        # Let the pod reach the unschedulable pool, then add a node big enough.
        await asyncio.sleep(2.5)
        await cluster.create_node(for_api(NodeBuilder("big-node").capacity(
            cpu="64", memory="64Gi", pods=110).labels(
            {"topology.kubernetes.io/zone": "zone-a"}).obj()))

        async def running() -> bool:
            current = await cluster.get_pod("big")
            return bool(current and current["spec"].get("nodeName") == "big-node"
                        and current["status"].get("phase") == "Running")
        await wait_until(running, timeout=10, message="pod Running on the new node")
        moved = metrics.queue_incoming_pods.labels("active", "NodeAdd").value + \
            metrics.queue_incoming_pods.labels("backoff", "NodeAdd").value
        assert moved >= 1, "requeued by the NodeAdd event"


async def test_pod_deleted_while_queued_leaves_no_trace(sandbox: Sandbox, tmp_path: Path) -> None:
    kc = sandbox.write_kubeconfig(tmp_path / "kc")
    async with user_client(kc) as cluster, running_scheduler(kc) as parts:
        await cluster.create_pod(pod("huge", cpu="1000"))
        sched = parts.scheduler
        await wait_until(lambda: sched.queue.queue_of(_stored(sched, "huge"))
                         in ("unschedulable", "backoff"), timeout=10, message="pod queued")
        await cluster.delete_pod("huge")
        await wait_until(lambda: not any(sched.queue.pending_pods().values()), timeout=5,
                         message="queue empty")
        assert sched.cache.pod_count() == 0
        assert sched.cache.assumed_pod_count() == 0


def _stored(sched: Any, name: str) -> dict[str, Any]:
    stored = sched.informers.informer("pods").store.get_by_key(f"default/{name}")
    return stored or {"metadata": {"name": name, "namespace": "default"}}


async def test_pod_deleted_while_binding_leaves_no_trace(sandbox: Sandbox, tmp_path: Path) -> None:
    kc = sandbox.write_kubeconfig(tmp_path / "kc")
    async with user_client(kc) as cluster, running_scheduler(kc) as parts:
        sched = parts.scheduler
        # Hold every binding POST for a while so the pod is deleted mid-bind.
        sandbox.faults.add_latency(1.0, "create", "pods")
        await cluster.create_pod(pod("doomed"))
        await wait_until(lambda: sched.cache.assumed_pod_count() == 1, timeout=10,
                         message="pod assumed and binding")
        sandbox.faults.clear()
        await cluster.delete_pod("doomed")
        await wait_until(lambda: not sched._binding_tasks, timeout=10, message="binding done")
        await wait_until(lambda: sched.cache.pod_count() == 0, timeout=5, message="cache empty")
        assert sched.cache.assumed_pod_count() == 0
        assert await cluster.get_pod("doomed") is None


async def test_two_profiles_schedule_their_own_pods(sandbox: Sandbox, tmp_path: Path) -> None:
    kc = sandbox.write_kubeconfig(tmp_path / "kc")
    config = scheduler_config()
    config.profiles.append(default_profile("py-scheduler-b"))
    async with user_client(kc) as cluster, running_scheduler(kc, config=config) as parts:
        assert set(parts.scheduler.profiles) == {"py-scheduler", "py-scheduler-b"}
        await cluster.create_pod(pod("a1"))
        await cluster.create_pod(pod("b1", scheduler="py-scheduler-b"))

        async def both_bound() -> bool:
            return bool(await cluster.node_name("a1") and await cluster.node_name("b1"))
        await wait_until(both_bound, timeout=10, message="both profiles' pods bound")

        async def scheduled_by(name: str) -> str:
            events = [e for e in await cluster.events_for(name) if e["reason"] == "Scheduled"]
            return events[0]["reportingController"] if events else ""
        await wait_until(lambda: scheduled_by("b1"), timeout=5, message="event for b1")
        assert await scheduled_by("a1") == "py-scheduler"
        assert await scheduled_by("b1") == "py-scheduler-b"


async def test_other_schedulers_pods_are_untouched_but_use_capacity(
    sandbox_factory: Any, tmp_path: Path
) -> None:
    sb = await sandbox_factory(nodes=1, node_cpu="2", node_memory="8Gi")
    kc = sb.write_kubeconfig(tmp_path / "kc")
    async with user_client(kc) as cluster, running_scheduler(kc) as parts:
        # Someone else's pending pod: never ours to touch.
        await cluster.create_pod(pod("theirs-pending", scheduler="default-scheduler"))
        # Someone else's bound pod uses 1.5 of the node's 2 CPUs.
        bound = for_api(PodBuilder("theirs-bound").scheduler_name("default-scheduler")
                        .req(cpu="1500m", memory="1Gi").node("node-0000").obj())
        await cluster.create_pod(bound)
        await cluster.create_pod(pod("ours", cpu="1"))

        async def ours_failed() -> bool:
            return any(e["reason"] == "FailedScheduling" for e in await cluster.events_for("ours"))
        await wait_until(ours_failed, timeout=10, message="our pod refused for lack of CPU")
        [event] = [e for e in await cluster.events_for("ours") if e["reason"] == "FailedScheduling"]
        assert event["note"].startswith("0/1 nodes are available: 1 Insufficient cpu."), event
        await asyncio.sleep(0.5)
        assert await cluster.events_for("theirs-pending") == []
        theirs = await cluster.get_pod("theirs-pending")
        assert theirs is not None and not theirs["spec"].get("nodeName")
        assert "conditions" not in theirs.get("status", {}) or all(
            c["type"] != "PodScheduled" for c in theirs["status"]["conditions"])
        assert parts.scheduler.queue.get(theirs) is None


async def test_watch_dropped_mid_run_resumes_without_losing_events(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    kc = sandbox.write_kubeconfig(tmp_path / "kc")
    async with user_client(kc) as cluster, running_scheduler(kc) as parts:
        pods_informer = parts.informers.informer("pods")
        lists_before = pods_informer.list_count
        await cluster.create_pods([pod(f"w-{i}") for i in range(30)])
        assert sandbox.drop_watches() > 0
        await cluster.create_pods([pod(f"x-{i}") for i in range(30)])
        assert sandbox.drop_watches() > 0
        await cluster.create_pods([pod(f"y-{i}") for i in range(30)])

        async def all_bound() -> bool:
            return await bound_count(cluster) == 90
        await wait_until(all_bound, timeout=20, message="90 pods bound across dropped watches")
        assert pods_informer.list_count == lists_before, "resumed from resourceVersion, no relist"
        await wait_until(lambda: parts.scheduler.cache.pod_count() == 90, timeout=5,
                         message="cache saw every bound pod")


async def test_bind_conflict_from_a_rival_scheduler_is_not_retried(
    sandbox_factory: Any, tmp_path: Path
) -> None:
    """Two schedulers race for the same pods: every pod is bound exactly once, the loser of
    each race forgets its assumption instead of retrying, and both caches end consistent."""
    sb = await sandbox_factory(nodes=10, simulate_kubelet=False)
    kc = sb.write_kubeconfig(tmp_path / "kc")
    m1, m2 = SchedulerMetrics(), SchedulerMetrics()
    async with user_client(kc) as cluster, running_scheduler(kc, metrics=m1) as one, \
            running_scheduler(kc, metrics=m2) as two:
        await cluster.create_pods([pod(f"r-{i}") for i in range(150)])

        async def all_bound() -> bool:
            return await bound_count(cluster) == 150
        await wait_until(all_bound, timeout=30, message="150 pods bound")
        for parts in (one, two):
            await wait_until(lambda p=parts: p.scheduler.cache.assumed_pod_count() == 0,
                             timeout=10, message="no assumption left")
            await wait_until(lambda p=parts: p.scheduler.cache.pod_count() == 150, timeout=10,
                             message="cache holds every pod once")
        counters = sb.counters()
        binds = counters["requests"].get("create pods/binding", 0)
        successes = sum(
            m.schedule_attempts.labels("scheduled", "py-scheduler").value for m in (m1, m2)
        )
        assert successes == 150
        # Each pod: one winning bind, at most one losing bind (no retry after a 409).
        assert 150 <= binds <= 300, counters


async def test_malformed_pod_gets_a_clear_event_and_the_daemon_goes_on(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    """A pod whose quantity no parser accepts (written by a looser API server: the sandbox's
    raw-write fault) is reported on the pod, naming the field; other pods keep scheduling."""
    kc = sandbox.write_kubeconfig(tmp_path / "kc")
    async with user_client(kc) as cluster, running_scheduler(kc) as parts:
        bad = pod("broken")
        bad["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "abc"
        sandbox.raw_put(bad)

        async def reported() -> list[dict[str, Any]]:
            return [e for e in await cluster.events_for("broken")
                    if e["reason"] == "FailedScheduling"]

        await wait_until(reported, timeout=10, message="event on the malformed pod")
        [event] = await reported()
        assert event["type"] == "Warning"
        assert "spec.containers[0].resources.requests.cpu" in event["note"], event["note"]
        assert '"abc"' in event["note"]

        async def condition() -> dict[str, Any]:
            current = await cluster.get_pod("broken") or {}
            conds = current.get("status", {}).get("conditions", [])
            return next((c for c in conds if c["type"] == "PodScheduled"), {})
        await wait_until(condition, timeout=5, message="PodScheduled condition")
        cond = await condition()
        assert (cond["status"], cond["reason"]) == ("False", "SchedulerError")

        # The daemon goes on: a good pod after the bad one is bound.
        await cluster.create_pod(pod("fine"))
        await wait_until(lambda: cluster.node_name("fine"), timeout=10, message="good pod bound")
        assert await cluster.node_name("broken") == ""
        assert parts.scheduler.queue.get(await cluster.get_pod("broken") or {}) is None


async def test_nodes_ruled_out_by_a_prefilter_result_are_counted_in_the_message(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    kc = sandbox.write_kubeconfig(tmp_path / "kc")
    async with user_client(kc) as cluster, running_scheduler(kc):
        pinned = pod("pinned", cpu="1000")
        pinned["spec"]["affinity"] = {"nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In",
                                  "values": ["node-0000"]}]}]}}}
        await cluster.create_pod(pinned)

        async def notes() -> list[str]:
            return [e["note"] for e in await cluster.events_for("pinned")
                    if e["reason"] == "FailedScheduling"]
        await wait_until(notes, timeout=10, message="FailedScheduling event")
        [note] = await notes()
        assert note.startswith(
            "0/3 nodes are available: 1 Insufficient cpu, "
            "2 node(s) didn't satisfy plugin(s) [NodeAffinity]."
        ), note


@pytest.mark.parametrize("write_pipeline", [1, 16])
async def test_refused_bindings_are_forgotten_and_retried_with_pipelined_writes(
    sandbox_factory: Any, tmp_path: Path, write_pipeline: int
) -> None:
    """Binding POSTs written pipelined (--write-pipeline) keep the failure path: a refused
    binding (the sandbox's fault API: 500 for ten of them) is not retried by the client,
    its pod is forgotten and requeued, and binds on its next attempt; every pod ends bound
    once, nothing stays assumed, and the sandbox saw exactly one more Binding POST per
    refusal."""
    sb = await sandbox_factory(nodes=5, simulate_kubelet=False)
    kc = sb.write_kubeconfig(tmp_path / "kc")
    metrics = SchedulerMetrics()
    async with user_client(kc) as cluster, running_scheduler(
            kc, metrics=metrics, write_pipeline=write_pipeline) as parts:
        sb.faults.fail("create", "pods", subresource="binding", code=500, times=10)
        await cluster.create_pods([pod(f"f-{i}") for i in range(60)])

        async def all_bound() -> bool:
            return await bound_count(cluster) == 60
        await wait_until(all_bound, timeout=60, message="60 pods bound")
        sched = parts.scheduler
        await wait_until(lambda: sched.cache.assumed_pod_count() == 0, timeout=10,
                         message="no assumption left")
        await wait_until(lambda: sched.cache.pod_count() == 60, timeout=10,
                         message="cache holds every pod once")
        assert sb.counters()["requests"].get("create pods/binding", 0) == 70
        assert metrics.schedule_attempts.labels("scheduled", "py-scheduler").value == 60
        assert metrics.schedule_attempts.labels("error", "py-scheduler").value == 10
