"""Property: any sequence of cache calls leaves the cache (and an incrementally updated snapshot)
equal to one rebuilt from scratch out of the surviving nodes and pods.  Bad calls must raise
CacheError and change nothing; malformed pods and nodes (issue 12) must raise ObjectError and
change nothing, and a malformed bound pod is accounted without phantom or negative usage.
"""

from __future__ import annotations

from typing import Any

import hypothesis.strategies as st
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from scheduler.cache import Cache, CacheError, Snapshot
from scheduler.metrics import SchedulerMetrics
from scheduler.objects.errors import ObjectError
from scheduler.objects.pod import PodInfo
from scheduler.objects.resources import Resource
from tests.builders import NodeBuilder, PodBuilder
from tests.unit.cache.views import cache_view, comparable_snapshot, resource_view

NODE_NAMES = [f"n{i}" for i in range(4)]
POD_NAMES = [f"p{i}" for i in range(6)]
IMAGES = ["nginx", "redis", "busybox"]
TTL = 10.0
REBUILD_METRICS = SchedulerMetrics()

node_specs = st.fixed_dictionaries(
    {
        "cpu": st.sampled_from(["2", "4", "8"]),
        "zone": st.sampled_from(["", "a", "b"]),
        "images": st.lists(st.sampled_from(IMAGES), unique=True, max_size=3),
        "gpu": st.booleans(),
    }
)

pod_specs = st.fixed_dictionaries(
    {
        "cpu": st.sampled_from([None, "100m", "1"]),
        "gpu": st.booleans(),
        "port": st.sampled_from([None, 80, 8080]),
        "pvc": st.sampled_from([None, "c1", "c2"]),
        "affinity": st.sampled_from(["none", "affinity", "anti"]),
        "label": st.sampled_from(["x", "y"]),
    }
)


