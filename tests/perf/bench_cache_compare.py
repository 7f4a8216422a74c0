"""What the cache comparer costs (run by hand; figure in docs/explain.md "Is the cache
right?"): one comparison of a cache holding ``--nodes`` nodes and ``--pods`` bound pods with
the same objects as the informers hold them (every pod parsed afresh to recompute the node
totals), best of 3.

    python -m tests.perf.bench_cache_compare --nodes 5000 --pods 30000
"""

from __future__ import annotations

import argparse
import time

from scheduler.cache import Cache
from scheduler.cache.comparer import compare
from scheduler.objects.pod import PodInfo
from tests.builders import make_node, make_pod


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=30000)
    args = parser.parse_args()
    cache = Cache()
    nodes = [make_node(f"node-{i:05d}") for i in range(args.nodes)]
    for n in nodes:
        n["metadata"]["resourceVersion"] = "1"
        cache.add_node(n)
    pods = []
    for i in range(args.pods):
        p = make_pod(f"pod-{i:06d}", cpu="100m", memory="128Mi",
                     node=f"node-{i % args.nodes:05d}")
        p["metadata"]["resourceVersion"] = "1"
        cache.add_pod(PodInfo.from_pod(p))
        pods.append(p)
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        result = compare(cache, nodes=nodes, pods=pods)
        best = min(best, time.perf_counter() - started)
        assert result.clean, result.differences[:3]
    print(f"{args.nodes} nodes, {args.pods} pods: one comparison {best * 1000:.0f} ms "
          "(best of 3)")


if __name__ == "__main__":
    main()
