import pytest

from scheduler.config.defaults import (
    default_config,
    default_plugin_args,
    effective_plugins,
    merge_plugin_args,
    merge_plugin_set,
)
from scheduler.config.types import PluginRef, Plugins, PluginSet, Profile

DEFAULT_ORDER = [
    ("SchedulingGates", 0), ("PrioritySort", 0), ("NodeUnschedulable", 0), ("NodeName", 0),
    ("TaintToleration", 3), ("NodeAffinity", 2), ("NodePorts", 0), ("NodeResourcesFit", 1),
    ("VolumeRestrictions", 0), ("NodeVolumeLimits", 0), ("VolumeBinding", 0),
    ("VolumeZone", 0), ("PodTopologySpread", 2), ("InterPodAffinity", 2),
    ("DynamicResources", 2), ("DefaultPreemption", 0), ("NodeResourcesBalancedAllocation", 1),
    ("ImageLocality", 1), ("DefaultBinder", 0), ("NodeDeclaredFeatures", 0),
]


def refs(ps: PluginSet) -> list[tuple[str, int]]:
    return [(p.name, p.weight) for p in ps.enabled]


def test_default_config() -> None:
    cfg = default_config()
    assert [p.scheduler_name for p in cfg.profiles] == ["py-scheduler"]
    eff = effective_plugins(cfg.profiles[0])
    assert refs(eff.multi_point) == DEFAULT_ORDER
    assert all(not ps.enabled for attr, ps in eff.items() if attr != "multi_point")
    assert set(cfg.profiles[0].plugin_config) == {
        "DefaultPreemption", "InterPodAffinity", "NodeAffinity",
        "NodeResourcesBalancedAllocation", "NodeResourcesFit", "PodTopologySpread",
        "VolumeBinding"}
    assert (cfg.parallelism, cfg.pod_initial_backoff_seconds, cfg.pod_max_backoff_seconds) == (
        16, 1, 10)


D = PluginSet(enabled=[PluginRef("A"), PluginRef("B", 2), PluginRef("C")])


@pytest.mark.parametrize(
    ("custom", "enabled", "disabled"),
    [
        (PluginSet(), [("A", 0), ("B", 2), ("C", 0)], []),
        (PluginSet(enabled=[PluginRef("X", 1)]), [("A", 0), ("B", 2), ("C", 0), ("X", 1)], []),
        (PluginSet(enabled=[PluginRef("B", 5)]), [("A", 0), ("B", 5), ("C", 0)], []),
        (PluginSet(disabled=[PluginRef("B")]), [("A", 0), ("C", 0)], ["B"]),
        (PluginSet(enabled=[PluginRef("C", 1), PluginRef("A", 4)], disabled=[PluginRef("*")]),
         [("C", 1), ("A", 4)], ["*"]),
        (PluginSet(enabled=[PluginRef("X"), PluginRef("A", 9)]),
         [("A", 9), ("B", 2), ("C", 0), ("X", 0)], []),
        (PluginSet(enabled=[PluginRef("B", 3)], disabled=[PluginRef("B")]),
         [("A", 0), ("C", 0), ("B", 3)], ["B"]),
    ],
    ids=["no-custom", "append", "override-in-place", "disable", "disable-all",
         "override-keeps-default-order", "disable-then-reenable-appends"],
)
def test_merge_plugin_set(custom: PluginSet, enabled: list[tuple[str, int]],
                          disabled: list[str]) -> None:
    merged = merge_plugin_set(D, custom)
    assert refs(merged) == enabled
    assert [p.name for p in merged.disabled] == disabled


def test_effective_plugins_per_point() -> None:
    prof = Profile("s", plugins=Plugins(
        score=PluginSet(enabled=[PluginRef("ImageLocality", 5)],
                        disabled=[PluginRef("NodeResourcesBalancedAllocation")]),
        multi_point=PluginSet(enabled=[PluginRef("Coscheduling")])))
    eff = effective_plugins(prof)
    assert refs(eff.score) == [("ImageLocality", 5)]
    assert eff.score.is_disabled("NodeResourcesBalancedAllocation")
    assert refs(eff.multi_point) == DEFAULT_ORDER + [("Coscheduling", 0)]
    # effective_plugins does not mutate the profile and is repeatable
    assert refs(effective_plugins(prof).multi_point) == refs(eff.multi_point)


@pytest.mark.parametrize(
    ("name", "args", "expected"),
    [
        ("DefaultPreemption", None,
         {"minCandidateNodesPercentage": 10, "minCandidateNodesAbsolute": 100}),
        ("DefaultPreemption", {"minCandidateNodesAbsolute": 5},
         {"minCandidateNodesPercentage": 10, "minCandidateNodesAbsolute": 5}),
        ("InterPodAffinity", None,
         {"hardPodAffinityWeight": 1, "ignorePreferredTermsOfExistingPods": False}),
        ("NodeResourcesFit", None,
         {"ignoredResources": [], "ignoredResourceGroups": [],
          "scoringStrategy": {"type": "LeastAllocated", "resources": [
              {"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}]}}),
        ("NodeResourcesFit", {"scoringStrategy": {"type": "MostAllocated", "resources": [
            {"name": "cpu"}, {"name": "nvidia.com/gpu", "weight": 3}]}},
         {"ignoredResources": [], "ignoredResourceGroups": [],
          "scoringStrategy": {"type": "MostAllocated", "resources": [
              {"name": "cpu", "weight": 1}, {"name": "nvidia.com/gpu", "weight": 3}]}}),
        ("NodeResourcesBalancedAllocation", {"resources": []},
         {"resources": [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}]}),
        ("PodTopologySpread", None, {"defaultingType": "System", "defaultConstraints": []}),
        ("PodTopologySpread", {"defaultConstraints": [{"maxSkew": 1}]},
         {"defaultingType": "List", "defaultConstraints": [{"maxSkew": 1}]}),
        ("VolumeBinding", None, {"bindTimeoutSeconds": 600, "shape": [
            {"utilization": 0, "score": 10}, {"utilization": 100, "score": 0}]}),
        ("NodeAffinity", None, {}),
        ("Coscheduling", {"permitWaitingTimeSeconds": 3}, {"permitWaitingTimeSeconds": 3}),
    ],
    ids=["preemption", "preemption-partial", "interpod", "fit", "fit-weights", "balanced",
         "spread-system", "spread-list", "volumebinding", "nodeaffinity", "out-of-tree"],
)
def test_merge_plugin_args(name: str, args: dict[str, object] | None,
                           expected: dict[str, object]) -> None:
    assert merge_plugin_args(name, args) == expected


def test_default_plugin_args_none_for_argless() -> None:
    assert default_plugin_args("ImageLocality") is None
    a = default_plugin_args("NodeResourcesFit")
    b = default_plugin_args("NodeResourcesFit")
    assert a == b and a is not b
