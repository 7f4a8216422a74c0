"""Cache state machine, node bookkeeping, images and TTL expiry."""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from scheduler.cache import Cache, CacheError, Snapshot
from scheduler.metrics import SchedulerMetrics
from scheduler.objects.errors import ObjectError
from scheduler.objects.pod import PodInfo
from tests.builders import NodeBuilder, PodBuilder, make_node, make_pod
from tests.unit.cache.views import cache_view, info_view


def pi(pod: dict[str, Any]) -> PodInfo:
    return PodInfo.from_pod(pod)


def bound(name: str, node: str, *, cpu: str = "100m", **kw: Any) -> dict[str, Any]:
    return make_pod(name, cpu=cpu, node=node, **kw)


def cache_with(*nodes: str) -> Cache:
    cache = Cache()
    for n in nodes:
        cache.add_node(make_node(n))
    return cache


def requested_cpu(cache: Cache, node: str) -> int:
    info = cache.get_node_info(node)
    assert info is not None
    return info.requested.milli_cpu


# --- the pod state machine -------------------------------------------------------------------


def test_assume_accounts_pod_on_its_node() -> None:
    cache = cache_with("n1")
    pod = bound("p", "n1", cpu="500m")
    cache.assume_pod(pi(pod))
    assert cache.is_assumed_pod(pod)
    assert cache.assumed_pod_count() == 1
    assert cache.pod_count() == 1
    assert requested_cpu(cache, "n1") == 500
    assert cache.get_pod(pod) is pod


@pytest.mark.parametrize(("steps", "found"), [
    ([], False),                                # never seen
    (["assume"], True),                         # assumed: its PodInfo
    (["assume", "finish"], True),               # binding finished, not yet confirmed
    (["assume", "add"], False),                 # confirmed by the informer
    (["assume", "forget"], False),              # forgotten (binding failed)
    (["add"], False),                           # bound by someone else
])
def test_assumed_pod_info_by_uid(steps: list[str], found: bool) -> None:
    """``assumed_pod_info(uid)`` answers as ``is_assumed_pod`` then ``get_pod_info``."""
    cache = cache_with("n1")
    pod = bound("p", "n1")
    info = pi(pod)
    for step in steps:
        {"assume": lambda: cache.assume_pod(info),
         "finish": lambda: cache.finish_binding(pod),
         "add": lambda: cache.add_pod(pi(pod)),
         "forget": lambda: cache.forget_pod(pod)}[step]()
    uid = info.uid
    assert (cache.assumed_pod_info(uid) is not None) is found
    expected = cache.get_pod_info(pod) if cache.is_assumed_pod(pod) else None
    assert cache.assumed_pod_info(uid) is expected
    if found:
        assert cache.assumed_pod_info(uid) is info


def test_assume_on_unknown_node_creates_nodeless_info() -> None:
    cache = Cache()
    cache.assume_pod(pi(bound("p", "ghost")))
    assert cache.node_count() == 1
    snapshot = Snapshot()
    cache.update_snapshot(snapshot)
    assert snapshot.num_nodes() == 0  # not a schedulable node until the node itself arrives
    cache.add_node(make_node("ghost"))
    cache.update_snapshot(snapshot)
    info = snapshot.get("ghost")
    assert info is not None and len(info.pods) == 1


@pytest.mark.parametrize(
    ("setup", "call", "message"),
    [
        pytest.param(["assume"], "assume", "already assumed", id="assume-twice"),
        pytest.param(["add"], "assume", "already added", id="assume-added"),
        pytest.param([], "forget", "not in the cache", id="forget-unknown"),
        pytest.param(["add"], "forget", "not assumed", id="forget-added"),
        pytest.param(["assume", "add"], "forget", "not assumed", id="forget-confirmed"),
        pytest.param(["add"], "add", "already added", id="add-twice"),
        pytest.param([], "update", "not in the cache", id="update-unknown"),
        pytest.param(["assume"], "update", "cannot be updated", id="update-assumed"),
        pytest.param([], "remove", "not in the cache", id="remove-unknown"),
        pytest.param(
            ["assume"], "forget-other-node", "was assumed on node 'n1'", id="forget-wrong-node"
        ),
    ],
)
def test_bad_calls_raise_and_leave_state_unchanged(
    setup: list[str], call: str, message: str
) -> None:
    cache = cache_with("n1", "n2")
    pod = bound("web", "n1", cpu="300m")
    for step in setup:
        if step == "assume":
            cache.assume_pod(pi(pod))
        else:
            cache.add_pod(pi(pod))
    before = cache_view(cache)
    assumed_before = cache.assumed_pod_count()
    with pytest.raises(CacheError, match=message) as err:
        if call == "assume":
            cache.assume_pod(pi(pod))
        elif call == "forget":
            cache.forget_pod(pod)
        elif call == "forget-other-node":
            cache.forget_pod(bound("web", "n2"))
        elif call == "add":
            cache.add_pod(pi(pod))
        elif call == "update":
            cache.update_pod(pod, pi(bound("web", "n1", cpu="1")))
        elif call == "remove":
            cache.remove_pod(pod)
    assert "default/web" in str(err.value)
    assert cache_view(cache) == before
    assert cache.assumed_pod_count() == assumed_before


