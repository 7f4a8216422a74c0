"""Micro-benchmark of one scheduling cycle (no API server): the default profile on N nodes.

    PYTHONPATH=. python tests/perf/bench_cycle.py --nodes 1000 --pods 500 [--profile]

Builds a cache and snapshot in memory, then runs PreFilter→Filter→Score→select for each pod
and assumes it (as the real cycle does), reporting the mean and p99 cycle time.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import random
import statistics
import time
from typing import Any

from scheduler.framework.types import Diagnosis
from scheduler.objects.pod import PodInfo
from scheduler.schedule_one import filter_nodes_from, num_feasible_nodes_to_find, select_host
from tests.offline import cache_with, default_framework


def node(i: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": f"node-{i:04d}", "uid": f"n{i}", "labels": {
            "kubernetes.io/hostname": f"node-{i:04d}",
            "topology.kubernetes.io/zone": f"zone-{'abc'[i % 3]}"}},
        "spec": {},
        "status": {"allocatable": {"cpu": "32", "memory": "128Gi", "pods": "110"},
                   "capacity": {"cpu": "32", "memory": "128Gi", "pods": "110"},
                   "conditions": [{"type": "Ready", "status": "True"}]},
    }


def pod(i: int, kind: str) -> dict[str, Any]:
    p: dict[str, Any] = {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": f"p-{i}", "namespace": "default", "uid": f"u{i}",
                     "resourceVersion": str(i), "labels": {"app": f"a{i // 50}"}},
        "spec": {"schedulerName": "py-scheduler", "containers": [{
            "name": "c", "image": "pause",
            "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}}]},
    }
    if kind == "anti-affinity":
        p["spec"]["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": f"a{i // 50}"}},
             "topologyKey": "kubernetes.io/hostname"}]}}
    if kind == "spread":
        p["spec"]["topologySpreadConstraints"] = [{
            "maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": f"a{i // 50}"}}}]
    return p


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--pods", type=int, default=500)
    ap.add_argument("--workload", default="plain", choices=("plain", "anti-affinity", "spread"))
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args()
    cache, snapshot = cache_with(node(i) for i in range(args.nodes))
    fwk = default_framework(snapshot)
    rng = random.Random(1)
    times: list[float] = []
    start_index = 0

    def cycle(i: int) -> None:
        nonlocal start_index
        t = time.perf_counter()
        cache.update_snapshot(snapshot)
        info = PodInfo.from_pod(pod(i, args.workload))
        state = fwk.new_cycle_state()
        nodes = snapshot.list()
        _, status, _ = fwk.run_pre_filter_plugins(state, info, nodes)
        assert status is None or status.is_success(), status
        to_find = num_feasible_nodes_to_find(0, len(nodes))
        n = len(nodes)
        feasible, processed = filter_nodes_from(
            fwk, state, info, nodes, start=start_index, to_find=to_find, diagnosis=Diagnosis())
        start_index = (start_index + processed) % n
        fwk.run_pre_score_plugins(state, info, feasible)
        table, status = fwk.score_table(state, info, feasible)
        host = select_host(list(zip(table.names, table.totals)), rng)
        assumed = dict(info.pod)
        assumed["spec"] = {**info.pod["spec"], "nodeName": host}
        cache.assume_pod(PodInfo.from_pod(assumed))
        times.append(time.perf_counter() - t)

    profiler = cProfile.Profile() if args.profile else None
    if profiler:
        profiler.enable()
    for i in range(args.pods):
        cycle(i)
    if profiler:
        profiler.disable()
        pstats.Stats(profiler).sort_stats("tottime").print_stats(25)
    times.sort()
    print(f"{args.workload}: nodes={args.nodes} pods={args.pods} "
          f"mean={statistics.fmean(times) * 1000:.2f}ms p50={times[len(times) // 2] * 1000:.2f}ms "
          f"p99={times[int(len(times) * 0.99)] * 1000:.2f}ms")


if __name__ == "__main__":
    main()
