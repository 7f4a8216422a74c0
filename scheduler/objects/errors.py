"""Errors raised while reading user objects (pods, nodes, PVs...).

Every parser in ``scheduler.objects`` reports bad input through :class:`ObjectError` so the
caller can log one line naming the object and the offending field and keep running.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["ObjectError", "describe_object"]


class ObjectError(ValueError):
    """A malformed field in a Kubernetes object.

    ``str(err)`` reads like ``Pod default/web-1: spec.containers[0].resources.requests.cpu:
    invalid quantity "abc": ...``.
    """

    def __init__(
        self,
        message: str,
        *,
        kind: str = "",
        namespace: str = "",
        name: str = "",
        field: str = "",
    ) -> None:
        self.kind = kind
        self.namespace = namespace
        self.name = name
        self.field = field
        self.detail = message
        super().__init__(self._render())

    def _render(self) -> str:
        parts: list[str] = []
        if self.kind or self.name:
            ident = f"{self.namespace}/{self.name}" if self.namespace else self.name
            parts.append(f"{self.kind} {ident}".strip())
        if self.field:
            parts.append(self.field)
        parts.append(self.detail)
        return ": ".join(parts)

    @classmethod
    def for_object(
        cls, obj: Mapping[str, Any] | None, field: str, message: str, *, kind: str = ""
    ) -> ObjectError:
        """Build an error naming ``obj`` (kind, namespace, name read from the dict)."""
        k, ns, n = describe_object(obj, kind=kind)
        return cls(message, kind=k, namespace=ns, name=n, field=field)


def describe_object(obj: Mapping[str, Any] | None, *, kind: str = "") -> tuple[str, str, str]:
    """Return (kind, namespace, name) of a raw object, tolerating garbage."""
    if not isinstance(obj, Mapping):
        return kind, "", ""
    k = kind or obj.get("kind") or ""
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping):
        return str(k), "", ""
    ns = meta.get("namespace") or ""
    n = meta.get("name") or ""
    return str(k), str(ns), str(n)