def test_forget_restores_node() -> None:
    cache = cache_with("n1")
    empty = info_view(cache.get_node_info("n1"))  # type: ignore[arg-type]
    pod = bound("p", "n1", cpu="1")
    cache.assume_pod(pi(pod))
    cache.forget_pod(pod)
    assert not cache.is_assumed_pod(pod)
    assert cache.get_pod(pod) is None
    after = info_view(cache.get_node_info("n1"))  # type: ignore[arg-type]
    assert after == empty


def test_forget_accepts_pod_without_node_name() -> None:
    cache = cache_with("n1")
    pod = bound("p", "n1")
    cache.assume_pod(pi(pod))
    original = make_pod("p", cpu="100m")  # the queue's copy, before spec.nodeName was set
    cache.forget_pod(original)
    assert cache.pod_count() == 0


def test_add_confirms_assumed_pod() -> None:
    cache = cache_with("n1")
    pod = bound("p", "n1", cpu="200m")
    cache.assume_pod(pi(pod))
    informer_copy = bound("p", "n1", cpu="200m", labels={"confirmed": "yes"})
    cache.add_pod(pi(informer_copy))
    assert not cache.is_assumed_pod(pod)
    assert cache.get_pod(pod) is informer_copy
    assert requested_cpu(cache, "n1") == 200
    assert cache.pod_count() == 1


def test_add_on_other_node_moves_assumed_pod() -> None:
    cache = cache_with("n1", "n2")
    cache.assume_pod(pi(bound("p", "n1", cpu="200m")))
    cache.add_pod(pi(bound("p", "n2", cpu="200m")))
    assert requested_cpu(cache, "n1") == 0
    assert requested_cpu(cache, "n2") == 200


def test_update_replaces_pod_requests() -> None:
    cache = cache_with("n1")
    pod = bound("p", "n1", cpu="200m")
    cache.add_pod(pi(pod))
    cache.update_pod(pod, pi(bound("p", "n1", cpu="700m")))
    assert requested_cpu(cache, "n1") == 700


def test_remove_assumed_pod_is_allowed() -> None:
    cache = cache_with("n1")
    pod = bound("p", "n1")
    cache.assume_pod(pi(pod))
    cache.remove_pod(pod)
    assert cache.assumed_pod_count() == 0
    assert cache.pod_count() == 0


def test_pod_without_uid_is_rejected() -> None:
    cache = cache_with("n1")
    pod = PodBuilder("p").node("n1").set("metadata.uid", "").obj()
    with pytest.raises(CacheError, match="default/p has no metadata.uid"):
        cache.assume_pod(pi(pod))
    with pytest.raises(CacheError, match="no spec.nodeName"):
        cache.assume_pod(pi(make_pod("q")))


def test_ports_and_pvcs_follow_pods() -> None:
    cache = cache_with("n1")
    pod = PodBuilder("p").node("n1").host_port(8080).pvc("data").obj()
    cache.add_pod(pi(pod))
    info = cache.get_node_info("n1")
    assert info is not None
    assert info.used_ports.check_conflict("", "TCP", 8080)
    assert info.pvc_ref_counts == {"default/data": 1}
    cache.remove_pod(pod)
    info = cache.get_node_info("n1")
    assert info is not None
    assert not info.used_ports.check_conflict("", "TCP", 8080)
    assert info.pvc_ref_counts == {}


