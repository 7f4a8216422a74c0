"""How long ``kube-py-scheduler explain`` takes on a large cluster (run by hand; the figures
go to docs/explain.md).

A sandbox process with N nodes (default 5000) and N bound pods; then ``explain`` as a user
runs it (a fresh ``kube-py-scheduler`` process, wall clock) for a pod that fits nowhere and
for one that fits everywhere, each best of ``--repeat`` runs; the cycle's own share is the
``cycle ... ms`` the table prints.

    python tests/perf/bench_explain.py [--nodes 5000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import asyncio
import re
import resource
import subprocess
import sys
import time
from typing import Any

from scheduler.client.api import ApiClient
from scheduler.client.connection import load_connection
from scheduler.sandbox.testing import SandboxProcess


def _pod(name: str, cpu: str, node: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "schedulerName": "py-scheduler",
        "containers": [{"name": "c", "image": "pause",
                        "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}}}],
    }
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default"}, "spec": spec}


async def _populate(kubeconfig: str, nodes: int) -> None:
    client = ApiClient(load_connection(kubeconfig=kubeconfig), qps=0)
    slots = asyncio.Semaphore(32)

    async def create(body: dict[str, Any]) -> None:
        async with slots:
            await client.create("/api/v1/namespaces/default/pods", body)

    try:
        await asyncio.gather(*(create(_pod(f"load-{i}", "500m", f"node-{i:04d}"))
                               for i in range(nodes)))
        await create(_pod("too-big", "64"))
        await create(_pod("fits", "1"))
    finally:
        await client.close()


def _explain(kubeconfig: str, pod: str) -> tuple[float, float, float, str]:
    """(wall seconds of the whole command, its CPU seconds, the cycle's ms as printed, the
    result line).  CPU time is the figure that does not depend on the machine's load."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-m", "scheduler", "explain", pod, "--kubeconfig", kubeconfig],
        check=True, capture_output=True, text=True,
    ).stdout
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    m = re.search(r"cycle (\d+) ms", out)
    result = next((line for line in out.splitlines() if line.startswith("Result:")), "")
    return wall, cpu, float(m.group(1)) if m else float("nan"), result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with SandboxProcess(nodes=args.nodes, node_cpu="4", node_memory="16Gi",
                        simulate_kubelet=False, startup_timeout=120) as sp:
        kubeconfig = str(sp.kubeconfig_path)
        asyncio.run(_populate(kubeconfig, args.nodes))
        for pod in ("too-big", "fits"):
            runs = [_explain(kubeconfig, pod) for _ in range(args.repeat)]
            wall, cpu, cycle, result = min(runs)
            print(f"{pod}: {args.nodes} nodes, {args.nodes + 2} pods: explain {wall:.2f} s wall, "
                  f"{cpu:.2f} s CPU (best of {args.repeat}), cycle {cycle:.0f} ms; {result[:50]}")


if __name__ == "__main__":
    main()
