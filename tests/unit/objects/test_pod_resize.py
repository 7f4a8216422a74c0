"""Pod requests during an in-place resize (KEP-1287, GA in 1.35) and with pod-level resources.

The resize rows follow upstream's TestPodResourceRequests (component-helpers resource helpers,
``UseStatusResources: true``, which kube-scheduler sets since InPlacePodVerticalScaling is GA);
the pod-level rows its pod-level cases.
"""

from typing import Any

import pytest

from scheduler.objects.errors import ObjectError
from scheduler.objects.pod import (
    POD_REASON_DEFERRED,
    POD_REASON_INFEASIBLE,
    POD_RESIZE_IN_PROGRESS,
    POD_RESIZE_PENDING,
    PodInfo,
    is_pod_resize_deferred,
    is_pod_resize_infeasible,
    pod_non_zero_requests,
    pod_requests,
    set_pod_level_resources_resize,
)
from scheduler.objects.resources import Resource
from tests.builders import PodBuilder

Mi = 2**20
Gi = 2**30
M = 10**6
G = 10**9


def _infeasible(b: PodBuilder) -> PodBuilder:
    return b.condition(POD_RESIZE_PENDING, reason=POD_REASON_INFEASIBLE)


@pytest.mark.parametrize(
    ("builder", "expected"),
    [
        # "resized, infeasible": what runs counts, not the desired size
        (_infeasible(PodBuilder("p").container("c1", requests={"cpu": "4"})
                     .container_status("c1", actual={"cpu": "2"})),
         Resource(2000)),
        # "resized, infeasible & in-progress": admitted 4 > running 2, spec 6 ignored
        (_infeasible(PodBuilder("p").container("c1", requests={"cpu": "6"})
                     .container_status("c1", allocated={"cpu": "4"}, actual={"cpu": "2"})),
         Resource(4000)),
        # "resized, no resize status": desired 4 > running 2
        (PodBuilder("p").container("c1", requests={"cpu": "4"})
         .container_status("c1", actual={"cpu": "2"}),
         Resource(4000)),
        # "resized: per-resource 3-way maximum"
        (PodBuilder("p").container("c1", requests={"cpu": "30m", "memory": "20M",
                                                   "ephemeral-storage": "10G"})
         .container_status("c1", allocated={"cpu": "20m", "memory": "10M",
                                            "ephemeral-storage": "30G"},
                           actual={"cpu": "10m", "memory": "30M", "ephemeral-storage": "20G"}),
         Resource(30, 30 * M, 30 * G)),
        # "resized, restartable init container, infeasible"
        (_infeasible(PodBuilder("p").sidecar("r1", requests={"cpu": "4"})
                     .container_status("r1", actual={"cpu": "2"}, init=True)),
         Resource(2000)),
        # "resized, restartable init container, no resize status"
        (PodBuilder("p").sidecar("r1", requests={"cpu": "4"})
         .container_status("r1", actual={"cpu": "2"}, init=True),
         Resource(4000)),
        # "aggregate request resolves max of sums instead of sum of maxes"
        (PodBuilder("p").container("c1", requests={"cpu": "1"})
         .container("c2", requests={"cpu": "2"})
         .container_status("c1", allocated={"cpu": "2"})
         .container_status("c2", allocated={"cpu": "1"}),
         Resource(3000)),
        # The case: shrinking 3 -> 1 CPU in progress counts 3 until reported...
        (PodBuilder("p").container("c", requests={"cpu": "1"})
         .condition(POD_RESIZE_IN_PROGRESS)
         .container_status("c", allocated={"cpu": "1"}, actual={"cpu": "3"}),
         Resource(3000)),
        # ... and while pending (deferred: not yet admitted) too
        (PodBuilder("p").container("c", requests={"cpu": "1"})
         .condition(POD_RESIZE_PENDING, reason=POD_REASON_DEFERRED)
         .container_status("c", allocated={"cpu": "3"}, actual={"cpu": "3"}),
         Resource(3000)),
        # ... then 1 once the kubelet reports the new size
        (PodBuilder("p").container("c", requests={"cpu": "1"})
         .container_status("c", allocated={"cpu": "1"}, actual={"cpu": "1"}),
         Resource(1000)),
        # growing 1 -> 3: the desired size counts from the start (the node must hold it)
        (PodBuilder("p").container("c", requests={"cpu": "3"})
         .condition(POD_RESIZE_PENDING, reason=POD_REASON_DEFERRED)
         .container_status("c", allocated={"cpu": "1"}, actual={"cpu": "1"}),
         Resource(3000)),
        # a status naming no container of the spec changes nothing
        (PodBuilder("p").container("c", requests={"cpu": "1"})
         .container_status("other", allocated={"cpu": "5"}),
         Resource(1000)),
        # overhead is added once, on top of the maximum
        (PodBuilder("p").container("c", requests={"cpu": "1"}).overhead(cpu="100m")
         .container_status("c", actual={"cpu": "2"}),
         Resource(2100)),
        # pod-level requests override the containers' sum, resized or not
        (PodBuilder("p").container("c", requests={"cpu": "1"})
         .pod_resources(requests={"cpu": "2"})
         .container_status("c", actual={"cpu": "3"}),
         Resource(2000)),
    ],
    ids=["infeasible", "infeasible-in-progress", "no-resize-status", "three-way-max",
         "sidecar-infeasible", "sidecar-no-status", "max-of-sums", "shrink-in-progress",
         "shrink-deferred", "shrink-done", "grow-deferred", "unknown-status", "overhead",
         "pod-level-wins"],
)
def test_requests_during_resize(builder: PodBuilder, expected: Resource) -> None:
    pod = builder.obj()
    assert pod_requests(pod) == expected
    assert PodInfo.from_pod(pod).requests == expected