def build_node(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    b = NodeBuilder(name)
    scalars = {"nvidia.com/gpu": 2} if spec["gpu"] else {}
    b.capacity(cpu=spec["cpu"], memory="8Gi", pods=110, **scalars)
    if spec["zone"]:
        b.labels({"topology.kubernetes.io/zone": spec["zone"]})
    if spec["images"]:
        b.images(*[(i, 100 + len(i)) for i in spec["images"]])
    return b.obj()


def build_pod(name: str, node: str, spec: dict[str, Any]) -> dict[str, Any]:
    b = PodBuilder(name).node(node).labels(app=spec["label"])
    scalars = {"nvidia.com/gpu": 1} if spec["gpu"] else {}
    if spec["cpu"] or scalars:
        b.req(cpu=spec["cpu"], **scalars)
    else:
        b.container()
    if spec["port"]:
        b.host_port(spec["port"])
    if spec["pvc"]:
        b.pvc(spec["pvc"])
    if spec["affinity"] == "affinity":
        b.pod_affinity_required({"app": "x"}, "kubernetes.io/hostname")
    elif spec["affinity"] == "anti":
        b.pod_anti_affinity_required({"app": "y"}, "kubernetes.io/hostname")
    return b.obj()


# (path, value) written over a well-formed pod / node
POD_CORRUPTIONS = [
    ("spec.volumes", [7]),
    ("spec.volumes", [{"name": "v", "persistentVolumeClaim": "claim"}]),
    ("spec.containers[0].resources", {"requests": {"cpu": "-2"}}),
    ("spec.containers[0].resources", {"requests": {"cpu": "abc", "memory": "1Gi"}}),
    ("spec.containers[0].resources", {"requests": {"nvidia.com/gpu": "0.5"}}),
    ("spec.containers[0].resources", {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}),
    ("spec.overhead", {"cpu": "-1"}),
    ("spec.affinity", {"podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [{"labelSelector": 5}]}}),
    ("spec.containers[0].ports", [{"hostPort": "80"}]),
    ("spec.schedulingGates", "gate"),
]
NODE_CORRUPTIONS = [
    ("status.allocatable", {"cpu": "x"}),
    ("status.capacity", {"memory": "-1"}),
    ("spec.taints", "NoSchedule"),
    ("metadata.labels", [1]),
]


def corrupt(obj: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    from tests.builders import set_path

    set_path(obj, path, value)
    return obj


class CacheMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.now = 0.0
        self.cache = Cache(assumed_pod_ttl=TTL, clock=lambda: self.now)
        self.snapshot = Snapshot()
        self.nodes: dict[str, dict[str, Any]] = {}
        # pod name -> (pod, assumed, deadline)
        self.pods: dict[str, tuple[dict[str, Any], bool, float | None]] = {}

    def expect_error(self, call: Any, error: type[Exception] = CacheError) -> None:
        before = cache_view(self.cache)
        try:
            call()
        except error:
            assert cache_view(self.cache) == before
            return
        raise AssertionError(f"expected {error.__name__}")

    # --- nodes ---

    @rule(name=st.sampled_from(NODE_NAMES), spec=node_specs)
    def add_node(self, name: str, spec: dict[str, Any]) -> None:
        node = build_node(name, spec)
        old = self.nodes.get(name)
        if old is not None and spec["cpu"] == "8":
            self.cache.update_node(old, node)
        else:
            self.cache.add_node(node)
        self.nodes[name] = node

    @rule(name=st.sampled_from(NODE_NAMES))
    def remove_node(self, name: str) -> None:
        node = self.nodes.pop(name, None)
        if node is None:
            self.expect_error(lambda: self.cache.remove_node(NodeBuilder(name).obj()))
        else:
            self.cache.remove_node(node)

    # --- pods ---

    @rule(name=st.sampled_from(POD_NAMES), node=st.sampled_from(NODE_NAMES), spec=pod_specs)
    def assume(self, name: str, node: str, spec: dict[str, Any]) -> None:
        pod = build_pod(name, node, spec)
        if name in self.pods:
            self.expect_error(lambda: self.cache.assume_pod(PodInfo.from_pod(pod)))
            return
        self.cache.assume_pod(PodInfo.from_pod(pod))
        self.pods[name] = (pod, True, None)

    @rule(name=st.sampled_from(POD_NAMES), node=st.sampled_from(NODE_NAMES), spec=pod_specs)
    def add(self, name: str, node: str, spec: dict[str, Any]) -> None:
        pod = build_pod(name, node, spec)
        current = self.pods.get(name)
        if current is not None and not current[1]:
            self.expect_error(lambda: self.cache.add_pod(PodInfo.from_pod(pod)))
            return
        self.cache.add_pod(PodInfo.from_pod(pod))
        self.pods[name] = (pod, False, None)

    @rule(name=st.sampled_from(POD_NAMES), spec=pod_specs)
    def update(self, name: str, spec: dict[str, Any]) -> None:
        current = self.pods.get(name)
        if current is None or current[1]:
            pod = build_pod(name, "n0", spec) if current is None else current[0]
            self.expect_error(
                lambda: self.cache.update_pod(pod, PodInfo.from_pod(build_pod(name, "n0", spec)))
            )
            return
        old = current[0]
        new = build_pod(name, old["spec"]["nodeName"], spec)
        self.cache.update_pod(old, PodInfo.from_pod(new))
        self.pods[name] = (new, False, None)

    @rule(name=st.sampled_from(POD_NAMES), node=st.sampled_from(NODE_NAMES), spec=pod_specs,
          corruption=st.sampled_from(POD_CORRUPTIONS))
    def add_malformed(self, name: str, node: str, spec: dict[str, Any],
                      corruption: tuple[str, Any]) -> None:
        """The informer delivers a bound pod nobody validated: parsing refuses it whole; the
        bound-pod path accounts it safely, exactly once."""
        pod = corrupt(build_pod(name, node, spec), *corruption)
        self.expect_error(lambda: self.cache.add_pod(PodInfo.from_pod(pod)), ObjectError)
        current = self.pods.get(name)
        info, problems = PodInfo.from_assigned_pod(pod)
        assert problems
        if current is not None and not current[1]:
            self.expect_error(lambda: self.cache.add_pod(info))
            return
        self.cache.add_pod(info)
        self.pods[name] = (pod, False, None)

    @rule(name=st.sampled_from(NODE_NAMES), spec=node_specs,
          corruption=st.sampled_from(NODE_CORRUPTIONS))
    def update_node_malformed(self, name: str, spec: dict[str, Any],
                              corruption: tuple[str, Any]) -> None:
        bad = corrupt(build_node(name, spec), *corruption)
        old = self.nodes.get(name)
        if old is not None:
            self.expect_error(lambda: self.cache.update_node(old, bad), ObjectError)
        else:
            self.expect_error(lambda: self.cache.add_node(bad), ObjectError)

    @rule(name=st.sampled_from(POD_NAMES), other_node=st.booleans())
    def forget(self, name: str, other_node: bool) -> None:
        current = self.pods.get(name)
        if current is None or not current[1]:
            pod = current[0] if current else PodBuilder(name).node("n0").obj()
            self.expect_error(lambda: self.cache.forget_pod(pod))
            return
        pod = current[0]
        if other_node:
            wrong = NODE_NAMES[(NODE_NAMES.index(pod["spec"]["nodeName"]) + 1) % len(NODE_NAMES)]
            self.expect_error(lambda: self.cache.forget_pod(PodBuilder(name).node(wrong).obj()))
            return
        self.cache.forget_pod(pod)
        del self.pods[name]

    @rule(name=st.sampled_from(POD_NAMES))
    def remove(self, name: str) -> None:
        current = self.pods.pop(name, None)
        if current is None:
            self.expect_error(lambda: self.cache.remove_pod(PodBuilder(name).node("n0").obj()))
            return
        self.cache.remove_pod(current[0])

    @rule(name=st.sampled_from(POD_NAMES))
    def finish_binding(self, name: str) -> None:
        current = self.pods.get(name)
        pod = current[0] if current else PodBuilder(name).node("n0").obj()
        self.cache.finish_binding(pod)  # a no-op for unknown or confirmed pods
        if current is not None and current[1]:
            self.pods[name] = (pod, True, self.now + TTL)

    @rule(dt=st.sampled_from([1.0, 6.0, 11.0]))
    def advance_and_cleanup(self, dt: float) -> None:
        self.now += dt
        expired = {p["metadata"]["name"] for p in self.cache.cleanup_assumed_pods()}
        expected = {
            name
            for name, (_, assumed, deadline) in self.pods.items()
            if assumed and deadline is not None and self.now > deadline
        }
        assert expired == expected
        for name in expected:
            del self.pods[name]

    @rule()
    def snapshot_matches_fresh_one(self) -> None:
        self.cache.update_snapshot(self.snapshot)
        fresh = Snapshot()
        self.rebuild().update_snapshot(fresh)
        assert comparable_snapshot(self.snapshot) == comparable_snapshot(fresh)
        # Every listed NodeInfo is the map's object (plugins may use either).
        assert all(self.snapshot.get(i.name) is i for i in self.snapshot.list())
        # The snapshot's pod lists hold the cache's pod objects in the cache's order (they
        # are synced by replaying the cache's changes, not copied whole).
        for name, info in self.snapshot.node_info_map.items():
            held = self.cache._nodes[name]
            for attr in ("pods", "pods_with_affinity", "pods_with_required_anti_affinity"):
                assert list(map(id, getattr(info, attr))) == list(map(id, getattr(held, attr)))
        images = {
            i: (s.size, s.num_nodes) for i, s in self.snapshot.image_states.items()
        }
        assert images == {i: (s.size, s.num_nodes) for i, s in fresh.image_states.items()}

    # --- the property ---

    def rebuild(self) -> Cache:
        # one registry for every rebuild: a cache's metrics are not compared, and building a
        # SchedulerMetrics per step was a third of this test's time
        cache = Cache(assumed_pod_ttl=TTL, metrics=REBUILD_METRICS)
        for node in self.nodes.values():
            cache.add_node(node)
        for pod, assumed, _ in self.pods.values():
            if assumed:
                cache.assume_pod(PodInfo.from_pod(pod))
            else:
                cache.add_pod(PodInfo.from_assigned_pod(pod)[0])
        return cache

    @invariant()
    def usage_is_the_sum_of_the_pods(self) -> None:
        """No phantom usage: each node's requests are exactly its pods', none negative."""
        for name, info in self.cache._nodes.items():
            total = Resource()
            for p in info.pods:
                total.add(p.requests)
            assert resource_view(info.requested) == resource_view(total), name
            assert min(resource_view(total)[:4]) >= 0
            assert all(v >= 0 for _, v in resource_view(total)[4])

    @invariant()
    def cache_matches_rebuild(self) -> None:
        fresh = self.rebuild()
        assert cache_view(self.cache) == cache_view(fresh)
        assert self.cache.pod_count() == len(self.pods)
        assert self.cache.assumed_pod_count() == sum(1 for _, a, _ in self.pods.values() if a)
        assert self.cache.node_count() == fresh.node_count()
        assert self.cache.dump().images == fresh.dump().images


TestCacheMachine = CacheMachine.TestCase
TestCacheMachine.settings = settings(
    # 60 runs of up to 40 steps (2400 operations) per CI run: was 150 (17 s of the suite).
    max_examples=60,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
