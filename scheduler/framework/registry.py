"""The plugin registry: plugin name -> factory, with where each registration comes from.

It lives in the framework (upstream ``framework/runtime.Registry``) because the framework
builds profiles from it while knowing no concrete plugin: the in-tree map is in
``scheduler.plugins.registry``, out-of-tree packages add theirs through the same
``Registry.register``, and the daemon hands the finished registry to the framework.

A factory may be given as a ``"module:attribute"`` path, resolved on first use, so that
building a registry of every plugin imports none of them, and a plugin module that fails
to import names itself (and its origin) instead of breaking every profile.
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import cast

from scheduler.framework.interfaces import EXTENSION_POINTS, Plugin, PluginFactory

__all__ = [
    "IN_TREE",
    "DuplicatePluginError",
    "PluginOrigin",
    "Registration",
    "Registry",
    "UnknownPluginError",
    "did_you_mean",
    "extension_points_of",
]


@dataclass(frozen=True, slots=True)
class PluginOrigin:
    """Where a registration comes from: in-tree, or an installed distribution's entry point."""

    distribution: str = ""
    version: str = ""
    entry_point: str = ""

    @property
    def in_tree(self) -> bool:
        return not self.distribution

    def __str__(self) -> str:
        if self.in_tree:
            return "in-tree"
        return f"{self.distribution} {self.version}".strip()


IN_TREE = PluginOrigin()


class UnknownPluginError(KeyError):
    """A name no registration has; ``suggestion`` is the closest registered name, if any
    is close (a misspelling: ``NodeResourcesFitt``)."""

    def __init__(self, name: str, *, known: Iterable[str] = ()) -> None:
        super().__init__(name)
        self.plugin_name = name
        self.suggestion = did_you_mean(name, known)

    def __str__(self) -> str:
        hint = f" (did you mean {self.suggestion!r}?)" if self.suggestion else ""
        return f"plugin {self.plugin_name!r} is not registered{hint}"


def did_you_mean(name: str, known: Iterable[str]) -> str | None:
    """The known name closest to ``name`` when it is close enough to be a typo (case
    aside), else None."""
    by_folded = {k.casefold(): k for k in known}
    if name.casefold() in by_folded:
        return by_folded[name.casefold()]
    close = difflib.get_close_matches(name.casefold(), list(by_folded), n=1, cutoff=0.8)
    return by_folded[close[0]] if close else None


class DuplicatePluginError(ValueError):
    """A second registration under a name already taken (names both origins)."""

    def __init__(self, name: str, *, existing: PluginOrigin, new: PluginOrigin) -> None:
        super().__init__(
            f"plugin {name!r} from {new} is already registered (from {existing})"
        )
        self.plugin_name = name
        self.existing = existing
        self.new = new


def extension_points_of(plugin: Plugin | type[Plugin]) -> list[str]:
    """The extension points (config names, upstream order) a plugin or plugin class implements."""
    cls = plugin if isinstance(plugin, type) else type(plugin)
    return [point for point, kind in EXTENSION_POINTS.items() if issubclass(cls, kind)]


@dataclass(slots=True)
class Registration:
    """One registered plugin; ``factory`` is resolved from ``path`` on first ``load``."""

    name: str
    origin: PluginOrigin
    path: str = ""
    factory: PluginFactory | None = None

    def load(self) -> PluginFactory:
        if self.factory is None:
            module_name, _, attribute = self.path.partition(":")
            module = importlib.import_module(module_name)
            self.factory = cast(PluginFactory, getattr(module, attribute))
        return self.factory

    def extension_points(self) -> list[str] | None:
        """The points its factory implements when the factory is a Plugin class; None when it
        is another callable (known only once it has built a plugin)."""
        factory = self.load()
        if isinstance(factory, type) and issubclass(factory, Plugin):
            return extension_points_of(factory)
        return None


class Registry:
    """Name -> registration.  Every plugin, in-tree or not, enters through ``register``."""

    def __init__(self) -> None:
        self._entries: dict[str, Registration] = {}

    def register(
        self,
        name: str,
        factory: PluginFactory | str,
        *,
        origin: PluginOrigin = IN_TREE,
    ) -> None:
        """Add a plugin.  ``factory`` is a callable ``(args, handle) -> Plugin`` or the
        ``"module:attribute"`` path of one (imported on first use)."""
        if not name:
            raise ValueError("a plugin name must not be empty")
        existing = self._entries.get(name)
        if existing is not None:
            raise DuplicatePluginError(name, existing=existing.origin, new=origin)
        if isinstance(factory, str):
            if ":" not in factory:
                raise ValueError(f"plugin {name!r}: factory path {factory!r} is not module:attr")
            self._entries[name] = Registration(name, origin, path=factory)
        else:
            self._entries[name] = Registration(name, origin, factory=factory)

    def get(self, name: str) -> PluginFactory:
        """The factory; raises UnknownPluginError, or the import error of a lazy path."""
        return self.registration(name).load()

    def registration(self, name: str) -> Registration:
        entry = self._entries.get(name)
        if entry is None:
            raise UnknownPluginError(name, known=self._entries)
        return entry

    def origin(self, name: str) -> PluginOrigin:
        return self.registration(name).origin

    def merged(self, other: Registry) -> Registry:
        """A new registry with this one's plugins and ``other``'s (names must not collide)."""
        out = Registry()
        for entry in (*self._entries.values(), *other._entries.values()):
            if entry.name in out._entries:
                raise DuplicatePluginError(
                    entry.name, existing=out._entries[entry.name].origin, new=entry.origin
                )
            out._entries[entry.name] = Registration(
                entry.name, entry.origin, path=entry.path, factory=entry.factory
            )
        return out

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._entries))

    def __len__(self) -> int:
        return len(self._entries)
