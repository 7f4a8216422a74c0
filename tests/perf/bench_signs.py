"""The batched scheduling cycle in process (no API server), CPU per pod, with the batching
signatures of DynamicResources (plain pods) and PodTopologySpread (Filter) in place
(``new``) or removed (``old``), and a digest of the placements (equal in both).

    PYTHONPATH=. python tests/perf/bench_signs.py TopologySpreading new 5000 1000 5000

Arguments: workload (TopologySpreading, SchedulingBasic, NodeAffinity), variant, nodes,
measured pods, existing pods (4-CPU / 32Gi nodes in three zones, the bench's templates).
"""
import sys, time
from scheduler.framework.types import FitError
from scheduler.objects.pod import PodInfo
from tests.offline import cache_with, default_framework, scheduling_cycle
from scheduler.bench import workloads as W
from tests.perf.bench_cycle import node

def run(workload, nodes_n, pods_n, existing_n, variant):
    if variant == "old":
        from scheduler.plugins.podtopologyspread.filtering import Filtering
        import scheduler.plugins.dynamicresources.plugin as d
        Filtering.sign_filter = None  # type: ignore[assignment]  # batching falls back to sign
        for c in vars(d).values():
            if isinstance(c, type) and "sign" in vars(c): c.sign = lambda self, pi: None
    nodes = []
    for i in range(nodes_n):
        n = node(i); n["status"]["allocatable"].update(cpu="4", memory="32Gi"); n["status"]["capacity"].update(cpu="4", memory="32Gi")
        nodes.append(n)
    cache, snapshot = cache_with(nodes)
    fwk = default_framework(snapshot)
    cycle = scheduling_cycle(cache, snapshot)
    for i in range(existing_n):
        p = W._existing_default(i, "default-scheduler"); p["metadata"]["uid"] = f"e{i}"
        p["spec"]["nodeName"] = nodes[i % nodes_n]["metadata"]["name"]
        cache.add_pod(PodInfo.from_pod(p))
    tmpl = {"TopologySpreading": W._spread, "SchedulingBasic": W._default, "NodeAffinity": W._node_affinity}[workload]
    placed = []
    t0 = time.process_time()
    for i in range(pods_n):
        p = tmpl(i, "default-scheduler"); p["metadata"]["uid"] = f"u{i}"
        pi = PodInfo.from_pod(p)
        cache.update_snapshot(snapshot)
        state = fwk.new_cycle_state()
        try:
            r = cycle.schedule_pod(fwk, state, pi)
        except FitError as e:
            placed.append("rej"); continue
        placed.append(r.suggested_host)
        a = dict(p); a["spec"] = {**p["spec"], "nodeName": r.suggested_host}
        cache.assume_pod(PodInfo.from_pod(a))
    cpu = time.process_time() - t0
    return cpu / pods_n * 1000, placed

if __name__ == "__main__":
    wl, variant = sys.argv[1], sys.argv[2]
    nodes_n, pods_n, existing = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
    ms, placed = run(wl, nodes_n, pods_n, existing, variant)
    import hashlib
    print(f"{wl} {variant}: {ms:.3f} ms CPU per pod; placements {hashlib.md5(' '.join(placed).encode()).hexdigest()[:10]}", flush=True)