@pytest.mark.parametrize(
    ("builder", "expected"),
    [
        # pod-level cpu and memory and hugepages (upstream's supported pod-level resources)
        (PodBuilder("p").container(requests={"cpu": "1", "memory": "1Gi"})
         .pod_resources(requests={"cpu": "2", "memory": "2Gi", "hugepages-2Mi": "4Mi"}),
         Resource(2000, 2 * Gi, scalar_resources={"hugepages-2Mi": 4 * Mi})),
        # pod-level limits default the pod-level requests (apiserver defaulting)
        (PodBuilder("p").container(requests={"cpu": "100m"})
         .pod_resources(limits={"cpu": "2", "memory": "1Gi"}),
         Resource(2000, Gi)),
        # init containers larger than the pod level: the pod level still wins
        (PodBuilder("p").container(requests={"cpu": "1"})
         .init_container(requests={"cpu": "5"})
         .pod_resources(requests={"cpu": "2"}),
         Resource(2000)),
        # overhead is added to the pod-level requests
        (PodBuilder("p").container(requests={"cpu": "1"}).overhead(cpu="250m", memory="64Mi")
         .pod_resources(requests={"cpu": "2", "memory": "1Gi"}),
         Resource(2250, Gi + 64 * Mi)),
        # resources pod level cannot set stay the containers'
        (PodBuilder("p").container(requests={"cpu": "1", "ephemeral-storage": "1Gi",
                                             "example.com/gpu": "1"})
         .pod_resources(requests={"cpu": "2"}),
         Resource(2000, ephemeral_storage=Gi, scalar_resources={"example.com/gpu": 1})),
    ],
    ids=["cpu-memory-hugepages", "limits-default", "over-init", "overhead", "other-resources"],
)
def test_pod_level_requests(builder: PodBuilder, expected: Resource) -> None:
    pod = builder.obj()
    assert pod_requests(pod) == expected


@pytest.mark.parametrize(
    ("builder", "expected"),
    [
        # pod-level cpu set: only memory, which nothing set, gets the scoring default
        (PodBuilder("p").container().pod_resources(requests={"cpu": "300m"}), (300, 200 * Mi)),
        # resizing pod: the scoring view takes the maximum too
        (PodBuilder("p").container("c", requests={"cpu": "1"})
         .container_status("c", actual={"cpu": "3"}), (3000, 200 * Mi)),
    ],
    ids=["pod-level-cpu", "resize"],
)
def test_non_zero_requests(builder: PodBuilder, expected: tuple[int, int]) -> None:
    assert pod_non_zero_requests(builder.obj()) == expected


