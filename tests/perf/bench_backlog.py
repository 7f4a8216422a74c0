"""Micro-benchmark: what a backlog of pending pods costs per pod, against its size.

Run by hand (``python tests/perf/bench_backlog.py``); figures go to docs/benchmarks.md
(the Backlog workload).  With N pods pending, it times (process CPU, so a loaded machine
moves it less) the queue's part of a backlog pod's life: its add (what the informer's
initial list does for each pending pod), its pop (the activeQ heap), and its removal when
it is bound (the informer's confirmation), plus a nomination and its release.  Each
figure should stay flat, or grow like log N, as N grows: a per-pod cost that grows
with N makes a backlog quadratic.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import time
from typing import Any

from tests.unit.queue.helpers import make_queue, new_metrics

from scheduler.logging import configure_logging
from scheduler.objects.pod import PodInfo
from scheduler.plugins.queuesort import PrioritySort


def pending_pod(i: int) -> dict[str, Any]:
    return {
        "metadata": {"name": f"pod-{i}", "namespace": "bench", "uid": f"uid-{i}",
                     "resourceVersion": str(i + 1)},
        "spec": {"schedulerName": "default-scheduler", "priority": i % 3,
                 "containers": [{"name": "c", "resources": {
                     "requests": {"cpu": "100m", "memory": "500Mi"}}}]},
    }


def _per_pod_us(seconds: float, count: int) -> float:
    return seconds / max(count, 1) * 1e6


async def one_size(count: int, *, keyed: bool) -> dict[str, float]:
    pods = [pending_pod(i) for i in range(count)]
    queue = make_queue(metrics=new_metrics(),
                       sort_key=PrioritySort().sort_key() if keyed else None)
    gc.collect()
    t0 = time.process_time()
    for p in pods:
        queue.add(p)
    t1 = time.process_time()
    popped = [await queue.pop() for _ in range(count)]
    t2 = time.process_time()
    for qpi in popped:
        assert qpi is not None
        queue.done(qpi.pod_info.uid)
        queue.delete(qpi.pod_info.pod, bound=True)
    t3 = time.process_time()
    infos = [PodInfo.from_pod(p) for p in pods]
    t4 = time.process_time()
    for i, info in enumerate(infos):
        queue.nominator.add_nominated_pod(info, f"node-{i % 500}")
    for info in infos:
        queue.nominator.delete_nominated_pod_if_exists(info.pod)
    t5 = time.process_time()
    return {"add": _per_pod_us(t1 - t0, count), "pop": _per_pod_us(t2 - t1, count),
            "done+delete": _per_pod_us(t3 - t2, count),
            "nominate+release": _per_pod_us(t5 - t4, count)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="1000,10000,50000")
    parser.add_argument("--no-key", action="store_true",
                        help="heaps call less() twice per comparison (no sort key)")
    args = parser.parse_args()
    configure_logging(fmt="console", level="warning")
    print("| pending pods | add µs/pod | pop µs/pod | done+delete µs/pod | "
          "nominate+release µs/pod |")
    print("|---|---|---|---|---|")
    for size in (int(s) for s in args.sizes.split(",")):
        r = asyncio.run(one_size(size, keyed=not args.no_key))
        print(f"| {size} | {r['add']:.1f} | {r['pop']:.1f} | {r['done+delete']:.1f} | "
              f"{r['nominate+release']:.1f} |")


if __name__ == "__main__":
    main()
