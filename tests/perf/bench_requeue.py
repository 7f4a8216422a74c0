"""Requeueing by object: N pods wait for the claims of their ResourceClaimTemplates, then the
claim controller's N claims arrive (informer ADDED), as in SchedulingWithResourceClaimTemplate
when the pods are created faster than their claims.

    PYTHONPATH=. python tests/perf/bench_requeue.py [--pods 2500] [--scan] [--state gated]
                                                    [--count 100]

The queue has the default profile's hints (DynamicResources' claim hint among them, keyed by
the claims a pod names); ``--scan`` turns the index off (every event runs the hints of every
waiting pod: the behaviour before the index).  ``--state``: the pods wait gated by
DynamicResources' PreEnqueue (their claims do not exist yet: what the sandbox run shows) or
unschedulable (rejected by DynamicResources in a cycle).  Each claim event concerns no waiting
pod (the pod's status does not name its claim yet), so nothing moves: what is measured is the
cost of finding that out.  Prints process CPU and Python function calls per claim event.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import pstats
import time
from typing import Any

from prometheus_client import CollectorRegistry

from scheduler.framework.events import RESOURCE_CLAIM_ADD
from scheduler.framework.status import Status
from scheduler.logging import configure_logging
from scheduler.metrics import SchedulerMetrics
from scheduler.objects.pod import PodInfo, scheduler_name
from scheduler.plugins import names
from scheduler.queue import SchedulingQueue
from tests.builders import dra_claim, make_node, make_pod, with_pod_claims
from tests.offline import cache_with, default_framework
from tests.perf.bench_dra_cycle import _Listers
from tests.unit.queue.helpers import priority_less


def waiting_pod(i: int) -> dict[str, Any]:
    pod = make_pod(f"pod-{i}", cpu="100m")
    pod["metadata"]["uid"] = f"uid-{i}"
    return with_pod_claims(pod, ("gpu", "template", "gpu-template"))


def claim_of(i: int) -> dict[str, Any]:
    c = dra_claim(f"pod-{i}-gpu")
    c["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": f"pod-{i}",
                                         "uid": f"uid-{i}", "controller": True}]
    return c


def build(pods: int, *, scan: bool, state: str) -> tuple[SchedulingQueue, list[dict[str, Any]]]:
    _cache, snapshot = cache_with([make_node("n0")])
    fwk = default_framework(snapshot, listers=_Listers(
        {"resourceclaims": [], "resourceslices": [], "deviceclasses": []}))

    def pre_enqueue(info: PodInfo) -> Status | None:
        return fwk.run_pre_enqueue_plugins(info) if state == "gated" else None

    queue = SchedulingQueue(
        less=priority_less, pre_enqueue=pre_enqueue,
        hints={scheduler_name(waiting_pod(0)): fwk.events_to_register()},
        profile_of=scheduler_name, metrics=SchedulerMetrics(CollectorRegistry()),
        index_hints=not scan)
    for i in range(pods):
        queue.add(waiting_pod(i))
    if state == "unschedulable":
        for _ in range(pods):
            qpi = queue.pop_nowait()
            assert qpi is not None
            qpi.unschedulable_plugins = {names.DYNAMIC_RESOURCES}
            queue.add_unschedulable_if_not_present(qpi, queue.scheduling_cycle())
    held = queue.pending_pods()
    where = "gated" if state == "gated" else "unschedulable"
    assert len(held[where]) == pods, {k: len(v) for k, v in held.items()}
    return queue, [claim_of(i) for i in range(pods)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pods", type=int, default=2500)
    ap.add_argument("--scan", action="store_true", help="no index: every pod's hints run")
    ap.add_argument("--state", choices=("gated", "unschedulable"), default="gated")
    ap.add_argument("--count", type=int, default=100, help="claim events profiled for calls")
    args = ap.parse_args()
    configure_logging(level="info")  # as the daemon runs: debug lines are not formatted

    queue, claims = build(args.pods, scan=args.scan, state=args.state)
    gc.collect()
    gc.freeze()
    started = time.process_time()
    for c in claims:
        queue.move_all_to_active_or_backoff_queue(RESOURCE_CLAIM_ADD, None, c)
    cpu = time.process_time() - started

    moved = sum(len(v) for k, v in queue.pending_pods().items() if k in ("active", "backoff"))

    # The calls, counted over the first claims on a fresh queue (the profiler's own cost
    # kept out of the CPU figure; every event finds the same pods waiting).
    queue, claims = build(args.pods, scan=args.scan, state=args.state)
    counted = claims[:args.count]
    prof = cProfile.Profile()
    prof.enable()
    for c in counted:
        queue.move_all_to_active_or_backoff_queue(RESOURCE_CLAIM_ADD, None, c)
    prof.disable()
    calls = pstats.Stats(prof).total_calls  # type: ignore[attr-defined]
    print(f"pods={args.pods} state={args.state} {'scan' if args.scan else 'index'}: "
          f"CPU per claim event {cpu / len(claims) * 1e3:.4f} ms, "
          f"Python calls per claim event {calls / len(counted):.1f}, pods moved {moved}")


if __name__ == "__main__":
    main()
