"""The Event recording's CPU per Event in the scheduler's process, with the Events written
from it (``--event-process off``) and from the child (``on``), against a sandbox process.

    PYTHONPATH=. python tests/perf/bench_event_process.py [--events 5000] [--per-turn 8]

Each Event is a ``Scheduled`` Event about a pod of its own (as a bound pod's), recorded
``--per-turn`` at a time per turn of the event loop, ``--rate`` a second (the scheduler binds
several pods a turn at ~1000 pods/s); the run ends when every Event is written (flushed). Prints the scheduler
process's CPU per Event (``time.process_time``), the child's (``/proc/<pid>/stat``) and the
Events that landed: CPU counts, so the figures move little with the machine's load (the
sandbox's CPU is not counted).
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

from scheduler.bench.machine import process_cpu_seconds
from scheduler.client.api import ApiClient
from scheduler.client.connection import load_connection
from scheduler.client.event_process import EventProcess, RemoteEventRecorder
from scheduler.client.events import EventRecorder
from scheduler.logging import configure_logging
from scheduler.metrics import SchedulerMetrics
from scheduler.sandbox.testing import SandboxProcess


def pod(i: int, run: str) -> dict[str, Any]:
    return {"kind": "Pod", "apiVersion": "v1",
            "metadata": {"name": f"{run}-{i}", "namespace": "default", "uid": f"uid-{run}-{i}",
                         "resourceVersion": str(1000 + i)}}


async def one(mode: str, kubeconfig: str, *, events: int, per_turn: int,
              rate: float, flush_delay: float = 0.0) -> dict[str, Any]:
    connection = load_connection(kubeconfig=kubeconfig)
    metrics = SchedulerMetrics()
    client = ApiClient(connection, qps=0, metrics=metrics)
    process: EventProcess | None = None
    recorder: EventRecorder | RemoteEventRecorder
    if mode == "on":
        process = EventProcess(connection, qps=0, burst=0, metrics=metrics,
                               flush_delay=flush_delay)
        recorder = process.recorder("py-scheduler", hostname="bench")
    else:
        recorder = EventRecorder(client, scheduler_name="py-scheduler", hostname="bench",
                                 metrics=metrics)
    recorder.start()
    if process is not None:
        await process.wait_ready()
    # warm the connections
    recorder.event(pod(0, f"warm-{mode}"), type="Normal", reason="Scheduled", action="Binding",
                   message="warm")
    await recorder.flush(30)
    child = process.pid if process is not None else None
    child0 = process_cpu_seconds(child) if child is not None else None
    cpu0, wall0 = time.process_time(), time.monotonic()
    for i in range(events):
        recorder.event(pod(i, mode), type="Normal", reason="Scheduled", action="Binding",
                       message=f"Successfully assigned default/{mode}-{i} to node-{i % 5000}")
        if i % per_turn == per_turn - 1:
            # paced at ``rate`` Events a second (below what either mode writes: none is
            # dropped as queue_full, which would leave its sending uncounted)
            await asyncio.sleep(per_turn / rate)
    await recorder.flush(120)
    cpu1, wall1 = time.process_time(), time.monotonic()
    child1 = process_cpu_seconds(child) if child is not None else None
    await recorder.stop(10)
    await client.close()
    dropped = sum(s.value for m in metrics.registry.collect()
                  if m.name == "scheduler_py_events_dropped" for s in m.samples
                  if s.name.endswith("_total"))
    return {
        "mode": mode,
        "scheduler_cpu_per_event_ms": round((cpu1 - cpu0) / events * 1000, 4),
        "child_cpu_per_event_ms": (round((child1 - child0) / events * 1000, 4)
                                   if child0 is not None and child1 is not None else None),
        "events_per_s": round(events / (wall1 - wall0), 1),
        "written": recorder.sent - 1,
        "dropped": dropped,
        "frames": process.frames if process is not None else None,
        "flush_delay": flush_delay if process is not None else None,
    }


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=5000)
    parser.add_argument("--per-turn", type=int, default=8)
    parser.add_argument("--rate", type=float, default=1000.0)
    parser.add_argument("--flush-delay", type=float, default=0.0,
                        help="on: seconds records wait for others before the pipe write")
    parser.add_argument("--modes", default="off,on,off,on")
    args = parser.parse_args()
    configure_logging(fmt="console", level="warning")
    sandbox = SandboxProcess().start()
    try:
        for mode in args.modes.split(","):
            print(await one(mode, str(sandbox.kubeconfig_path), events=args.events,
                            per_turn=args.per_turn, rate=args.rate,
                            flush_delay=args.flush_delay), flush=True)
    finally:
        sandbox.stop()


if __name__ == "__main__":
    asyncio.run(main())
