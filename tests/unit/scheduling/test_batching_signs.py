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


def _spread_stream_run(batched: bool, seed: int, spread: str,
                       stats: dict[str, int] | None = None) -> tuple[list[str], int]:
    from tests.unit.scheduling.test_batching_equivalence import _node, _run
    shapes = [{"cpu": "4", "memory": "4Gi", "pods": "110", "zone": zone, "taints": [],
               "cordoned": False, "images": []} for zone in ("a", "b", "c")]
    nodes = [_node(i, shapes[i % 3]) for i in range(90)]
    pod_shape = {"cpu": "100m", "memory": "128Mi", "tolerate": None, "zone": None,
                 "prefer_zone": None, "image": "x", "host_port": None, "spread": spread}
    # a zone filled first (nodeSelector pods of the same app), then spread pods: the
    # skew closes and reopens zones as they go
    filler = dict(pod_shape, zone="a", spread=None)
    stream: list[Any] = [("pod", 1)] * 4 + [("pod", 0)] * 40
    return _run(nodes, [pod_shape, filler, pod_shape, pod_shape], stream, batched=batched,
                seed=seed, percentage=0, stats=stats)


@pytest.mark.parametrize("spread", ["zone", "hostname"])
def test_spread_pods_reuse_filter_statuses_and_place_like_unbatched(spread: str) -> None:
    """PodTopologySpread signs its Filter by the domains over the skew: zone spreading
    (three domains) reuses the statuses of unchanged nodes, hostname spreading (90 domains,
    past MAX_SIGNED_DOMAINS) is not signed; both place every pod as the unbatched cycle."""
    for seed in range(3):
        plain, _ = _spread_stream_run(False, seed, spread)
        stats: dict[str, int] = {}
        batched, _ = _spread_stream_run(True, seed, spread, stats)
        assert batched == plain
        assert sum(1 for p in plain if not p.startswith("rejected")) == 44
        # A whole window is kept only when every Filter plugin signs the pod (unsigned
        # PodTopologySpread: partial batching, no window).
        if spread == "zone":
            assert stats["windows_reused"] >= 5
        else:
            assert stats["windows_reused"] == 0
