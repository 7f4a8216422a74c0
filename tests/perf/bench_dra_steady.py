"""The whole default-profile scheduling cycle for upstream's steady-state DRA shape, offline:
500 nodes of 10 devices, a fill level (empty, half, full), pods each with a claim of its own
(one device from the class), replaced as they are placed, as
SteadyStateClusterResourceClaimTemplate keeps 10 pods.  Per pod: the claim appears (informer
ADD), ``schedule_pod`` over a fresh snapshot (every default plugin, DynamicResources
among them), Reserve, the claim's allocation written back (informer UPDATE, as PreBind's
write comes back), the pod assumed; ten pods later the pod and its claim are deleted.

    PYTHONPATH=. python tests/perf/bench_dra_steady.py [--fill half] [--pods 500] [--profile]

No API server, informer or binding: what the bench's ``cycle_cpu_per_pod_ms`` holds of the
plugins, measured without the I/O whose cost moves with the machine's load.  Process CPU
per pod, and a digest of the hosts and devices chosen (two builds allocate alike when their
digests match).
"""

from __future__ import annotations

import argparse
import copy
import gc
import hashlib
import random
import time
from collections import deque
from typing import Any

from scheduler.objects.pod import PodInfo
from scheduler.plugins.dynamicresources.plugin import DynamicResources
from tests.builders import make_node
from tests.offline import cache_with, default_framework, scheduling_cycle
from tests.perf.bench_dra_cycle import NODES, PER_NODE, _held, _Listers
from tests.unit.dra.builders import claim, device, exactly, gpu_class, resource_slice
from tests.unit.plugins.dynamicresources.test_plugin import pod_with

KEEP = 10  # pods alive at once, as upstream's steady state


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--fill", choices=("empty", "half", "full"), default="half")
    ap.add_argument("--pods", type=int, default=500)
    ap.add_argument("--warm", type=int, default=100)
    ap.add_argument("--profile", action="store_true", help="cProfile the measured pods")
    args = ap.parse_args()
    names = [f"n{i}" for i in range(NODES)]
    ids = [(n, j) for n in names for j in range(PER_NODE)]
    random.Random(0).shuffle(ids)
    held = {"empty": 0, "half": len(ids) // 2, "full": len(ids) - KEEP}[args.fill]
    listers = _Listers({
        "resourceclaims": [_held(i, n, d) for i, (n, d) in enumerate(ids[:held])],
        "resourceslices": [resource_slice(f"{n}-gpus", node=n,
                                          devices=[device(f"gpu-{j}") for j in range(PER_NODE)])
                           for n in names],
        "deviceclasses": [gpu_class()]})
    cache, snapshot = cache_with(make_node(n, cpu="32", memory="128Gi") for n in names)
    fwk = default_framework(snapshot, listers=listers)
    cycle = scheduling_cycle(cache, snapshot)
    [dra] = [p for p in fwk.plugins.values() if isinstance(p, DynamicResources)]
    alive: deque[tuple[PodInfo, dict[str, Any]]] = deque()
    placed: list[str] = []

    def put(obj: dict[str, Any]) -> None:  # the informer's ADD or UPDATE (a dict lookup)
        key = ("resourceclaims", obj["metadata"].get("namespace") or "", obj["metadata"]["name"])
        old = listers._by_key.get(key)
        listers._by_key[key] = obj
        for add, update, _delete in listers.handlers.get("resourceclaims", []):
            add(obj) if old is None else update(old, obj)

    def delete(obj: dict[str, Any]) -> None:  # the informer's DELETE
        listers._by_key.pop(("resourceclaims", obj["metadata"].get("namespace") or "",
                             obj["metadata"]["name"]), None)
        for _add, _update, on_delete in listers.handlers.get("resourceclaims", []):
            on_delete(obj)

    def one(k: int) -> None:
        if len(alive) >= KEEP:  # the oldest pod deleted, its claim with it
            info, c = alive.popleft()
            cache.remove_pod(info.pod)
            delete(c)
        c = claim(f"mine-{k}", exactly("r"))
        c["metadata"]["uid"] = f"claim-uid-{k}"
        c["metadata"]["resourceVersion"] = str(k)
        put(c)
        pod = pod_with(f"p{k}", f"mine-{k}")
        info = PodInfo.from_pod(pod)
        cache.update_snapshot(snapshot)
        state = fwk.new_cycle_state()
        host = cycle.schedule_pod(fwk, state, info).suggested_host
        status = fwk.run_reserve_plugins_reserve(state, info, host)
        assert status is None or status.is_success(), status
        written = copy.deepcopy(c)
        alloc = _in_flight(dra, c)
        written["status"] = {"allocation": alloc, "reservedFor": [
            {"resource": "pods", "name": info.name, "uid": info.uid}]}
        written["metadata"]["resourceVersion"] = f"{k}-2"
        put(written)
        bound = {**pod, "spec": {**pod["spec"], "nodeName": host}}
        cache.add_pod(PodInfo.from_pod(bound))
        alive.append((PodInfo.from_pod(bound), written))
        devs = ",".join(r["device"] for r in alloc["devices"]["results"])
        placed.append(f"{host}:{devs}")

    for k in range(args.warm):
        one(k)
    gc.collect()
    prof = None
    if args.profile:
        import cProfile
        prof = cProfile.Profile(time.process_time)
        prof.enable()
    started = time.process_time()
    for k in range(args.warm, args.warm + args.pods):
        one(k)
    cpu = time.process_time() - started
    if prof is not None:
        import pstats
        prof.disable()
        pstats.Stats(prof).sort_stats("cumulative").print_stats(45)
        pstats.Stats(prof).sort_stats("tottime").print_stats(30)
    digest = hashlib.sha256(";".join(placed).encode()).hexdigest()[:12]
    print(f"fill={args.fill} pods={args.pods} cycle CPU per pod {cpu / args.pods * 1000:.3f} ms "
          f"placements {digest}")


def _in_flight(dra: DynamicResources, c: dict[str, Any]) -> dict[str, Any]:
    meta = c["metadata"]
    alloc = dra.tracker.in_flight(f"{meta.get('namespace', '')}/{meta['name']}")
    assert alloc is not None, "Reserve assumed no allocation"
    return alloc


if __name__ == "__main__":
    main()
