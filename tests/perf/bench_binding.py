"""The binding side of a pod, offline: from the node the cycle chose to the Binding POST and
the ``Scheduled`` Event POST done and the binding metrics recorded (assume, Reserve, Permit,
the binding task, the leader checks, the API dispatcher, PreBind/Bind/PostBind, the event
recorder and its senders), with the floor profile (PrioritySort and DefaultBinder only) and
a client that answers every request at the next turn of the event loop.

    PYTHONPATH=. python tests/perf/bench_binding.py [--pods 5000] [--profile]

Prints process CPU per pod and, with ``--profile``, Python calls per pod (cProfile, every
function and builtin call counted, the loop's own included): both without the API server
and the watch path whose cost moves with the machine's load and the other engineers' work.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import pstats
import time
from typing import Any

from scheduler.bench.run import floor_config
from scheduler.client.events import EventRecorder
from scheduler.client.informer import InformerFactory
from scheduler.client.pod_status import update_pod_condition
from scheduler.framework.types import QueuedPodInfo
from scheduler.logging import configure_logging
from scheduler.metrics import SchedulerMetrics
from scheduler.objects.pod import PodInfo
from scheduler.plugins.registry import in_tree_registry
from scheduler.schedule_one import Attempt, ScheduleResult
from scheduler.scheduler import Scheduler


class _Response:
    status = 201
    body: dict[str, Any] = {}
    headers: dict[str, str] = {}

    def ok(self) -> bool:
        return True


class InstantClient:
    """Answers every write at the loop's next turn, as a reply read off a socket would."""

    def __init__(self) -> None:
        self.requests = 0

    async def request(self, method: str, path: str, **_kw: Any) -> _Response:
        self.requests += 1
        await asyncio.sleep(0)
        return _Response()

    async def create(self, path: str, body: Any, **_kw: Any) -> Any:
        self.requests += 1
        await asyncio.sleep(0)
        return body

    async def create_unread(self, path: str, body: Any) -> None:
        self.requests += 1
        await asyncio.sleep(0)


def _node(i: int) -> dict[str, Any]:
    capacity = {"cpu": "4", "memory": "32Gi", "pods": "110"}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": f"node-{i}", "uid": f"n{i}"},
            "spec": {}, "status": {"allocatable": capacity, "capacity": dict(capacity)}}


def _pod(i: int, scheduler_name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"p{i}", "namespace": "bench", "uid": f"u{i}",
                         "resourceVersion": "1"},
            "spec": {"schedulerName": scheduler_name,
                     "containers": [{"name": "c", "image": "i", "resources": {
                         "requests": {"cpu": "10m", "memory": "10Mi"}}}]},
            "status": {"phase": "Pending"}}


async def run(pods: int, *, profile: bool, top: int = 0) -> None:
    config = floor_config()
    client = InstantClient()
    recorders: list[EventRecorder] = []

    def recorder_factory(name: str) -> EventRecorder:
        recorder = EventRecorder(client, scheduler_name=name,  # type: ignore[arg-type]
                                 hostname="bench", queue_size=pods + 1)
        recorders.append(recorder)
        return recorder

    sched = Scheduler(config=config, client=client,  # type: ignore[arg-type]
                      informers=InformerFactory(client),  # type: ignore[arg-type]
                      recorder_factory=recorder_factory,
                      update_pod_condition=update_pod_condition,
                      registry=in_tree_registry(), metrics=SchedulerMetrics())
    for recorder in recorders:
        recorder.start()
    for i in range(50):
        sched.cache.add_node(_node(i))
    fwk = next(iter(sched.profiles.values()))
    name = fwk.profile_name
    queued = [QueuedPodInfo(PodInfo.from_pod(_pod(i, name)), timestamp=0.0) for i in range(pods)]
    cycle = sched.cycle
    gc.collect()
    profiler = cProfile.Profile() if profile else None
    cpu = time.process_time()
    if profiler is not None:
        profiler.enable()
    for i, qpi in enumerate(queued):
        # What the scheduling cycle does once it has chosen a node.
        state = fwk.new_cycle_state()
        attempt = Attempt(started=time.perf_counter(), pod_scheduling_cycle=0)
        result = ScheduleResult(suggested_host=f"node-{i % 50}", evaluated_nodes=1,
                                feasible_nodes=1)
        result, assumed, status = cycle._assume_reserve_permit(fwk, state, qpi.pod_info, result)
        cycle._finish_scheduling_cycle(fwk, state, qpi, result=result, assumed_info=assumed,
                                       status=status, attempt=attempt)
        if i % 64 == 63:
            await asyncio.sleep(0)  # the scheduling loop yields between cycles
    while sched._binding_tasks:
        await asyncio.sleep(0)
    for recorder in recorders:
        await recorder.stop(30)
    if profiler is not None:
        profiler.disable()
    cpu = time.process_time() - cpu
    assert client.requests == 2 * pods, client.requests
    print(f"pods {pods}: {cpu / pods * 1e3:.4f} ms CPU per pod")
    if profiler is not None:
        calls = sum(v[1] for v in pstats.Stats(profiler).stats.values())  # type: ignore[attr-defined]
        print(f"calls per pod: {calls / pods:.1f}")
        if top:
            pstats.Stats(profiler).sort_stats("ncalls").print_stats(top)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pods", type=int, default=5000)
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--profile-top", type=int, default=0,
                    help="with --profile, print the N functions called most")
    args = ap.parse_args()
    configure_logging(level="info")  # as the daemon runs: debug lines are not formatted
    asyncio.run(run(args.pods, profile=args.profile, top=args.profile_top))


if __name__ == "__main__":
    main()
