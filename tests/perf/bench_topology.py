"""The real batched scheduling cycle offline for the affinity and spreading shapes of
upstream's scheduler_perf (TopologySpreading, SchedulingPodAntiAffinity, NodeAffinity,
SchedulingBasic for reference): the bench's node and pod templates, its existing pods, each
measured pod assumed and then confirmed by an informer-like ``add_pod`` a few pods later
(the bound MODIFIED event), process CPU per pod of the loop alone.

    PYTHONPATH=. python tests/perf/bench_topology.py TopologySpreading [--nodes 5000]
        [--pods 2000] [--lag 8] [--profile] [--owned]

No API server, informer or binding: what the bench's ``cycle_cpu_per_pod_ms`` holds of the
plugins and batching.  The digest of the chosen hosts says two builds placed the same pods
on the same nodes.  ``--profile`` prints cProfile's top functions of the measured loop.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import hashlib
import pstats
import random
import time
from collections import deque
from typing import Any

from scheduler.bench import workloads
from scheduler.cache.cache import Cache
from scheduler.cache.snapshot import Snapshot
from scheduler.framework.types import FitError
from scheduler.objects.pod import PodInfo
from tests.fakes import DictListers
from tests.offline import default_framework, scheduling_cycle, windows_reused


def node(i: int) -> dict[str, Any]:
    name = f"node-{i:05d}"
    capacity = {"cpu": "4", "memory": "32Gi", "pods": "110"}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "uid": f"n{i}", "labels": {
                "kubernetes.io/hostname": name,
                "topology.kubernetes.io/zone": workloads.ZONES[i % 3]}},
            "spec": {}, "status": {"allocatable": capacity, "capacity": dict(capacity),
                                   "conditions": [{"type": "Ready", "status": "True"}]}}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("workload", choices=("TopologySpreading", "SchedulingPodAntiAffinity",
                                         "NodeAffinity", "SchedulingBasic"))
    ap.add_argument("--nodes", type=int, default=5000)
    ap.add_argument("--pods", type=int, default=2000)
    ap.add_argument("--warm", type=int, default=200)
    ap.add_argument("--lag", type=int, default=8, help="pods assumed before the first "
                    "confirmation (the binding's round trip)")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--owned", action="store_true", help="measured pods labelled app=web and "
                    "owned by a ReplicaSet the listers hold: PodTopologySpread's system "
                    "default constraints apply")
    args = ap.parse_args()
    shape = workloads.WORKLOADS[args.workload]
    cache, snapshot = Cache(), Snapshot()
    for i in range(args.nodes):
        cache.add_node(node(i))
    names = [f"node-{i:05d}" for i in range(args.nodes)]
    rng = random.Random(7)
    existing = shape.scaled(shape.existing_pods, args.nodes)
    for i in range(existing):
        assert shape.existing is not None
        pod = shape.existing(i, "default-scheduler")
        pod["metadata"]["uid"] = f"e{i}"
        pod["spec"]["nodeName"] = names[rng.randrange(args.nodes)] if (
            args.workload != "SchedulingPodAntiAffinity") else names[i % args.nodes]
        cache.add_pod(PodInfo.from_pod(pod))
    owner = {"apiVersion": "apps/v1", "kind": "ReplicaSet",
             "metadata": {"name": "web", "namespace": workloads.MEASURED_NAMESPACE},
             "spec": {"selector": {"matchLabels": {"app": "web"}}}}
    fwk = default_framework(snapshot, **(
        {"listers": DictListers({"replicasets": [owner]})} if args.owned else {}))
    cycle = scheduling_cycle(cache, snapshot)
    hosts: list[str] = []
    pending: deque[PodInfo] = deque()

    def run(count: int, first: int) -> None:
        for i in range(first, first + count):
            pod = shape.measured(i, "default-scheduler")
            if args.owned:
                pod["metadata"]["labels"] = {**pod["metadata"].get("labels", {}), "app": "web"}
                pod["metadata"]["ownerReferences"] = [{
                    "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": "rs",
                    "controller": True}]
            pod["metadata"]["uid"] = f"u{i}"
            info = PodInfo.from_pod(pod)
            cache.update_snapshot(snapshot)
            try:
                host = cycle.schedule_pod(fwk, fwk.new_cycle_state(), info).suggested_host
            except FitError:
                hosts.append("-")
                continue
            bound = {**pod, "spec": {**pod["spec"], "nodeName": host}}
            cache.assume_pod(PodInfo.from_pod(bound))
            pending.append(PodInfo.from_pod(bound))
            while len(pending) > args.lag:
                cache.add_pod(pending.popleft())  # the informer's confirmation
            hosts.append(host)

    run(args.warm, 0)  # warm: the first pass over every window
    gc.collect()
    gc.freeze()
    profiler = cProfile.Profile(time.process_time) if args.profile else None
    started = time.process_time()
    if profiler is not None:
        profiler.enable()
    run(args.pods, args.warm)
    if profiler is not None:
        profiler.disable()
    cpu = time.process_time() - started
    digest = hashlib.sha256(",".join(hosts).encode()).hexdigest()[:12]
    print(f"{args.workload} nodes={args.nodes} pods={args.pods} cycle CPU per pod "
          f"{cpu / args.pods * 1000:.3f} ms hosts {digest}{windows_reused(cycle)}")
    if profiler is not None:
        stats = pstats.Stats(profiler)
        stats.sort_stats("tottime").print_stats(30)
        stats.sort_stats("cumulative").print_stats(45)


if __name__ == "__main__":
    main()
