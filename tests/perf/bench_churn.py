"""MixedChurn's scheduling loop in process (no API server): pod-default pods scheduled by the
real batched cycle on N node-default nodes in three zones, and every ``--every`` pods one
tick of the bench's churn (upstream's recreate with number 1): at one tick a churn node
(no labels, capacity ``pods: 0``: it takes no pod) is added and an unschedulable 9-CPU
priority-10 pod tried once, PostFilter included; at the next the node is removed (and the
large pod deleted, which costs the cycle nothing).  Process CPU per measured pod, the share
spent on the large pods, and a digest of the chosen hosts and of the large pods' messages
(two builds must print the same digests).

    PYTHONPATH=. python tests/perf/bench_churn.py [--nodes 5000] [--pods 2000] [--every 100]

``--every`` is the pods scheduled per churn tick: the bench's churn ticks once a second,
so it is the scheduler's pods/s (114 at the loaded figure in docs/benchmarks.md, ~1420 at
twice upstream's floor).  ``--profile FILE`` writes a cProfile of the measured part and
prints its Python calls per pod: not moved by the machine's load, and the same in every run
of one build (the per-plugin timing samples 10 % of the cycles, as the daemon does, from a
seeded generator: ``tests.offline.default_framework``), so two builds compare by it.
"""

from __future__ import annotations

import argparse
import cProfile
import hashlib
import time
from typing import Any

from scheduler.bench import workloads
from scheduler.objects.pod import PodInfo
from tests.offline import attempt, cache_with, default_framework, place, scheduling_cycle
from tests.perf._harness import measured, quiet_logs
from tests.perf.bench_batched_cycle import node


def main() -> None:
    quiet_logs()
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=5000)
    ap.add_argument("--pods", type=int, default=2000)
    ap.add_argument("--every", type=int, default=100)
    ap.add_argument("--profile", default="")
    ap.add_argument("--profile-churn", default="", help="a cProfile of the churn alone")
    args = ap.parse_args()
    cache, snapshot = cache_with(node(i) for i in range(args.nodes))
    fwk = default_framework(snapshot)
    cycle = scheduling_cycle(cache, snapshot)
    hosts: list[str] = []
    messages: list[str] = []
    churn_node: list[dict[str, Any]] = []
    large_cpu = [0.0]

    churn_profiler = cProfile.Profile() if args.profile_churn else None

    def churn(index: int) -> None:
        if churn_profiler is not None:
            churn_profiler.enable()
        started = time.process_time()
        _, obj = workloads.churn_object("node", index, scheduler_name="default-scheduler")
        obj["metadata"]["uid"] = f"churn-{index}"
        cache.add_node(obj)
        churn_node.append(obj)
        _, large = workloads.churn_object("large-pod", index, scheduler_name="default-scheduler")
        large["metadata"]["uid"] = f"large-{index}"
        host, _, status = attempt(cache, snapshot, fwk, cycle, PodInfo.from_pod(large))
        messages.append("scheduled?" if host is not None or status is None
                        else status.message())
        large_cpu[0] += time.process_time() - started
        if churn_profiler is not None:
            churn_profiler.disable()

    def run(count: int, first: int) -> None:
        for i in range(first, first + count):
            if i % args.every == 0:
                # a tick: what the tick before created is deleted, else created
                if churn_node:
                    for old in churn_node:
                        cache.remove_node(old)
                    churn_node.clear()
                else:
                    churn(i // args.every)
            pod = workloads.pod(f"p{i}", namespace="bench", scheduler_name="default-scheduler")
            pod["metadata"]["uid"] = f"u{i}"
            hosts.append(place(cache, snapshot, fwk, cycle, pod))

    run(200, 1)  # warm
    large_cpu[0] = 0.0
    with measured(args.profile) as part:
        run(args.pods, 201)
    cpu = part.cpu
    if churn_profiler is not None:
        churn_profiler.dump_stats(args.profile_churn)
    digest = hashlib.sha256(",".join(hosts).encode()).hexdigest()[:12]
    said = hashlib.sha256("\n".join(messages).encode()).hexdigest()[:12]
    calls = f"; Python calls per pod {part.calls / args.pods:.1f}" if args.profile else ""
    print(f"nodes={args.nodes} pods={args.pods} every={args.every}: CPU per pod "
          f"{cpu / args.pods * 1000:.3f} ms ({large_cpu[0] / args.pods * 1000:.3f} ms of it "
          f"the churn and large pods){calls}; hosts {digest}; messages {said}")
    if messages:
        print("last message:", messages[-1][:300])
    batches = cycle.batches
    if batches is not None:
        print(f"batching: {batches.reused} node filters reused, {batches.windows_reused} "
              f"windows reused, {batches.score_windows_reused} scored from kept scores")


if __name__ == "__main__":
    main()
