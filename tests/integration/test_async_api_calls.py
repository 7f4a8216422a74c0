"""SchedulerAsyncAPICalls end to end over HTTP against the sandbox: the binding of a pod and
the PodScheduled condition of a pod that fits nowhere are written through the API dispatcher,
counted by upstream's series, and the queue of calls ends empty."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from scheduler.client.api_dispatcher import POD_BINDING, POD_STATUS_PATCH
from tests.integration.harness import wait_until
from tests.integration.scenarios import api, node, pod, scenario, wait_bound

PODS = "/api/v1/namespaces/default/pods"



async def test_bindings_and_status_patches_go_through_the_dispatcher(
    sandbox_factory: Any, tmp_path: Path
) -> None:
    async with scenario(sandbox_factory, tmp_path, [node("n0", cpu="2")]) as env:
        sched = env.parts.scheduler
        assert sched.api_dispatcher is not None
        metrics = sched.metrics

        def sample(name: str, **labels: str) -> float:
            return metrics.registry.get_sample_value(name, labels) or 0.0

        await env.cluster.create_pod(api(pod("fits", cpu="1")))
        await env.cluster.create_pod(api(pod("too-big", cpu="8")))
        assert await wait_bound(env.cluster, ["fits"]) == {"fits": "n0"}

        async def condition_written() -> bool:
            got = await env.cluster.client.get(f"{PODS}/too-big")
            return any(c.get("type") == "PodScheduled" and c.get("status") == "False"
                       and c.get("reason") == "Unschedulable"
                       for c in (got.get("status") or {}).get("conditions") or [])

        await wait_until(condition_written, timeout=10, message="too-big's PodScheduled")
        assert sample("scheduler_async_api_call_execution_total", call_type=POD_BINDING,
                      result="success") == 1
        assert sample("scheduler_async_api_call_execution_total", call_type=POD_STATUS_PATCH,
                      result="success") >= 1

        async def idle() -> bool:
            return not sched.api_dispatcher.pending() if sched.api_dispatcher else False

        await wait_until(idle, timeout=5, message="the dispatcher idle")
        assert sample("scheduler_pending_async_api_calls", call_type=POD_STATUS_PATCH) == 0
        assert sample("scheduler_pending_async_api_calls", call_type=POD_BINDING) == 0
