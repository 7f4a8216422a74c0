from typing import Any

import pytest

from scheduler.objects.errors import ObjectError
from scheduler.objects.pod import (
    PodInfo,
    is_assigned,
    is_being_deleted,
    is_terminal,
    pod_host_ports,
    pod_key,
    pod_non_zero_requests,
    pod_priority,
    pod_requests,
    scheduler_name,
)
from scheduler.objects.resources import Resource
from tests.builders import PodBuilder

Mi = 2**20
Gi = 2**30


@pytest.mark.parametrize(
    ("builder", "expected"),
    [
        (PodBuilder("p").container(), Resource()),
        (PodBuilder("p").req(cpu="100m", memory="1Gi"), Resource(100, Gi)),
        (PodBuilder("p").container(requests={"cpu": "100m"}).container(requests={"cpu": "1"}),
         Resource(1100)),
        # requests default from limits (apiserver defaulting)
        (PodBuilder("p").limits(cpu="2", memory="1Gi"), Resource(2000, Gi)),
        (PodBuilder("p").req(cpu="1").limits(cpu="2", memory="1Gi"), Resource(1000, Gi)),
        # regular init containers: max with the sum of containers
        (PodBuilder("p").req(cpu="1").init_container(requests={"cpu": "3", "memory": "1Mi"}),
         Resource(3000, Mi)),
        (PodBuilder("p").req(cpu="1", memory="2Gi").init_container(requests={"cpu": "500m"}),
         Resource(1000, 2 * Gi)),
        # sidecar adds to the total; a later init container stacks on the sidecar
        (PodBuilder("p").req(cpu="1")
         .init_container("s", requests={"cpu": "500m"}, restart_policy="Always"),
         Resource(1500)),
        (PodBuilder("p").req(cpu="1")
         .init_container("s", requests={"cpu": "500m"}, restart_policy="Always")
         .init_container("i", requests={"cpu": "2"}),
         Resource(2500)),
        # an init container before the sidecar does not stack on it
        (PodBuilder("p").req(cpu="1")
         .init_container("i", requests={"cpu": "2"})
         .init_container("s", requests={"cpu": "500m"}, restart_policy="Always"),
         Resource(2000)),
        (PodBuilder("p").req(cpu="100m").overhead(cpu="10m", memory="5Mi"), Resource(110, 5 * Mi)),
        (PodBuilder("p").req(cpu="100m", **{"nvidia.com/gpu": 2}).req(ephemeral_storage="1Gi"),
         Resource(100, ephemeral_storage=Gi, scalar_resources={"nvidia.com/gpu": 2})),
        # pod-level requests override cpu/memory from containers
        (PodBuilder("p").req(cpu="100m", memory="1Gi", **{"example.com/x": 1})
         .pod_resources(requests={"cpu": "2"}),
         Resource(2000, Gi, scalar_resources={"example.com/x": 1})),
        # sub-milli parts are summed before rounding up
        (PodBuilder("p").container(requests={"cpu": "0.5m"}).container(requests={"cpu": "0.5m"}),
         Resource(1)),
    ],
    ids=["no-requests", "single", "sum", "limits-default", "limits-fill-missing", "init-max",
         "init-smaller", "sidecar", "sidecar-then-init", "init-then-sidecar", "overhead",
         "scalar-and-ephemeral", "pod-level", "exact-sum"],
)
def test_pod_requests(builder: PodBuilder, expected: Resource) -> None:
    pod = builder.obj()
    assert pod_requests(pod) == expected
    assert PodInfo.from_pod(pod).requests == expected


@pytest.mark.parametrize(
    ("builder", "expected"),
    [
        (PodBuilder("p").container(), (100, 200 * Mi)),
        (PodBuilder("p").container().container(), (200, 400 * Mi)),
        (PodBuilder("p").req(cpu="1"), (1000, 200 * Mi)),
        (PodBuilder("p").req(cpu="0", memory="0"), (0, 0)),  # explicit zero stays zero
        (PodBuilder("p").req(memory="1Gi").init_container(requests={"cpu": "1"}),
         (1000, Gi)),
        (PodBuilder("p").container().overhead(cpu="10m"), (110, 200 * Mi)),
        (PodBuilder("p").container().pod_resources(requests={"cpu": "300m"}), (300, 200 * Mi)),
    ],
    ids=["defaults", "two-containers", "cpu-only", "explicit-zero", "init", "overhead",
         "pod-level"],
)
def test_non_zero_requests(builder: PodBuilder, expected: tuple[int, int]) -> None:
    pod = builder.obj()
    assert pod_non_zero_requests(pod) == expected
    info = PodInfo.from_pod(pod)
    assert (info.non_zero_cpu, info.non_zero_memory) == expected


