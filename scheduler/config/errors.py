"""The single error type for configuration problems."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["ConfigError"]


class ConfigError(ValueError):
    """A broken KubeSchedulerConfiguration.

    ``str(err)`` is ``<source>: <field path>: <problem>`` (one line per problem when several
    were found), e.g. ``config.yaml: profiles[1].plugins.score.enabled[0].weight: must be a
    positive integer, got -3``. ``errors`` keeps the (path, message) pairs.
    """

    def __init__(self, source: str, errors: Sequence[tuple[str, str]]) -> None:
        self.source = source
        self.errors = list(errors)
        lines = []
        for path, msg in self.errors:
            parts = [p for p in (source, path) if p]
            lines.append(": ".join([*parts, msg]))
        super().__init__("\n".join(lines))
