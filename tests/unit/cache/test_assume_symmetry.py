"""Assume/forget symmetry, as upstream's cache tests hold it: a pod assumed and then forgotten,
confirmed and removed, expired, moved or updated leaves its node exactly as it was (requested
and non-zero requested resources, host ports, PVC counts, the pods and their affinity lists),
while the node's generation only ever grows (the snapshot must see every change).  After every
step the cache comparer finds the cache equal to the cluster the step leaves behind.

The property test drives random sequences of the same calls over several nodes and pods and
checks, after each, that every node's totals are exactly a recomputation from the pods it
holds and that the comparer finds nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from scheduler.cache import Cache, Snapshot
from scheduler.cache.comparer import compare
from scheduler.framework.node_info import NodeInfo
from scheduler.objects.pod import PodInfo
from scheduler.objects.resources import Resource
from tests.builders import NodeBuilder, PodBuilder
from tests.unit.cache.views import comparable_snapshot

GPU = "example.com/gpu"
TTL = 30.0


def node(name: str) -> dict[str, Any]:
    return NodeBuilder(name).capacity(cpu="16", memory="64Gi", pods=110, **{GPU: 8}) \
        .resource_version("1").obj()


def exact_view(info: NodeInfo | None) -> dict[str, Any] | None:
    """Everything a pod changes on its NodeInfo, compared exactly (no zero dropped)."""
    if info is None:
        return None
    return {
        # copies: a view must not follow the live NodeInfo
        "requested": info.requested.clone(),
        "non_zero": info.non_zero_requested.clone(),
        "ports": {ip: set(e) for ip, e in info.used_ports._ports.items()},
        "pvc": dict(info.pvc_ref_counts),
        "pods": [p.uid for p in info.pods],
        "affinity": [p.uid for p in info.pods_with_affinity],
        "anti": [p.uid for p in info.pods_with_required_anti_affinity],
        "node": info.node,
    }


# --- the pods the sequences move: each shares something with the node's other pods --------

def base_pods() -> list[dict[str, Any]]:
    """Bound on node a before every sequence: a host port, a PVC and a GPU already in use."""
    return [
        PodBuilder("base-port").node("a").req(cpu="100m").host_port(80).resource_version(1).obj(),
        PodBuilder("base-pvc").node("a").req(cpu="100m").pvc("c1").resource_version(1).obj(),
        PodBuilder("base-gpu").node("a").req(cpu="100m", **{GPU: 1}).resource_version(1).obj(),
    ]


def subject(shape: str, *, cpu: str = "500m", labels: str = "v1") -> PodBuilder:
    b = PodBuilder("subject").labels(version=labels)
    if shape == "no requests":
        b.container()  # the non-zero defaults count for scoring
    elif shape == "gpu":
        b.req(cpu=cpu, memory="1Gi", **{GPU: 2})
    elif shape == "overhead and init":
        b.req(cpu=cpu, memory="1Gi").overhead(cpu="50m", memory="10Mi") \
            .init_container(requests={"cpu": "2", "memory": "2Gi"}) \
            .sidecar(requests={"cpu": "100m"}, ports=[{"containerPort": 9090, "hostPort": 9090}])
    else:
        b.req(cpu=cpu, memory="1Gi")
    if shape == "shared host port":
        b.host_port(80)
    elif shape == "own host port":
        b.host_port(8080)
    elif shape == "shared pvc":
        b.pvc("c1")
    elif shape == "own pvc":
        b.pvc("c2")
    elif shape == "affinity":
        b.pod_affinity_required({"app": "x"}, "kubernetes.io/hostname")
    elif shape == "anti-affinity":
        b.pod_anti_affinity_required({"app": "y"}, "kubernetes.io/hostname")
    return b


SHAPES = ["plain", "no requests", "gpu", "shared host port", "own host port", "shared pvc",
          "own pvc", "affinity", "anti-affinity", "overhead and init"]  # init: a sidecar's port


# --- the sequences, as upstream's cache tests run them ------------------------------------

@dataclass
class World:
    """The cache and the cluster it should match (the subject pod's copy in the cluster)."""

    cache: Cache
    shape: str
    now: float = 0.0
    cluster_subject: dict[str, Any] | None = None
    cached_subject: dict[str, Any] | None = None
    rv: int = 1

    def pod(self, node_name: str | None, **kw: Any) -> dict[str, Any]:
        b = subject(self.shape, **kw).resource_version(self.rv)
        if node_name:
            b.node(node_name)
        return b.obj()


def assume(w: World) -> None:
    w.cluster_subject = w.pod(None)  # pending in the cluster: the binding is in flight
    w.cached_subject = w.pod("a")
    w.cache.assume_pod(PodInfo.from_pod(w.cached_subject))


def forget(w: World) -> None:
    assert w.cached_subject is not None
    w.cache.forget_pod(w.cached_subject)  # the binding failed: the pod stays pending
    w.cached_subject = None


def finish_binding(w: World) -> None:
    assert w.cached_subject is not None
    w.cache.finish_binding(w.cached_subject, now=w.now)


def expire(w: World) -> None:
    w.now += TTL + 1
    expired = w.cache.cleanup_assumed_pods(now=w.now)
    assert [p["metadata"]["name"] for p in expired] == ["subject"]
    w.cached_subject = None  # the informer never confirmed it: still pending there


def add_on(node_name: str) -> Any:
    def add(w: World) -> None:
        w.rv += 1
        w.cluster_subject = w.cached_subject = w.pod(node_name)
        w.cache.add_pod(PodInfo.from_pod(w.cached_subject))
    add.__name__ = f"add on {node_name}"
    return add


def update(cpu: str, labels: str) -> Any:
    def upd(w: World) -> None:
        assert w.cached_subject is not None
        w.rv += 1
        old = w.cached_subject
        new = w.pod(old["spec"]["nodeName"], cpu=cpu, labels=labels)
        w.cache.update_pod(old, PodInfo.from_pod(new))
        w.cluster_subject = w.cached_subject = new
    upd.__name__ = f"update cpu={cpu}"
    return upd


def remove(w: World) -> None:
    assert w.cached_subject is not None
    w.cache.remove_pod(w.cached_subject)
    w.cluster_subject = w.cached_subject = None


add, add_b = add_on("a"), add_on("b")
SEQUENCES = {
    "assume, forget": [assume, forget],
    "assume, finish binding, forget": [assume, finish_binding, forget],
    "assume, finish binding, expire": [assume, finish_binding, expire],
    "assume, add, remove": [assume, add, remove],
    "assume, add, update (resize), remove": [assume, add, update("2", "v2"), remove],
    "assume, remove (deleted while assumed)": [assume, remove],
    "assume, add on another node, remove": [assume, add_b, remove],
    "assume, expire, add after expiration, remove":
        [assume, finish_binding, expire, add, remove],
    "add, update, update back, remove": [add, update("2", "v2"), update("500m", "v1"), remove],
    "assume, forget, assume, add, remove": [assume, forget, assume, add, remove],
}


@pytest.mark.parametrize("steps", list(SEQUENCES.values()), ids=list(SEQUENCES))
@pytest.mark.parametrize("shape", SHAPES)
def test_sequence_returns_every_node_to_where_it_was(shape: str, steps: list[Any]) -> None:
    cache = Cache(assumed_pod_ttl=TTL, clock=lambda: 0.0)
    nodes = [node("a"), node("b")]
    for n in nodes:
        cache.add_node(n)
    bases = base_pods()
    for p in bases:
        cache.add_pod(PodInfo.from_pod(p))
    snapshot = Snapshot()
    cache.update_snapshot(snapshot)
    before = {name: exact_view(cache._nodes.get(name)) for name in ("a", "b")}
    snapshot_before = comparable_snapshot(snapshot)
    generations = [cache._nodes["a"].generation]
    counts = (cache.pod_count(), cache.assumed_pod_count(), cache.node_count())
    world = World(cache, shape)

    for step in steps:
        step(world)
        cluster = bases + ([world.cluster_subject] if world.cluster_subject else [])
        result = compare(cache, nodes=nodes, pods=cluster)
        assert result.differences == [], (step.__name__, result.differences)
        generations.append(cache._nodes["a"].generation)
        if step is assume:
            # Assumed: the node holds the pod's requests on top of what it had.
            expected = before["a"]["requested"].clone()
            expected.add(PodInfo.from_pod(world.pod("a")).requests)
            assert cache._nodes["a"].requested == expected
            assert len(cache._nodes["a"].pods) == len(bases) + 1

    assert {name: exact_view(cache._nodes.get(name)) for name in ("a", "b")} == before
    assert (cache.pod_count(), cache.assumed_pod_count(), cache.node_count()) == counts
    # Every step that touched node a took a new generation: never back to an old one.
    touched = [g for g, prev in zip(generations[1:], generations) if g != prev]
    assert touched == sorted(set(touched)) and all(g > generations[0] for g in touched)
    assert generations[-1] > generations[0]
    cache.update_snapshot(snapshot)
    assert comparable_snapshot(snapshot) == snapshot_before
    assert snapshot.get("a") is not None and snapshot.get("a").generation == generations[-1]


def test_forgetting_a_gpu_pod_leaves_no_zeroed_extended_resource() -> None:
    """The asymmetry this file found: Resource.sub left {"example.com/gpu": 0} behind."""
    cache = Cache()
    cache.add_node(node("a"))
    info = PodInfo.from_pod(PodBuilder("p").node("a").req(cpu="1", **{GPU: 2}).obj())
    cache.assume_pod(info)
    cache.forget_pod(info.pod)
    (held,) = [i for name, i in cache.node_infos() if name == "a"]
    assert held.requested == Resource()


# --- the property: random sequences ---------------------------------------------------------

NODE_NAMES = ["a", "b", "c"]
POD_NAMES = [f"p{i}" for i in range(5)]
pod_shapes = st.sampled_from(SHAPES)


def random_pod(name: str, shape: str, node_name: str | None, rv: int) -> dict[str, Any]:
    b = subject(shape).resource_version(rv)
    b._meta["name"] = name
    b._meta["uid"] = f"uid-{name}"
    if node_name:
        b.node(node_name)
    return b.obj()


class SymmetryMachine(RuleBasedStateMachine):
    """The cache driven as the event handlers and the binding cycle drive it, next to a model
    of the cluster: the pods as the API shows them."""

    def __init__(self) -> None:
        super().__init__()
        self.now = 0.0
        self.cache = Cache(assumed_pod_ttl=TTL, clock=lambda: self.now)
        self.nodes = {name: node(name) for name in NODE_NAMES}
        for n in self.nodes.values():
            self.cache.add_node(n)
        self.cluster: dict[str, dict[str, Any]] = {}  # name -> the API's copy
        self.cached: dict[str, dict[str, Any]] = {}  # name -> what the cache was given
        self.assumed: set[str] = set()
        self.rv = 1

    def _next_rv(self) -> int:
        self.rv += 1
        return self.rv

    @rule(name=st.sampled_from(POD_NAMES), shape=pod_shapes,
          node_name=st.sampled_from(NODE_NAMES))
    def create_and_assume(self, name: str, shape: str, node_name: str) -> None:
        if name in self.cluster:
            return
        pending = random_pod(name, shape, None, self._next_rv())
        self.cluster[name] = pending
        copy = random_pod(name, shape, node_name, self.rv)
        self.cache.assume_pod(PodInfo.from_pod(copy))
        self.cached[name] = copy
        self.assumed.add(name)

    @rule(name=st.sampled_from(POD_NAMES), shape=pod_shapes,
          node_name=st.sampled_from(NODE_NAMES))
    def bound_by_someone_else(self, name: str, shape: str, node_name: str) -> None:
        if name in self.cluster:
            return
        pod = random_pod(name, shape, node_name, self._next_rv())
        self.cluster[name] = self.cached[name] = pod
        self.cache.add_pod(PodInfo.from_pod(pod))

    @rule(name=st.sampled_from(POD_NAMES))
    def binding_fails(self, name: str) -> None:
        if name not in self.assumed:
            return
        self.cache.forget_pod(self.cached.pop(name))
        self.assumed.discard(name)

    @rule(name=st.sampled_from(POD_NAMES), elsewhere=st.booleans())
    def informer_confirms(self, name: str, elsewhere: bool) -> None:
        if name not in self.assumed:
            return
        node_name = self.cached[name]["spec"]["nodeName"]
        if elsewhere:  # a race: bound to another node than assumed
            node_name = NODE_NAMES[(NODE_NAMES.index(node_name) + 1) % len(NODE_NAMES)]
        bound = dict(self.cluster[name])
        bound["spec"] = {**bound["spec"], "nodeName": node_name}
        bound["metadata"] = {**bound["metadata"], "resourceVersion": str(self._next_rv())}
        self.cluster[name] = self.cached[name] = bound
        self.cache.add_pod(PodInfo.from_pod(bound))
        self.assumed.discard(name)

    @rule(name=st.sampled_from(POD_NAMES), shape=pod_shapes)
    def resized(self, name: str, shape: str) -> None:
        old = self.cached.get(name)
        if old is None or name in self.assumed:
            return
        new = random_pod(name, shape, old["spec"]["nodeName"], self._next_rv())
        self.cache.update_pod(old, PodInfo.from_pod(new))
        self.cluster[name] = self.cached[name] = new

    @rule(name=st.sampled_from(POD_NAMES))
    def deleted(self, name: str) -> None:
        if name not in self.cluster:
            return
        del self.cluster[name]
        cached = self.cached.pop(name, None)
        if cached is not None:
            self.cache.remove_pod(cached)
            self.assumed.discard(name)

    @rule(name=st.sampled_from(POD_NAMES))
    def binding_sent(self, name: str) -> None:
        if name in self.assumed:
            self.cache.finish_binding(self.cached[name])

    @rule(dt=st.sampled_from([1.0, TTL + 1]))
    def time_passes(self, dt: float) -> None:
        self.now += dt
        for pod in self.cache.cleanup_assumed_pods():
            name = pod["metadata"]["name"]
            self.cached.pop(name)
            self.assumed.discard(name)

    @rule(name=st.sampled_from(NODE_NAMES))
    def node_deleted(self, name: str) -> None:
        """Its pods stay bound until their own deletes: the cache keeps them on a ghost."""
        gone = self.nodes.pop(name, None)
        if gone is not None:
            self.cache.remove_node(gone)

    @rule(name=st.sampled_from(NODE_NAMES))
    def node_back(self, name: str) -> None:
        if name not in self.nodes:
            self.nodes[name] = node(name)
            self.cache.add_node(self.nodes[name])

    @invariant()
    def totals_are_a_recomputation_from_the_pods_held(self) -> None:
        for name, info in self.cache.node_infos():
            fresh = NodeInfo()
            fresh.node = info.node
            for pod_info in info.pods:
                fresh.add_pod(PodInfo.from_pod(pod_info.pod))
            assert exact_view(info) == exact_view(fresh), name

    @invariant()
    def the_comparer_finds_the_cache_equal_to_the_cluster(self) -> None:
        result = compare(self.cache, nodes=list(self.nodes.values()),
                         pods=list(self.cluster.values()))
        assert result.differences == []
        assert result.assumed == len(self.assumed)
        assert result.pods == len(self.cached)


TestSymmetryMachine = SymmetryMachine.TestCase
TestSymmetryMachine.settings = settings(
    # 50 runs of up to 40 steps per CI run (was 100).
    max_examples=50,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
