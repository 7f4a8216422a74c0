"""The scheduler's start (informer sync) with 10000 pending pods at 5000 nodes, the cyclic
collector paused during LISTs (``new``) or not (``old``), alternating in one sandbox.

    PYTHONPATH=. MODES=new,old python tests/perf/bench_sync.py [rounds]

Prints the wall time and the process CPU of ``Components.start`` (every informer's LIST and
handlers: 5000 nodes into the cache, 10000 pods into the queue).
"""
import asyncio, sys, time, os, gc
from scheduler.client.api import ApiClient
from scheduler.client.connection import load_connection
from scheduler.config.defaults import default_config
from scheduler.sandbox.testing import SandboxProcess
from scheduler.bench.ceiling import gather_bounded, create_namespace
from scheduler.bench.workloads import pod
import scheduler.client.informer as inf
from scheduler.logging import configure_logging
configure_logging(level="warning")

class NoPause:
    def __enter__(self): pass
    def __exit__(self,*a): pass

async def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    async with SandboxProcess(nodes=5000, simulate_kubelet=False) as sb:
        conn = load_connection(kubeconfig=str(sb.kubeconfig_path))
        user = ApiClient(conn, qps=0, pool_size=64)
        await create_namespace(user, "m")
        cfg = default_config(); cfg.leader_election.leader_elect = False; cfg.client_connection.qps = 0
        name = cfg.profiles[0].scheduler_name
        pods = [pod(f"p-{i}", namespace="m", scheduler_name=name) for i in range(10000)]
        async def c(p): await user.create("/api/v1/namespaces/m/pods", p)
        await gather_bounded(pods, c, 32)
        from scheduler.app import build_components
        from scheduler.metrics import SchedulerMetrics
        real = inf._collector_pause if hasattr(inf, "_collector_pause") else None
        for r in range(rounds):
            for mode in os.environ.get("MODES","new,old").split(","):
                if hasattr(inf, "_collector_pause"):
                    inf._collector_pause = real if mode == "new" else NoPause()
                parts = build_components(cfg, conn, metrics=SchedulerMetrics())
                gc.collect()
                c0, w0 = time.process_time(), time.monotonic()
                await parts.start(sync_timeout=120)
                c1, w1 = time.process_time(), time.monotonic()
                q = parts.scheduler.queue
                print(f"{mode}: sync wall {w1-w0:.3f}s cpu {c1-c0:.3f}s", flush=True)
                await parts.aclose(grace_seconds=1)
        await user.close()
asyncio.run(main())
