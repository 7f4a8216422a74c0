"""PodInfo.from_pod shares the parse of equal specs (scheduler.objects.pod's memo): a parse
taken from the memo must be the parse a fresh one would give, for the pod it is given to;
a malformed pod is never served from it, and its error names it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from types import MappingProxyType
from typing import Any

import pytest

from scheduler.objects import pod as pod_module
from scheduler.objects.errors import ObjectError
from scheduler.objects.pod import PodInfo, pod_requests, resize_report
from tests.builders import PodBuilder
from tests.unit.scheduling.test_eventhandlers_confirm import _parsed


@pytest.fixture(autouse=True)
def empty_memo() -> Iterator[None]:
    pod_module._SPEC_MEMO.clear()
    pod_module._RESOURCES_MEMO.clear()
    yield
    pod_module._SPEC_MEMO.clear()
    pod_module._RESOURCES_MEMO.clear()


def _fresh(pod: dict[str, Any]) -> PodInfo:
    """The parse with nothing remembered (the memo's state restored after)."""
    saved = dict(pod_module._SPEC_MEMO), dict(pod_module._RESOURCES_MEMO)
    pod_module._SPEC_MEMO.clear()
    pod_module._RESOURCES_MEMO.clear()
    try:
        return PodInfo.from_pod(pod)
    finally:
        pod_module._SPEC_MEMO.update(saved[0])
        pod_module._RESOURCES_MEMO.update(saved[1])


def _base(name: str = "a", namespace: str = "default") -> PodBuilder:
    return (PodBuilder(name, namespace).uid(f"u-{namespace}-{name}").labels(app="web")
            .req(cpu="500m", memory="1Gi").toleration("k", "Exists").host_port(8080)
            .required_node_affinity([{"matchExpressions": [
                {"key": "zone", "operator": "In", "values": ["a", "b"]}]}])
            .pod_anti_affinity_required({"app": "web"}, "kubernetes.io/hostname")
            .topology_spread(1, "zone", selector={"app": "web"}))


# (what the second pod changes, whether it reads the same spec as the first)
CASES: list[tuple[str, Callable[[PodBuilder], PodBuilder], bool]] = [
    ("same spec, other pod", lambda b: b, True),
    ("other namespace and labels", lambda b: b.namespace("other").labels(app="db"), True),
    ("bound to a node", lambda b: b.node("n1"), True),
    ("own PVC", lambda b: b.pvc("data"), True),
    ("started by its kubelet (ids, states: no sizes)", lambda b: b.phase("Running").set(
        "status.containerStatuses", [{"name": "c0", "containerID": "x://1", "ready": True,
                                      "state": {"running": {"startedAt": "t"}}}]), True),
    ("a resize reported", lambda b: b.container_status("c0", allocated={"cpu": "2"}), False),
    ("a resize infeasible", lambda b: b.condition("PodResizePending", "True", "Infeasible"),
     False),
    ("other requests", lambda b: b.req(cpu="2"), False),
    ("other priority", lambda b: b.priority(5), False),
    ("other tolerations", lambda b: b.toleration("other", "Exists"), False),
    ("scheduling gates", lambda b: b.scheduling_gates("g"), False),
]


@pytest.mark.parametrize(("label", "change", "shared"), CASES, ids=[c[0] for c in CASES])
def test_a_shared_parse_is_the_fresh_parse(
    label: str, change: Callable[[PodBuilder], PodBuilder], shared: bool
) -> None:
    first = PodInfo.from_pod(_base().obj())
    second_pod = change(_base("b")).obj()
    second = PodInfo.from_pod(second_pod)
    assert _parsed(second) == _parsed(_fresh(second_pod))
    assert second.pod is second_pod and second.key.endswith("/b")
    assert (second.tolerations is first.tolerations) is shared
    # pod_requests hands out its own copy of the shared requests
    requests = pod_requests(second_pod)
    requests.milli_cpu += 1000
    assert PodInfo.from_pod(second_pod).requests.milli_cpu == _fresh(second_pod).requests.milli_cpu


# A spec the memo has seen parsed well, then the same spec made malformed in one place
# it does not key on (volumes, nodeName) or does (a request): each error names its pod.
BAD: list[tuple[str, Callable[[dict[str, Any]], None], str]] = [
    ("volume", lambda p: p["spec"].__setitem__("volumes", [{"name": ""}]), "spec.volumes[0].name"),
    ("nodeName", lambda p: p["spec"].__setitem__("nodeName", 7), "spec.nodeName"),
    ("request", lambda p: p["spec"]["containers"][0]["resources"]["requests"].__setitem__(
        "cpu", "lots"), "spec.containers[0].resources.requests.cpu"),
    ("labels", lambda p: p["metadata"].__setitem__("labels", {"a": 1}), "metadata.labels"),
]


@pytest.mark.parametrize(("label", "spoil", "field"), BAD, ids=[b[0] for b in BAD])
def test_a_malformed_pod_is_never_served_from_the_memo(
    label: str, spoil: Callable[[dict[str, Any]], None], field: str
) -> None:
    PodInfo.from_pod(_base().obj())
    kept = len(pod_module._SPEC_MEMO)
    for name in ("b", "c"):
        pod = _base(name).obj()
        spoil(pod)
        with pytest.raises(ObjectError) as caught:
            PodInfo.from_pod(pod)
        assert caught.value.field == field
        assert f"default/{name}" in str(caught.value)
        with pytest.raises(ObjectError) as again:
            _fresh(pod)
        assert str(again.value) == str(caught.value)
    assert len(pod_module._SPEC_MEMO) == kept


def test_values_json_cannot_encode_are_parsed_and_never_kept() -> None:
    pod = _base().obj()
    pod["spec"]["securityContext"] = MappingProxyType({})  # a Mapping orjson cannot encode
    assert _parsed(PodInfo.from_pod(pod)) == _parsed(_fresh(pod))
    assert not pod_module._SPEC_MEMO


def test_the_memo_is_bounded() -> None:
    for i in range(pod_module._MEMO_SIZE + 10):
        PodInfo.from_pod(_base().priority(i).obj())
    assert 0 < len(pod_module._SPEC_MEMO) <= pod_module._MEMO_SIZE


def test_resize_report_keeps_only_what_requests_are_parsed_from() -> None:
    pending = _base().obj()
    started = (_base().phase("Running").set("status.containerStatuses", [
        {"name": "c0", "containerID": "x://9", "restartCount": 3}]).obj())
    resized = _base().container_status("c0", actual={"cpu": "1"}).obj()
    assert resize_report(pending) == resize_report(started)
    assert resize_report(pending) != resize_report(resized)
    broken = _base().set("status.containerStatuses", "nope").obj()
    assert resize_report(broken) != resize_report(pending)


def test_with_node_name_copies_every_slot() -> None:
    info = PodInfo.from_pod(_base().obj())
    bound = {**info.pod, "spec": {**info.pod["spec"], "nodeName": "n1"}}
    copy = info.with_node_name(bound)
    for slot in PodInfo.__slots__:
        if slot not in ("pod", "node_name"):
            assert getattr(copy, slot) is getattr(info, slot), slot
    assert copy.pod is bound and copy.node_name == "n1"


@pytest.mark.parametrize("remembered", [False, True])
def test_from_pod_copies_every_slot_of_the_shared_parse(remembered: bool) -> None:
    """PodInfo's slots include _SpecParse's (named there only): from_pod sets each from the
    parse it took, fresh or remembered."""
    pod = _base().priority(7).obj()
    if remembered:
        PodInfo.from_pod(pod)  # the parse is kept for the next pod with this spec
    info = PodInfo.from_pod(pod)
    (parsed,) = pod_module._SPEC_MEMO.values()
    assert set(pod_module._SpecParse.__slots__) <= set(PodInfo.__slots__)
    for slot in pod_module._SpecParse.__slots__:
        assert getattr(info, slot) is getattr(parsed, slot), slot


def _report_by_parts(pod: dict[str, Any]) -> tuple[Any, ...]:
    """resize_report as the composition of the helpers it reads inline."""
    status = pod.get("status")
    if not isinstance(status, dict):
        return (None, None, None, None, None)
    return (pod_module._reported_sizes(status.get("containerStatuses")),
            pod_module._reported_sizes(status.get("initContainerStatuses")),
            pod_module._resize_pending_reason(pod), status.get("allocatedResources"),
            status.get("resources"))


_CONDITIONS: list[Any] = [
    None, [], "nope", ("PodResizePending",), 3,
    [{"type": "PodScheduled", "status": "True"}],
    [{"type": "Ready"}, {"type": "PodResizePending", "reason": "Deferred"}],
    [{"type": "PodResizePending", "reason": "Infeasible"},
     {"type": "PodResizePending", "reason": "Deferred"}],
    [{"type": "PodResizePending"}], [{"type": "PodResizePending", "reason": 7}],
    ["x", 1, None, {"type": "PodResizePending", "reason": "Infeasible"}],
    [MappingProxyType({"type": "PodResizePending", "reason": "Deferred"})],
    [MappingProxyType({"type": "Ready"}), {"type": "PodResizePending", "reason": "Infeasible"}],
]
_SIZES: list[Any] = [
    None, [], "nope", [{"name": "c0", "restartCount": 1}], [7],
    [{"name": "c0", "resources": {"requests": {"cpu": "1"}}}, {"name": "c1"}],
    [{"name": "c0", "allocatedResources": {"cpu": "2"}}],
]


@pytest.mark.parametrize("conditions", _CONDITIONS)
@pytest.mark.parametrize("sizes", _SIZES)
def test_resize_report_reads_as_its_helpers(conditions: Any, sizes: Any) -> None:
    """The report reads the empty lists and the conditions' scan inline: the same report as
    the helpers give, for every shape of conditions and container statuses (malformed
    included)."""
    for status in ({"conditions": conditions, "containerStatuses": sizes},
                   {"conditions": conditions, "initContainerStatuses": sizes,
                    "allocatedResources": {"cpu": "1"}, "resources": {"requests": {}}}):
        pod = {"metadata": {"name": "p"}, "status": {k: v for k, v in status.items()
                                                     if v is not None}}
        assert resize_report(pod) == _report_by_parts(pod), status
    for bare in ({"metadata": {"name": "p"}}, {"status": None}, {"status": "nope"}):
        assert resize_report(bare) == (None, None, None, None, None)
