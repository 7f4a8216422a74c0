"""NodeResourcesFit: Filter (every insufficient resource reported), args validation, scoring
strategies, and the queueing hints."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.config.defaults import merge_plugin_args
from scheduler.config.errors import ConfigError
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.events import ActionType, EventResource, QueueingHint
from scheduler.framework.node_info import NodeInfo
from scheduler.framework.status import Code, Status
from scheduler.objects.pod import PodInfo
from scheduler.plugins.noderesources.fit import (
    NAME,
    REASON_INSUFFICIENT_CPU,
    REASON_INSUFFICIENT_EPHEMERAL_STORAGE,
    REASON_INSUFFICIENT_MEMORY,
    REASON_TOO_MANY_PODS,
    Fit,
    fits,
)
from tests.builders import NodeBuilder, PodBuilder, make_node, make_pod

U = Code.UNSCHEDULABLE
# More than the node's whole allocatable: no preemption can make room (upstream).
UU = Code.UNSCHEDULABLE_AND_UNRESOLVABLE
GPU = "example.com/gpu"


def _fit(**args: Any) -> Fit:
    return Fit(merge_plugin_args(NAME, args), None)


def _node(cpu: str = "4", memory: str = "8Gi", pods: int = 10, **extra: Any) -> dict[str, Any]:
    return NodeBuilder("n1").capacity(cpu=cpu, memory=memory, pods=pods, **extra).obj()


def _info(node: dict[str, Any], *existing: dict[str, Any]) -> NodeInfo:
    info = NodeInfo(node)
    for pod in existing:
        info.add_pod(PodInfo.from_pod(pod))
    return info


def _filter(plugin: Fit, pod: dict[str, Any], info: NodeInfo) -> Status | None:
    state = CycleState()
    pod_info = PodInfo.from_pod(pod)
    result, status = plugin.pre_filter(state, pod_info, [info])
    assert (result, status) == (None, None)
    return plugin.filter(state, pod_info, info)


def _pod(**req: Any) -> dict[str, Any]:
    return PodBuilder("p").req(**req).obj()


# --- Filter -----------------------------------------------------------------------------------

FILTER_CASES = [
    (
        "no requests fit a full node",
        PodBuilder("p").container().obj(),
        _info(_node(cpu="1", memory="1Gi"), make_pod("e", cpu="1", memory="1Gi")),
        None,
    ),
    ("fits", _pod(cpu="1", memory="1Gi"), _info(_node(), make_pod("e", cpu="2")), None),
    (
        "exactly fills the node",
        _pod(cpu="2", memory="6Gi"),
        _info(_node(), make_pod("e", cpu="2", memory="2Gi")),
        None,
    ),
    (
        "cpu short",
        _pod(cpu="3"),
        _info(_node(), make_pod("e", cpu="2")),
        Status(U, REASON_INSUFFICIENT_CPU),
    ),
    (
        "memory short",
        _pod(memory="7Gi"),
        _info(_node(), make_pod("e", memory="2Gi")),
        Status(U, REASON_INSUFFICIENT_MEMORY),
    ),
    (
        "both reported, more than the node holds: unresolvable",
        _pod(cpu="5", memory="9Gi"),
        _info(_node()),
        Status(UU, REASON_INSUFFICIENT_CPU, REASON_INSUFFICIENT_MEMORY),
    ),
    (
        "both reported, room once pods leave",
        _pod(cpu="3", memory="7Gi"),
        _info(_node(), make_pod("e", cpu="2", memory="2Gi")),
        Status(U, REASON_INSUFFICIENT_CPU, REASON_INSUFFICIENT_MEMORY),
    ),
    (
        "one resource beyond the node makes the status unresolvable",
        _pod(cpu="3", memory="9Gi"),
        _info(_node(), make_pod("e", cpu="2")),
        Status(UU, REASON_INSUFFICIENT_CPU, REASON_INSUFFICIENT_MEMORY),
    ),
    (
        "exactly the node's allocatable, taken by others: resolvable",
        _pod(cpu="4"),
        _info(_node(), make_pod("e", cpu="1")),
        Status(U, REASON_INSUFFICIENT_CPU),
    ),
    (
        "too many pods, even with no requests",
        PodBuilder("p").container().obj(),
        _info(_node(pods=1), make_pod("e")),
        Status(U, REASON_TOO_MANY_PODS),
    ),
    (
        "too many pods listed first",
        _pod(cpu="3"),
        _info(_node(pods=1), make_pod("e", cpu="2")),
        Status(U, REASON_TOO_MANY_PODS, REASON_INSUFFICIENT_CPU),
    ),
    (
        "too many pods never unresolvable, a resource beyond the node is",
        _pod(cpu="5"),
        _info(_node(pods=1), make_pod("e")),
        Status(UU, REASON_TOO_MANY_PODS, REASON_INSUFFICIENT_CPU),
    ),
    (
        "ephemeral storage",
        _pod(ephemeral_storage="2Gi"),
        _info(
            NodeBuilder("n1").capacity(cpu="1", memory="1Gi", pods=5, ephemeral_storage="1Gi").obj()
        ),
        Status(UU, REASON_INSUFFICIENT_EPHEMERAL_STORAGE),
    ),
    (
        "ephemeral storage taken by others",
        _pod(ephemeral_storage="1Gi"),
        _info(
            NodeBuilder("n1").capacity(cpu="1", memory="1Gi", pods=5, ephemeral_storage="1Gi").obj(),
            make_pod("e", ephemeral_storage="1Gi"),
        ),
        Status(U, REASON_INSUFFICIENT_EPHEMERAL_STORAGE),
    ),
    (
        "extended resource fits",
        _pod(**{GPU: 1}),
        _info(_node(**{GPU: 2}), make_pod("e", **{GPU: 1})),
        None,
    ),
    (
        "extended resource short",
        _pod(**{GPU: 2}),
        _info(_node(**{GPU: 2}), make_pod("e", **{GPU: 1})),
        Status(U, f"Insufficient {GPU}"),
    ),
    (
        "extended resource absent on node",
        _pod(**{GPU: 1}),
        _info(_node()),
        Status(UU, f"Insufficient {GPU}"),
    ),
    (
        "init container larger than containers",
        PodBuilder("p").req(cpu="1").init_container(requests={"cpu": "3"}).obj(),
        _info(_node(), make_pod("e", cpu="2")),
        Status(U, REASON_INSUFFICIENT_CPU),
    ),
    (
        "overhead counts",
        PodBuilder("p").req(cpu="2").overhead(cpu="500m").obj(),
        _info(_node(), make_pod("e", cpu="2")),
        Status(U, REASON_INSUFFICIENT_CPU),
    ),
    (
        "sidecar adds to containers",
        PodBuilder("p").req(cpu="1500m").sidecar(requests={"cpu": "1"}).obj(),
        _info(_node(), make_pod("e", cpu="2")),
        Status(U, REASON_INSUFFICIENT_CPU),
    ),
]


@pytest.mark.parametrize(
    ("name", "pod", "info", "expected"), FILTER_CASES, ids=[c[0] for c in FILTER_CASES]
)
def test_filter(name: str, pod: dict[str, Any], info: NodeInfo, expected: Status | None) -> None:
    assert _filter(_fit(), pod, info) == expected


@pytest.mark.parametrize(
    ("args", "resource", "expected"),
    [
        ({"ignoredResources": [GPU]}, GPU, None),
        ({"ignoredResourceGroups": ["example.com"]}, GPU, None),
        ({"ignoredResourceGroups": ["example.org"]}, GPU, Status(UU, f"Insufficient {GPU}")),
        # only extended resources can be ignored; hugepages stay checked
        (
            {"ignoredResources": ["hugepages-2Mi"]},
            "hugepages-2Mi",
            Status(UU, "Insufficient hugepages-2Mi"),
        ),
    ],
)
def test_ignored_resources(args: dict[str, Any], resource: str, expected: Status | None) -> None:
    assert _filter(_fit(**args), _pod(**{resource: "1"}), _info(_node())) == expected


def test_filter_without_pre_filter_is_error() -> None:
    status = _fit().filter(CycleState(), PodInfo.from_pod(_pod(cpu="1")), _info(_node()))
    assert status is not None and status.code == Code.ERROR


def test_fits_helper_reports_details() -> None:
    (short,) = fits(PodInfo.from_pod(_pod(cpu="3")), _info(_node(), make_pod("e", cpu="2")))
    assert (short.resource_name, short.requested, short.used, short.capacity,
            short.unresolvable) == ("cpu", 3000, 2000, 4000, False)
    (beyond,) = fits(PodInfo.from_pod(_pod(cpu="5")), _info(_node(), make_pod("e", cpu="2")))
    assert (beyond.requested, beyond.capacity, beyond.unresolvable) == (5000, 4000, True)


# --- args -------------------------------------------------------------------------------------

BAD_ARGS = [
    ({"scoringStrategy": {"type": "Nope"}}, "scoringStrategy.type"),
    (
        {
            "scoringStrategy": {
                "type": "LeastAllocated",
                "resources": [{"name": "cpu", "weight": 101}],
            }
        },
        "scoringStrategy.resources[0].weight",
    ),
    (
        {
            "scoringStrategy": {
                "type": "MostAllocated",
                "resources": [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": -1}],
            }
        },
        "scoringStrategy.resources[1].weight",
    ),
    (
        {
            "scoringStrategy": {
                "type": "RequestedToCapacityRatio",
                "resources": [{"name": "cpu", "weight": 1}],
            }
        },
        "scoringStrategy.requestedToCapacityRatio",
    ),
    (
        {
            "scoringStrategy": {
                "type": "RequestedToCapacityRatio",
                "requestedToCapacityRatio": {"shape": []},
            }
        },
        "scoringStrategy.requestedToCapacityRatio.shape",
    ),
    (
        {
            "scoringStrategy": {
                "type": "RequestedToCapacityRatio",
                "requestedToCapacityRatio": {
                    "shape": [{"utilization": 50, "score": 1}, {"utilization": 50, "score": 2}]
                },
            }
        },
        "scoringStrategy.requestedToCapacityRatio.shape[1].utilization",
    ),
    (
        {
            "scoringStrategy": {
                "type": "RequestedToCapacityRatio",
                "requestedToCapacityRatio": {
                    "shape": [{"utilization": 0, "score": 1}, {"utilization": 101, "score": 2}]
                },
            }
        },
        "scoringStrategy.requestedToCapacityRatio.shape[1].utilization",
    ),
    (
        {
            "scoringStrategy": {
                "type": "RequestedToCapacityRatio",
                "requestedToCapacityRatio": {"shape": [{"utilization": 0, "score": 11}]},
            }
        },
        "scoringStrategy.requestedToCapacityRatio.shape[0].score",
    ),
    ({"ignoredResources": ["bad name!"]}, "ignoredResources[0]"),
    ({"ignoredResourceGroups": ["example.com/gpu"]}, "ignoredResourceGroups[0]"),
    ({"ignoredResources": "cpu"}, "ignoredResources"),
]


@pytest.mark.parametrize(("args", "field"), BAD_ARGS, ids=[b[1] for b in BAD_ARGS])
def test_bad_args_name_the_field(args: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigError) as err:
        _fit(**args)
    assert err.value.errors[0][0] == f"{NAME}.args.{field}"


def test_default_args() -> None:
    plugin = _fit()
    assert plugin.scorer.name == "LeastAllocated"
    assert [(r.name, r.weight) for r in plugin.resources] == [("cpu", 1), ("memory", 1)]


# --- Score ------------------------------------------------------------------------------------


def _score(plugin: Fit, pod: dict[str, Any], info: NodeInfo) -> int:
    state = CycleState()
    pod_info = PodInfo.from_pod(pod)
    assert plugin.pre_score(state, pod_info, [info]) is None
    score, status = plugin.score(state, pod_info, info)
    assert status is None
    # Score without PreScore state computes the same.
    assert plugin.score(CycleState(), pod_info, info) == (score, None)
    return score


NODE = _node(cpu="4", memory="10Gi")
RES_CPU3_MEM1 = [{"name": "cpu", "weight": 3}, {"name": "memory", "weight": 1}]
SHAPE_PACK = {"shape": [{"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}]}
SHAPE_SPREAD = {"shape": [{"utilization": 0, "score": 10}, {"utilization": 100, "score": 0}]}

SCORE_CASES = [
    # (id, strategy, pod, existing pods on NODE, expected)
    (
        "least half used",
        {"type": "LeastAllocated"},
        _pod(cpu="1", memory="2Gi"),
        [make_pod("e", cpu="1", memory="3Gi")],
        50,
    ),
    (
        "least cpu full",
        {"type": "LeastAllocated"},
        _pod(cpu="1", memory="2Gi"),
        [make_pod("e", cpu="3", memory="3Gi")],
        25,
    ),
    (
        "least over-committed counts 0",
        {"type": "LeastAllocated"},
        _pod(cpu="2", memory="2Gi"),
        [make_pod("e", cpu="3", memory="3Gi")],
        25,
    ),
    (
        "least weighted",
        {"type": "LeastAllocated", "resources": RES_CPU3_MEM1},
        _pod(cpu="1", memory="2Gi"),
        [make_pod("e", cpu="3", memory="3Gi")],
        12,
    ),
    (
        "least best-effort pod uses non-zero defaults",
        {"type": "LeastAllocated"},
        PodBuilder("p").container().obj(),
        [],
        97,
    ),
    (
        "most half used",
        {"type": "MostAllocated"},
        _pod(cpu="1", memory="2Gi"),
        [make_pod("e", cpu="1", memory="3Gi")],
        50,
    ),
    (
        "most over-committed counts full",
        {"type": "MostAllocated"},
        _pod(cpu="2", memory="2Gi"),
        [make_pod("e", cpu="3", memory="3Gi")],
        75,
    ),
    (
        "extended resource the pod does not request is ignored",
        {
            "type": "MostAllocated",
            "resources": [{"name": "cpu", "weight": 1}, {"name": GPU, "weight": 5}],
        },
        _pod(cpu="1", memory="2Gi"),
        [make_pod("e", cpu="1")],
        50,
    ),
    # cpu 50% -> 50, memory 3Gi/10Gi -> 30: (50 + 2 * 30) / 3 = 36.7 -> 37
    (
        "rtcr bin packing weighted",
        {
            "type": "RequestedToCapacityRatio",
            "resources": [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 2}],
            "requestedToCapacityRatio": SHAPE_PACK,
        },
        _pod(cpu="1", memory="2Gi"),
        [make_pod("e", cpu="1", memory="1Gi")],
        37,
    ),
    # cpu 50, memory 2457Mi/10Gi -> 23: 36.5 rounds half away from zero (Go), not to even
    (
        "rtcr rounds half up",
        {"type": "RequestedToCapacityRatio", "requestedToCapacityRatio": SHAPE_PACK},
        _pod(cpu="1", memory="1Gi"),
        [make_pod("e", cpu="1", memory="1433Mi")],
        37,
    ),
    (
        "rtcr zero-score resources drop out",
        {"type": "RequestedToCapacityRatio", "requestedToCapacityRatio": SHAPE_SPREAD},
        _pod(cpu="2", memory="2Gi"),
        [make_pod("e", cpu="2", memory="3Gi")],
        50,
    ),
]


@pytest.mark.parametrize(
    ("name", "strategy", "pod", "existing", "expected"),
    SCORE_CASES,
    ids=[c[0] for c in SCORE_CASES],
)
def test_score(
    name: str,
    strategy: dict[str, Any],
    pod: dict[str, Any],
    existing: list[dict[str, Any]],
    expected: int,
) -> None:
    node = NODE if "extended" not in name else _node(cpu="4", memory="10Gi", **{GPU: 4})
    assert _score(_fit(scoringStrategy=strategy), pod, _info(node, *existing)) == expected


def test_score_with_no_resources_is_error() -> None:
    plugin = _fit()
    plugin.scorer.resources.clear()
    _, status = plugin.score(CycleState(), PodInfo.from_pod(_pod(cpu="1")), _info(NODE))
    assert status is not None and status.code == Code.ERROR


# --- events -----------------------------------------------------------------------------------


def test_events() -> None:
    registered = {(e.event.resource, e.event.action_type) for e in _fit().events_to_register()}
    assert registered == {
        (EventResource.POD, ActionType.DELETE | ActionType.UPDATE_POD_SCALE_DOWN),
        (EventResource.UNSCHEDULED_POD, ActionType.UPDATE_POD_SCALE_DOWN),
        (EventResource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_ALLOCATABLE),
    }


TARGET = PodBuilder("target").uid("t").req(cpu="1").obj()


def _assigned(name: str, **req: Any) -> dict[str, Any]:
    return PodBuilder(name).uid(f"uid-{name}").req(**req).node("n1").obj()


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        (_assigned("a", cpu="2"), None, QueueingHint.QUEUE),  # assigned pod deleted
        (PodBuilder("u").req(cpu="2").obj(), None, QueueingHint.SKIP),  # unassigned deleted
        # upstream Fit.isSchedulableAfterPodEvent: a nominated pod held room on its node.
        (PodBuilder("u").req(cpu="2").nominated_node("n1").obj(), None, QueueingHint.QUEUE),
        (_assigned("a", cpu="2"), _assigned("a", cpu="1"), QueueingHint.QUEUE),  # cpu shrank
        (_assigned("a", memory="2Gi"), _assigned("a", memory="1Gi"), QueueingHint.SKIP),
        (_assigned("a", cpu="1"), _assigned("a", cpu="2"), QueueingHint.SKIP),  # grew
        (
            _assigned("a", cpu="1"),
            PodBuilder("a").uid("uid-a").req(cpu="1").node("n1").phase("Succeeded").obj(),
            QueueingHint.QUEUE,
        ),  # finished
        (PodBuilder("target").uid("t").req(cpu="2").obj(), TARGET, QueueingHint.QUEUE),  # itself
    ],
)
def test_pod_hint(old: Any, new: Any, expected: QueueingHint) -> None:
    assert _fit().is_schedulable_after_pod_event(TARGET, old, new) is expected


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        (None, make_node("n1", cpu="2"), QueueingHint.QUEUE),
        (None, make_node("n1", cpu="500m"), QueueingHint.SKIP),  # too small
        (make_node("n1", cpu="500m"), make_node("n1", cpu="2"), QueueingHint.QUEUE),
        (
            make_node("n1", cpu="2", memory="1Gi"),
            make_node("n1", cpu="2", memory="2Gi"),
            QueueingHint.SKIP,
        ),  # memory grew, the pod wants cpu only
        (
            make_node("n1", cpu="2", pods=10),
            make_node("n1", cpu="2", pods=20),
            QueueingHint.QUEUE,
        ),  # room for more pods
    ],
)
def test_node_hint(old: Any, new: Any, expected: QueueingHint) -> None:
    assert _fit().is_schedulable_after_node_change(TARGET, old, new) is expected