def test_host_ports() -> None:
    pod = (PodBuilder("p").host_port(80).host_port(53, protocol="UDP", host_ip="10.0.0.1")
           .container("c2", ports=[{"containerPort": 8080}, {"containerPort": 9, "hostPort": 0}])
           .init_container("init", ports=[{"containerPort": 1, "hostPort": 1}])
           .init_container("side", restart_policy="Always",
                           ports=[{"containerPort": 2, "hostPort": 2, "protocol": ""}])
           .obj())
    expected = [("0.0.0.0", "TCP", 2), ("0.0.0.0", "TCP", 80), ("10.0.0.1", "UDP", 53)]
    assert pod_host_ports(pod) == expected
    assert PodInfo.from_pod(pod).host_ports == expected


@pytest.mark.parametrize(
    ("path", "value", "field", "message"),
    [
        ("spec.containers", [{"name": "c", "resources": {"requests": {"cpu": "abc"}}}],
         "spec.containers[0].resources.requests.cpu", 'invalid quantity "abc"'),
        ("spec.initContainers", [{"name": "c", "resources": {"limits": {"memory": "1Q"}}}],
         "spec.initContainers[0].resources.limits.memory", "invalid quantity"),
        ("spec.overhead", {"cpu": []}, "spec.overhead.cpu", "invalid quantity"),
        ("spec.containers", [{"name": "c", "ports": [{"hostPort": "80"}]}],
         "spec.containers[0].ports[0].hostPort", "must be an integer"),
        ("spec.priority", "high", "spec.priority", "must be an integer"),
        ("spec.containers", {"name": "c"}, "spec.containers", "must be a list"),
        ("metadata.labels", {"a": 1}, "metadata.labels", "map of strings"),
        ("spec.tolerations", [{"key": 3}], "spec.tolerations[0].key", "must be a string"),
        ("spec.nodeSelector", {"a": 1}, "spec.nodeSelector", "map of strings"),
    ],
    ids=["bad-cpu", "bad-init-limit", "bad-overhead", "bad-host-port", "bad-priority",
         "containers-not-list", "bad-labels", "bad-toleration", "bad-node-selector"],
)
def test_pod_info_errors(path: str, value: Any, field: str, message: str) -> None:
    pod = PodBuilder("web-1").set(path, value).obj()
    with pytest.raises(ObjectError, match=message) as ei:
        PodInfo.from_pod(pod)
    err = ei.value
    assert (err.kind, err.namespace, err.name, err.field) == ("Pod", "default", "web-1", field)
    assert str(err).startswith(f"Pod default/web-1: {field}: ")


def test_pod_info_fields() -> None:
    pod = (PodBuilder("web-1", "ns1").uid("u1").labels(app="web").priority(7)
           .resource_version(42).toleration(key="k", operator="Exists")
           .node_selector(zone="a").node("n1").scheduler_name("py-scheduler")
           .pod_anti_affinity_required({"app": "web"}, "kubernetes.io/hostname").obj())
    info = PodInfo.from_pod(pod)
    assert (info.key, info.uid, info.namespace, info.name) == ("ns1/web-1", "u1", "ns1", "web-1")
    assert info.labels == {"app": "web"}
    assert info.priority == 7
    assert info.resource_version == "42"
    assert len(info.tolerations) == 1
    assert info.required_node_affinity.node_selector == (("zone", "a"),)
    assert info.has_affinity and info.has_required_anti_affinity
    assert not info.has_required_affinity
    assert info.node_name == "n1" and info.scheduler_name == "py-scheduler"
    assert info.pod is pod


@pytest.mark.parametrize(
    ("builder", "key", "prio", "assigned", "terminal", "deleting", "sched"),
    [
        (PodBuilder("a"), "default/a", 0, False, False, False, "default-scheduler"),
        (PodBuilder("b", "x").priority(-5).node("n").phase("Succeeded")
         .deletion_timestamp().scheduler_name("s"), "x/b", -5, True, True, True, "s"),
        (PodBuilder("c").phase("Failed"), "default/c", 0, False, True, False,
         "default-scheduler"),
        (PodBuilder("d").phase("Running"), "default/d", 0, False, False, False,
         "default-scheduler"),
    ],
    ids=["plain", "everything", "failed", "running"],
)
def test_pod_helpers(builder: PodBuilder, key: str, prio: int, assigned: bool, terminal: bool,
                     deleting: bool, sched: str) -> None:
    pod = builder.obj()
    assert pod_key(pod) == key
    assert pod_priority(pod) == prio
    assert is_assigned(pod) is assigned
    assert is_terminal(pod) is terminal
    assert is_being_deleted(pod) is deleting
    assert scheduler_name(pod) == sched
