"""Benchmark of the sandbox API server (run by hand; figures go to docs/benchmarks.md).

The sandbox runs in its own process (``python -m scheduler.sandbox``); clients run in other
processes and use the official client (``kubernetes.aio``, raw responses so the client's model
classes do not dominate) or raw aiohttp where that is what a scheduler does:

1. create N nodes and M pods with ``kubernetes.aio`` from W worker processes -> writes/s
   (``--client raw``: ``ApiClient.call_api`` with dict bodies; ``--client typed``: the
   generated ``CoreV1Api.create_*_without_preload_content`` methods)
2. list all pods (raw HTTP + orjson; and with the official client) -> seconds
3. bind every pod from 32 concurrent connections while 10 watchers stream pods -> binds/s
   and the delay between a bind's response and its MODIFIED event at each watcher.

    python tests/perf/bench_sandbox.py [--nodes 5000] [--pods 10000] [--json]

``--per-pod``: the sandbox's own CPU per scheduled pod, in the shape of the scheduler's bench.
The sandbox (``--nodes`` simulated nodes, kubelet on) runs in a subprocess; this process is
the client: one pod watch with the scheduler's field selector (and bookmarks), one node
watch, then for each pod its create POST, its binding POST and its ``Scheduled`` Event POST
(events.k8s.io/v1), ``--concurrency`` at a time, each phase measured apart (the sandbox's
user+system CPU from /proc/<pid>/stat, divided by the pods), the binding phase until the
watch has seen every pod Running (the kubelet's status write included).

    nice -n 5 python tests/perf/bench_sandbox.py --per-pod --nodes 5000 --pods 5000
    # profile the sandbox meanwhile: /work/wt/py-spy record --pid <printed pid> ...

``--calls TOP``: the same phases with the sandbox (as ``python -m scheduler.sandbox`` builds
it) in a thread of this process, each phase under cProfile on the sandbox's loop only: its
Python calls per pod (they do not move with the machine's load, unlike its CPU) and the TOP
functions by calls; ``--calls-dump DIR`` keeps each phase's profile for pstats.

    nice -n 5 python tests/perf/bench_sandbox.py --calls 25 --nodes 5000 --pods 2000
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures as cf
import json
import multiprocessing as mp
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from scheduler.sandbox.testing import SandboxProcess  # noqa: E402


# ------------------------------------------------------------------ workers (child processes)


async def _create(kubeconfig: str, kind: str, names: list[str], concurrency: int, mode: str) -> float:
    from kubernetes.aio import client, config

    api_client = await config.new_client_from_config(config_file=kubeconfig)
    async with api_client:
        core = client.CoreV1Api(api_client)
        host = api_client.configuration.host
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        queue = list(reversed(names))

        async def one() -> None:
            while queue:
                name = queue.pop()
                if kind == "node":
                    body = {"apiVersion": "v1", "kind": "Node",
                            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
                            "status": {"allocatable": {"cpu": "32", "memory": "128Gi", "pods": "110"},
                                       "capacity": {"cpu": "32", "memory": "128Gi", "pods": "110"}}}
                    if mode == "raw":
                        r = await api_client.call_api("POST", f"{host}/api/v1/nodes", headers, body=body)
                    else:
                        r = await core.create_node_without_preload_content(body)
                else:
                    body = {"apiVersion": "v1", "kind": "Pod",
                            "metadata": {"name": name, "labels": {"app": "bench"}},
                            "spec": {"containers": [{"name": "c", "image": "busybox",
                                                     "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]}}
                    if mode == "raw":
                        r = await api_client.call_api("POST", f"{host}/api/v1/namespaces/default/pods",
                                                      headers, body=body)
                    else:
                        r = await core.create_namespaced_pod_without_preload_content("default", body)
                assert r.status == 201, r.status
                await r.read()

        t0 = time.perf_counter()
        await asyncio.gather(*(one() for _ in range(concurrency)))
        return time.perf_counter() - t0


def create_worker(kubeconfig: str, kind: str, names: list[str], concurrency: int, mode: str = "raw") -> float:
    return asyncio.run(_create(kubeconfig, kind, names, concurrency, mode))


async def _bind(url: str, pods: list[tuple[str, str]], concurrency: int) -> dict[str, float]:
    done: dict[str, float] = {}
    queue = list(reversed(pods))
    conn = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=conn) as s:
        async def one() -> None:
            while queue:
                name, node = queue.pop()
                body = orjson.dumps({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name},
                                     "target": {"apiVersion": "v1", "kind": "Node", "name": node}})
                async with s.post(f"{url}/api/v1/namespaces/default/pods/{name}/binding", data=body,
                                  headers={"Content-Type": "application/json"}) as r:
                    await r.read()
                    assert r.status == 201, r.status
                done[name] = time.time()

        t0 = time.perf_counter()
        await asyncio.gather(*(one() for _ in range(concurrency)))
        done["__elapsed__"] = time.perf_counter() - t0
    return done


def bind_worker(url: str, pods: list[tuple[str, str]], concurrency: int) -> dict[str, float]:
    return asyncio.run(_bind(url, pods, concurrency))


async def _watch(url: str, rv: str, watchers: int, expect: int, ready: Any) -> list[dict[str, float]]:
    seen: list[dict[str, float]] = [{} for _ in range(watchers)]

    async def one(i: int, s: aiohttp.ClientSession) -> None:
        params = {"watch": "true", "resourceVersion": rv, "timeoutSeconds": "600"}
        async with s.get(f"{url}/api/v1/pods", params=params,
                         timeout=aiohttp.ClientTimeout(total=None)) as r:
            ready.put(i)
            async for line in r.content:
                ev = orjson.loads(line)
                obj = ev["object"]
                if ev["type"] == "MODIFIED" and obj["spec"].get("nodeName"):
                    name = obj["metadata"]["name"]
                    if name not in seen[i]:
                        seen[i][name] = time.time()
                        if len(seen[i]) >= expect:
                            return

    async with aiohttp.ClientSession() as s:
        await asyncio.gather(*(one(i, s) for i in range(watchers)))
    return seen


def watch_worker(url: str, rv: str, watchers: int, expect: int, ready: Any) -> list[dict[str, float]]:
    return asyncio.run(_watch(url, rv, watchers, expect, ready))


# ------------------------------------------------------------------ driver


def _cpu_seconds(pid: int) -> float:
    """User+system CPU time of a process (Linux), to tell server cost from client cost."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _split(items: list[Any], n: int) -> list[list[Any]]:
    return [items[i::n] for i in range(n)]


