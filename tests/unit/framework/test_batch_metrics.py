"""Opportunistic batching's series with upstream's names and labels (1.35):
scheduler_batch_attempts_total{profile,result} and
scheduler_batch_cache_flushed_total{profile,reason}."""

from __future__ import annotations

from scheduler.cache.snapshot import Snapshot
from scheduler.config.defaults import default_config
from scheduler.framework.batching import BatchCache
from scheduler.framework.node_info import ImageStateSummary
from scheduler.framework.runtime import Framework
from scheduler.objects.pod import PodInfo
from scheduler.offline import offline_handle_kwargs
from scheduler.plugins.registry import in_tree_registry
from tests.builders import PodBuilder


def _fwk() -> Framework:
    return Framework(profile=default_config().profiles[0], registry=in_tree_registry(),
                     **offline_handle_kwargs())


def _with_image() -> Snapshot:
    snapshot = Snapshot()
    snapshot.image_states["registry.k8s.io/pause:3.10"] = ImageStateSummary(1 << 20, 1)
    return snapshot


def _begin(cache: BatchCache, fwk: Framework, pod: PodInfo, *, num_nodes: int = 10,
           snapshot: Snapshot | None = None) -> None:
    state = fwk.new_cycle_state()
    cache.begin(fwk, state, pod, num_nodes=num_nodes, image_generation=0,
                snapshot=snapshot if snapshot is not None else _with_image())


def test_attempts_and_flushes_are_counted_by_upstream_labels() -> None:
    fwk = _fwk()
    value = fwk.metrics.registry.get_sample_value
    profile = fwk.profile_name
    small = PodInfo.from_pod(PodBuilder("a").req(cpu="100m").obj())
    big = PodInfo.from_pod(PodBuilder("b").req(cpu="2").obj())
    cache = BatchCache(max_signatures=1)

    def attempts(result: str) -> float | None:
        return value("scheduler_batch_attempts_total", {"profile": profile, "result": result})

    def flushes(reason: str) -> float | None:
        return value("scheduler_batch_cache_flushed_total",
                     {"profile": profile, "reason": reason})

    _begin(cache, fwk, small)  # nothing kept yet
    assert (attempts("no_hint"), attempts("hint_used")) == (1.0, None)
    _begin(cache, fwk, small)  # the kept results of its signature
    assert attempts("hint_used") == 1.0
    _begin(cache, fwk, small, num_nodes=11)  # a node came: kept scores may all have moved
    assert (flushes("expired"), attempts("no_hint")) == (1.0, 2.0)
    _begin(cache, fwk, big, num_nodes=11)  # another signature pushes the only one out
    assert (flushes("pod_incompatible"), attempts("no_hint")) == (1.0, 3.0)


def test_node_count_expires_kept_results_only_when_some_node_holds_an_image() -> None:
    """ImageLocality's score reads the share of nodes holding an image; while no node
    holds one, every node scores the minimum whatever the count, and nothing expires."""
    fwk = _fwk()
    value = fwk.metrics.registry.get_sample_value
    labels = {"profile": fwk.profile_name}
    pod = PodInfo.from_pod(PodBuilder("a").req(cpu="100m").obj())
    cache = BatchCache()
    for num_nodes, snapshot, hint, expired in [
        (10, Snapshot(), None, None),  # nothing kept yet
        (11, Snapshot(), 1.0, None),  # a node came, no image anywhere: kept
        (12, _with_image(), 1.0, 1.0),  # an image somewhere: expired once it counts
        (13, _with_image(), 1.0, 2.0),
        (13, _with_image(), 2.0, 2.0),
    ]:
        _begin(cache, fwk, pod, num_nodes=num_nodes, snapshot=snapshot)
        assert value("scheduler_batch_attempts_total", {**labels, "result": "hint_used"}) == hint
        assert value("scheduler_batch_cache_flushed_total",
                     {**labels, "reason": "expired"}) == expired
