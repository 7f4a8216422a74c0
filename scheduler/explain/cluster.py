"""The cluster as the daemon would see it, loaded once, read-only.

``explain`` builds a real ``Scheduler`` (the daemon's wiring: informers, event handlers,
cache, queue, nominator, one framework per profile from the same config and registry) on a
client that refuses every verb but GET, lets its informers list everything once, and stops
them.  The scheduling loop never runs, so nothing is bound, evicted, patched or recorded;
and, read-only, it says nothing about what it would have written (another pod it cannot
parse is the daemon's to report, not explain's).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any

from scheduler.app import POD_FIELD_SELECTOR  # the daemon's pod informer: non-terminal pods
from scheduler.client.api import ApiClient, ApiResponse, NotFound
from scheduler.client.connection import ConnectionConfig
from scheduler.client.informer import InformerFactory
from scheduler.config.types import KubeSchedulerConfiguration
from scheduler.framework.registry import Registry
from scheduler.plugins.registry import in_tree_registry
from scheduler.scheduler import Scheduler

DEFAULT_SYNC_TIMEOUT = 60.0


class ReadOnlyViolation(RuntimeError):
    """Something tried to write to the API server during ``explain`` (a bug)."""


class ReadOnlyApiClient(ApiClient):
    """An ApiClient that only reads: any other verb raises before a request is sent."""

    async def request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        params: Mapping[str, str] | None = None,
        content_type: str = "application/json",
        discard_ok_body: bool = False,
    ) -> ApiResponse:
        if method.upper() not in ("GET", "HEAD"):
            raise ReadOnlyViolation(f"explain is read-only: refused {method.upper()} {path}")
        return await super().request(
            method, path, body=body, params=params, content_type=content_type,
            discard_ok_body=discard_ok_body,
        )


class _NoEvents:
    """Explain records no events."""

    def event(self, regarding: Mapping[str, Any], **_: Any) -> None:
        return None


async def _no_condition_update(*_: Any, **__: Any) -> None:
    raise ReadOnlyViolation("explain is read-only: refused a pod condition update")


class ClusterUnavailable(Exception):
    """The API server could not be listed within the timeout."""


@dataclass
class LoadedCluster:
    client: ApiClient
    scheduler: Scheduler


@contextlib.asynccontextmanager
async def load_cluster(
    connection: ConnectionConfig,
    config: KubeSchedulerConfiguration,
    *,
    registry: Registry | None = None,
    sync_timeout: float = DEFAULT_SYNC_TIMEOUT,
) -> AsyncIterator[LoadedCluster]:
    """A Scheduler whose cache and queue hold the cluster's current state (informers
    listed once, then stopped)."""
    client = ReadOnlyApiClient(connection, qps=0, user_agent="kube-py-scheduler-explain")
    try:
        informers = InformerFactory(client, pod_field_selector=POD_FIELD_SELECTOR)
        sched = Scheduler(
            config=config, client=client, informers=informers,
            recorder_factory=lambda _name: _NoEvents(),
            update_pod_condition=_no_condition_update,
            registry=registry if registry is not None else in_tree_registry(),
            read_only=True,
        )
        informers.start()
        try:
            synced = await informers.wait_for_cache_sync(sync_timeout)
        finally:
            await informers.stop()
        if not synced:
            raise ClusterUnavailable(
                f"could not list the cluster's objects within {sync_timeout:g}s"
            )
        try:
            yield LoadedCluster(client=client, scheduler=sched)
        finally:
            await sched.extenders.close()
    finally:
        await client.close()


async def get_pod(client: ApiClient, namespace: str, name: str) -> dict[str, Any] | None:
    try:
        pod: dict[str, Any] = await client.get(f"/api/v1/namespaces/{namespace}/pods/{name}")
    except NotFound:
        return None
    return pod