def run(args: argparse.Namespace) -> dict[str, Any]:
    results: dict[str, Any] = {"nodes": args.nodes, "pods": args.pods, "cpus": os.cpu_count(),
                               "client": args.client}
    with SandboxProcess(watch_history=max(20000, args.pods * 3)) as sp:
        kc = str(sp.kubeconfig_path)
        ctx = mp.get_context("spawn")
        with cf.ProcessPoolExecutor(args.workers, mp_context=ctx) as pool:
            # warm the workers (process start, imports, client setup) outside the timings
            list(pool.map(create_worker, [kc] * args.workers, ["pod"] * args.workers,
                          [[f"warm-{i}"] for i in range(args.workers)], [1] * args.workers))
            # 1. writes
            assert sp.proc is not None
            cpu0 = _cpu_seconds(sp.proc.pid)
            t0 = time.perf_counter()
            nodes = [f"bench-node-{i:05d}" for i in range(args.nodes)]
            list(pool.map(create_worker, [kc] * args.workers, ["node"] * args.workers,
                          _split(nodes, args.workers), [args.concurrency] * args.workers,
                          [args.client] * args.workers))
            t_nodes = time.perf_counter() - t0
            t0 = time.perf_counter()
            pods = [f"bench-pod-{i:05d}" for i in range(args.pods)]
            list(pool.map(create_worker, [kc] * args.workers, ["pod"] * args.workers,
                          _split(pods, args.workers), [args.concurrency] * args.workers,
                          [args.client] * args.workers))
            t_pods = time.perf_counter() - t0
            results["create_nodes_per_s"] = round(args.nodes / t_nodes)
            results["create_pods_per_s"] = round(args.pods / t_pods)
            results["writes_per_s"] = round((args.nodes + args.pods) / (t_nodes + t_pods))
            server_cpu = _cpu_seconds(sp.proc.pid) - cpu0
            results["server_cpu_pct_during_writes"] = round(100 * server_cpu / (t_nodes + t_pods))
            us = 1e6 * server_cpu / (args.nodes + args.pods)
            results["server_us_per_write"] = round(us)
            results["server_write_capacity_per_s"] = round(1e6 / us)

        # 2. list
        async def list_raw() -> tuple[float, int, str]:
            async with aiohttp.ClientSession() as s:
                best = 1e9
                for _ in range(3):
                    t = time.perf_counter()
                    async with s.get(f"{sp.url}/api/v1/pods") as r:
                        body = orjson.loads(await r.read())
                    best = min(best, time.perf_counter() - t)
                return best, len(body["items"]), body["metadata"]["resourceVersion"]

        t_list, n_items, rv = asyncio.run(list_raw())
        assert n_items == args.pods + args.workers
        results["list_pods_s"] = round(t_list, 3)
        from kubernetes import client, config

        core = client.CoreV1Api(config.new_client_from_config(config_file=kc))
        t = time.perf_counter()
        r = core.list_pod_for_all_namespaces(_preload_content=False)
        assert len(json.loads(r.data)["items"]) == n_items
        results["list_pods_official_client_raw_s"] = round(time.perf_counter() - t, 3)

        # 3. binds with watchers
        ctx = mp.get_context("spawn")
        manager = ctx.Manager()
        ready = manager.Queue()
        with cf.ProcessPoolExecutor(2, mp_context=ctx) as pool:
            wf = pool.submit(watch_worker, sp.url, rv, args.watchers, args.pods, ready)
            for _ in range(args.watchers):
                ready.get(timeout=60)
            pairs = [(p, nodes[i % len(nodes)] if nodes else "node-x") for i, p in enumerate(pods)]
            cpu0 = _cpu_seconds(sp.proc.pid)
            bf = pool.submit(bind_worker, sp.url, pairs, 32)
            done = bf.result()
            bind_cpu = _cpu_seconds(sp.proc.pid) - cpu0
            seen = wf.result(timeout=300)
        elapsed = done.pop("__elapsed__")
        results["binds_per_s"] = round(len(done) / elapsed)
        results["server_cpu_pct_during_binds"] = round(100 * bind_cpu / elapsed)
        delays = []
        for name, t_bind in done.items():
            worst = max(w[name] for w in seen) - t_bind
            delays.append(worst * 1000)
        delays.sort()
        results["watch_fanout_watchers"] = args.watchers
        results["watch_delay_ms_p50"] = round(statistics.median(delays), 1)
        results["watch_delay_ms_p99"] = round(delays[int(len(delays) * 0.99) - 1], 1)
        counters = sp.admin.counters()
        results["server_bindings"] = counters["bindings"]
    return results


