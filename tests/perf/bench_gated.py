"""SchedulingWhileGated's node in process (no API server): upstream's 1Node_10000GatedPods
puts every pod on one node (90000 pods allowed), so what grows with a node's pod count is
paid every cycle.  ``--existing`` bound light pods are on the node first; then every
measured light pod is placed by the real batched cycle (snapshot updated, assumed), the pod
placed before it confirmed (its binding's version replaces the assumed one, as the informer
does), and every ``--delete-every`` pods one existing pod is deleted (upstream deletes them
at 50/s while ~1000 pods/s are measured), in the bench's orders.  Process CPU per measured pod, the part of it in
``Cache.update_snapshot``, Python calls per pod with ``--profile``, and a digest of the
hosts.

    PYTHONPATH=. python tests/perf/bench_gated.py [--existing 20000] [--pods 5000]
"""

from __future__ import annotations

import argparse
import hashlib
import time
from typing import Any

from scheduler.bench import workloads
from scheduler.objects.pod import PodInfo
from tests.offline import cache_with, default_framework, place, scheduling_cycle
from tests.perf._harness import confirm_binding, measured, quiet_logs


def one_node(pods: int) -> dict[str, Any]:
    """Upstream's node-with-name template as the bench's workload sizes it."""
    capacity = {"cpu": "4", "memory": "32Gi", "pods": str(pods)}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "node-0", "uid": "n0", "labels": {
                "kubernetes.io/hostname": "node-0"}},
            "spec": {}, "status": {"allocatable": capacity, "capacity": dict(capacity),
                                   "conditions": [{"type": "Ready", "status": "True"}]}}


def main() -> None:
    quiet_logs()
    ap = argparse.ArgumentParser()
    ap.add_argument("--existing", type=int, default=20000)
    ap.add_argument("--pods", type=int, default=5000)
    ap.add_argument("--delete-every", type=int, default=20)
    ap.add_argument("--profile", default="", help="a cProfile of the measured part")
    args = ap.parse_args()
    cache, snapshot = cache_with([one_node(90000)])
    existing: list[dict[str, Any]] = []
    for i in range(args.existing):
        pod = workloads.light_pod(f"deleting-{i}", namespace="existing",
                                  scheduler_name="default-scheduler")
        pod["metadata"]["uid"] = f"e{i}"
        pod["spec"]["nodeName"] = "node-0"
        existing.append(pod)
    # Added in the order the informer lists them (the sandbox lists by name: deleting-0,
    # deleting-1, deleting-10, ...), deleted in the creator's (deleting-0, deleting-1,
    # deleting-2, ...): most deleted pods are deep in the node's list.
    for pod in sorted(existing, key=lambda p: p["metadata"]["name"]):
        cache.add_pod(PodInfo.from_assigned_pod(pod)[0])
    existing.reverse()  # popped from the end: deleting-0 first
    fwk = default_framework(snapshot)
    cycle = scheduling_cycle(cache, snapshot)
    hosts: list[str] = []
    unconfirmed: list[dict[str, Any]] = []
    in_snapshot = [0.0]
    update_snapshot = cache.update_snapshot

    def timed_update(target: Any) -> None:
        started = time.process_time()
        update_snapshot(target)
        in_snapshot[0] += time.process_time() - started

    if not args.profile:  # two clock reads a cycle would weigh in the profile
        cache.update_snapshot = timed_update  # type: ignore[method-assign]

    def run(count: int, first: int) -> None:
        for i in range(first, first + count):
            if i % args.delete_every == 0 and existing:
                cache.remove_pod(existing.pop())
            pod = workloads.light_pod(f"light-{i}", namespace="bench",
                                      scheduler_name="default-scheduler")
            pod["metadata"]["uid"] = f"u{i}"
            host = place(cache, snapshot, fwk, cycle, pod)
            hosts.append(host)
            for earlier in unconfirmed:
                confirm_binding(cache, earlier)
            unconfirmed[:] = [{**pod, "spec": {**pod["spec"], "nodeName": host}}]

    run(200, 0)  # warm
    in_snapshot[0] = 0.0
    with measured(args.profile) as part:
        run(args.pods, 200)
    digest = hashlib.sha256(",".join(hosts).encode()).hexdigest()[:12]
    calls = f"; Python calls per pod {part.calls / args.pods:.1f}" if part.calls else ""
    of_it = ("" if args.profile else
             f", of it update_snapshot {in_snapshot[0] / args.pods * 1000:.3f} ms")
    print(f"existing={args.existing} pods={args.pods} (node holds {cache.pod_count()}): CPU "
          f"per pod {part.cpu / args.pods * 1000:.3f} ms{of_it}; hosts {digest}{calls}")


if __name__ == "__main__":
    main()
