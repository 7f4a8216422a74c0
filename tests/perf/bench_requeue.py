"""Requeueing by object: N pods wait for the claims of their ResourceClaimTemplates, then the
claim controller's N claims arrive (informer ADDED), as in SchedulingWithResourceClaimTemplate
when the pods are created faster than their claims.

    PYTHONPATH=. python tests/perf/bench_requeue.py [--pods 2500] [--scan] [--state gated]
                                                    [--count 100]
    PYTHONPATH=. python tests/perf/bench_requeue.py --shape while-gated [--gated 10000]
                                                    [--pods 5000] [--scan]
    PYTHONPATH=. python tests/perf/bench_requeue.py --shape backoff [--backing-off 10000]
                                                    [--pods 5000]

The queue has the default profile's hints (DynamicResources' claim hint among them, keyed by
the claims a pod names); ``--scan`` turns the index off (every event runs the hints of every
waiting pod: the behaviour before the index).  ``--state``: the pods wait gated by
DynamicResources' PreEnqueue (their claims do not exist yet: what the sandbox run shows) or
unschedulable (rejected by DynamicResources in a cycle).  Each claim event concerns no waiting
pod (the pod's status does not name its claim yet), so nothing moves: what is measured is the
cost of finding that out.  Prints process CPU and Python function calls per claim event.

``--shape while-gated``: SchedulingWhileGated's queue work per scheduled pod, with ``--gated``
pods held by SchedulingGates' PreEnqueue (upstream's gated-pod): the pod's ADDED (PreEnqueue,
activeQ, the UnschedulablePodAdd event), its pop, its bind (the queue's delete, the
AssignedPodAdd event), and one AssignedPodDelete event every 20 pods (upstream deletes 50 pods
a second while scheduling about a thousand).  Run it with ``--gated 0`` for the same without
gated pods: the difference is what the gated pods cost a scheduled pod.

``--shape backoff``: the same per scheduled pod with ``--backing-off`` pods waiting out a
long backoff in backoffQ (rejected by NodeResourcesFit): whether any step on the hot path
grows with them.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import pstats
import time
from typing import Any

from prometheus_client import CollectorRegistry

from scheduler.framework.events import ASSIGNED_POD_DELETE, RESOURCE_CLAIM_ADD, UNSCHEDULED_POD_ADD
from scheduler.framework.status import Status
from scheduler.logging import configure_logging
from scheduler.metrics import SchedulerMetrics
from scheduler.objects.pod import PodInfo, pod_key, scheduler_name
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


def light_pod(name: str, i: int, *, gated: bool = False) -> dict[str, Any]:
    pod = make_pod(f"{name}-{i}")
    pod["metadata"]["uid"] = f"{name}-uid-{i}"
    if gated:
        pod["spec"]["schedulingGates"] = [{"name": "test.k8s.io/hold"}]
    return pod


def build_shape(*, shape: str, waiting: int, scan: bool) -> SchedulingQueue:
    """A queue with the default profile's PreEnqueue and hints, holding ``waiting`` gated
    pods (``while-gated``) or pods backing off after a NodeResourcesFit rejection."""
    _cache, snapshot = cache_with([make_node("n0")])
    fwk = default_framework(snapshot, listers=_Listers(
        {"resourceclaims": [], "resourceslices": [], "deviceclasses": []}))
    clock = [1000.0]
    queue = SchedulingQueue(
        less=priority_less, pre_enqueue=fwk.run_pre_enqueue_plugins,
        hints={scheduler_name(light_pod("p", 0)): fwk.events_to_register()},
        profile_of=scheduler_name, metrics=SchedulerMetrics(CollectorRegistry()),
        index_hints=not scan, clock=lambda: clock[0], pod_max_backoff=3600.0,
        pod_initial_backoff=3600.0)
    for i in range(waiting):
        queue.add(light_pod("waiting", i, gated=shape == "while-gated"))
    if shape == "backoff":
        for _ in range(waiting):
            qpi = queue.pop_nowait()
            assert qpi is not None
            qpi.unschedulable_plugins = {names.NODE_RESOURCES_FIT}
            queue.add_unschedulable_if_not_present(qpi, queue.scheduling_cycle() - 1)
        gone = light_pod("gone", 0)
        gone["spec"]["nodeName"] = "n0"  # room freed: every pod moves, to backoffQ
        queue.move_all_to_active_or_backoff_queue(ASSIGNED_POD_DELETE, gone, None)
    where = "gated" if shape == "while-gated" else "backoff"
    held = queue.pending_pods()
    assert len(held[where]) == waiting, {k: len(v) for k, v in held.items()}
    return queue


def scheduled_pods(pods: int) -> list[tuple[dict[str, Any], PodInfo, dict[str, Any]]]:
    """(pending, bound, deleting) objects of each scheduled pod, built before the clock."""
    out = []
    for i in range(pods):
        pod = light_pod("measured", i)
        gone = light_pod("deleting", i)
        gone["spec"]["nodeName"] = "n0"
        bound = PodInfo.from_pod({**pod, "spec": {**pod["spec"], "nodeName": "n0"}})
        out.append((pod, bound, gone))
    return out


def schedule_through(queue: SchedulingQueue,
                     pods: list[tuple[dict[str, Any], PodInfo, dict[str, Any]]]) -> None:
    """The queue's work for ``pods`` scheduled one after the other (see the module)."""
    for i, (pod, bound, gone) in enumerate(pods):
        queue.add(pod)
        queue.move_all_to_active_or_backoff_queue(UNSCHEDULED_POD_ADD, None, pod)
        qpi = queue.pop_nowait()
        assert qpi is not None and qpi.key == pod_key(pod)
        queue.done(qpi.pod_info.uid)
        queue.delete(pod, bound=True)
        queue.assigned_pod_added(bound)
        if i % 20 == 0:
            queue.move_all_to_active_or_backoff_queue(ASSIGNED_POD_DELETE, gone, None)


