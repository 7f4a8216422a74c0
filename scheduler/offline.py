"""Inert stand-ins for a Framework's Handle dependencies, for building plugins offline.

Constructing every profile's plugins before connecting is how bad plugin args are reported
at startup (exit 2) instead of after the informers have synced.  Plugin constructors must not
do I/O, so these stand-ins are never called; if one is, it fails loudly.
"""

from __future__ import annotations

import builtins
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from scheduler.framework.node_info import NodeInfo
from scheduler.objects.pod import PodInfo


class _OfflineError(RuntimeError):
    pass


class _EmptySnapshot:
    def list(self) -> list[NodeInfo]:
        return []

    def get(self, node_name: str) -> NodeInfo | None:
        return None

    def have_pods_with_affinity(self) -> builtins.list[NodeInfo]:
        return []

    def have_pods_with_required_anti_affinity(self) -> builtins.list[NodeInfo]:
        return []


class _EmptyListers:
    def get(self, resource: str, namespace: str, name: str) -> dict[str, Any] | None:
        return None

    def list(self, resource: str, namespace: str | None = None) -> list[dict[str, Any]]:
        return []

    def by_index(self, resource: str, index: str, value: str,
                 key: Callable[[dict[str, Any]], str | None]) -> builtins.list[dict[str, Any]]:
        return []


class _NoClient:
    async def request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        params: Mapping[str, str] | None = None,
        content_type: str = "application/json",
        discard_ok_body: bool = False,
    ) -> Any:
        raise _OfflineError("offline validation handle: no API requests allowed")


class _NoRecorder:
    def event(
        self,
        regarding: Mapping[str, Any],
        *,
        type: str,
        reason: str,
        action: str,
        message: str,
        related: Mapping[str, Any] | None = None,
    ) -> None:
        return None


class _NoNominator:
    def nominated_pods_for_node(self, node_name: str) -> list[PodInfo]:
        return []


def _no_activate(pods: Iterable[dict[str, Any]]) -> None:
    return None


def offline_handle_kwargs() -> dict[str, Any]:
    snapshot = _EmptySnapshot()
    return {
        "snapshot_provider": lambda: snapshot,
        "listers": _EmptyListers(),
        "client": _NoClient(),
        "event_recorder": _NoRecorder(),
        "nominator": _NoNominator(),
        "activate": _no_activate,
        "clock": time.monotonic,
        "metrics": None,
    }
