"""The bench creator's CPU per pod, alone against a sandbox process.

    PYTHONPATH=. python tests/perf/bench_creator.py [--pods 10000] [--concurrency 32]
        [--depth N] [--rounds 3]

Starts a sandbox (``SandboxProcess``, no simulated kubelet), then for each round a creator
process (``python -m scheduler.bench.creator``, the bench's own) with ``--pods`` pod-default
pods in a fresh namespace, released as the bench releases it.  The creator's and the
sandbox's CPU over the creation window are read from ``/proc/<pid>/stat`` (so the figure does
not depend on the creator reporting it, and a creator of another commit is measured the
same way: run this file with that commit's tree first on ``PYTHONPATH``). Prints one JSON
line a round: pods/s, CPU per pod of the creator and of the sandbox in microseconds, and
the creator's own report of its CPU when it gives one.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
from typing import Any

from scheduler.bench.creator import CreatorProcess
from scheduler.bench.machine import Machine
from scheduler.bench.workloads import pod


def process_cpu_seconds(pid: int) -> float:
    """/proc/<pid>/stat's utime + stime in seconds (kept here, not imported, so that this
    file also measures the trees from before ``scheduler.bench.machine`` had it)."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def one_round(kubeconfig: str, sandbox_pid: int, user: Any, *, round_no: int,
                    pods: int, concurrency: int, depth: int | None) -> dict[str, Any]:
    namespace = f"creator-{round_no}"
    await user.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                              "metadata": {"name": namespace}})
    bodies = [pod(f"p-{i}", namespace=namespace, scheduler_name="nobody")
              for i in range(pods)]
    extra: dict[str, Any] = {"depth": depth} if depth is not None else {}
    creator = await CreatorProcess.start(kubeconfig, bodies, concurrency=concurrency, **extra)
    try:
        pid = creator._proc.pid  # noqa: SLF001 - also the attribute of older creators
        c0, s0 = process_cpu_seconds(pid), process_cpu_seconds(sandbox_pid)
        await creator.go()
        # the report line comes once the last response is in; read the child's CPU before
        # it exits (a private reader: the older creators have it too)
        done = await creator._line(300)  # noqa: SLF001
        c1, s1 = process_cpu_seconds(pid), process_cpu_seconds(sandbox_pid)
    finally:
        await creator.aclose()
    rate = done["created"] / max(done["finished"] - done["started"], 1e-9)
    out = {"pods": pods, "created": done["created"], "failed": done["failed"],
           "pods_per_s": round(rate, 1),
           "creator_cpu_per_pod_us": round((c1 - c0) / pods * 1e6, 1),
           "sandbox_cpu_per_pod_us": round((s1 - s0) / pods * 1e6, 1),
           "concurrency": concurrency, "depth": depth}
    own = done.get("cpu")
    if own is not None:
        out["creator_reported_cpu_per_pod_us"] = round(own / pods * 1e6, 1)
    await user.delete(f"/api/v1/namespaces/{namespace}")
    return out


async def main() -> None:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    p.add_argument("--pods", type=int, default=10000)
    p.add_argument("--concurrency", type=int, default=32)
    p.add_argument("--depth", type=int, default=None,
                   help="requests in flight per connection (the pipelined creator only)")
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    from scheduler.client.api import ApiClient
    from scheduler.client.connection import load_connection
    from scheduler.sandbox.testing import SandboxProcess

    print(json.dumps({"machine": Machine.current().line(), "at": time.strftime("%H:%M:%S")}))
    async with SandboxProcess(simulate_kubelet=False) as sandbox:
        assert sandbox.proc is not None
        kubeconfig = str(sandbox.kubeconfig_path)
        user = ApiClient(load_connection(kubeconfig=kubeconfig), qps=0)
        try:
            for i in range(args.rounds):
                print(json.dumps(await one_round(
                    kubeconfig, sandbox.proc.pid, user, round_no=i, pods=args.pods,
                    concurrency=args.concurrency, depth=args.depth)), flush=True)
        finally:
            await user.close()


if __name__ == "__main__":
    asyncio.run(main())