def main_shape(args: argparse.Namespace) -> None:
    waiting = args.gated if args.shape == "while-gated" else args.backing_off
    if args.shape == "while-gated" and waiting:
        # The informer's ADDED of each gated pod (its sync lists them all): the queue's add
        # (PreEnqueue, the gated set) and the UnschedulablePodAdd event it raises.
        gated = [light_pod("waiting", i, gated=True) for i in range(waiting)]
        queue = build_shape(shape=args.shape, waiting=0, scan=args.scan)
        prof = cProfile.Profile()
        started = time.process_time()
        prof.enable()
        for pod in gated:
            queue.add(pod)
            queue.move_all_to_active_or_backoff_queue(UNSCHEDULED_POD_ADD, None, pod)
        prof.disable()
        cpu = time.process_time() - started
        calls = pstats.Stats(prof).total_calls  # type: ignore[attr-defined]
        print(f"ADDED of a gated pod: CPU {cpu / waiting * 1e3:.4f} ms (profiled), "
              f"Python calls {calls / waiting:.1f}")
    queue = build_shape(shape=args.shape, waiting=waiting, scan=args.scan)
    gc.collect()
    gc.freeze()
    pods = scheduled_pods(args.pods)
    started = time.process_time()
    schedule_through(queue, pods)
    cpu = time.process_time() - started
    queue = build_shape(shape=args.shape, waiting=waiting, scan=args.scan)
    pods = scheduled_pods(args.count)
    prof = cProfile.Profile()
    prof.enable()
    schedule_through(queue, pods)
    prof.disable()
    stats = pstats.Stats(prof)
    calls = stats.total_calls  # type: ignore[attr-defined]
    print(f"shape={args.shape} waiting={waiting} {'scan' if args.scan else 'index'}: "
          f"CPU per scheduled pod {cpu / args.pods * 1e3:.4f} ms, "
          f"Python calls per scheduled pod {calls / args.count:.1f}")
    if args.top:
        stats.sort_stats("ncalls").print_stats(args.top)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pods", type=int, default=2500)
    ap.add_argument("--scan", action="store_true", help="no index: every pod's hints run")
    ap.add_argument("--state", choices=("gated", "unschedulable"), default="gated")
    ap.add_argument("--count", type=int, default=100, help="claim events profiled for calls")
    ap.add_argument("--shape", choices=("claims", "while-gated", "backoff"), default="claims")
    ap.add_argument("--gated", type=int, default=10000)
    ap.add_argument("--backing-off", type=int, default=10000)
    ap.add_argument("--top", type=int, default=0, help="print the functions called most")
    args = ap.parse_args()
    configure_logging(level="info")  # as the daemon runs: debug lines are not formatted
    if args.shape != "claims":
        main_shape(args)
        return

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