@pytest.mark.parametrize(
    ("reason", "deferred", "infeasible"),
    [(POD_REASON_DEFERRED, True, False), (POD_REASON_INFEASIBLE, False, True),
     ("Other", False, False), (None, False, False)],
)
def test_resize_conditions(reason: str | None, deferred: bool, infeasible: bool) -> None:
    b = PodBuilder("p")
    if reason is not None:
        b.condition(POD_RESIZE_PENDING, reason=reason)
    pod = b.obj()
    assert is_pod_resize_deferred(pod) is deferred
    assert is_pod_resize_infeasible(pod) is infeasible


@pytest.mark.parametrize(
    ("path", "value", "field"),
    [
        ("status.containerStatuses", "x", "status.containerStatuses"),
        ("status.containerStatuses", ["x"], "status.containerStatuses[0]"),
        ("status.containerStatuses",
         [{"name": "c0", "allocatedResources": {"cpu": "lots"}}],
         "status.containerStatuses[0].allocatedResources.cpu"),
        ("status.containerStatuses", [{"name": "c0", "resources": {"requests": {"cpu": "-1"}}}],
         "status.containerStatuses[0].resources.requests.cpu"),
    ],
    ids=["not-a-list", "not-an-object", "bad-quantity", "negative"],
)
def test_malformed_status_is_named(path: str, value: Any, field: str) -> None:
    pod = PodBuilder("p").req(cpu="1").set(path, value).obj()
    with pytest.raises(ObjectError) as err:
        PodInfo.from_pod(pod)
    assert err.value.field == field


def test_bound_pod_with_malformed_status_counts_its_spec() -> None:
    pod = (PodBuilder("p").node("n1").container("c", requests={"cpu": "1"})
           .set("status.containerStatuses",
                [{"name": "c", "allocatedResources": {"cpu": "lots"}}]).obj())
    info, problems = PodInfo.from_assigned_pod(pod)
    assert [p.field for p in problems] == ["status.containerStatuses[0].allocatedResources.cpu"]
    assert info.requests == Resource(1000)


@pytest.fixture
def pod_level_resize() -> Any:
    set_pod_level_resources_resize(True)
    yield
    set_pod_level_resources_resize(False)


def _pod_status(b: PodBuilder, *, allocated: dict[str, str] | None = None,
                actual: dict[str, str] | None = None) -> PodBuilder:
    if allocated is not None:
        b.set("status.allocatedResources", allocated)
    if actual is not None:
        b.set("status.resources", {"requests": actual})
    return b


@pytest.mark.parametrize(
    ("builder", "expected"),
    [
        # pod-level requests resized 4 -> 2: the reported 4 counts until it is 2
        (_pod_status(PodBuilder("p").container("c").pod_resources(requests={"cpu": "2"}),
                     allocated={"cpu": "4"}, actual={"cpu": "4"}), Resource(4000)),
        # the report holds the overhead: it is taken out before the maximum, added once after
        (_pod_status(PodBuilder("p").container("c").overhead(cpu="100m")
                     .pod_resources(requests={"cpu": "2"}),
                     allocated={"cpu": "3100m"}, actual={"cpu": "3100m"}), Resource(3100)),
        # infeasible: the desired pod-level size is dropped
        (_infeasible(_pod_status(PodBuilder("p").container("c")
                                 .pod_resources(requests={"cpu": "8"}),
                                 allocated={"cpu": "1"}, actual={"cpu": "1"})), Resource(1000)),
        # no pod-level requests: the pod-level report replaces the containers' reports
        (_pod_status(PodBuilder("p").container("c", requests={"cpu": "1"})
                     .container_status("c", actual={"cpu": "9"}),
                     allocated={"cpu": "2"}, actual={"cpu": "3"}), Resource(3000)),
    ],
    ids=["pod-level-shrink", "overhead", "infeasible", "containers"],
)
def test_pod_level_resize_report_behind_its_gate(pod_level_resize: None, builder: PodBuilder,
                                                 expected: Resource) -> None:
    assert pod_requests(builder.obj()) == expected


def test_pod_level_resize_report_is_ignored_with_the_gate_off() -> None:
    pod = _pod_status(PodBuilder("p").container("c").pod_resources(requests={"cpu": "2"}),
                      allocated={"cpu": "4"}, actual={"cpu": "4"}).obj()
    assert pod_requests(pod) == Resource(2000)
