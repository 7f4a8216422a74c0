"""Upstream scheduler_perf's steady state, and the claims allocated before a DRA run.

``createPods`` with ``steadyState: true`` (SteadyStateClusterResourceClaimTemplate) keeps the
cluster at one fill level: it creates a batch of pods, and once every pod of the batch is
seen scheduled it deletes the namespace's pods (grace period 0) and creates the next batch,
until its duration is over; the scheduling throughput is measured meanwhile.  As the
creator (``creator.py``) does for the one-shot shapes, this driver runs in a process of its
own, so the scheduler pays the pods' watch events but not their creation or deletion::

    python -m scheduler.bench.steady --kubeconfig FILE --bodies POD.jsonl \\
        --batch 10 --duration 10 --max-pods N [--concurrency N]

The bodies file holds one pod, the template (its name is replaced by ``<name>-<n>``); the
protocol is the creator's (``{"ready": 1}``, a line on stdin, then the report, which also
says how many pods were seen scheduled).  ``--max-pods`` ends the run early (tests).

``allocate_claims`` is upstream's ``allocResourceClaims`` for the bench's DRA driver: each
claim gets one device of a node picked at random among those with a free one.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import random
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from scheduler.bench.creator import CreatorProcess, CreatorReport, create_bodies

GROUP = "/apis/resource.k8s.io/v1"


@dataclass(frozen=True)
class SteadyReport:
    created: int
    failed: int
    error: str
    started: float
    finished: float
    scheduled: int
    batches: int


async def drive(client: Any, template: dict[str, Any], *, batch: int, duration: float,
                max_pods: int, concurrency: int = 32,
                clock: Callable[[], float] = time.monotonic) -> SteadyReport:
    """Batches of ``batch`` pods from ``template`` into its namespace, each batch deleted
    once it is all scheduled and the next created, until ``duration`` seconds have passed or
    ``max_pods`` pods were seen scheduled.  ``client`` has ``request`` and ``watch`` (an
    :class:`~scheduler.client.api.ApiClient`)."""
    namespace = template["metadata"]["namespace"]
    prefix = template["metadata"]["name"]
    pods_path = f"/api/v1/namespaces/{namespace}/pods"
    listed = await client.request("GET", pods_path)
    rv = str(((listed.body or {}).get("metadata") or {}).get("resourceVersion") or "")
    scheduled_uids: set[str] = set()
    seen: asyncio.Queue[None] = asyncio.Queue()

    async def watch() -> None:
        params = {"resourceVersion": rv} if rv else {}
        async for event in client.watch(pods_path, params):
            obj = event.get("object") or {}
            if event.get("type") not in ("ADDED", "MODIFIED"):
                continue
            uid = str((obj.get("metadata") or {}).get("uid"))
            if (obj.get("spec") or {}).get("nodeName") and uid not in scheduled_uids:
                scheduled_uids.add(uid)
                seen.put_nowait(None)

    created = failed = 0
    error = ""
    serial = 0

    async def create_batch() -> None:
        nonlocal serial, created, failed, error
        bodies = []
        for _ in range(batch):
            body = copy.deepcopy(template)
            body["metadata"]["name"] = f"{prefix}-{serial}"
            serial += 1
            bodies.append((pods_path, orjson.dumps(body)))
        # the creator's POST loop (``create_bodies``): failures counted, the first one kept
        report = await create_bodies(client, bodies, concurrency)
        created += report.created
        failed += report.failed
        error = error or report.error

    watcher = asyncio.create_task(watch(), name="bench-steady-watch")
    started = clock()
    end = started + duration
    scheduled = batches = 0
    try:
        await create_batch()
        batches = 1
        while scheduled < max_pods:
            left = end - clock()
            if left <= 0:
                break
            try:
                await asyncio.wait_for(seen.get(), timeout=left)
            except asyncio.TimeoutError:
                break
            scheduled += 1
            if scheduled % batch == 0 and scheduled < max_pods and clock() < end:
                resp = await client.request("DELETE", pods_path,
                                            params={"gracePeriodSeconds": "0"})
                if not resp.ok:
                    failed += 1
                    error = error or f"DELETE {pods_path}: HTTP {resp.status}"
                    break
                await create_batch()
                batches += 1
    finally:
        watcher.cancel()
        try:
            await watcher
        except (asyncio.CancelledError, Exception):
            pass
    return SteadyReport(created=created, failed=failed, error=error, started=started,
                        finished=clock(), scheduled=scheduled, batches=batches)


async def start_driver(kubeconfig: str, template: dict[str, Any], *, batch: int,
                       duration: float, max_pods: int, concurrency: int) -> CreatorProcess:
    """This module in a child process, ready and waiting for :meth:`CreatorProcess.go`."""
    return await CreatorProcess.start(kubeconfig, [template], concurrency=concurrency,
                                      module="scheduler.bench.steady",
                                      extra=["--batch", str(batch), "--duration", str(duration),
                                             "--max-pods", str(max_pods)])


def pick_devices(count: int, *, nodes: Sequence[str], per_node: int,
                 rng: random.Random) -> list[tuple[str, int]]:
    """(node, device index) for ``count`` claims: each on a node picked uniformly among
    those with a free device (its lowest free one), as upstream's allocResourceClaims tries
    the nodes in a random order and takes the first where the claim fits."""
    if count > len(nodes) * per_node:
        raise ValueError(f"{count} claims do not fit {len(nodes)} nodes of {per_node} devices")
    used = dict.fromkeys(nodes, 0)
    open_nodes = list(nodes)
    out = []
    for _ in range(count):
        i = rng.randrange(len(open_nodes))
        node = open_nodes[i]
        out.append((node, used[node]))
        used[node] += 1
        if used[node] == per_node:
            open_nodes[i] = open_nodes[-1]
            open_nodes.pop()
    return out


async def allocate_claims(user: Any, claims: Sequence[dict[str, Any]],
                          concurrency: int) -> None:
    """Create each claim, then write its ``status`` (the allocation) through ``/status``."""
    slots = asyncio.Semaphore(max(1, concurrency))

    async def one(claim: dict[str, Any]) -> None:
        status = claim["status"]
        body = {k: v for k, v in claim.items() if k != "status"}
        ns = claim["metadata"]["namespace"]
        path = f"{GROUP}/namespaces/{ns}/resourceclaims"
        async with slots:
            made = await user.create(path, body)
            made["status"] = status
            await user.update(f"{path}/{claim['metadata']['name']}/status", made)

    await asyncio.gather(*(one(c) for c in claims))


async def _main(args: argparse.Namespace) -> int:
    from scheduler.client.api import ApiClient
    from scheduler.client.connection import load_connection

    with open(args.bodies, "rb") as f:
        [template] = [orjson.loads(line) for line in f if line.strip()]
    client = ApiClient(load_connection(kubeconfig=args.kubeconfig), qps=0,
                       pool_size=args.concurrency, user_agent="kube-py-scheduler-bench-steady")
    try:
        await asyncio.gather(*(client.get("/version") for _ in range(args.concurrency)))
        print(json.dumps({"ready": 1}), flush=True)
        loop = asyncio.get_running_loop()
        if not await loop.run_in_executor(None, sys.stdin.readline):
            return 1
        report = await drive(client, template, batch=args.batch, duration=args.duration,
                             max_pods=args.max_pods, concurrency=args.concurrency)
    finally:
        await client.close()
    print(json.dumps(report.__dict__), flush=True)
    return 0 if report.failed == 0 else 1


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m scheduler.bench.steady",
                                description=(__doc__ or "").split("\n")[0])
    p.add_argument("--kubeconfig", required=True, help="the API server")
    p.add_argument("--bodies", required=True, help="the pod template, one JSON object")
    p.add_argument("--batch", type=int, default=10, help="pods a batch (default %(default)s)")
    p.add_argument("--duration", type=float, default=10.0,
                   help="seconds to run (default %(default)s)")
    p.add_argument("--max-pods", type=int, default=1_000_000,
                   help="stop once this many pods were scheduled (default %(default)s)")
    p.add_argument("--concurrency", type=int, default=32,
                   help="concurrent connections (default %(default)s)")
    args = p.parse_args(list(argv) if argv is not None else None)
    if args.batch < 1 or args.duration <= 0 or args.max_pods < 1:
        p.error("--batch, --duration and --max-pods must be positive")
    from scheduler.logging import configure_logging

    configure_logging(fmt="console", level="warning")
    return asyncio.run(_main(args))


__all__ = ["CreatorReport", "SteadyReport", "allocate_claims", "drive", "pick_devices",
           "start_driver"]

if __name__ == "__main__":
    sys.exit(main())
