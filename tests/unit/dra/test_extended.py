"""DRAExtendedResource without the framework: the class-by-resource cache (upstream's rule for
several classes naming one resource), which requests a class backs, and the special claim's
requests and mappings per container."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.dra.extended import (
    ANNOTATION,
    CLASS_PREFIX,
    ClassCache,
    backed_resources,
    find_claim,
    is_dra_extended_resource_name,
    requests_and_mappings,
    special_claim,
)
from tests.builders import PodBuilder
from tests.unit.dra.builders import device_class


def ext_class(name: str, resource: str | None, *, created: str = "2026-01-01T00:00:00Z"
              ) -> dict[str, Any]:
    c = device_class(name)
    c["metadata"]["creationTimestamp"] = created
    if resource is not None:
        c["spec"]["extendedResourceName"] = resource
    return c


@pytest.mark.parametrize(("name", "want"), [
    ("example.com/gpu", True),
    (CLASS_PREFIX + "gpu", True),
    ("cpu", False),
    ("kubernetes.io/foo", False),
    ("requests.example.com/gpu", False),
])
def test_dra_extended_resource_names(name: str, want: bool) -> None:
    assert is_dra_extended_resource_name(name) is want


@pytest.mark.parametrize(("classes", "resource", "want"), [
    # the explicit and the implicit name both map to the class
    ([ext_class("a", "example.com/gpu")], "example.com/gpu", "a"),
    ([ext_class("a", "example.com/gpu")], CLASS_PREFIX + "a", "a"),
    ([ext_class("a", None)], CLASS_PREFIX + "a", "a"),
    ([ext_class("a", None)], "example.com/gpu", None),
    # two classes name one resource: the newer wins, whatever the order of events
    ([ext_class("old", "example.com/gpu", created="2026-01-01T00:00:00Z"),
      ext_class("new", "example.com/gpu", created="2026-02-01T00:00:00Z")],
     "example.com/gpu", "new"),
    ([ext_class("new", "example.com/gpu", created="2026-02-01T00:00:00Z"),
      ext_class("old", "example.com/gpu", created="2026-01-01T00:00:00Z")],
     "example.com/gpu", "new"),
    # same creation time: the lower name
    ([ext_class("b", "example.com/gpu"), ext_class("a", "example.com/gpu")],
     "example.com/gpu", "a"),
    ([ext_class("a", "example.com/gpu"), ext_class("b", "example.com/gpu")],
     "example.com/gpu", "a"),
])
def test_class_by_resource(classes: list[dict[str, Any]], resource: str, want: str | None
                           ) -> None:
    cache = ClassCache()
    for c in classes:
        cache.class_added(c)
    assert cache.class_name(resource) == want
    listed = ClassCache()
    listed.replace(classes)
    assert listed.class_name(resource) == want


def test_update_moves_the_mapping_and_delete_drops_it() -> None:
    cache = ClassCache()
    old = ext_class("a", "example.com/gpu")
    cache.class_added(old)
    v = cache.version
    new = ext_class("a", "example.com/tpu")
    cache.class_updated(old, new)
    assert cache.version > v
    assert cache.class_name("example.com/gpu") is None
    assert cache.class_name("example.com/tpu") == "a"
    assert cache.resource_of("a") == "example.com/tpu"
    cache.class_deleted(new)
    assert len(cache) == 0 and cache.resource_of("a") == ""


def test_backed_resources_only_non_zero_and_mapped() -> None:
    cache = ClassCache()
    cache.class_added(ext_class("gpu", "example.com/gpu"))
    got = backed_resources({"example.com/gpu": 2, "example.com/nic": 1,
                            CLASS_PREFIX + "gpu": 0, "hugepages-2Mi": 5}, cache)
    assert got == {"example.com/gpu": 2}


def _pod(*containers: tuple[str, dict[str, Any], bool, bool]) -> dict[str, Any]:
    """containers: (name, requests, is init, is sidecar)."""
    pod = PodBuilder("p", "default").obj()
    pod["spec"]["containers"] = []
    for name, reqs, init, sidecar in containers:
        c: dict[str, Any] = {"name": name, "image": "x", "resources": {"requests": reqs}}
        if sidecar:
            c["restartPolicy"] = "Always"
        pod["spec"].setdefault("initContainers" if init else "containers", []).append(c)
    return pod


GPU = "example.com/gpu"


def _req(name: str, count: int) -> dict[str, Any]:
    return {"name": name, "exactly": {"deviceClassName": "gpu", "allocationMode": "ExactCount",
                                      "count": count}}


def _map(container: str, request: str) -> dict[str, str]:
    return {"containerName": container, "resourceName": GPU, "requestName": request}


@pytest.mark.parametrize(("pod", "want_requests", "want_mappings"), [
    # one container: one request named by container index and the resource's sorted index
    (_pod(("c", {"cpu": "1", GPU: "2"}, False, False)),
     [_req("container-0-request-1", 2)], [_map("c", "container-0-request-1")]),
    # two containers: a request each
    (_pod(("a", {GPU: "1"}, False, False), ("b", {GPU: "3"}, False, False)),
     [_req("container-0-request-0", 1), _req("container-1-request-0", 3)],
     [_map("a", "container-0-request-0"), _map("b", "container-1-request-0")]),
    # a plain init container reuses the request of the container after it
    (_pod(("i", {GPU: "1"}, True, False), ("c", {GPU: "2"}, False, False)),
     [_req("container-1-request-0", 2)],
     [_map("c", "container-1-request-0"), _map("i", "container-1-request-0")]),
    # ... and asks only for what the later containers do not cover
    (_pod(("i", {GPU: "3"}, True, False), ("c", {GPU: "2"}, False, False)),
     [_req("container-0-request-0", 1), _req("container-1-request-0", 2)],
     [_map("c", "container-1-request-0"), _map("i", "container-1-request-0"),
      _map("i", "container-0-request-0")]),
    # two plain init containers share the larger of their requests
    (_pod(("i1", {GPU: "1"}, True, False), ("i2", {GPU: "2"}, True, False),
          ("c", {"cpu": "1"}, False, False)),
     [_req("container-1-request-0", 2)],
     [_map("i1", "container-1-request-0"), _map("i2", "container-1-request-0")]),
    # a sidecar is long-lived: its own request
    (_pod(("s", {GPU: "1"}, True, True), ("c", {GPU: "1"}, False, False)),
     [_req("container-0-request-0", 1), _req("container-1-request-0", 1)],
     [_map("s", "container-0-request-0"), _map("c", "container-1-request-0")]),
])
def test_requests_and_mappings(pod: dict[str, Any], want_requests: list[dict[str, Any]],
                               want_mappings: list[dict[str, str]]) -> None:
    cache = ClassCache()
    cache.class_added(ext_class("gpu", GPU))
    reqs, maps = requests_and_mappings(pod, [GPU], cache)
    assert reqs == want_requests
    assert maps == want_mappings


def test_limits_stand_for_missing_requests() -> None:
    pod = _pod(("c", {}, False, False))
    pod["spec"]["containers"][0]["resources"] = {"limits": {GPU: "1"}}
    cache = ClassCache()
    cache.class_added(ext_class("gpu", GPU))
    reqs, _ = requests_and_mappings(pod, [GPU], cache)
    assert reqs == [_req("container-0-request-0", 1)]


def test_special_claim_and_finding_it_again() -> None:
    pod = _pod(("c", {GPU: "1"}, False, False))
    pod["metadata"]["uid"] = "uid-p"
    c = special_claim(pod, [_req("container-0-request-0", 1)])
    assert c["metadata"]["generateName"] == "p-extended-resources-"
    assert c["metadata"]["annotations"] == {ANNOTATION: "true"}
    ref = c["metadata"]["ownerReferences"][0]
    assert (ref["kind"], ref["name"], ref["uid"], ref["controller"]) == ("Pod", "p", "uid-p",
                                                                         True)
    created = {**c, "metadata": {**c["metadata"], "name": "p-extended-resources-x1"}}
    assert find_claim(pod, [created]) is created
    other = {**pod, "metadata": {**pod["metadata"], "uid": "uid-other"}}
    assert find_claim(other, [created]) is None  # a pod of the same name, recreated
    plain = {**created, "metadata": {**created["metadata"], "annotations": {}}}
    assert find_claim(pod, [plain]) is None
