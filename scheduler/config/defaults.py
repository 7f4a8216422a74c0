"""Upstream v1 defaulting: the default plugin set, default plugin args, and plugin merging.

Mirrors ``pkg/scheduler/apis/config/v1`` (``getDefaultPlugins``, ``mergePlugins``,
``mergePluginSet`` and the ``SetDefaults_*Args`` functions). All default plugins are enabled
through multiPoint; the framework expands multiPoint into the extension points each plugin
implements.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from scheduler.config import features
from scheduler.config.types import (
    EXTENSION_POINTS,
    KubeSchedulerConfiguration,
    PluginRef,
    Plugins,
    PluginSet,
    Profile,
)

__all__ = [
    "DEFAULT_SCHEDULER_NAME",
    "MAX_NODE_SCORE",
    "SCHEDULING_GATES",
    "PRIORITY_SORT",
    "NODE_UNSCHEDULABLE",
    "NODE_NAME",
    "TAINT_TOLERATION",
    "NODE_AFFINITY",
    "NODE_PORTS",
    "NODE_RESOURCES_FIT",
    "VOLUME_RESTRICTIONS",
    "NODE_VOLUME_LIMITS",
    "VOLUME_BINDING",
    "VOLUME_ZONE",
    "POD_TOPOLOGY_SPREAD",
    "INTER_POD_AFFINITY",
    "DEFAULT_PREEMPTION",
    "NODE_RESOURCES_BALANCED_ALLOCATION",
    "IMAGE_LOCALITY",
    "DEFAULT_BINDER",
    "DEFAULT_PLUGINS",
    "PLUGIN_ARGS_FIELDS",
    "default_plugins",
    "default_plugin_args",
    "merge_plugin_args",
    "merge_plugin_set",
    "merge_plugins",
    "effective_plugins",
    "default_profile",
    "default_plugin_config",
    "default_config",
    "shipped_config",
    "SHIPPED_PROFILE",
]

DEFAULT_SCHEDULER_NAME = "py-scheduler"
MAX_NODE_SCORE = 100

SCHEDULING_GATES = "SchedulingGates"
PRIORITY_SORT = "PrioritySort"
NODE_UNSCHEDULABLE = "NodeUnschedulable"
NODE_NAME = "NodeName"
TAINT_TOLERATION = "TaintToleration"
NODE_AFFINITY = "NodeAffinity"
NODE_PORTS = "NodePorts"
NODE_RESOURCES_FIT = "NodeResourcesFit"
VOLUME_RESTRICTIONS = "VolumeRestrictions"
NODE_VOLUME_LIMITS = "NodeVolumeLimits"
VOLUME_BINDING = "VolumeBinding"
VOLUME_ZONE = "VolumeZone"
POD_TOPOLOGY_SPREAD = "PodTopologySpread"
INTER_POD_AFFINITY = "InterPodAffinity"
DEFAULT_PREEMPTION = "DefaultPreemption"
NODE_RESOURCES_BALANCED_ALLOCATION = "NodeResourcesBalancedAllocation"
IMAGE_LOCALITY = "ImageLocality"
DEFAULT_BINDER = "DefaultBinder"
DYNAMIC_RESOURCES = "DynamicResources"

# (name, weight) in upstream order; weight 0 = not a scored plugin / unset
DEFAULT_PLUGINS: tuple[tuple[str, int], ...] = (
    (SCHEDULING_GATES, 0),
    (PRIORITY_SORT, 0),
    (NODE_UNSCHEDULABLE, 0),
    (NODE_NAME, 0),
    (TAINT_TOLERATION, 3),
    (NODE_AFFINITY, 2),
    (NODE_PORTS, 0),
    (NODE_RESOURCES_FIT, 1),
    (VOLUME_RESTRICTIONS, 0),
    (NODE_VOLUME_LIMITS, 0),
    (VOLUME_BINDING, 0),
    (VOLUME_ZONE, 0),
    (POD_TOPOLOGY_SPREAD, 2),
    (INTER_POD_AFFINITY, 2),
    # kube-scheduler 1.34+: just before DefaultPreemption, so PostFilter deallocates an idle
    # claim before any pod is evicted; weight 2 since its Score ranks firstAvailable
    # subrequests (DRAPrioritizedList)
    (DYNAMIC_RESOURCES, 2),
    (DEFAULT_PREEMPTION, 0),
    (NODE_RESOURCES_BALANCED_ALLOCATION, 1),
    (IMAGE_LOCALITY, 1),
    (DEFAULT_BINDER, 0),
    # GA in 1.37; upstream's applyFeatureGates appends it to the defaults (after
    # DefaultBinder, DynamicResources being in the list already)
    ("NodeDeclaredFeatures", 0),
)

_DEFAULT_RESOURCE_SPEC: list[dict[str, Any]] = [
    {"name": "cpu", "weight": 1},
    {"name": "memory", "weight": 1},
]

# Fields each in-tree args type accepts (strict decoding rejects others).
PLUGIN_ARGS_FIELDS: dict[str, frozenset[str]] = {
    DEFAULT_PREEMPTION: frozenset({"minCandidateNodesPercentage", "minCandidateNodesAbsolute"}),
    INTER_POD_AFFINITY: frozenset({"hardPodAffinityWeight", "ignorePreferredTermsOfExistingPods"}),
    NODE_AFFINITY: frozenset({"addedAffinity"}),
    NODE_RESOURCES_BALANCED_ALLOCATION: frozenset({"resources"}),
    NODE_RESOURCES_FIT: frozenset({"ignoredResources", "ignoredResourceGroups",
                                   "scoringStrategy"}),
    POD_TOPOLOGY_SPREAD: frozenset({"defaultConstraints", "defaultingType"}),
    VOLUME_BINDING: frozenset({"bindTimeoutSeconds", "shape"}),
}


def default_plugins() -> Plugins:
    """A fresh copy of the v1 default plugins (all through multiPoint)."""
    return Plugins(multi_point=PluginSet(
        enabled=[PluginRef(n, w) for n, w in DEFAULT_PLUGINS]))


def _default_resources(resources: Any) -> Any:
    if not resources:
        return copy.deepcopy(_DEFAULT_RESOURCE_SPEC)
    if isinstance(resources, list):
        out = []
        for r in resources:
            if isinstance(r, Mapping) and not r.get("weight"):
                r = {**r, "weight": 1}  # unset or 0 weight means 1
            out.append(r)
        return out
    return resources  # wrong type: left for the plugin's validation


def merge_plugin_args(name: str, args: Mapping[str, Any] | None) -> dict[str, Any]:
    """``args`` with upstream defaults filled in for unset fields (``SetDefaults_<Name>Args``).

    Plugins without in-tree args get a plain copy of ``args``.
    """
    a: dict[str, Any] = copy.deepcopy(dict(args)) if args else {}
    a.pop("apiVersion", None)
    a.pop("kind", None)
    if name == DEFAULT_PREEMPTION:
        a.setdefault("minCandidateNodesPercentage", 10)
        a.setdefault("minCandidateNodesAbsolute", 100)
    elif name == INTER_POD_AFFINITY:
        a.setdefault("hardPodAffinityWeight", 1)
        a.setdefault("ignorePreferredTermsOfExistingPods", False)
    elif name == NODE_RESOURCES_BALANCED_ALLOCATION:
        a["resources"] = _default_resources(a.get("resources"))
    elif name == NODE_RESOURCES_FIT:
        a.setdefault("ignoredResources", [])
        a.setdefault("ignoredResourceGroups", [])
        ss = a.get("scoringStrategy")
        if ss is None:
            a["scoringStrategy"] = {"type": "LeastAllocated",
                                    "resources": copy.deepcopy(_DEFAULT_RESOURCE_SPEC)}
        elif isinstance(ss, dict):
            ss["resources"] = _default_resources(ss.get("resources"))
    elif name == POD_TOPOLOGY_SPREAD:
        if not a.get("defaultingType"):
            a["defaultingType"] = "List" if a.get("defaultConstraints") else "System"
        a.setdefault("defaultConstraints", [])
    elif name == VOLUME_BINDING:
        a.setdefault("bindTimeoutSeconds", 600)
        if not a.get("shape") and features.DEFAULT.enabled("StorageCapacityScoring"):
            # SetDefaults_VolumeBindingArgs: the nodes with the most free capacity score best
            a["shape"] = [{"utilization": 0, "score": 10}, {"utilization": 100, "score": 0}]
    elif name == NODE_AFFINITY:
        pass  # addedAffinity stays unset
    return a


def default_plugin_args(name: str) -> dict[str, Any] | None:
    """Default args of an in-tree plugin, or None when the plugin takes no args."""
    if name not in PLUGIN_ARGS_FIELDS:
        return None
    return merge_plugin_args(name, None)


def merge_plugin_set(default: PluginSet, custom: PluginSet) -> PluginSet:
    """Upstream ``mergePluginSet``.

    Defaults not disabled (by name or ``*``) keep their order; a custom plugin with a
    default's name replaces it in place; remaining custom plugins are appended in order.
    The result's disabled list holds custom then default disabled entries.
    """
    disabled = [PluginRef(p.name) for p in custom.disabled]
    disabled += [PluginRef(p.name) for p in default.disabled]
    disabled_names = {p.name for p in disabled}
    custom_index: dict[str, int] = {}
    for i, p in enumerate(custom.enabled):
        custom_index[p.name] = i  # last one wins, like the upstream map
    replaced: set[int] = set()
    enabled: list[PluginRef] = []
    if "*" not in disabled_names:
        for p in default.enabled:
            if p.name in disabled_names:
                continue
            idx = custom_index.get(p.name)
            if idx is not None:
                p = custom.enabled[idx]
                replaced.add(idx)
            enabled.append(PluginRef(p.name, p.weight))
    for i, p in enumerate(custom.enabled):
        if i not in replaced:
            enabled.append(PluginRef(p.name, p.weight))
    return PluginSet(enabled=enabled, disabled=disabled)


def merge_plugins(default: Plugins, custom: Plugins | None) -> Plugins:
    """Upstream ``mergePlugins``: merge every extension point's set."""
    if custom is None:
        return copy.deepcopy(default)
    merged = Plugins()
    for attr, _ in EXTENSION_POINTS:
        setattr(merged, attr, merge_plugin_set(getattr(default, attr), getattr(custom, attr)))
    return merged


