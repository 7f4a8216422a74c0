"""Out-of-tree plugins: installed packages register them under an entry-point group.

A distribution declares, in its ``pyproject.toml``::

    [project.entry-points."kube_py_scheduler.plugins"]
    LabelPreference = "label_preference:LabelPreference"

and, once installed, profiles enable and configure ``LabelPreference`` by name exactly like an
in-tree plugin.  Each entry point goes into the registry through ``Registry.register``, the
same call in-tree plugins use, with its distribution and version as origin.  Everything that
can be checked without a cluster is checked here, at startup, and reported naming the entry
point, the distribution and the cause: a name taken by an in-tree plugin (or another
distribution), an entry point that fails to import, one that is not a plugin factory, a plugin
class implementing no extension point.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Iterable

from scheduler.framework.interfaces import Plugin
from scheduler.framework.registry import PluginOrigin, Registry, extension_points_of

__all__ = ["ENTRY_POINT_GROUP", "PluginLoadError", "load_entry_points"]

ENTRY_POINT_GROUP = "kube_py_scheduler.plugins"


class PluginLoadError(Exception):
    """An out-of-tree plugin cannot be registered; the message names what and why."""


def _origin(ep: importlib.metadata.EntryPoint) -> PluginOrigin:
    dist = ep.dist
    name = (dist.metadata["Name"] if dist is not None else "") or "<unknown distribution>"
    version = dist.version if dist is not None else ""
    return PluginOrigin(distribution=name, version=version,
                        entry_point=f"{ep.name} = {ep.value}")


def describe(origin: PluginOrigin) -> str:
    """``entry point 'X = mod:Cls' of distribution dist 1.0`` (for error messages)."""
    return f"entry point {origin.entry_point!r} of distribution {origin}"


def load_entry_points(
    registry: Registry,
    *,
    entry_points: Iterable[importlib.metadata.EntryPoint] | None = None,
) -> Registry:
    """Register every plugin of the ``kube_py_scheduler.plugins`` group into ``registry``
    (returned).  Raises PluginLoadError on the first entry point that cannot be used."""
    eps = (importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)
           if entry_points is None else entry_points)
    for ep in sorted(eps, key=lambda e: e.name):
        origin = _origin(ep)
        where = describe(origin)
        if ep.name in registry:
            existing = registry.origin(ep.name)
            owner = "an in-tree plugin" if existing.in_tree else f"the plugin from {existing}"
            raise PluginLoadError(
                f"{where}: plugin name {ep.name!r} is already taken by {owner}; rename the "
                "entry point")
        try:
            factory = ep.load()
        except Exception as exc:
            raise PluginLoadError(
                f"{where}: cannot import {ep.value!r}: {type(exc).__name__}: {exc}") from exc
        if not callable(factory):
            raise PluginLoadError(
                f"{where}: {ep.value!r} is a {type(factory).__name__}, not a plugin factory "
                "(a Plugin class, or a callable (args, handle) -> Plugin)")
        if isinstance(factory, type):
            if not issubclass(factory, Plugin):
                raise PluginLoadError(
                    f"{where}: {factory.__qualname__} does not subclass "
                    "scheduler.framework.Plugin")
            if not extension_points_of(factory):
                raise PluginLoadError(
                    f"{where}: {factory.__qualname__} implements no extension point (subclass "
                    "FilterPlugin, ScorePlugin ... from scheduler.framework)")
        registry.register(ep.name, factory, origin=origin)
    return registry
