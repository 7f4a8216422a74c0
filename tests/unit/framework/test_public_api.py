"""The public plugin API (``scheduler.framework``) and the plugin ``Registry``."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping
from typing import Any

import pytest

import scheduler.framework as api
from scheduler.framework import (
    CycleState,
    FilterPlugin,
    Handle,
    NodeInfo,
    PluginOrigin,
    PodInfo,
    Registry,
    ScorePlugin,
    Status,
    extension_points_of,
)
from scheduler.framework.registry import DuplicatePluginError, UnknownPluginError
from scheduler.plugins.registry import IN_TREE, in_tree_registry

# The public names, pinned: adding one is an API decision, removing one breaks plugins.
PUBLIC = {
    "MAX_NODE_SCORE", "MIN_NODE_SCORE", "ActionType", "ApiClient", "ApiResponse", "BindPlugin",
    "ClusterEvent", "ClusterEventWithHint", "Code", "CycleState", "EnqueueExtensions",
    "EventRecorder", "EventResource", "FilterPlugin", "Handle", "KeyedHint", "NodeInfo", "NodeInfoLister",
    "NodeScore", "ObjectLister", "PermitPlugin", "Plugin", "PluginArgs", "PluginFactory",
    "PluginOrigin", "PodGroupPlugin", "PodInfo", "PodNominator", "PostBindPlugin", "PostFilterPlugin",
    "PostFilterResult", "PreBindPlugin", "PreEnqueuePlugin", "PreFilterExtensions",
    "PreFilterPlugin", "PreFilterResult", "PreScorePlugin", "QueueSortPlugin", "QueuedPodInfo",
    "QueueingHint", "QueueingHintFn", "Registry", "ReservePlugin", "ScoreExtensions",
    "ScorePlugin", "ScoreValuesNormalizer", "SignPlugin", "Status", "WaitingPod", "extension_points_of",
    "missing_state", "read_state",
}


def test_public_names_are_exactly_all_and_importable() -> None:
    assert set(api.__all__) == PUBLIC
    assert len(api.__all__) == len(PUBLIC)
    for name in api.__all__:
        assert getattr(api, name) is not None, name
    exported = {n for n in vars(api) if not n.startswith("_")}
    # Only the public names and the submodules Python binds on the package when they load.
    assert exported - PUBLIC <= {
        "cycle_state", "events", "interfaces", "node_info", "registry", "status", "types",
        "errors", "handle", "runtime", "builder", "instrumentation", "waiting_pods",
        "batching", "batching_kept", "batching_mask", "batching_sign", "nominated", "runtime_base",
        "runtime_filter",
        "runtime_score", "runtime_binding",
    }


def test_importing_the_api_loads_no_runtime_plugin_or_prometheus() -> None:
    code = (
        "import sys, scheduler.framework\n"
        "heavy = [m for m in sys.modules if m.startswith(('scheduler.framework.runtime',"
        " 'scheduler.plugins', 'prometheus_client', 'scheduler.client', 'kubernetes',"
        " 'aiohttp'))]\n"
        "print(heavy)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


class _Both(FilterPlugin, ScorePlugin):
    NAME = "Both"

    def __init__(self, args: Mapping[str, Any], handle: Handle) -> None:
        pass

    def filter(self, state: CycleState, pod_info: PodInfo, node_info: NodeInfo) -> Status | None:
        return None

    def score(
        self, state: CycleState, pod_info: PodInfo, node_info: NodeInfo
    ) -> tuple[int, Status | None]:
        return 0, None


def test_extension_points_of_classes_and_instances() -> None:
    assert extension_points_of(_Both) == ["filter", "score"]
    assert extension_points_of(_Both({}, None)) == ["filter", "score"]  # type: ignore[arg-type]


def test_registry_records_origin_and_rejects_duplicates_naming_both() -> None:
    registry = in_tree_registry()
    origin = PluginOrigin(distribution="acme-plugins", version="1.2.0", entry_point="Both")
    registry.register("Both", _Both, origin=origin)
    assert registry.origin("Both") == origin
    assert str(registry.origin("Both")) == "acme-plugins 1.2.0"
    assert str(registry.origin("NodeName")) == "in-tree"
    assert registry.registration("Both").extension_points() == ["filter", "score"]
    with pytest.raises(DuplicatePluginError, match="'NodeName' from acme-plugins 1.2.0 is "
                       r"already registered \(from in-tree\)"):
        registry.register("NodeName", _Both, origin=origin)
    with pytest.raises(UnknownPluginError, match="'Nope' is not registered"):
        registry.get("Nope")


def test_in_tree_plugins_register_lazily_through_register() -> None:
    registry = in_tree_registry()
    assert list(registry) == sorted(IN_TREE)
    for name in IN_TREE:
        assert registry.origin(name).in_tree
    assert "NodeName" in registry
    points = registry.registration("NodeResourcesFit").extension_points()
    assert points is not None and {"preFilter", "filter", "score"} <= set(points)


def test_a_factory_path_that_fails_to_import_raises_on_use_only() -> None:
    registry = Registry()
    registry.register("Broken", "scheduler.no_such_module:Plugin")
    with pytest.raises(ModuleNotFoundError):
        registry.get("Broken")
    with pytest.raises(ValueError, match="not module:attr"):
        registry.register("Bad", "no-colon")


def test_merged_registry_keeps_both_and_refuses_collisions() -> None:
    extra = Registry()
    extra.register("Both", _Both, origin=PluginOrigin(distribution="d", version="1"))
    merged = in_tree_registry().merged(extra)
    assert merged.get("Both") is _Both
    assert "NodeName" in merged and len(merged) == len(IN_TREE) + 1
    clash = Registry()
    clash.register("NodeName", _Both, origin=PluginOrigin(distribution="d", version="1"))
    with pytest.raises(DuplicatePluginError):
        in_tree_registry().merged(clash)
