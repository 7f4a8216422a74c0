"""Properties of the parsers on garbage (issue 12): any JSON value written anywhere in a pod,
node or read-only object gives a clean ObjectError naming the object, never another
exception; what passes is fully usable; a bound pod is always accounted without negative
usage and its repaired copy parses."""

from __future__ import annotations

import copy
from typing import Any

import hypothesis.strategies as st
from hypothesis import given, settings

from scheduler.cache.node_tree import zone_key
from scheduler.framework.node_info import NodeInfo
from scheduler.objects.errors import ObjectError
from scheduler.objects.node import validate_node
from scheduler.objects.pod import PodInfo
from scheduler.objects.validation import validate_object
from tests.builders import NodeBuilder, PodBuilder, set_path

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**40), 2**40)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from(["", "0.5", "-1", "1e3", "abc", "100m", "Always", "x", "NoSchedule"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
        st.sampled_from(["name", "key", "cpu", "claimName", "labelSelector", "values",
                         "operator", "topologyKey", "example.com/gpu", "weight"]),
        inner, max_size=3),
    max_leaves=8,
)

POD_PATHS = [
    "metadata.labels", "metadata.namespace", "spec", "spec.priority", "spec.nodeName",
    "spec.containers", "spec.containers[0]", "spec.containers[0].resources",
    "spec.containers[0].resources.requests", "spec.containers[0].resources.requests.cpu",
    "spec.containers[0].resources.requests.memory", "spec.containers[0].resources.limits",
    "spec.containers[0].ports", "spec.initContainers", "spec.resources", "spec.overhead",
    "spec.volumes", "spec.affinity", "spec.affinity.podAffinity",
    "spec.affinity.podAntiAffinity", "spec.affinity.nodeAffinity", "spec.tolerations",
    "spec.topologySpreadConstraints", "spec.schedulingGates", "spec.nodeSelector",
    "spec.schedulerName",
]
NODE_PATHS = [
    "metadata.labels", "metadata.annotations", "spec", "spec.taints", "spec.unschedulable",
    "status", "status.allocatable", "status.allocatable.cpu", "status.capacity",
    "status.images", "status.conditions",
]


def _garbled_pod(path: str, value: Any) -> dict[str, Any]:
    """A pod using every field the cache reads, with ``value`` written at ``path``."""
    pod = (PodBuilder("p").uid("u").node("n1").req(cpu="100m", memory="64Mi")
           .labels(app="x").host_port(80).pvc("c")
           .pod_anti_affinity_required({"app": "x"}, "kubernetes.io/hostname")
           .topology_spread(1, "zone", selector={"matchLabels": {"app": "x"}})
           .toleration("k", "Exists").obj())
    set_path(pod, path, copy.deepcopy(value))
    return pod


@settings(max_examples=200, deadline=None)
@given(path=st.sampled_from(POD_PATHS), value=json_values)
def test_any_garbage_in_a_pod_is_an_object_error_or_a_usable_pod(path: str, value: Any) -> None:
    try:
        info = PodInfo.from_pod(_garbled_pod(path, value))
    except ObjectError as exc:
        assert str(exc).startswith("Pod ") and "/p: " in str(exc)  # (the namespace may be bad)
        assert exc.field
    else:
        assert all(v >= 0 for v in (info.requests.milli_cpu, info.requests.memory,
                                    *info.requests.scalar_resources.values()))
        NodeInfo().add_pod(info)  # everything the cache reads is there


@settings(max_examples=200, deadline=None)
@given(path=st.sampled_from(POD_PATHS), value=json_values)
def test_a_bound_pod_is_always_accounted_without_negative_usage(path: str, value: Any) -> None:
    pod = _garbled_pod(path, value)
    try:
        info, problems = PodInfo.from_assigned_pod(pod)
    except ObjectError as exc:  # nothing to key it by
        assert exc.field.startswith(("metadata.name", "metadata.namespace")), str(exc)
        return
    assert info.name == "p"
    assert info.node_name == "n1" or path in ("spec", "spec.nodeName")  # unreadable binding
    assert all(v >= 0 for v in (info.requests.milli_cpu, info.requests.memory,
                                *info.requests.scalar_resources.values()))
    PodInfo.from_pod(info.pod)  # the repaired copy is a valid pod
    assert problems or info.pod is pod
    node = NodeInfo()
    node.add_pod(info)
    assert node.remove_pod(info.pod) and node.requested.milli_cpu == 0


@settings(max_examples=200, deadline=None)
@given(path=st.sampled_from(NODE_PATHS), value=json_values)
def test_any_garbage_in_a_node_is_an_object_error_or_a_usable_node(path: str,
                                                                    value: Any) -> None:
    node = (NodeBuilder("n1").capacity(cpu="4", memory="8Gi", pods=110)
            .labels({"topology.kubernetes.io/zone": "a"}).taint("k").images(("img", 10)).obj())
    set_path(node, path, copy.deepcopy(value))
    try:
        validate_node(node)
    except ObjectError as exc:
        assert str(exc).startswith("Node n1: ")
    else:
        info = NodeInfo(node)
        info.taints()
        zone_key(node)
        assert info.allocatable.milli_cpu >= 0


OBJECTS = {
    "PersistentVolume": {"metadata": {"name": "pv"}, "spec": {
        "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
        "storageClassName": "s", "claimRef": {"name": "c", "namespace": "d"},
        "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "z", "operator": "In", "values": ["a"]}]}]}}}},
    "PersistentVolumeClaim": {"metadata": {"name": "c", "namespace": "d"}, "spec": {
        "resources": {"requests": {"storage": "1Gi"}}, "selector": {"matchLabels": {"a": "b"}},
        "storageClassName": "s"}},
    "StorageClass": {"metadata": {"name": "s"}, "provisioner": "p",
                     "volumeBindingMode": "WaitForFirstConsumer",
                     "allowedTopologies": [{"matchLabelExpressions": [
                         {"key": "z", "values": ["a"]}]}]},
    "CSINode": {"metadata": {"name": "n"}, "spec": {"drivers": [
        {"name": "d", "allocatable": {"count": 3}, "topologyKeys": ["z"]}]}},
    "PodDisruptionBudget": {"metadata": {"name": "b", "namespace": "d"}, "spec": {
        "selector": {"matchLabels": {"a": "b"}}, "minAvailable": 1},
        "status": {"disruptionsAllowed": 0}},
    "PodGroup": {"metadata": {"name": "g", "namespace": "d"}, "spec": {
        "minMember": 2, "minResources": {"cpu": "1"}, "scheduleTimeoutSeconds": 10}},
}


def test_the_well_formed_read_only_objects_pass() -> None:
    assert {k: validate_object(k, v) for k, v in OBJECTS.items()} == dict.fromkeys(OBJECTS)


@settings(max_examples=200, deadline=None)
@given(kind=st.sampled_from(sorted(OBJECTS)), value=json_values, data=st.data())
def test_validating_a_read_only_object_never_raises(kind: str, value: Any,
                                                    data: st.DataObject) -> None:
    obj = copy.deepcopy(OBJECTS[kind])
    paths = ["metadata", "metadata.name", "metadata.labels", "spec", "status",
             *[f"spec.{k}" for k in obj.get("spec", {})], *[k for k in obj if k != "metadata"]]
    set_path(obj, data.draw(st.sampled_from(paths)), copy.deepcopy(value))
    error = validate_object(kind, obj)
    assert error is None or isinstance(error, ObjectError) and error.kind == kind
