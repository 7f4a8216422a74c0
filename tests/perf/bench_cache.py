"""Micro-benchmark: Cache.update_snapshot with 5000 nodes / 50000 pods.

Run by hand (``python tests/perf/bench_cache.py``); figures go to docs/benchmarks.md.  Measures the
incremental refresh when 1 and 100 nodes changed since the previous snapshot (a pod added on
each), the cost of a first, full snapshot and of assume+forget, and MixedChurn's node churn:
a zone-less node added then removed, the snapshot updated after each (two node lists
rebuilt), in process CPU time.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

from scheduler.cache import Cache, Snapshot
from scheduler.objects.pod import PodInfo


def make_node(i: int) -> dict[str, Any]:
    return {
        "metadata": {
            "name": f"node-{i}",
            "uid": f"node-uid-{i}",
            "labels": {"topology.kubernetes.io/zone": f"zone-{i % 3}"},
        },
        "status": {
            "allocatable": {"cpu": "32", "memory": "128Gi", "pods": "110"},
            "images": [{"names": [f"img-{j}"], "sizeBytes": 100_000_000} for j in range(i % 5)],
        },
    }


def make_pod(i: int, node: str) -> dict[str, Any]:
    return {
        "metadata": {"name": f"pod-{i}", "namespace": "bench", "uid": f"pod-uid-{i}",
                     "labels": {"app": f"app-{i % 50}"}},
        "spec": {
            "nodeName": node,
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "100m",
                                                                    "memory": "128Mi"}}}],
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=50000)
    parser.add_argument("--rounds", type=int, default=50)
    args = parser.parse_args()

    cache = Cache()
    t0 = time.perf_counter()
    for i in range(args.nodes):
        cache.add_node(make_node(i))
    infos = [PodInfo.from_pod(make_pod(i, f"node-{i % args.nodes}")) for i in range(args.pods)]
    t1 = time.perf_counter()
    for info in infos:
        cache.add_pod(info)
    t2 = time.perf_counter()
    snapshot = Snapshot()
    cache.update_snapshot(snapshot)
    t3 = time.perf_counter()
    print(f"setup: {args.nodes} nodes + parse {args.pods} pods {t1 - t0:.2f}s, "
          f"add pods {t2 - t1:.2f}s; first full snapshot {1000 * (t3 - t2):.1f} ms")

    extra = args.pods
    for changed in (0, 1, 100):
        samples = []
        for r in range(args.rounds):
            for k in range(changed):
                node = f"node-{(r * 131 + k * 7) % args.nodes}"
                cache.add_pod(PodInfo.from_pod(make_pod(extra, node)))
                extra += 1
            start = time.perf_counter()
            cache.update_snapshot(snapshot)
            samples.append(time.perf_counter() - start)
        print(f"update_snapshot, {changed:>3} nodes changed: "
              f"median {1e6 * statistics.median(samples):8.1f} us, "
              f"max {1e6 * max(samples):8.1f} us")

    # MixedChurn's churn: a node with no zone added, then removed, a refresh after each.
    samples = []
    for r in range(args.rounds):
        churn = make_node(args.nodes + r)
        del churn["metadata"]["labels"]["topology.kubernetes.io/zone"]
        start = time.process_time()
        cache.add_node(churn)
        cache.update_snapshot(snapshot)
        cache.remove_node(churn)
        cache.update_snapshot(snapshot)
        samples.append(time.process_time() - start)
    print(f"node added + removed, two refreshes (CPU): "
          f"median {1e6 * statistics.median(samples):8.1f} us")

    # The hot path of every successful cycle: assume, then forget or confirm.
    pod = PodInfo.from_pod(make_pod(10**9, "node-0"))
    n = 2000
    start = time.perf_counter()
    for _ in range(n):
        cache.assume_pod(pod)
        cache.forget_pod(pod.pod)
    print(f"assume+forget on a node with ~{args.pods // args.nodes} pods: "
          f"{1e6 * (time.perf_counter() - start) / n:.1f} us")


if __name__ == "__main__":
    main()