# --- TTL ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ttl", "finish_at", "cleanup_at", "expired"),
    [
        pytest.param(0.0, 0.0, 10_000.0, False, id="ttl-0-never-expires"),
        pytest.param(30.0, None, 10_000.0, False, id="binding-not-finished"),
        pytest.param(30.0, 100.0, 130.0, False, id="at-deadline"),
        pytest.param(30.0, 100.0, 130.5, True, id="after-deadline"),
    ],
)
def test_assumed_pod_expiry(
    ttl: float, finish_at: float | None, cleanup_at: float, expired: bool
) -> None:
    cache = Cache(assumed_pod_ttl=ttl, clock=lambda: 0.0)
    cache.add_node(make_node("n1"))
    pod = bound("p", "n1", cpu="1")
    cache.assume_pod(pi(pod))
    if finish_at is not None:
        cache.finish_binding(pod, now=finish_at)
    gone = cache.cleanup_assumed_pods(cleanup_at)
    assert (gone == [pod]) is expired
    assert (cache.get_pod(pod) is None) is expired
    assert requested_cpu(cache, "n1") == (0 if expired else 1000)


def test_confirmed_pod_does_not_expire() -> None:
    cache = Cache(assumed_pod_ttl=1.0)
    cache.add_node(make_node("n1"))
    pod = bound("p", "n1")
    cache.assume_pod(pi(pod))
    cache.finish_binding(pod, now=0.0)
    cache.add_pod(pi(pod))
    assert cache.cleanup_assumed_pods(100.0) == []
    assert cache.pod_count() == 1


async def test_run_expires_and_exports_metrics() -> None:
    now = [0.0]
    metrics = SchedulerMetrics(CollectorRegistry())
    cache = Cache(assumed_pod_ttl=5.0, clock=lambda: now[0], metrics=metrics)
    cache.add_node(make_node("n1"))
    pod = bound("p", "n1")
    cache.assume_pod(pi(pod))
    cache.finish_binding(pod)
    slept: list[float] = []

    async def fake_sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds * 3

    await cache.run(iterations=3, sleep=fake_sleep)
    assert slept == [1.0, 1.0, 1.0]
    assert cache.get_pod(pod) is None  # expired at t=6
    value = metrics.registry.get_sample_value
    assert value("scheduler_cache_size", {"type": "pods"}) == 0
    assert value("scheduler_cache_size", {"type": "nodes"}) == 1
    assert value("scheduler_cache_size", {"type": "assumed_pods"}) == 0


# --- nodes -------------------------------------------------------------------------------------


def test_removed_node_with_pods_stays_until_its_pods_go() -> None:
    cache = cache_with("n1", "n2")
    pod = bound("p", "n1")
    cache.add_pod(pi(pod))
    cache.remove_node(make_node("n1"))
    assert cache.node_count() == 2
    assert cache.dump().deleted_nodes == ["n1"]
    snapshot = Snapshot()
    cache.update_snapshot(snapshot)
    assert [i.name for i in snapshot.list()] == ["n2"]
    assert snapshot.get("n1") is None
    assert cache.get_pod(pod) is pod  # upstream GetPod still finds it
    cache.remove_pod(pod)
    assert cache.node_count() == 1
    assert cache.dump().deleted_nodes == []


def test_remove_unknown_node_raises() -> None:
    cache = cache_with("n1")
    with pytest.raises(CacheError, match="node n9 is not in the cache"):
        cache.remove_node(make_node("n9"))
    cache.remove_node(make_node("n1"))
    with pytest.raises(CacheError, match="node n1"):
        cache.remove_node(make_node("n1"))


def test_readded_node_keeps_pods() -> None:
    cache = cache_with("n1")
    cache.add_pod(pi(bound("p", "n1", cpu="300m")))
    cache.remove_node(make_node("n1"))
    cache.add_node(make_node("n1", cpu="8"))
    info = cache.get_node_info("n1")
    assert info is not None
    assert info.requested.milli_cpu == 300
    assert info.allocatable.milli_cpu == 8000


