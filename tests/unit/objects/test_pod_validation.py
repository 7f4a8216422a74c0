"""What PodInfo refuses, as kube-apiserver's pod validation would (issue 12): requests that
cannot be honoured, and every shape a plugin or the cache could trip over."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.objects.errors import ObjectError
from scheduler.objects.pod import PodInfo, parse_scheduling_gates
from tests.builders import PodBuilder

GPU = "example.com/gpu"
C0 = "spec.containers[0].resources"

# (description, path, value, field named, or None when the pod is valid)
CASES: list[tuple[str, str, Any, str | None]] = [
    ("negative cpu request", C0, {"requests": {"cpu": "-1"}}, f"{C0}.requests.cpu"),
    ("negative memory limit", C0, {"limits": {"memory": "-1Mi"}}, f"{C0}.limits.memory"),
    ("non-numeric request", C0, {"requests": {"cpu": "two"}}, f"{C0}.requests.cpu"),
    ("fractional extended request", C0, {"requests": {GPU: "0.5"}}, f"{C0}.requests.{GPU}"),
    ("fractional extended limit", C0, {"limits": {GPU: "500m"}}, f"{C0}.limits.{GPU}"),
    ("negative extended request", C0, {"requests": {GPU: "-1"}}, f"{C0}.requests.{GPU}"),
    ("whole extended request", C0, {"requests": {GPU: "2"}, "limits": {GPU: "2"}}, None),
    ("request above limit", C0, {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}},
     f"{C0}.requests.cpu"),
    ("request below limit", C0, {"requests": {"cpu": "1"}, "limits": {"cpu": "2"}}, None),
    ("extended request below its limit", C0,
     {"requests": {GPU: "1"}, "limits": {GPU: "2"}}, f"{C0}.requests.{GPU}"),
    ("hugepages request below its limit", C0,
     {"requests": {"hugepages-2Mi": "2Mi"}, "limits": {"hugepages-2Mi": "4Mi"}},
     f"{C0}.requests.hugepages-2Mi"),
    ("fractional cpu", C0, {"requests": {"cpu": "0.5"}}, None),
    ("negative init container request", "spec.initContainers",
     [{"name": "i", "resources": {"requests": {"cpu": "-1"}}}],
     "spec.initContainers[0].resources.requests.cpu"),
    ("negative pod-level request", "spec.resources", {"requests": {"memory": "-1"}},
     "spec.resources.requests.memory"),
    ("pod-level request above its limit", "spec.resources",
     {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}, "spec.resources.requests.cpu"),
    ("negative overhead", "spec.overhead", {"cpu": "-100m"}, "spec.overhead.cpu"),
    ("fractional extended overhead", "spec.overhead", {GPU: "0.5"}, f"spec.overhead.{GPU}"),
    ("resources a list", C0, [], f"{C0}"),
    ("volumes an empty map", "spec.volumes", {}, "spec.volumes"),
    ("affinity an empty list", "spec.affinity", [], "spec.affinity"),
    ("volume without a name", "spec.volumes", [{"emptyDir": {}}], "spec.volumes[0].name"),
    ("volume source not an object", "spec.volumes", [{"name": "v", "hostPath": "/x"}],
     "spec.volumes[0].hostPath"),
    ("ephemeral volume", "spec.volumes", [{"name": "v", "ephemeral": {}}], None),
    ("preferred term weight 0", "spec.affinity",
     {"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
         {"weight": 0, "podAffinityTerm": {"topologyKey": "z"}}]}},
     "spec.affinity.podAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight"),
    ("namespaces not strings", "spec.affinity",
     {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
         {"topologyKey": "z", "namespaces": [1]}]}},
     "spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0]"
     ".namespaces"),
    ("spread without topologyKey", "spec.topologySpreadConstraints",
     [{"maxSkew": 1, "whenUnsatisfiable": "DoNotSchedule"}],
     "spec.topologySpreadConstraints[0].topologyKey"),
    ("spread minDomains 0", "spec.topologySpreadConstraints",
     [{"maxSkew": 1, "topologyKey": "z", "whenUnsatisfiable": "DoNotSchedule",
       "minDomains": 0}], "spec.topologySpreadConstraints[0].minDomains"),
    ("spread policy unknown", "spec.topologySpreadConstraints",
     [{"maxSkew": 1, "topologyKey": "z", "whenUnsatisfiable": "DoNotSchedule",
       "nodeTaintsPolicy": "Maybe"}], "spec.topologySpreadConstraints[0].nodeTaintsPolicy"),
    ("nodeName not a string", "spec.nodeName", 7, "spec.nodeName"),
    ("schedulerName not a string", "spec.schedulerName", ["a"], "spec.schedulerName"),
]


@pytest.mark.parametrize(("what", "path", "value", "field"), CASES, ids=[c[0] for c in CASES])
def test_pod_validation(what: str, path: str, value: Any, field: str | None) -> None:
    pod = PodBuilder("p").container().set(path, value).obj()
    if field is None:
        PodInfo.from_pod(pod)
        return
    with pytest.raises(ObjectError) as err:
        PodInfo.from_pod(pod)
    assert err.value.field == field, what
    assert str(err.value).startswith(f"Pod default/p: {field}: "), str(err.value)


GATES: list[tuple[Any, tuple[str, ...] | str]] = [
    (None, ()),
    ([], ()),
    ([{"name": "a"}, {"name": "b"}], ("a", "b")),
    ("gate", "spec.schedulingGates"),
    ({"name": "gate"}, "spec.schedulingGates"),
    ([5], "spec.schedulingGates[0]"),
    ([{"value": "x"}], "spec.schedulingGates[0].name"),
    ([{"name": ""}], "spec.schedulingGates[0].name"),
    ([{"name": "a"}, {"name": "a"}], "spec.schedulingGates[1].name"),
]


@pytest.mark.parametrize(("gates", "expected"), GATES)
def test_scheduling_gates_are_names_or_a_malformed_pod(
    gates: Any, expected: tuple[str, ...] | str
) -> None:
    pod = PodBuilder("p").container().set("spec.schedulingGates", gates).obj()
    if isinstance(expected, tuple):
        assert parse_scheduling_gates(pod) == expected
        assert PodInfo.from_pod(pod).scheduling_gates == expected
        return
    with pytest.raises(ObjectError) as err:
        PodInfo.from_pod(pod)
    assert err.value.field == expected


def test_assume_reuses_the_parsed_pod_info_with_only_the_node_name_changed() -> None:
    pod = PodBuilder("p").req(cpu="1").pvc("c").obj()
    info = PodInfo.from_pod(pod)
    bound = {**pod, "spec": {**pod["spec"], "nodeName": "n1"}}
    assumed = info.with_node_name(bound)
    assert (assumed.pod, assumed.node_name) == (bound, "n1")
    assert (info.pod, info.node_name) == (pod, "")
    assert assumed.requests == info.requests and assumed.pvc_names == ("default/c",)
