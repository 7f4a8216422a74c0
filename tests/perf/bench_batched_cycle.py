"""The real scheduling cycle (``SchedulingCycle.schedule_pod``, batching on) and the assume,
offline: upstream's pod-default pods on N node-default nodes, process CPU per pod.

    PYTHONPATH=. python tests/perf/bench_batched_cycle.py [--nodes 5000] [--pods 2000]

No API server, informer or binding: what the bench's ``cycle_cpu_per_pod_ms`` holds of the
plugins and batching, measured without the I/O whose cost moves with the machine's load.
The digest of the chosen hosts says two builds placed the same pods on the same nodes.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import random
import time
from types import SimpleNamespace
from typing import Any

from scheduler.bench import workloads
from scheduler.cache.cache import Cache
from scheduler.cache.snapshot import Snapshot
from scheduler.config.defaults import default_config
from scheduler.framework.runtime import Framework
from scheduler.metrics import SchedulerMetrics
from scheduler.objects.pod import PodInfo
from scheduler.offline import offline_handle_kwargs
from scheduler.plugins.registry import in_tree_registry
from scheduler.schedule_one import SchedulingCycle


def node(i: int) -> dict[str, Any]:
    name = f"node-{i:05d}"
    capacity = {"cpu": "4", "memory": "32Gi", "pods": "110"}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "uid": f"n{i}", "labels": {
                "kubernetes.io/hostname": name, "topology.kubernetes.io/zone": "abc"[i % 3]}},
            "spec": {}, "status": {"allocatable": capacity, "capacity": dict(capacity),
                                   "conditions": [{"type": "Ready", "status": "True"}]}}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=5000)
    ap.add_argument("--pods", type=int, default=2000)
    args = ap.parse_args()
    cache, snapshot = Cache(), Snapshot()
    for i in range(args.nodes):
        cache.add_node(node(i))
    kwargs = offline_handle_kwargs()
    kwargs["snapshot_provider"] = lambda: snapshot
    fwk = Framework(profile=default_config().profiles[0], registry=in_tree_registry(), **kwargs)
    sched = SimpleNamespace(
        cache=cache, snapshot=snapshot, rng=random.Random(1),
        config=SimpleNamespace(percentage_of_nodes_to_score=0),
        has_nominated_pods=lambda: False, metrics=SchedulerMetrics())
    cycle = SchedulingCycle(sched)  # type: ignore[arg-type]  # the cycle's collaborators
    hosts: list[str] = []

    def run(count: int, first: int) -> None:
        for i in range(first, first + count):
            pod = workloads.pod(f"p{i}", namespace="bench", scheduler_name="default-scheduler")
            pod["metadata"]["uid"] = f"u{i}"
            info = PodInfo.from_pod(pod)
            cache.update_snapshot(snapshot)
            host = cycle.schedule_pod(fwk, fwk.new_cycle_state(), info).suggested_host
            cache.assume_pod(PodInfo.from_pod({**pod, "spec": {**pod["spec"], "nodeName": host}}))
            hosts.append(host)

    run(200, 0)  # warm: the first pass over every window
    gc.collect()
    gc.freeze()
    started = time.process_time()
    run(args.pods, 200)
    cpu = time.process_time() - started
    digest = hashlib.sha256(",".join(hosts).encode()).hexdigest()[:12]
    print(f"nodes={args.nodes} pods={args.pods} cycle CPU per pod {cpu / args.pods * 1000:.3f} ms "
          f"hosts {digest}")


if __name__ == "__main__":
    main()
