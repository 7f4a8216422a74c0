"""Which of the default profile's plugins sign which pods (framework/batching.py): a plain
pod must leave no Score plugin unsigned once PreScore has run, or batching never keeps a
window for it (every cycle of SchedulingBasic, Backlog, NodeAffinity... then rescored and
renormalized all of its nodes)."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.config.defaults import default_config
from scheduler.framework.batching import _sign_parts
from scheduler.framework.node_info import NodeInfo
from scheduler.framework.runtime import Framework
from scheduler.objects.pod import PodInfo
from scheduler.offline import offline_handle_kwargs
from scheduler.plugins.registry import in_tree_registry
from tests.builders import PodBuilder, make_node

DRA = "DynamicResources"


def _framework() -> Framework:
    return Framework(profile=default_config().profiles[0], registry=in_tree_registry(),
                     **offline_handle_kwargs())


def _plain() -> dict[str, Any]:
    return PodBuilder("p").req(cpu="100m", memory="500Mi").obj()


def _with_claim() -> dict[str, Any]:
    return (PodBuilder("p").req(cpu="100m")
            .set("spec.resourceClaims", [{"name": "gpu", "resourceClaimName": "c"}]).obj())


def _with_extended() -> dict[str, Any]:
    return PodBuilder("p").req(cpu="100m", **{"example.com/gpu": "1"}).obj()


@pytest.mark.parametrize(
    ("pod", "signed"),
    [
        pytest.param(_plain, True, id="plain-pod"),
        pytest.param(_with_claim, False, id="resource-claim"),
        pytest.param(_with_extended, False, id="extended-resource-a-class-could-back"),
    ],
)
def test_dynamic_resources_signs_only_pods_it_skips(pod: Any, signed: bool) -> None:
    plugin = _framework().get_plugin(DRA)
    assert plugin is not None
    sign = getattr(plugin, "sign")
    assert (sign(PodInfo.from_pod(pod())) is not None) is signed


def test_a_plain_pod_leaves_no_score_plugin_unsigned_after_pre_score() -> None:
    fwk = _framework()
    pod_info = PodInfo.from_pod(_plain())
    state = fwk.new_cycle_state()
    nodes = [make_node(f"n{i}", cpu="4", memory="32Gi") for i in range(3)]
    infos = []
    for node in nodes:
        info = NodeInfo()
        info.set_node(node)
        infos.append(info)
    _, status, _ = fwk.run_pre_filter_plugins(state, pod_info, infos)
    assert status is None or status.is_success()
    assert fwk.run_pre_score_plugins(state, pod_info, infos) is None
    signed, unsigned = _sign_parts(fwk.score_plugins, state.skip_score_plugins, pod_info)
    assert unsigned == frozenset()
    assert DRA in dict(signed)
