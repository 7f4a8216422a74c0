"""The ingest side of a pod, in process: its watch events from the bytes on the socket to
the informer store, the event handlers, the cache and the queue.

    PYTHONPATH=. python tests/perf/bench_ingest.py [--pods 2000] [--nodes 5000]
        [--config floor|default] [--kubelet] [--profile] [--rounds 3]

Each pod's events are the ones the scheduler's pod informer receives from the sandbox, as
the sandbox writes them (templates taken from a real sandbox: one pod created, bound and,
with ``--kubelet``, started): ADDED when created, MODIFIED when bound and, with
``--kubelet``, the status MODIFIED of the simulated kubelet starting it.  They go through
the same watch stream parser and informer event loop as on the wire (one stream per phase,
the bytes in 64 KiB chunks).  Between the ADDED and the bound MODIFIED each pod is popped,
assumed on a node and its binding finished, as the scheduling cycle does (not counted).

Prints the process CPU per pod of each phase (best of ``--rounds``) and, with
``--profile``, the Python calls per pod of each phase (cProfile; independent of the load).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import pstats
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import orjson

from scheduler.app import build_components
from scheduler.bench.run import floor_config
from scheduler.bench.workloads import pod as pod_template
from scheduler.client.api import WatchStreamParser
from scheduler.client.connection import ConnectionConfig
from scheduler.config.defaults import default_config
from scheduler.logging import configure_logging
from scheduler.metrics import SchedulerMetrics
from scheduler.schedule_one import assumed_pod_info

CHUNK = 64 * 1024
NAMESPACE = "bench"


async def templates(scheduler_name: str) -> tuple[dict[str, Any], ...]:
    """One pod as the sandbox serves it: pending, bound, and started by its kubelet."""
    from scheduler.client.api import ApiClient
    from scheduler.client.connection import load_connection
    from scheduler.sandbox.testing import SandboxProcess

    async with SandboxProcess(nodes=1, simulate_kubelet=True) as sandbox:
        client = ApiClient(load_connection(kubeconfig=str(sandbox.kubeconfig_path)), qps=0)
        try:
            await client.create("/api/v1/namespaces", {
                "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
            path = f"/api/v1/namespaces/{NAMESPACE}/pods"
            pending = await client.create(path, pod_template(
                "p", namespace=NAMESPACE, scheduler_name=scheduler_name))
            node = (await client.get("/api/v1/nodes"))["items"][0]["metadata"]["name"]
            await client.create(f"{path}/p/binding", {
                "apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p"},
                "target": {"apiVersion": "v1", "kind": "Node", "name": node}})
            bound = await client.get(f"{path}/p")
            running = bound
            for _ in range(200):
                running = await client.get(f"{path}/p")
                if (running.get("status") or {}).get("phase") == "Running":
                    break
                await asyncio.sleep(0.02)
            nodes = [n for n in (await client.get("/api/v1/nodes"))["items"]]
        finally:
            await client.close()
    bound = {**bound, "status": {**bound["status"]}}
    # The bound version as the binding wrote it (before the kubelet).
    return pending, bound, running, nodes[0]


def instance(template: dict[str, Any], i: int, rv: int, node: str | None) -> dict[str, Any]:
    obj = orjson.loads(orjson.dumps(template))
    meta = obj["metadata"]
    meta["name"] = f"p-{i}"
    meta["uid"] = f"00000000-0000-4000-8000-{i:012d}"
    meta["resourceVersion"] = str(rv)
    if node is not None:
        obj["spec"]["nodeName"] = node
    return obj


def node_instance(template: dict[str, Any], i: int) -> dict[str, Any]:
    obj = orjson.loads(orjson.dumps(template))
    name = f"node-{i:05d}"
    obj["metadata"]["name"] = name
    obj["metadata"]["uid"] = f"n-{i}"
    obj["metadata"]["resourceVersion"] = str(i + 1)
    labels = obj["metadata"].setdefault("labels", {})
    labels["kubernetes.io/hostname"] = name
    labels["topology.kubernetes.io/zone"] = "abc"[i % 3]
    return obj


def stream(events: list[tuple[str, dict[str, Any]]]) -> list[bytes]:
    """The events as the API server writes them, cut in CHUNK-sized reads."""
    data = b"".join(orjson.dumps({"type": t, "object": o}) + b"\n" for t, o in events)
    return [data[i:i + CHUNK] for i in range(0, len(data), CHUNK)]


class Wire:
    """The informer's client: ``watch`` parses one prepared byte stream, as ApiClient.watch
    parses the socket's reads."""

    def __init__(self) -> None:
        self.chunks: list[bytes] = []

    async def watch(self, path: str, params: Any = None) -> AsyncIterator[dict[str, Any]]:
        parser = WatchStreamParser()
        for chunk in self.chunks:
            for event in parser.feed(chunk):
                yield event
        for event in parser.finish():
            yield event


