"""Issue 22's spin defect, end to end over HTTP: a gang that only partly fits must idle at
the pace its backoff allows (not retry in a loop), must not drag an unrelated pending pod
into the loop, and must bind whole once capacity arrives.

Assertions are on counts (attempts within a window against what backoff allows), never on
speed."""

from __future__ import annotations

import asyncio
import math
from pathlib import Path
from typing import Any

from scheduler.app import Components
from scheduler.metrics import SchedulerMetrics
from scheduler.sandbox import Sandbox
from tests.builders import make_node
from tests.integration.harness import for_api, running_scheduler, user_client, wait_until
from tests.integration.procs import (
    coscheduling_config,
    create_pod_group,
    gang_pod,
    install_crd,
    pod_group,
)

GANG = [f"spin-{i}" for i in range(5)]
UNRELATED = "unrelated"
WINDOW_SECONDS = 6.0
INITIAL_BACKOFF = 1.0


def _attempts(parts: Components, name: str) -> int | None:
    """The pod's attempt count as the queue keeps it (queued or in flight)."""
    return parts.scheduler.queue.attempts_of({"metadata": {"namespace": "default",
                                                           "name": name}})


async def _settled_attempts(parts: Components, names: list[str]) -> dict[str, int]:
    out: dict[str, int] = {}

    def read() -> bool:
        for name in names:
            value = _attempts(parts, name)
            if value is None:
                return False
            out[name] = value
        return True
    await wait_until(read, timeout=10, message="every pod held by the queue")
    return out


def _total_attempts(metrics: SchedulerMetrics) -> float:
    return sum(metrics.schedule_attempts.labels(result, "py-scheduler").value
               for result in ("scheduled", "unschedulable", "error"))


def _backoff_bound(window: float) -> int:
    """The most attempts a pod may make in ``window`` seconds: one per backoff period (the
    shortest, the initial one, is the generous bound), plus one in flight at each end."""
    return math.floor(window / INITIAL_BACKOFF) + 2


async def test_partly_fitting_gang_idles_within_backoff_and_binds_when_a_node_appears(
    sandbox_factory: Any, tmp_path: Path
) -> None:
    # Four nodes of 32 CPU; five members of 20 CPU: only four fit, one per node.
    sb: Sandbox = await sandbox_factory(nodes=4, node_cpu="32", node_memory="64Gi")
    kc = sb.write_kubeconfig(tmp_path / "kc")
    metrics = SchedulerMetrics()
    config = coscheduling_config()
    config.pod_initial_backoff_seconds = int(INITIAL_BACKOFF)
    config.pod_max_backoff_seconds = 2
    async with user_client(kc) as cluster:
        await install_crd(cluster.client)
        async with running_scheduler(kc, config=config, metrics=metrics) as parts:
            await create_pod_group(cluster.client, pod_group("spin", 5, timeout=10))
            await cluster.create_pods([gang_pod(n, "spin", cpu="20") for n in GANG])
            # Fits no node while the gang holds nothing, and no node at all (40 > 32).
            await cluster.create_pod(gang_pod(UNRELATED, None, cpu="40"))

            async def rejected() -> bool:
                events = await cluster.events_for("spin-4")
                return any(e["reason"] == "FailedScheduling" for e in events)
            await wait_until(rejected, timeout=10, message="the gang's first rejection")

            names = [*GANG, UNRELATED]
            before = await _settled_attempts(parts, names)
            total_before = _total_attempts(metrics)
            await asyncio.sleep(WINDOW_SECONDS)  # the window being measured
            after = await _settled_attempts(parts, names)
            total_after = _total_attempts(metrics)

            made = {n: after[n] - before[n] for n in names}
            for name in names:
                assert made[name] <= _backoff_bound(WINDOW_SECONDS), made
            # Six pods, each within its backoff: the whole scheduler is within their sum.
            assert total_after - total_before <= sum(
                _backoff_bound(WINDOW_SECONDS) for _ in names), (
                total_after - total_before, made)
            assert sb.counters()["bindings"] == 0
            # /debug/queue shows the gang's state: its five members, wherever they wait.
            from scheduler.explain.debug import SchedulerIntrospection
            view = SchedulerIntrospection(parts.scheduler).queue()
            assert sum(view["podGroups"]["groups"]["default/spin"].values()) == 5, view

            # A fifth node: the whole gang binds (and only the gang: the unrelated pod fits
            # nowhere still).
            await cluster.create_node(for_api(make_node("node-extra", cpu="32",
                                                        memory="64Gi")))

            async def all_bound() -> bool:
                pods = {p["metadata"]["name"]: p for p in await cluster.list_pods("default")}
                return all(pods[n]["spec"].get("nodeName") for n in GANG)
            await wait_until(all_bound, timeout=20, message="the whole gang bound")
            pods = {p["metadata"]["name"]: p for p in await cluster.list_pods("default")}
            nodes = [pods[n]["spec"]["nodeName"] for n in GANG]
            assert len(set(nodes)) == 5, nodes
            assert not pods[UNRELATED]["spec"].get("nodeName")

            # Observability: one pod group attempt per pass, the last one scheduled; one
            # event on the PodGroup per decision (not one per member per retry).
            def group_attempts(result: str) -> float:
                return float(metrics.podgroup_schedule_attempts.labels(
                    result, "py-scheduler")._value.get())
            assert group_attempts("scheduled") == 1
            assert 1 <= group_attempts("unschedulable") <= total_after - total_before + 5
            pg_events = await cluster.events_for("spin")
            assert [e["reason"] for e in pg_events if e["reason"] == "Scheduled"] == [
                "Scheduled"]
            # Failures aggregate into few events (series), never one per member.
            failed = [e for e in pg_events if e["reason"] == "FailedScheduling"]
            assert 1 <= len(failed) <= 2, failed