# ------------------------------------------------------------------ per pod (--per-pod)

SCHEDULER_POD_SELECTOR = "status.phase!=Succeeded,status.phase!=Failed"


def _bench_pod(i: int) -> dict[str, Any]:
    from scheduler.bench.workloads import pod

    return pod(f"pod-{i:06d}", namespace="default", scheduler_name="kube-py-scheduler",
               labels={"app": "bench", "type": "measured"})


def _scheduled_event(name: str, node: str, i: int) -> dict[str, Any]:
    ref = {"kind": "Pod", "namespace": "default", "name": name, "uid": "", "apiVersion": "v1"}
    return {"apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": f"{name}.{i:x}", "namespace": "default"},
            "eventTime": "2026-11-27T05:00:00.000000Z", "reportingController": "kube-py-scheduler",
            "reportingInstance": "kube-py-scheduler-bench", "action": "Binding", "reason": "Scheduled",
            "regarding": ref, "note": f"Successfully assigned default/{name} to {node}",
            "type": "Normal"}


class _Phases:
    """What --per-pod measures around each phase: the sandbox process's CPU by default."""

    def __init__(self, pid: int) -> None:
        self.pid = pid

    def cpu(self) -> float:
        return _cpu_seconds(self.pid)

    def start(self, label: str) -> None:
        pass

    def stop(self, label: str, out: dict[str, Any], n: int) -> None:
        pass