def test_malformed_node_raises_object_error_and_changes_nothing() -> None:
    cache = cache_with("n1")
    before = cache_view(cache)
    bad = NodeBuilder("n1").capacity(cpu="lots").obj()
    with pytest.raises(ObjectError, match="Node n1"):
        cache.update_node(make_node("n1"), bad)
    with pytest.raises(ObjectError, match="metadata.name"):
        cache.add_node({"metadata": {}})
    assert cache_view(cache) == before


def test_node_updates_keep_the_node_info_and_its_pods() -> None:
    cache = Cache()
    cache.add_node(make_node("n1"))
    cache.add_pod(pi(make_pod("p", node="n1", cpu="100m")))
    cache.update_node(make_node("n1"), make_node("n1", cpu="8"))
    info = cache.get_node_info("n1")
    assert info is not None and info.allocatable.milli_cpu == 8000
    assert [p.name for p in info.pods] == ["p"] and requested_cpu(cache, "n1") == 100


# --- images ------------------------------------------------------------------------------------


def node_with_images(name: str, *images: str, size: int = 100) -> dict[str, Any]:
    return NodeBuilder(name).capacity(cpu="4").images(*[(i, size) for i in images]).obj()


def test_image_states_count_nodes_cluster_wide() -> None:
    cache = Cache()
    cache.add_node(node_with_images("n1", "nginx", "redis"))
    cache.add_node(node_with_images("n2", "nginx"))
    snapshot = Snapshot()
    cache.update_snapshot(snapshot)
    n1 = snapshot.get("n1")
    assert n1 is not None
    assert {k: (v.size, v.num_nodes) for k, v in n1.image_states.items()} == {
        "nginx": (100, 2),
        "redis": (100, 1),
    }
    # n2 drops nginx: n1 is not re-copied, yet its view of nginx must follow.
    n1_pods_before = n1.pods
    cache.update_node(node_with_images("n2", "nginx"), node_with_images("n2"))
    cache.update_snapshot(snapshot)
    assert snapshot.get("n1") is n1 and n1.pods is n1_pods_before
    assert n1.image_states["nginx"].num_nodes == 1
    cache.add_node(node_with_images("n3", "redis"))
    cache.update_snapshot(snapshot)
    assert n1.image_states["redis"].num_nodes == 2
    cache.remove_node(node_with_images("n1"))
    cache.remove_node(node_with_images("n3"))
    cache.update_snapshot(snapshot)
    assert snapshot.image_states == {}
    assert cache.dump().images == {}


def test_image_with_two_names_counts_once_per_node() -> None:
    cache = Cache()
    node = NodeBuilder("n1").images((["nginx:1", "nginx@sha256:abc"], 50)).obj()
    cache.add_node(node)
    assert cache.dump().images == {"nginx:1": (50, 1), "nginx@sha256:abc": (50, 1)}


def test_dump_lists_nodes_pods_and_assumed() -> None:
    cache = cache_with("n1", "n2")
    cache.add_pod(pi(bound("a", "n1")))
    cache.assume_pod(pi(bound("b", "n2")))
    dump = cache.dump()
    assert dump.nodes == {"n1": ["default/a"], "n2": ["default/b"]}
    assert dump.assumed_pods == ["default/b"]


@pytest.mark.parametrize(
    ("informer_node", "message"),
    [
        pytest.param("n2", "confirmed it bound to node 'n2', not 'n1' as assumed",
                     id="bound-elsewhere"),
        pytest.param("n1", "confirmed it bound to node 'n1'\\)", id="bound-as-assumed"),
    ],
)
def test_forget_after_informer_confirmed_keeps_the_bound_pod(
    informer_node: str, message: str
) -> None:
    # Assumed on n1; the informer shows it bound to informer_node before the binder's
    # failure forgets the assumed copy: the cache keeps the bound pod, on its real node only.
    cache = cache_with("n1", "n2")
    assumed = bound("web", "n1", cpu="300m")
    cache.assume_pod(pi(assumed))
    cache.add_pod(pi(bound("web", informer_node, cpu="300m")))
    with pytest.raises(CacheError, match=message):
        cache.forget_pod(assumed)
    assert not cache.is_assumed_pod(assumed)
    assert cache.pod_count() == 1
    cached = cache.get_pod(assumed)
    assert cached is not None and cached["spec"]["nodeName"] == informer_node
    other = "n2" if informer_node == "n1" else "n1"
    assert requested_cpu(cache, informer_node) == 300
    assert requested_cpu(cache, other) == 0
