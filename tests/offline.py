"""The scheduling cycle built offline, for unit tests and the benchmarks in ``tests/perf``:
a cache holding the nodes, its snapshot, the default profile's Framework over that snapshot
(the Handle's other parts inert, ``scheduler.offline``) and a ``SchedulingCycle`` whose
scheduler is only what the cycle reads of it. No API server, informer, queue or binding.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from types import SimpleNamespace
from typing import Any

from scheduler.cache.cache import Cache
from scheduler.cache.snapshot import Snapshot
from scheduler.config.defaults import default_config
from scheduler.config.types import Profile
from scheduler.framework.runtime import Framework
from scheduler.metrics import SchedulerMetrics
from scheduler.objects.pod import PodInfo
from scheduler.offline import offline_handle_kwargs
from scheduler.plugins.registry import in_tree_registry
from scheduler.framework.status import Status
from scheduler.framework.types import FitError
from scheduler.schedule_one import ScheduleResult, SchedulingCycle

# One registry for the metrics no caller reads (pass your own to read them): a
# SchedulerMetrics per cache, framework and cycle cost the property tests seconds.
SHARED_METRICS = SchedulerMetrics()


def cache_with(nodes: Iterable[dict[str, Any]]) -> tuple[Cache, Snapshot]:
    """A cache holding ``nodes`` and an empty snapshot of it (``update_snapshot`` fills it)."""
    cache, snapshot = Cache(metrics=SHARED_METRICS), Snapshot()
    for node in nodes:
        cache.add_node(node)
    return cache, snapshot


def default_framework(snapshot: Snapshot, *, profile: Profile | None = None,
                      sample_seed: int = 0, **handle: Any) -> Framework:
    """``profile`` (the default config's first) built over ``snapshot`` with the in-tree
    plugins; ``handle`` replaces Handle parts (e.g. ``nominator``).  Its per-plugin timing
    samples cycles as the daemon's does (upstream's 10 %), drawn from
    ``random.Random(sample_seed)``: which cycles are timed, and so a bench's Python calls
    per pod, are the same in every run."""
    kwargs = offline_handle_kwargs()
    kwargs["snapshot_provider"] = lambda: snapshot
    kwargs["metrics"] = SHARED_METRICS
    kwargs["rng"] = random.Random(sample_seed)
    kwargs.update(handle)
    return Framework(profile=profile or default_config().profiles[0],
                     registry=in_tree_registry(), **kwargs)


def scheduling_cycle(cache: Cache, snapshot: Snapshot, *, seed: int = 1, percentage: int = 0,
                     metrics: SchedulerMetrics | None = None, **scheduler: Any) -> SchedulingCycle:
    """The cycle over ``cache`` and ``snapshot``: ties broken by ``random.Random(seed)``,
    ``percentageOfNodesToScore`` ``percentage``, no nominated pods; ``scheduler`` adds
    attributes to the scheduler it sees (e.g. ``nominator``)."""
    sched = SimpleNamespace(
        cache=cache, snapshot=snapshot, rng=random.Random(seed),
        config=SimpleNamespace(percentage_of_nodes_to_score=percentage),
        has_nominated_pods=lambda: False, metrics=metrics or SHARED_METRICS, **scheduler)
    return SchedulingCycle(sched)  # type: ignore[arg-type]  # the cycle's collaborators


def place(cache: Cache, snapshot: Snapshot, fwk: Framework, cycle: SchedulingCycle,
          pod: dict[str, Any]) -> str:
    """One pod through the cycle over a fresh snapshot, then assumed on the chosen host (what
    the daemon does between popping a pod and binding it); the host."""
    info = PodInfo.from_pod(pod)
    cache.update_snapshot(snapshot)
    host = cycle.schedule_pod(fwk, fwk.new_cycle_state(), info).suggested_host
    cache.assume_pod(PodInfo.from_pod({**pod, "spec": {**pod["spec"], "nodeName": host}}))
    return host


def attempt(cache: Cache, snapshot: Snapshot, fwk: Framework, cycle: SchedulingCycle,
            info: PodInfo) -> tuple[str | None, ScheduleResult | None, Status | None]:
    """One pod through the cycle over a fresh snapshot, nothing assumed: (its host, None,
    None) when some node fits, else (None, and what the failure path gives after running
    PostFilter: the result with its nomination and the status with the pod's message)."""
    cache.update_snapshot(snapshot)
    state = fwk.new_cycle_state()
    try:
        return cycle.schedule_pod(fwk, state, info).suggested_host, None, None
    except FitError as exc:
        result, _, status = cycle._schedule_failed(fwk, state, info, exc)
        return None, result, status


def windows_reused(cycle: SchedulingCycle) -> str:
    """For a bench's line: batching's kept windows taken over the run (warm-up included),
    whole, and of those the ones the walk had found among rejected nodes."""
    batches = cycle.batches
    if batches is None:
        return ""
    return (f" windows reused {batches.windows_reused}"
            f" (scattered {batches.scattered_windows_reused})")
