"""PreemptionAsync's preemptors in process (no API server): N node-default nodes each holding
four low-priority 900m pods (the shape's existing pods) and, on every ``--fill``-th node, a
100m measured pod; then ``--preemptors`` 3-CPU priority-10 pods, each through the real
scheduling cycle (Filter finds no node) and DefaultPreemption's real PostFilter, whose
API calls go to a client that answers 200.  Each decision is then carried out on the cache
(the victims removed) and the preemptor stays nominated to its node for ``--lag`` more
preemptors before it is placed there, so later preemptors meet nominated pods as in the
daemon.

Prints the process CPU per preemptor (the whole failed cycle, and PostFilter alone) and a
digest of every nominated node and its victims in order: two builds must print the same
digest.

    PYTHONPATH=. python tests/perf/bench_preemption.py [--nodes 5000] [--preemptors 40]
        [--plain 200] [--unstarted]

``--plain N`` then schedules N priority-0 100m pods (each assumed on its host) while the
last ``--lag`` preemptors stay nominated, measured apart (CPU, Python calls per plain pod
into ``FILE.plain``, a digest of their hosts): what a plain pod pays for nominated nodes.

``--profile FILE`` writes a cProfile of the measured preemptors and prints the Python calls
per preemptor (a figure the machine's load does not move).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import random
import time
from types import SimpleNamespace
from typing import Any

from scheduler.bench import workloads
from scheduler.objects.pod import PodInfo
from scheduler.plugins import names
from scheduler.plugins.defaultpreemption.plugin import DefaultPreemption
from scheduler.queue.nominator import Nominator
from tests.offline import (
    attempt,
    cache_with,
    default_framework,
    place,
    scheduling_cycle,
    windows_reused,
)
from tests.perf._harness import measured, quiet_logs
from tests.perf.bench_batched_cycle import node

SCHEDULER = "default-scheduler"


class _OkClient:
    """Every API call succeeds (the victims' condition PATCH and DELETE)."""

    async def request(self, method: str, path: str, **_: Any) -> Any:
        return SimpleNamespace(status=200, body={})


def _started(i: int) -> str:
    # One-second timestamps as the sandbox's kubelet writes them, for pods created ~2000 a
    # second (``--distinct-starts`` spreads them: each pod its own second, a cluster whose
    # pods started over a day, which no start-time cache of a few thousand entries holds).
    spread = (i * 7919) % 86400 if DISTINCT_STARTS[0] else i // 2000
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(1_700_000_000 + spread))


DISTINCT_STARTS = [False]
# ``--unstarted``: the pods have no status.startTime, as in the daemon's bench (whose
# sandbox runs no kubelet): each sorts as starting ``now``.
UNSTARTED = [False]


def _status(i: int) -> dict[str, Any]:
    if UNSTARTED[0]:
        return {"phase": "Pending"}
    return {"phase": "Running", "startTime": _started(i)}


def existing_pods(nodes: int, fill: int) -> list[dict[str, Any]]:
    out = []
    for n in range(nodes):
        name = f"node-{n:05d}"
        for k in range(4):
            i = n * 4 + k
            p = workloads.pod(f"low-{i}", namespace="existing", scheduler_name=SCHEDULER,
                              cpu="900m", node_name=name)
            p["metadata"]["uid"] = f"low-{i}"
            p["status"] = _status(i)
            out.append(p)
        if fill and n % fill == 0:
            p = workloads.pod(f"pod-{n}", namespace="measured", scheduler_name=SCHEDULER,
                              node_name=name)
            p["metadata"]["uid"] = f"pod-{n}"
            p["status"] = _status(10**6 + n)
            out.append(p)
    return out


