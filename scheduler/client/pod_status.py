"""The PodScheduled condition and nominatedNodeName users see on a pending pod.

Mirrors kube-scheduler's ``updatePod``: compute the new status with
``podutil.UpdatePodCondition`` semantics and send a strategic-merge patch to ``pods/status`` only
when something changed, so a pod failing the same way every backoff does not cost a write.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable, Mapping
from datetime import datetime, timezone
from typing import Any, Protocol

import structlog

from scheduler.client.api import ApiClient, ApiConnectionError, ServerError, Sleep, TooManyRequests

log = structlog.get_logger(__name__)


def _now_rfc3339(now: datetime) -> str:
    return now.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def compute_condition(
    status: Mapping[str, Any], condition: Mapping[str, Any], *, now: datetime
) -> tuple[dict[str, Any], bool]:
    """The condition to write and whether it differs from the pod's current one.

    ``lastTransitionTime`` is now when the condition is new or its status flips, and kept
    otherwise; ``lastProbeTime`` is whatever the caller set (kube-scheduler leaves it null).
    """
    new = dict(condition)
    new["lastTransitionTime"] = _now_rfc3339(now)
    new.setdefault("lastProbeTime", None)
    old = next(
        (c for c in status.get("conditions") or [] if c.get("type") == new.get("type")),
        None,
    )
    if old is None:
        return new, True
    if old.get("status") == new.get("status"):
        new["lastTransitionTime"] = old.get("lastTransitionTime")
    changed = any(
        (old.get(f) or None) != (new.get(f) or None)
        for f in ("status", "reason", "message", "lastProbeTime", "lastTransitionTime")
    )
    return new, changed


async def update_pod_condition(
    client: ApiClient,
    pod: Mapping[str, Any],
    *,
    condition: dict[str, Any],
    nominated_node_name: str | None = None,
    now: Callable[[], datetime] = lambda: datetime.now(timezone.utc),
    retries: int = 3,
    sleep: Sleep = asyncio.sleep,
) -> dict[str, Any] | None:
    """Patch ``pod``'s condition (and nominatedNodeName) if they changed.

    ``nominated_node_name``: ``None`` leaves it alone, ``""`` clears it, a name sets it.
    Returns the patched pod, or ``None`` when nothing needed writing.  Retries connection
    errors, 5xx and 429 (``retries`` times); other API errors (e.g. ``NotFound``) are raised.
    """
    status = pod.get("status") or {}
    new_condition, changed = compute_condition(status, condition, now=now())
    current_nnn = status.get("nominatedNodeName") or ""
    nnn_changed = nominated_node_name is not None and nominated_node_name != current_nnn
    if not changed and not nnn_changed:
        return None
    patch_status: dict[str, Any] = {}
    if changed:
        # Strategic merge merges conditions by "type": only ours is touched.
        patch_status["conditions"] = [new_condition]
    if nnn_changed:
        patch_status["nominatedNodeName"] = nominated_node_name or None
    patch = {"status": patch_status}
    return await _patch_status(client, pod, patch, retries=retries, sleep=sleep)


class StatusPatcher(Protocol):
    async def patch_pod_status(
        self, namespace: str, name: str, patch: Mapping[str, Any]
    ) -> Any: ...


async def update_nominated_node_name(
    client: StatusPatcher,
    pod: Mapping[str, Any],
    node_name: str,
    *,
    always: bool = False,
    retries: int = 3,
    sleep: Sleep = asyncio.sleep,
) -> dict[str, Any] | None:
    """Patch only ``status.nominatedNodeName`` (``""`` clears it) if it differs from the pod's
    (upstream updatePod with a nominating info and no condition).  Returns the patched pod,
    or ``None`` when nothing needed writing (``always`` writes even when ``pod`` may be an
    older version than the server's).  Retries as ``update_pod_condition``."""
    if not always and ((pod.get("status") or {}).get("nominatedNodeName") or "") == node_name:
        return None
    patch = {"status": {"nominatedNodeName": node_name or None}}
    return await _patch_status(client, pod, patch, retries=retries, sleep=sleep)


async def _patch_status(
    client: StatusPatcher,
    pod: Mapping[str, Any],
    patch: Mapping[str, Any],
    *,
    retries: int,
    sleep: Sleep,
) -> dict[str, Any]:
    """PATCH ``pods/status`` with ``patch``, retrying connection errors, 5xx and 429
    (``retries`` times, exponential pause); other API errors are raised.  Returns the patched
    pod (a copy of ``pod`` when the client answers no object)."""
    meta = pod.get("metadata") or {}
    name = str(meta.get("name") or "")
    namespace = str(meta.get("namespace") or "default")
    attempt = 0
    while True:
        attempt += 1
        try:
            result = await client.patch_pod_status(namespace, name, patch)
            return result if isinstance(result, dict) else copy.deepcopy(dict(pod))
        except (ApiConnectionError, ServerError, TooManyRequests) as exc:
            if attempt > retries:
                raise
            log.debug("retrying pod status patch", pod=f"{namespace}/{name}", error=str(exc))
            await sleep(0.1 * 2**attempt)
