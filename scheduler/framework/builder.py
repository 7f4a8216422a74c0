"""Building a profile's plugin lists: instantiation, plugin args, multiPoint expansion and
score weights (upstream ``NewFramework``'s construction half, ``expandMultiPointPlugins``,
``getScoreWeights``).

Kept apart from the runtime that runs the plugins: this half runs once per profile at
startup and is where configuration errors are found, each as a ``PluginConfigError`` naming
the profile, the plugin and the field.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from scheduler.config.defaults import effective_plugins, merge_plugin_args
from scheduler.config.types import PluginRef, PluginSet, Profile
from scheduler.framework.errors import PluginConfigError, ProfileConfigErrors
from scheduler.framework.interfaces import EXTENSION_POINTS, Handle, Plugin, ScorePlugin
from scheduler.framework.registry import Registry, UnknownPluginError
from scheduler.framework.types import MAX_NODE_SCORE, MAX_TOTAL_SCORE


@dataclass
class BuiltProfile:
    """A profile's plugins by name, per extension point in run order, and score weights."""

    plugins: dict[str, Plugin] = field(default_factory=dict)
    points: dict[str, list[tuple[str, Plugin]]] = field(
        default_factory=lambda: {p: [] for p in EXTENSION_POINTS}
    )
    score_weights: dict[str, int] = field(default_factory=dict)