async def run(args: argparse.Namespace) -> None:
    cache, snapshot = cache_with(node(i) for i in range(args.nodes))
    for p in existing_pods(args.nodes, args.fill):
        cache.add_pod(PodInfo.from_pod(p))
    nominator = Nominator()
    fwk = default_framework(snapshot, client=_OkClient(), nominator=nominator)
    cycle = scheduling_cycle(cache, snapshot, nominator=nominator)
    cycle.sched.has_nominated_pods = nominator.has_nominated_pods
    plugin = fwk.get_plugin(names.DEFAULT_PREEMPTION)
    assert isinstance(plugin, DefaultPreemption)
    plugin._rng = random.Random(args.seed)
    decisions: list[str] = []
    prepare = plugin._prepare_candidate_async

    def record(candidate: Any, preemptor: PodInfo) -> Any:
        decisions.append(f"{preemptor.key}->{candidate.name}:"
                         + ",".join(v.key for v in candidate.victims))
        return prepare(candidate, preemptor)

    plugin._prepare_candidate_async = record  # type: ignore[method-assign]
    post_filter_cpu = [0.0]
    post_filter = plugin.post_filter

    def timed_post_filter(*a: Any) -> Any:
        t0 = time.process_time()
        try:
            return post_filter(*a)
        finally:
            post_filter_cpu[0] += time.process_time() - t0

    plugin.post_filter = timed_post_filter  # type: ignore[method-assign]
    # The runtime kept the bound method at construction: point its PostFilter list at ours.
    fwk._post_filter = [(n, plugin if n != names.DEFAULT_PREEMPTION else
                         SimpleNamespace(post_filter=timed_post_filter))
                        for n, plugin in fwk._post_filter]
    pending: list[tuple[PodInfo, str]] = []

    async def preempt(index: int) -> None:
        _, obj = workloads.churn_object("high-priority-pod", index, scheduler_name=SCHEDULER)
        obj["metadata"]["uid"] = f"high-{index}"
        info = PodInfo.from_pod(obj)
        host, result, status = attempt(cache, snapshot, fwk, cycle, info)
        if host is not None or result is None or status is None:
            decisions.append(f"{info.key} fits {host}")
            return
        await plugin.wait_idle()
        nominated = result.nominating
        if not nominated:
            decisions.append(f"{info.key} not nominated: {status.message()[:200]}")
            return
        # carry it out: the victims leave, the preemptor holds the node until placed
        victims = decisions[-1].split(":", 1)[1].split(",")
        for key in victims:
            ns, name = key.split("/")
            cache.remove_pod({"metadata": {"namespace": ns, "name": name, "uid": name},
                              "spec": {"nodeName": nominated}})
        nominator.add_nominated_pod(info, nominated)
        pending.append((info, nominated))
        while len(pending) > args.lag:
            placed, where = pending.pop(0)
            nominator.delete_nominated_pod_if_exists(placed.pod)
            bound = {**placed.pod, "spec": {**placed.pod["spec"], "nodeName": where}}
            cache.add_pod(PodInfo.from_pod(bound))

    for i in range(3):  # warm
        await preempt(i)
    post_filter_cpu[0] = 0.0
    with measured(args.profile) as part:
        for i in range(3, 3 + args.preemptors):
            await preempt(i)
    cpu = part.cpu
    if args.profile:
        print(f"Python calls per preemptor (cProfile, load-independent): "
              f"{part.calls / args.preemptors:.0f}")
    digest = hashlib.sha256("\n".join(decisions).encode()).hexdigest()[:12]
    print(f"nodes={args.nodes} preemptors={args.preemptors} fill={args.fill} lag={args.lag}: "
          f"CPU per preemptor {cpu / args.preemptors * 1000:.2f} ms (PostFilter "
          f"{post_filter_cpu[0] / args.preemptors * 1000:.2f} ms); decisions {digest}")
    print("last decision:", decisions[-1][:200], flush=True)
    if args.plain:
        await _plain_pods(args, cache, snapshot, fwk, cycle, len(pending))


async def _plain_pods(args: argparse.Namespace, cache: Any, snapshot: Any, fwk: Any,
                      cycle: Any, nominated: int) -> None:
    """``--plain`` priority-0 pods of the measured pods' shape, each through the cycle and
    assumed on its host, while the last ``--lag`` preemptors stay nominated (higher
    priority: the nodes holding them take the two-pass Filter); their hosts' digest."""
    hosts: list[str] = []

    def one(i: int) -> None:
        p = workloads.pod(f"plain-{i}", namespace="measured", scheduler_name=SCHEDULER)
        p["metadata"]["uid"] = f"plain-{i}"
        hosts.append(place(cache, snapshot, fwk, cycle, p))

    for i in range(3):  # warm
        one(i)
    profile = f"{args.profile}.plain" if args.profile else ""
    with measured(profile) as part:
        for i in range(3, 3 + args.plain):
            one(i)
    if args.profile:
        print(f"Python calls per plain pod (cProfile, load-independent): "
              f"{part.calls / args.plain:.0f}")
    digest = hashlib.sha256("\n".join(hosts).encode()).hexdigest()[:12]
    print(f"plain pods={args.plain} with {nominated} nominated preemptors: CPU per plain pod "
          f"{part.cpu / args.plain * 1000:.3f} ms; hosts {digest};"
          f"{windows_reused(cycle)}", flush=True)


def main() -> None:
    quiet_logs()
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=5000)
    ap.add_argument("--preemptors", type=int, default=40)
    ap.add_argument("--fill", type=int, default=2, help="a measured pod on every Nth node")
    ap.add_argument("--lag", type=int, default=2, help="preemptors kept nominated")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--profile", default="")
    ap.add_argument("--distinct-starts", action="store_true")
    ap.add_argument("--unstarted", action="store_true",
                    help="existing pods without status.startTime (the daemon's bench)")
    ap.add_argument("--plain", type=int, default=0,
                    help="then this many plain pods, measured apart, beside the nominated")
    args = ap.parse_args()
    DISTINCT_STARTS[0] = args.distinct_starts
    UNSTARTED[0] = args.unstarted
    asyncio.run(run(args))


if __name__ == "__main__":
    main()
