"""The real scheduling cycle (``SchedulingCycle.schedule_pod``, batching on) and the assume,
offline: upstream's pod-default pods on N node-default nodes, process CPU per pod.

    PYTHONPATH=. python tests/perf/bench_batched_cycle.py [--nodes 5000] [--pods 2000] [--profile]
        [--confirm]

No API server, informer or binding: what the bench's ``cycle_cpu_per_pod_ms`` holds of the
plugins and batching, measured without the I/O whose cost moves with the machine's load.
The digest of the chosen hosts says two builds placed the same pods on the same nodes.
``--profile``: the measured pods under cProfile, and the Python calls per pod (a count that
does not move with the machine's load, unlike the CPU time; the CPU figure is then the
profiler's).  ``--confirm``: each pod's bound version (the informer's MODIFIED after the
binding: a new resourceVersion and the PodScheduled condition) confirms its assumption
after the next pod's cycle, as in the daemon (the assumed parse re-pointed at it, as the
daemon's event handler does).
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import hashlib
import time
from typing import Any

from scheduler.bench import workloads
from scheduler.objects.pod import PodInfo
from tests.offline import cache_with, default_framework, place, scheduling_cycle, windows_reused
from tests.perf._harness import confirm_binding


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
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--confirm", action="store_true")
    args = ap.parse_args()
    cache, snapshot = cache_with(node(i) for i in range(args.nodes))
    fwk = default_framework(snapshot)
    cycle = scheduling_cycle(cache, snapshot)
    hosts: list[str] = []
    unconfirmed: list[dict[str, Any]] = []

    def run(count: int, first: int) -> None:
        for i in range(first, first + count):
            pod = workloads.pod(f"p{i}", namespace="bench", scheduler_name="default-scheduler")
            pod["metadata"]["uid"] = f"u{i}"
            host = place(cache, snapshot, fwk, cycle, pod)
            hosts.append(host)
            if args.confirm:
                for earlier in unconfirmed:
                    confirm_binding(cache, earlier)
                unconfirmed[:] = [{**pod, "spec": {**pod["spec"], "nodeName": host}}]

    run(200, 0)  # warm: the first pass over every window
    gc.collect()
    gc.freeze()
    profiler = cProfile.Profile() if args.profile else None
    started = time.process_time()
    if profiler is not None:
        profiler.enable()
    run(args.pods, 200)
    if profiler is not None:
        profiler.disable()
    cpu = time.process_time() - started
    digest = hashlib.sha256(",".join(hosts).encode()).hexdigest()[:12]
    calls = ""
    if profiler is not None:
        total = sum(entry.callcount for entry in profiler.getstats())
        calls = f" Python calls per pod {total / args.pods:.0f}"
    confirmed = " confirmed" if args.confirm else ""
    print(f"nodes={args.nodes} pods={args.pods}{confirmed} cycle CPU per pod {cpu / args.pods * 1000:.3f} ms "
          f"hosts {digest}{calls}{windows_reused(cycle)}")


if __name__ == "__main__":
    main()