async def _per_pod(sp: Any, args: argparse.Namespace, phases: _Phases | None = None) -> dict[str, Any]:
    assert sp.proc is not None
    pid = sp.proc.pid
    ph = phases or _Phases(pid)
    n = args.pods
    names = [f"pod-{i:06d}" for i in range(n)]
    nodes = [f"node-{i:0{max(4, len(str(args.nodes - 1)))}d}" for i in range(args.nodes)]
    running: set[str] = set()
    all_running = asyncio.Event()
    conn = aiohttp.TCPConnector(limit=args.concurrency + 4)
    hdr = {"Content-Type": "application/json", "Accept": "application/json"}
    out: dict[str, Any] = {"sandbox_pid": pid, "nodes": args.nodes, "pods": n,
                           "concurrency": args.concurrency, "cpus": os.cpu_count()}
    async with aiohttp.ClientSession(connector=conn) as s:
        async with s.get(f"{sp.url}/api/v1/pods", params={"limit": "500"}) as r:
            rv = orjson.loads(await r.read())["metadata"]["resourceVersion"]

        async def pod_watch() -> None:
            params = {"watch": "true", "resourceVersion": rv, "allowWatchBookmarks": "true",
                      "fieldSelector": SCHEDULER_POD_SELECTOR, "timeoutSeconds": "3600"}
            async with s.get(f"{sp.url}/api/v1/pods", params=params, headers=hdr,
                             timeout=aiohttp.ClientTimeout(total=None)) as r:
                async for line in r.content:
                    ev = orjson.loads(line)
                    if ev["type"] == "MODIFIED" and ev["object"]["status"].get("phase") == "Running":
                        running.add(ev["object"]["metadata"]["name"])
                        if len(running) >= n:
                            all_running.set()

        async def node_watch() -> None:
            params = {"watch": "true", "resourceVersion": rv, "allowWatchBookmarks": "true",
                      "timeoutSeconds": "3600"}
            async with s.get(f"{sp.url}/api/v1/nodes", params=params, headers=hdr,
                             timeout=aiohttp.ClientTimeout(total=None)) as r:
                async for _line in r.content:
                    pass

        watches = [asyncio.create_task(pod_watch(), name="bench-pod-watch"),
                   asyncio.create_task(node_watch(), name="bench-node-watch")]
        await asyncio.sleep(0.5)

        async def phase(label: str, make: Any, wait_running: bool = False) -> None:
            todo = list(range(n - 1, -1, -1))

            async def worker() -> None:
                while todo:
                    i = todo.pop()
                    url, body = make(i)
                    async with s.post(url, data=orjson.dumps(body), headers=hdr) as r:
                        await r.read()
                        assert r.status == 201, (label, r.status, await r.text())

            ph.start(label)
            cpu0 = ph.cpu()
            t0 = time.perf_counter()
            await asyncio.gather(*(worker() for _ in range(args.concurrency)))
            if wait_running:
                await asyncio.wait_for(all_running.wait(), 120)
            wall = time.perf_counter() - t0
            cpu = ph.cpu() - cpu0
            ph.stop(label, out, n)
            out[f"{label}_us_per_pod"] = round(1e6 * cpu / n, 1)
            out[f"{label}_per_s"] = round(n / wall)

        base = f"{sp.url}/api/v1/namespaces/default/pods"
        await phase("create", lambda i: (base, _bench_pod(i)))
        await phase("bind_and_status", lambda i: (
            f"{base}/{names[i]}/binding",
            {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": names[i], "namespace": "default"},
             "target": {"apiVersion": "v1", "kind": "Node", "name": nodes[i % len(nodes)]}}),
            wait_running=True)
        await phase("event", lambda i: (f"{sp.url}/apis/events.k8s.io/v1/namespaces/default/events",
                                        _scheduled_event(names[i], nodes[i % len(nodes)], i)))
        for w in watches:
            w.cancel()
        await asyncio.gather(*watches, return_exceptions=True)
    out["total_us_per_pod"] = round(sum(v for k, v in out.items() if k.endswith("_us_per_pod")), 1)
    return out


def run_per_pod(args: argparse.Namespace) -> dict[str, Any]:
    with SandboxProcess(nodes=args.nodes, watch_history=max(10000, args.pods * 4)) as sp:
        if args.pause_for_profiler:
            assert sp.proc is not None
            print(f"sandbox pid {sp.proc.pid}; starting in {args.pause_for_profiler} s", flush=True)
            time.sleep(args.pause_for_profiler)
        return asyncio.run(_per_pod(sp, args))


