"""The in-tree plugins: name -> factory path, and the registry holding them.

The ``Registry`` type is the framework's (``scheduler.framework.registry``); this module only
knows which plugins ship with kube-py-scheduler.  They are registered by ``"module:attr"``
path through ``Registry.register``, the same call out-of-tree plugins go through, so building
the registry imports no plugin and a plugin module that fails to import names itself.
"""

from __future__ import annotations

from collections.abc import Mapping

from scheduler.framework.registry import IN_TREE as IN_TREE_ORIGIN
from scheduler.framework.registry import Registry
from scheduler.plugins import names

# name -> "module:attribute" of a class whose constructor is (args, handle).
IN_TREE: Mapping[str, str] = {
    names.SCHEDULING_GATES: "scheduler.plugins.schedulinggates:SchedulingGates",
    names.PRIORITY_SORT: "scheduler.plugins.queuesort:PrioritySort",
    names.NODE_UNSCHEDULABLE: "scheduler.plugins.nodeunschedulable:NodeUnschedulable",
    names.NODE_NAME: "scheduler.plugins.nodename:NodeName",
    names.TAINT_TOLERATION: "scheduler.plugins.tainttoleration:TaintToleration",
    names.NODE_AFFINITY: "scheduler.plugins.nodeaffinity:NodeAffinity",
    names.NODE_PORTS: "scheduler.plugins.nodeports:NodePorts",
    names.NODE_RESOURCES_FIT: "scheduler.plugins.noderesources.fit:Fit",
    names.NODE_RESOURCES_BALANCED_ALLOCATION: (
        "scheduler.plugins.noderesources.balanced_allocation:BalancedAllocation"
    ),
    names.IMAGE_LOCALITY: "scheduler.plugins.imagelocality:ImageLocality",
    names.INTER_POD_AFFINITY: "scheduler.plugins.interpodaffinity.plugin:InterPodAffinity",
    names.POD_TOPOLOGY_SPREAD: "scheduler.plugins.podtopologyspread.plugin:PodTopologySpread",
    names.VOLUME_RESTRICTIONS: "scheduler.plugins.volumerestrictions:VolumeRestrictions",
    names.NODE_VOLUME_LIMITS: "scheduler.plugins.nodevolumelimits:NodeVolumeLimits",
    names.VOLUME_BINDING: "scheduler.plugins.volumebinding.plugin:VolumeBinding",
    names.VOLUME_ZONE: "scheduler.plugins.volumezone:VolumeZone",
    names.DEFAULT_PREEMPTION: "scheduler.plugins.defaultpreemption.plugin:DefaultPreemption",
    names.DEFAULT_BINDER: "scheduler.plugins.defaultbinder:DefaultBinder",
    names.COSCHEDULING: "scheduler.plugins.coscheduling.plugin:Coscheduling",
    names.DYNAMIC_RESOURCES: "scheduler.plugins.dynamicresources.plugin:DynamicResources",
    names.NODE_DECLARED_FEATURES: (
        "scheduler.plugins.nodedeclaredfeatures:NodeDeclaredFeatures"
    ),
    names.CAPACITY_SCHEDULING: "scheduler.plugins.capacityscheduling.plugin:CapacityScheduling",
}


def in_tree_registry() -> Registry:
    """A registry of every in-tree plugin, registered as out-of-tree ones are (lazily)."""
    registry = Registry()
    for name, path in IN_TREE.items():
        registry.register(name, path, origin=IN_TREE_ORIGIN)
    return registry
