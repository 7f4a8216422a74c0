"""Issue 26's "done means", end to end over HTTP: a node whose pod is shrinking from 3 CPU to
1 CPU still counts 3 until the kubelet reports the new size; the report is what lets the
next pod in."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.builders import PodBuilder
from tests.integration.harness import for_api, wait_until
from tests.integration.scenarios import api, failed_notes, node, pod, scenario, wait_bound


def _web(*, spec_cpu: str, allocated: str, running: str, condition: str | None) -> dict[str, Any]:
    """The bound pod as the kubelet reports it (written raw: its status is the kubelet's)."""
    b = (PodBuilder("web").uid("uid-web").node("n1")
         .container("app", requests={"cpu": spec_cpu, "memory": "128Mi"})
         .phase("Running")
         .container_status("app", allocated={"cpu": allocated, "memory": "128Mi"},
                           actual={"cpu": running, "memory": "128Mi"}))
    if condition is not None:
        b.condition(condition)
    obj = for_api(b.obj())
    obj["status"] = b.obj()["status"]  # for_api drops a pod's status; the kubelet wrote it
    return obj


async def test_shrinking_pod_keeps_its_old_size_until_the_kubelet_reports_it(
    sandbox_factory: Any, tmp_path: Path
) -> None:
    async with scenario(sandbox_factory, tmp_path, [node("n1", cpu="4")]) as env:
        # spec patched to 1 CPU; the kubelet admitted it but 3 CPU still run
        env.sandbox.raw_put(_web(spec_cpu="1", allocated="1", running="3",
                                 condition="PodResizeInProgress"))
        await env.cluster.create_pod(api(pod("next", cpu="2")))

        async def refused_for_cpu() -> bool:
            return any("Insufficient cpu" in n for n in await failed_notes(env.cluster, "next"))

        await wait_until(refused_for_cpu, timeout=10, message="3 + 2 CPU do not fit 4")
        assert await env.cluster.node_name("next") in ("", None)

        # the kubelet reports the resize done: 1 CPU runs, and the waiting pod fits
        env.sandbox.raw_put(_web(spec_cpu="1", allocated="1", running="1", condition=None))
        assert (await wait_bound(env.cluster, ["next"], timeout=15))["next"] == "n1"