class _ThreadPhases(_Phases):
    """--calls: the sandbox's thread's CPU, and a cProfile of that thread around each phase
    (enabled and disabled on the sandbox's own loop), reported as Python calls per pod."""

    def __init__(self, loop: asyncio.AbstractEventLoop, ident: int, top: int, dump: str | None) -> None:
        super().__init__(os.getpid())
        self.dump = dump
        self.loop = loop
        self.clock = time.pthread_getcpuclockid(ident)
        self.top = top
        self.prof: Any = None

    def cpu(self) -> float:
        return time.clock_gettime(self.clock)

    def _on_loop(self, fn: Any) -> None:
        asyncio.run_coroutine_threadsafe(_call(fn), self.loop).result(10)

    def start(self, label: str) -> None:
        import cProfile

        self.prof = cProfile.Profile()
        self._on_loop(self.prof.enable)

    def stop(self, label: str, out: dict[str, Any], n: int) -> None:
        import pstats

        self._on_loop(self.prof.disable)
        if self.dump:
            self.prof.dump_stats(str(Path(self.dump) / f"{label}.prof"))
        st = pstats.Stats(self.prof)
        rows = st.stats  # type: ignore[attr-defined]
        total = sum(v[1] for v in rows.values())
        out[f"{label}_calls_per_pod"] = round(total / n, 1)
        top = sorted(rows.items(), key=lambda kv: -kv[1][1])[: self.top]
        out[f"{label}_top_calls"] = [
            f"{v[1] / n:.2f} {Path(k[0]).name}:{k[1]}({k[2]})" for k, v in top]


async def _call(fn: Any) -> None:
    fn()


def run_calls(args: argparse.Namespace) -> dict[str, Any]:
    """--per-pod with the sandbox in a thread of this process (the CLI's own Sandbox and gc
    freeze), for call counts: they do not move with the machine's load."""
    import gc
    import threading

    from scheduler.sandbox import cli

    sargs = cli.build_parser().parse_args(
        ["--nodes", str(args.nodes), "--port", "0", "--no-scheduler-prereqs",
         "--watch-history", str(max(10000, args.pods * 4)), "--log-level", "warning"])
    sb = cli.sandbox_from_args(sargs)
    started: cf.Future[Any] = cf.Future()
    stopped = threading.Event()

    def serve() -> None:
        async def main() -> None:
            await sb.start()
            gc.collect()
            gc.freeze()
            done = asyncio.Event()
            started.set_result((asyncio.get_running_loop(), threading.get_ident(), done))
            await done.wait()
            await sb.stop()

        asyncio.run(main())
        stopped.set()

    th = threading.Thread(target=serve, name="sandbox", daemon=True)
    th.start()
    loop, ident, done = started.result(60)

    class _Sp:
        url = sb.url
        proc = type("P", (), {"pid": os.getpid()})()

    try:
        return asyncio.run(_per_pod(_Sp(), args, _ThreadPhases(loop, ident, args.calls, args.calls_dump)))
    finally:
        loop.call_soon_threadsafe(done.set)
        stopped.wait(30)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nodes", type=int, default=5000)
    p.add_argument("--pods", type=int, default=10000)
    p.add_argument("--workers", type=int, default=2, help="client processes for creates")
    p.add_argument("--concurrency", type=int, default=16, help="concurrent requests per worker")
    p.add_argument("--watchers", type=int, default=10)
    p.add_argument("--client", choices=["raw", "typed"], default="raw",
                   help="creates via ApiClient.call_api with dict bodies (raw, what a hot path should "
                        "do) or via the generated CoreV1Api methods (typed)")
    p.add_argument("--json", action="store_true", help="print JSON only")
    p.add_argument("--per-pod", action="store_true",
                   help="the sandbox's CPU per scheduled pod (create, bind + kubelet status, event)")
    p.add_argument("--pause-for-profiler", type=float, default=0.0,
                   help="with --per-pod: print the sandbox's pid and wait this long before measuring")
    p.add_argument("--calls", type=int, default=0, metavar="TOP",
                   help="--per-pod with the sandbox in a thread of this process: its Python calls "
                        "per pod per phase (cProfile) and the TOP functions by calls")
    p.add_argument("--calls-dump", metavar="DIR",
                   help="with --calls: write each phase's profile to DIR/<phase>.prof")
    args = p.parse_args()
    res = run_calls(args) if args.calls else run_per_pod(args) if args.per_pod else run(args)
    if args.json:
        print(json.dumps(res))
    else:
        width = max(len(k) for k in res)
        for k, v in res.items():
            print(f"{k:<{width}}  {v}")
        print(json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
