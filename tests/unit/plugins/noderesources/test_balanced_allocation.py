"""NodeResourcesBalancedAllocation: (1 - std of utilization fractions) * 100, real requests,
best-effort pods skipped."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.config.defaults import merge_plugin_args
from scheduler.config.errors import ConfigError
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.node_info import NodeInfo
from scheduler.framework.status import Code
from scheduler.objects.pod import PodInfo
from scheduler.plugins.noderesources.balanced_allocation import (
    NAME,
    BalancedAllocation,
    balanced_resource_scorer,
)
from tests.builders import NodeBuilder, PodBuilder, make_pod


def _plugin(**args: Any) -> BalancedAllocation:
    return BalancedAllocation(merge_plugin_args(NAME, args), None)


def _info(*existing: dict[str, Any]) -> NodeInfo:
    info = NodeInfo(
        NodeBuilder("n1").capacity(cpu="4", memory="8Gi", pods=10, ephemeral_storage="100Gi").obj()
    )
    for pod in existing:
        info.add_pod(PodInfo.from_pod(pod))
    return info


def _score(plugin: BalancedAllocation, pod: dict[str, Any], info: NodeInfo) -> int:
    state = CycleState()
    pod_info = PodInfo.from_pod(pod)
    assert plugin.pre_score(state, pod_info, [info]) is None
    score, status = plugin.score(state, pod_info, info)
    assert status is None
    assert plugin.score(CycleState(), pod_info, info) == (score, None)
    return score


@pytest.mark.parametrize(
    ("pod", "existing", "expected"),
    [
        # cpu 2/4 = .5, memory 2/8 = .25 -> std .125 -> 87
        (
            PodBuilder("p").req(cpu="1", memory="1Gi").obj(),
            [make_pod("e", cpu="1", memory="1Gi")],
            87,
        ),
        # perfectly balanced
        (
            PodBuilder("p").req(cpu="1", memory="2Gi").obj(),
            [make_pod("e", cpu="1", memory="2Gi")],
            100,
        ),
        # fractions are capped at 1: cpu 6/4 -> 1, memory 4/8 = .5 -> std .25 -> 75
        (
            PodBuilder("p").req(cpu="3", memory="2Gi").obj(),
            [make_pod("e", cpu="3", memory="2Gi")],
            75,
        ),
        # real (not non-zero) requests: memory 0/8 = 0, cpu 2/4 -> std .25 -> 75
        (PodBuilder("p").req(cpu="2").obj(), [], 75),
    ],
)
def test_score(pod: dict[str, Any], existing: list[dict[str, Any]], expected: int) -> None:
    assert _score(_plugin(), pod, _info(*existing)) == expected


def test_three_resources_use_population_std() -> None:
    plugin = _plugin(
        resources=[
            {"name": "cpu", "weight": 1},
            {"name": "memory", "weight": 1},
            {"name": "ephemeral-storage", "weight": 1},
        ]
    )
    pod = PodBuilder("p").req(cpu="2", memory="2Gi", ephemeral_storage="75Gi").obj()
    # fractions .5, .25, .75: std = sqrt(.125 / 3) = .2041 -> 79
    assert _score(plugin, pod, _info()) == 79


def test_best_effort_pod_skips() -> None:
    plugin = _plugin()
    pod_info = PodInfo.from_pod(PodBuilder("p").container().obj())
    status = plugin.pre_score(CycleState(), pod_info, [_info()])
    assert status is not None and status.code == Code.SKIP
    assert plugin.score(CycleState(), pod_info, _info()) == (0, None)


def test_scorer_edge_cases() -> None:
    assert balanced_resource_scorer([0, 0], [0, 0]) == 100  # nothing to compare
    assert balanced_resource_scorer([1, 0], [2, 0]) == 100  # one resource: std 0


@pytest.mark.parametrize(
    ("resources", "field"),
    [
        ([{"name": "cpu", "weight": 2}], "resources[0].weight"),
        ([{"name": "cpu", "weight": 1}, {"name": "cpu", "weight": 1}], "resources[1].name"),
        ([{"weight": 1}], "resources[0].name"),
        ("cpu", "resources"),
    ],
)
def test_bad_args(resources: Any, field: str) -> None:
    with pytest.raises(ConfigError) as err:
        BalancedAllocation({"resources": resources}, None)
    assert err.value.errors[0][0] == f"{NAME}.args.{field}"


@pytest.mark.parametrize(
    ("pod", "existing", "expected"),
    [
        # pod-level requests (PodLevelResources, beta on since 1.34) replace the containers':
        # cpu (1 + 1)/4 = .5, memory (1 + 1)/8 = .25 -> 87, as the first row of test_score
        (PodBuilder("p").req(cpu="100m", memory="100Mi")
         .pod_resources(requests={"cpu": "1", "memory": "1Gi"}).obj(),
         [make_pod("e", cpu="1", memory="1Gi")], 87),
        # ... and for the pods already on the node: balanced, 100
        (PodBuilder("p").req(cpu="1", memory="2Gi").obj(),
         [PodBuilder("e").req(cpu="10m").pod_resources(requests={"cpu": "1", "memory": "2Gi"})
          .obj()], 100),
        # a resizing pod on the node counts its larger reported size: cpu (1 + 3)/4 -> 1,
        # memory 2/8 -> std .375 -> 62
        (PodBuilder("p").req(cpu="1", memory="1Gi").obj(),
         [PodBuilder("e").container("c", requests={"cpu": "1", "memory": "1Gi"})
          .container_status("c", actual={"cpu": "3", "memory": "1Gi"}).obj()], 62),
    ],
    ids=["pod-level-incoming", "pod-level-existing", "resizing-existing"],
)
def test_score_reads_the_effective_requests(pod: dict[str, Any], existing: list[dict[str, Any]],
                                            expected: int) -> None:
    assert _score(_plugin(), pod, _info(*existing)) == expected