class ProfileBuilder:
    """Builds one profile's ``BuiltProfile``; every error names the profile."""

    def __init__(self, profile: Profile, registry: Registry, handle: Handle) -> None:
        self._profile = profile
        self._registry = registry
        self._handle = handle
        self._built = BuiltProfile()

    def _config_error(
        self, message: str, *, plugin: str = "", field: str = ""
    ) -> PluginConfigError:
        return PluginConfigError(
            profile=self._profile.scheduler_name, plugin=plugin, field=field, message=message
        )

    def build(self) -> BuiltProfile:
        plugins = effective_plugins(self._profile)
        sets: dict[str, PluginSet] = {point: plugins.get(point) for point in EXTENSION_POINTS}
        multi = plugins.multi_point
        built = self._built

        needed: dict[str, None] = {}
        for ps in (*sets.values(), multi):
            for ref in ps.enabled:
                needed.setdefault(ref.name, None)
        failed: list[PluginConfigError] = []
        for name in needed:
            try:
                built.plugins[name] = self.instantiate(name)
            except PluginConfigError as exc:  # build the others: report every bad plugin
                failed.append(exc)
        if failed:
            raise failed[0] if len(failed) == 1 else ProfileConfigErrors(failed)

        # Plugins configured at specific points (upstream updatePluginList).
        for point, ps in sets.items():
            kind = EXTENSION_POINTS[point]
            seen: set[str] = set()
            for ref in ps.enabled:
                plugin = built.plugins[ref.name]
                if not isinstance(plugin, kind):
                    raise self._config_error(
                        f"plugin does not implement the {point} extension point",
                        plugin=ref.name,
                        field=f"plugins.{point}.enabled",
                    )
                if ref.name in seen:
                    raise self._config_error(
                        f"plugin enabled more than once at {point}",
                        plugin=ref.name,
                        field=f"plugins.{point}.enabled",
                    )
                seen.add(ref.name)
                built.points[point].append((ref.name, plugin))

        if multi.enabled:
            self._expand_multi_point(sets, multi)

        if len(built.points["queueSort"]) != 1:
            raise self._config_error(
                "only one queue sort plugin required for profile, but got "
                f"{len(built.points['queueSort'])}",
                field="plugins.queueSort",
            )
        if not built.points["bind"]:
            raise self._config_error(
                "at least one bind plugin is needed for profile", field="plugins.bind"
            )
        self._set_score_weights([*sets["score"].enabled, *multi.enabled])
        return built

    def instantiate(self, name: str) -> Plugin:
        """The plugin ``name`` built with the profile's args for it; PluginConfigError names
        the profile, the plugin and the field."""
        try:
            factory = self._registry.get(name)
        except UnknownPluginError as exc:
            hint = f" (did you mean {exc.suggestion!r}?)" if exc.suggestion else ""
            raise self._config_error(f"plugin is not registered{hint}", plugin=name) from None
        except Exception as exc:  # a plugin module that fails to import
            raise self._config_error(f"cannot load plugin: {exc}", plugin=name) from exc
        args = merge_plugin_args(name, self._profile.plugin_config.get(name))
        try:
            plugin = factory(args, self._handle)
        except Exception as exc:
            raise self._args_error(name, exc) from exc
        if not isinstance(plugin, Plugin):
            raise self._config_error(
                f"factory returned {type(plugin).__name__}, not a Plugin", plugin=name
            )
        return plugin

    def _args_error(self, name: str, exc: Exception) -> PluginConfigError:
        """Name the profile, the plugin and the field of a plugin constructor's error.  Plugins
        raise ``ConfigError("", [(path, message)])`` (``plugins.helper.args_error``)."""
        errors = getattr(exc, "errors", None)
        if (
            isinstance(errors, list)
            and errors
            and all(isinstance(e, tuple) and len(e) == 2 for e in errors)
        ):
            field = str(errors[0][0])
            message = "; ".join(
                str(msg) if i == 0 else f"{path}: {msg}" for i, (path, msg) in enumerate(errors)
            )
            return self._config_error(message, plugin=name, field=field)
        field = getattr(exc, "field", "")
        message = str(exc) or type(exc).__name__
        return self._config_error(message, plugin=name, field=str(field) if field else "")

    def _expand_multi_point(self, sets: Mapping[str, PluginSet], multi: PluginSet) -> None:
        """Upstream ``expandMultiPointPlugins``: a multiPoint plugin joins every point it
        implements unless disabled there; a plugin also configured at that specific point keeps
        the specific entry (and its place) instead.  Resulting order: specific overrides of
        multiPoint plugins, then multiPoint plugins, then the other specific plugins."""
        built = self._built
        for point, ps in sets.items():
            disabled = ps.disabled_names()
            if "*" in disabled:
                continue
            kind = EXTENSION_POINTS[point]
            specific = [name for name, _ in built.points[point]]
            overrides: list[str] = []
            expanded: list[str] = []
            for ref in multi.enabled:
                plugin = built.plugins[ref.name]
                if not isinstance(plugin, kind) or ref.name in disabled:
                    continue
                if ref.name in specific:
                    if ref.name not in overrides:
                        overrides.append(ref.name)
                    continue
                if ref.name in expanded:
                    raise self._config_error(
                        f"plugin enabled more than once in multiPoint (expanding {point})",
                        plugin=ref.name,
                        field="plugins.multiPoint.enabled",
                    )
                expanded.append(ref.name)
            order = (
                [n for n in specific if n in overrides]
                + expanded
                + [n for n in specific if n not in overrides]
            )
            built.points[point] = [(n, built.plugins[n]) for n in order]

    def _set_score_weights(self, refs: Iterable[PluginRef]) -> None:
        """Upstream ``getScoreWeights``: the specific score entry wins over multiPoint's, a
        weight of 0 means 1, and the total must not overflow."""
        built = self._built
        total = 0
        for ref in refs:
            plugin = built.plugins.get(ref.name)
            if not isinstance(plugin, ScorePlugin) or ref.name in built.score_weights:
                continue
            weight = ref.weight or 1
            if weight * MAX_NODE_SCORE > MAX_TOTAL_SCORE - total:
                raise self._config_error(
                    "total score of Score plugins could overflow",
                    plugin=ref.name,
                    field="plugins.score",
                )
            built.score_weights[ref.name] = weight
            total += weight * MAX_NODE_SCORE
        for name, _ in built.points["score"]:
            built.score_weights.setdefault(name, 1)
