"""Malformed pods and nodes never corrupt the cache (issue 12): a cache update is all or
nothing, a pod that cannot be parsed fails at parse time, a bound pod we cannot read is
accounted safely, and a malformed node is refused whole."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.cache import Cache
from scheduler.objects.errors import ObjectError
from scheduler.objects.pod import PodInfo
from tests.builders import NodeBuilder, PodBuilder, make_node
from tests.unit.cache.views import cache_view, info_view

# (description, path, value, field named by the error) written over a 500m pod on n1
POD_CORRUPTIONS = [
    ("volume not an object", "spec.volumes", [7], "spec.volumes[0]"),
    ("claim not an object", "spec.volumes",
     [{"name": "v", "persistentVolumeClaim": "claim"}], "spec.volumes[0].persistentVolumeClaim"),
    ("claim without a name", "spec.volumes",
     [{"name": "v", "persistentVolumeClaim": {}}],
     "spec.volumes[0].persistentVolumeClaim.claimName"),
    ("host port out of range", "spec.containers[0].ports", [{"hostPort": 70000}],
     "spec.containers[0].ports[0].hostPort"),
    ("anti-affinity term not an object", "spec.affinity",
     {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": ["x"]}},
     "spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0]"),
    ("toleration not an object", "spec.tolerations", [5], "spec.tolerations[0]"),
    ("labels not a map", "metadata.labels", ["a"], "metadata.labels"),
]


def _bad_pod(path: str, value: Any, *, name: str = "bad") -> dict[str, Any]:
    return PodBuilder(name).node("n1").req(cpu="500m").set(path, value).obj()


def _cache() -> Cache:
    cache = Cache()
    cache.add_node(make_node("n1", cpu="1"))
    return cache


@pytest.mark.parametrize(("what", "path", "value", "field"), POD_CORRUPTIONS,
                         ids=[c[0] for c in POD_CORRUPTIONS])
def test_a_pod_that_cannot_be_parsed_fails_before_the_cache_every_time(
    what: str, path: str, value: Any, field: str
) -> None:
    cache = _cache()
    before = cache_view(cache)
    for _ in range(3):  # each retry used to leave 500m more phantom usage behind
        with pytest.raises(ObjectError) as err:
            cache.assume_pod(PodInfo.from_pod(_bad_pod(path, value)))
        assert err.value.field == field, what
        assert str(err.value).startswith(f"Pod default/bad: {field}: "), str(err.value)
    assert cache_view(cache) == before


@pytest.mark.parametrize(("what", "path", "value", "field"), POD_CORRUPTIONS,
                         ids=[c[0] for c in POD_CORRUPTIONS])
def test_a_bound_pod_that_cannot_be_parsed_is_accounted_once_without_the_bad_field(
    what: str, path: str, value: Any, field: str
) -> None:
    cache = _cache()
    info, problems = PodInfo.from_assigned_pod(_bad_pod(path, value))
    assert [p.field for p in problems][:1] == [field], what
    cache.add_pod(info)
    node = cache.get_node_info("n1")
    assert node is not None
    assert node.requested.milli_cpu == 500 and not node.pvc_ref_counts
    assert len(node.used_ports) == 0
    cache.remove_pod(info.pod)
    after = cache.get_node_info("n1")
    assert after is not None and after.requested.milli_cpu == 0 and after.pods == []


# (description, container resources, milli-CPU counted for the bound pod)
BAD_REQUESTS = [
    ("negative cpu", {"requests": {"cpu": "-2"}}, 0),
    ("negative cpu with a limit", {"requests": {"cpu": "-2"}, "limits": {"cpu": "1"}}, 1000),
    ("non-numeric cpu", {"requests": {"cpu": "abc"}}, 0),
    ("request above limit", {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}, 1000),
    ("fractional extended resource", {"requests": {"cpu": "100m", "example.com/gpu": "0.5"}},
     100),
]


@pytest.mark.parametrize(("what", "resources", "counted"), BAD_REQUESTS,
                         ids=[c[0] for c in BAD_REQUESTS])
def test_bad_requests_are_refused_and_a_bound_pod_never_frees_capacity(
    what: str, resources: dict[str, Any], counted: int
) -> None:
    pod = PodBuilder("bad").node("n1").container().set(
        "spec.containers[0].resources", resources).obj()
    with pytest.raises(ObjectError) as err:
        PodInfo.from_pod(pod)
    assert err.value.field.startswith("spec.containers[0].resources."), what
    info, _ = PodInfo.from_assigned_pod(pod)
    assert info.requests.milli_cpu == counted
    assert all(v >= 0 for v in info.requests.scalar_resources.values())


def _node_view(cache: Cache, name: str) -> dict[str, Any]:
    info = cache.get_node_info(name)
    assert info is not None
    return info_view(info)


NODE_CORRUPTIONS = [
    ("allocatable not a quantity", "status.allocatable.cpu", "lots", "status.allocatable.cpu"),
    ("negative allocatable", "status.allocatable.memory", "-1Gi", "status.allocatable.memory"),
    ("capacity not a map", "status.capacity", ["cpu"], "status.capacity"),
    ("taints not a list", "spec.taints", {"key": "a"}, "spec.taints"),
    ("taint not an object", "spec.taints", ["NoSchedule"], "spec.taints[0]"),
    ("labels not a map", "metadata.labels", "zone=a", "metadata.labels"),
    ("label value not a string", "metadata.labels", {"zone": 1}, "metadata.labels"),
    ("unschedulable not a boolean", "spec.unschedulable", "yes", "spec.unschedulable"),
    ("images not objects", "status.images", [3], "status.images[0]"),
]


@pytest.mark.parametrize(("what", "path", "value", "field"), NODE_CORRUPTIONS,
                         ids=[c[0] for c in NODE_CORRUPTIONS])
def test_a_malformed_node_is_refused_whole(what: str, path: str, value: Any,
                                           field: str) -> None:
    cache = _cache()
    good = make_node("n1", cpu="1")
    bad = NodeBuilder("n1").capacity(cpu="1", memory="1Gi", pods=10).set(path, value).obj()
    before = cache_view(cache)
    with pytest.raises(ObjectError) as err:
        cache.update_node(good, bad)
    assert err.value.field == field, what
    assert str(err.value).startswith(f"Node n1: {field}: ")
    assert cache_view(cache) == before
    fresh = Cache()
    with pytest.raises(ObjectError):
        fresh.add_node(bad)
    assert fresh.node_count() == 0 and fresh.get_node_info("n1") is None
    assert _node_view(cache, "n1")["node"] == good