async def one_round(args: argparse.Namespace, tpl: tuple[dict[str, Any], ...],
                    profile: bool) -> dict[str, tuple[float, int]]:
    config = floor_config() if args.config == "floor" else default_config()
    config.leader_election.leader_elect = False
    name = config.profiles[0].scheduler_name
    parts = build_components(config, ConnectionConfig(host="http://127.0.0.1:9"),
                             metrics=SchedulerMetrics())
    sched = parts.scheduler
    pending_t, bound_t, running_t, node_t = tpl
    node_names = [f"node-{i:05d}" for i in range(args.nodes)]
    for i in range(args.nodes):
        sched.handlers.on_node_add(node_instance(node_t, i))
    informer = parts.informers.informer("pods")
    wire = Wire()
    informer.client = wire  # type: ignore[assignment]  # the prepared byte stream
    informer.kind, informer.api_version = "Pod", "v1"
    rv = 1000
    n = args.pods

    def events(template: dict[str, Any], etype: str, bound: bool) -> list[bytes]:
        nonlocal rv
        out = []
        for i in range(n):
            rv += 1
            tmpl = {**template, "spec": {**template["spec"], "schedulerName": name}}
            out.append((etype, instance(tmpl, i, rv, node_names[i % len(node_names)]
                                       if bound else None)))
        return stream(out)

    phases: dict[str, list[bytes]] = {"added": events(pending_t, "ADDED", False)}
    phases["bound"] = events(bound_t, "MODIFIED", True)
    if args.kubelet:
        phases["status"] = events(running_t, "MODIFIED", True)
    results: dict[str, tuple[float, int]] = {}

    def measure(label: str, fn: Callable[[], Any]) -> None:
        gc.collect()
        profiler = cProfile.Profile() if profile else None
        started = time.process_time()
        if profiler is not None:
            profiler.enable()
        fn()
        if profiler is not None:
            profiler.disable()
        cpu = time.process_time() - started
        calls = 0
        if profiler is not None:
            stats = pstats.Stats(profiler)
            calls = stats.total_calls  # type: ignore[attr-defined]
            if args.profile_top:
                print(f"--- {label}")
                stats.sort_stats(args.profile_sort).print_stats(args.profile_top)
        results[label] = (cpu, calls)

    loop = asyncio.get_running_loop()

    def feed(label: str) -> Callable[[], Any]:
        def run() -> None:
            wire.chunks = phases[label]
            # The informer's own watch loop over the stream (run to completion here).
            coro = informer._watch_once()
            try:
                coro.send(None)
            except StopIteration as stop:
                assert stop.value == n, (stop.value, n)
            else:
                raise RuntimeError("the watch awaited something real")
        return run

    measure("added", feed("added"))
    assert len(sched.queue) == n, len(sched.queue)

    def schedule() -> None:
        for i in range(n):
            qpi = sched.queue.pop_nowait()
            assert qpi is not None
            assumed = assumed_pod_info(qpi.pod_info, node_names[int(qpi.pod_info.name[2:])
                                                                  % len(node_names)])
            sched.cache.assume_pod(assumed)
            sched.cache.finish_binding(assumed.pod)
            sched.queue.done(assumed.uid)

    measure("pop+assume", schedule)
    measure("bound", feed("bound"))
    assert not sched.cache.dump().assumed_pods
    if args.kubelet:
        measure("status", feed("status"))
    del loop
    await parts.client.close()
    return results


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pods", type=int, default=2000)
    ap.add_argument("--nodes", type=int, default=5000)
    ap.add_argument("--config", choices=("floor", "default"), default="floor")
    ap.add_argument("--kubelet", action="store_true")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--profile-top", type=int, default=0)
    ap.add_argument("--profile-sort", default="tottime",
                    help="pstats order of --profile-top: tottime, ncalls, cumulative")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    configure_logging(level="warning")
    name = floor_config().profiles[0].scheduler_name if args.config == "floor" else (
        default_config().profiles[0].scheduler_name)
    tpl = await templates(name)
    best: dict[str, float] = {}
    calls: dict[str, int] = {}
    for _ in range(args.rounds):
        for label, (cpu, count) in (await one_round(args, tpl, False)).items():
            best[label] = min(best.get(label, cpu), cpu)
    if args.profile:
        for label, (_cpu, count) in (await one_round(args, tpl, True)).items():
            calls[label] = count
    n = args.pods
    ingest = sum(v for k, v in best.items() if k != "pop+assume")
    for label, cpu in best.items():
        extra = f", {calls[label] / n:.1f} calls per pod" if label in calls else ""
        print(f"{label:>10}: {cpu / n * 1e6:8.1f} us per pod{extra}")
    print(f"{'ingest':>10}: {ingest / n * 1e6:8.1f} us per pod "
          f"(config={args.config}, pods={n}, nodes={args.nodes}, kubelet={args.kubelet})"
          + (f", {sum(v for k, v in calls.items() if k != 'pop+assume') / n:.1f} calls"
             " per pod" if calls else ""))


if __name__ == "__main__":
    asyncio.run(main())
