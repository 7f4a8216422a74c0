"""Upstream scheduler_perf's steady state, and the claims allocated before a DRA run.

``createPods`` with ``steadyState: true`` (SteadyStateClusterResourceClaimTemplate) keeps the
cluster at one fill level with a constant number of pods (``count``, the ``--batch`` here)
until its duration is over; the scheduling throughput is measured meanwhile.  Upstream
creates a batch, waits until all of it is scheduled, deletes the namespace's pods and
creates the next batch; this driver keeps the same number of pods but pipelined: each pod
seen scheduled is deleted (grace period 0) and replaced at once, many replacements in
flight, so the scheduler is never left waiting for a batch's round trip.  As the
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
import resource
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
    replaced: int  # pods deleted once scheduled and created anew (one DELETE + one POST)
    in_flight_max: int  # the most replacements under way at once


async def drive(client: Any, template: dict[str, Any], *, batch: int, duration: float,
                max_pods: int, concurrency: int = 32,
                clock: Callable[[], float] = time.monotonic) -> SteadyReport:
    """Keep ``batch`` pods from ``template`` in its namespace: create ``batch`` pods, then
    each pod seen scheduled is deleted (grace period 0) and a new one created in its place,
    as soon as it is seen and with up to ``concurrency`` replacements under way at once,
    until ``duration`` seconds have passed or ``max_pods`` pods were seen scheduled.

    Upstream's ``createPodsSteadily`` keeps the same number of pods but in lock step: it
    waits for a whole batch to be scheduled, deletes the namespace's pods and creates the
    next batch, so its rate is bounded by that round trip as much as by the scheduler.
    Here a pod is replaced the moment it is seen scheduled, so the scheduler always has
    pods to schedule and the measured rate is its own.  ``client`` has ``request`` and
    ``watch`` (an :class:`~scheduler.client.api.ApiClient`)."""
    from scheduler.client.api import ApiConnectionError

    namespace = template["metadata"]["namespace"]
    prefix = template["metadata"]["name"]
    pods_path = f"/api/v1/namespaces/{namespace}/pods"
    listed = await client.request("GET", pods_path)
    rv = str(((listed.body or {}).get("metadata") or {}).get("resourceVersion") or "")
    scheduled_uids: set[str] = set()
    # names of pods seen scheduled; None: a replacement failed, stop
    seen: asyncio.Queue[str | None] = asyncio.Queue()

    async def watch() -> None:
        params = {"resourceVersion": rv} if rv else {}
        async for event in client.watch(pods_path, params):
            obj = event.get("object") or {}
            if event.get("type") not in ("ADDED", "MODIFIED"):
                continue
            meta = obj.get("metadata") or {}
            uid = str(meta.get("uid"))
            if (obj.get("spec") or {}).get("nodeName") and uid not in scheduled_uids:
                scheduled_uids.add(uid)
                seen.put_nowait(str(meta.get("name")))

    created = failed = replaced = in_flight = in_flight_max = 0
    error = ""
    serial = 0

    def next_body() -> bytes:
        nonlocal serial
        body = copy.deepcopy(template)
        body["metadata"]["name"] = f"{prefix}-{serial}"
        serial += 1
        return orjson.dumps(body)

    def fail(why: str) -> None:
        nonlocal failed, error
        failed += 1
        error = error or why[:500]
        seen.put_nowait(None)

    slots = asyncio.Semaphore(max(1, concurrency))

    async def replace(name: str) -> None:
        """Delete a scheduled pod, then create its successor (upstream's order: the
        device a deleted pod's claim held is freed before a new claim asks for one)."""
        nonlocal created, replaced, in_flight, in_flight_max
        in_flight += 1
        in_flight_max = max(in_flight_max, in_flight)
        try:
            async with slots:
                path = f"{pods_path}/{name}"
                try:
                    resp = await client.request("DELETE", path,
                                                params={"gracePeriodSeconds": "0"})
                except ApiConnectionError as exc:
                    fail(f"DELETE {path}: {exc}")
                    return
                if not resp.ok and resp.status != 404:
                    fail(f"DELETE {path}: HTTP {resp.status}")
                    return
                try:
                    resp = await client.request("POST", pods_path, body=next_body())
                except ApiConnectionError as exc:
                    fail(f"POST {pods_path}: {exc}")
                    return
                if not resp.ok:
                    fail(f"POST {pods_path}: HTTP {resp.status} {resp.body}")
                    return
                created += 1
                replaced += 1
        finally:
            in_flight -= 1

    watcher = asyncio.create_task(watch(), name="bench-steady-watch")
    replacing: set[asyncio.Task[None]] = set()
    started = clock()
    end = started + duration
    scheduled = 0
    try:
        # the first pods, as the creator POSTs them (failures counted, the first one kept)
        first = await create_bodies(client, [(pods_path, next_body()) for _ in range(batch)],
                                    concurrency)
        created, failed, error = first.created, first.failed, first.error
        while scheduled < max_pods and not failed:
            left = end - clock()
            if left <= 0:
                break
            try:
                name = await asyncio.wait_for(seen.get(), timeout=left)
            except asyncio.TimeoutError:
                break
            if name is None:
                break
            scheduled += 1
            if scheduled < max_pods and clock() < end:
                task = asyncio.create_task(replace(name), name=f"bench-steady-replace-{name}")
                replacing.add(task)
                task.add_done_callback(replacing.discard)
    finally:
        for task in (watcher, *replacing):
            task.cancel()
        for task in (watcher, *replacing):
            try:
                await task
            except (asyncio.CancelledError, Exception):
                pass
    return SteadyReport(created=created, failed=failed, error=error, started=started,
                        finished=clock(), scheduled=scheduled, replaced=replaced,
                        in_flight_max=in_flight_max)


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
        usage0 = resource.getrusage(resource.RUSAGE_SELF)
        report = await drive(client, template, batch=args.batch, duration=args.duration,
                             max_pods=args.max_pods, concurrency=args.concurrency)
        usage = resource.getrusage(resource.RUSAGE_SELF)
    finally:
        await client.close()
    # the driver's CPU over its run, as the creator reports it: the bench's CPU split reads it
    cpu = round(usage.ru_utime - usage0.ru_utime + usage.ru_stime - usage0.ru_stime, 6)
    print(json.dumps({**report.__dict__, "cpu": cpu}), flush=True)
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
