"""The in-tree plugin registry: plugin name -> factory.

Plugins are imported lazily by dotted path so that importing the registry stays cheap and a
plugin module that fails to import names itself in the error instead of breaking every profile.
Out-of-tree plugins are added with ``Registry.register``.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from typing import cast

from scheduler.framework.interfaces import PluginFactory
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
}


class UnknownPluginError(KeyError):
    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.plugin_name = name

    def __str__(self) -> str:
        return f"plugin {self.plugin_name!r} is not registered"


class Registry:
    """Name -> factory, with in-tree plugins resolved on first use."""

    def __init__(self, paths: Mapping[str, str] | None = None) -> None:
        self._paths: dict[str, str] = dict(IN_TREE if paths is None else paths)
        self._factories: dict[str, PluginFactory] = {}

    def register(self, name: str, factory: PluginFactory) -> None:
        if name in self._factories or name in self._paths:
            raise ValueError(f"plugin {name!r} is already registered")
        self._factories[name] = factory

    def get(self, name: str) -> PluginFactory:
        factory = self._factories.get(name)
        if factory is not None:
            return factory
        path = self._paths.get(name)
        if path is None:
            raise UnknownPluginError(name)
        module_name, _, attribute = path.partition(":")
        module = importlib.import_module(module_name)
        factory = cast(PluginFactory, getattr(module, attribute))
        self._factories[name] = factory
        return factory

    def __contains__(self, name: object) -> bool:
        return name in self._factories or name in self._paths

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(set(self._paths) | set(self._factories)))