def effective_plugins(profile: Profile) -> Plugins:
    """The profile's plugins (as the user wrote them) merged over the v1 defaults."""
    return merge_plugins(default_plugins(), profile.plugins)


def default_profile(scheduler_name: str = DEFAULT_SCHEDULER_NAME) -> Profile:
    p = Profile(scheduler_name=scheduler_name)
    p.plugin_config = default_plugin_config(effective_plugins(p), {})
    return p


def default_plugin_config(plugins: Plugins, user: Mapping[str, Mapping[str, Any]]
                          ) -> dict[str, dict[str, Any]]:
    """User pluginConfig with defaults filled in, plus default args for every enabled in-tree
    plugin the user did not configure (``setDefaults_KubeSchedulerProfile``)."""
    out: dict[str, dict[str, Any]] = {}
    for name, args in user.items():
        out[name] = merge_plugin_args(name, args)
    for name in plugins.all_enabled_names():
        if name not in out:
            d = default_plugin_args(name)
            if d is not None:
                out[name] = d
    return out


def default_config() -> KubeSchedulerConfiguration:
    """What an absent config file means: one ``py-scheduler`` profile, upstream defaults."""
    return KubeSchedulerConfiguration(profiles=[default_profile()])


# The profile the project ships: ``manifests/configmap.yaml`` and the Helm chart's default
# values hold exactly this (a test compares them). Gang scheduling is on: Coscheduling joins
# every extension point it implements and replaces PrioritySort as the queue sort; pods
# without the ``scheduling.x-k8s.io/pod-group`` label are scheduled as by the v1 defaults.
# Elastic quotas are on too, as scheduler-plugins' chart has them: CapacityScheduling takes
# DefaultPreemption's place at PostFilter (after DynamicResources' as in the v1 defaults,
# before Coscheduling's, as preemption runs first in scheduler-plugins' profile); without ElasticQuotas it preempts exactly as
# DefaultPreemption does.
SHIPPED_PROFILE: dict[str, Any] = {
    "schedulerName": DEFAULT_SCHEDULER_NAME,
    "plugins": {
        "multiPoint": {"enabled": [{"name": "Coscheduling"}, {"name": "CapacityScheduling"}]},
        "queueSort": {"enabled": [{"name": "Coscheduling"}], "disabled": [{"name": "*"}]},
        "postFilter": {"enabled": [{"name": "DynamicResources"}, {"name": "CapacityScheduling"},
                                   {"name": "Coscheduling"}],
                       "disabled": [{"name": "*"}]},
    },
    "pluginConfig": [{"name": "Coscheduling", "args": {"permitWaitingTimeSeconds": 60}}],
}


def shipped_config() -> KubeSchedulerConfiguration:
    """What the daemon runs without ``--config``: the shipped profile, so that a newcomer on
    the sandbox gets the same behaviour (gangs included) as a cluster install.  Library users
    and benchmarks that want upstream's plain v1 defaults use :func:`default_config`."""
    from scheduler.config.load import parse_config  # load imports this module

    return parse_config({
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "profiles": [copy.deepcopy(SHIPPED_PROFILE)],
    }, source="<built-in default>")
