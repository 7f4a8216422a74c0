"""Pods parked at Permit, waiting for plugins to allow them (gang scheduling) or time out.

A Permit plugin that answers Wait leaves the pod assumed on its node; the binding task then
awaits the WaitingPod before PreBind.  Each waiting plugin has its own timer; the first timer
that fires rejects the pod, ``allow`` from every pending plugin lets it through, and ``reject``
from anyone (a plugin, the pod's deletion) fails it.  Everything runs on the event loop, so no
locks are needed; timers are ``loop.call_later`` handles, which tests can drive with a fake loop
clock or short timeouts.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Mapping

from scheduler.framework.status import Code, Status
from scheduler.objects.pod import PodInfo

# Upstream caps a Permit plugin's timeout at 15 minutes.
MAX_PERMIT_TIMEOUT_SECONDS = 15 * 60.0

TIMEOUT_REASON = "rejected due to timeout after waiting {timeout} at plugin {plugin}"


def format_go_duration(seconds: float) -> str:
    """Format like Go's ``time.Duration.String`` (``10s``, ``1m30s``, ``500ms``, ``15m0s``)."""
    ns = round(seconds * 1e9)
    if ns == 0:
        return "0s"
    sign = "-" if ns < 0 else ""
    ns = abs(ns)
    if ns < 1_000:
        return f"{sign}{ns}ns"
    if ns < 1_000_000:
        return f"{sign}{_fraction(ns, 1_000)}µs"
    if ns < 1_000_000_000:
        return f"{sign}{_fraction(ns, 1_000_000)}ms"
    hours, rest = divmod(ns, 3600 * 1_000_000_000)
    minutes, rest = divmod(rest, 60 * 1_000_000_000)
    out = sign
    if hours:
        out += f"{hours}h"
    if hours or minutes:
        out += f"{minutes}m"
    return out + f"{_fraction(rest, 1_000_000_000)}s"


def _fraction(value: int, unit: int) -> str:
    whole, frac = divmod(value, unit)
    if not frac:
        return str(whole)
    digits = str(frac).rjust(len(str(unit)) - 1, "0").rstrip("0")
    return f"{whole}.{digits}"


class WaitingPod:
    """A pod waiting at Permit.  Implements ``interfaces.WaitingPod``."""

    __slots__ = ("_pod_info", "_loop", "_future", "_pending")

    def __init__(
        self,
        pod_info: PodInfo,
        plugin_timeouts: Mapping[str, float],
        *,
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        self._pod_info = pod_info
        self._loop = loop if loop is not None else asyncio.get_running_loop()
        self._future: asyncio.Future[Status | None] = self._loop.create_future()
        self._pending: dict[str, asyncio.TimerHandle] = {}
        for plugin, timeout in plugin_timeouts.items():
            timeout = min(max(timeout, 0.0), MAX_PERMIT_TIMEOUT_SECONDS)
            self._pending[plugin] = self._loop.call_later(
                timeout, self._on_timeout, plugin, timeout
            )

    @property
    def pod_info(self) -> PodInfo:
        return self._pod_info

    @property
    def uid(self) -> str:
        return self._pod_info.uid

    def pending_plugins(self) -> list[str]:
        return list(self._pending)

    def done(self) -> bool:
        """Whether the pod was allowed or rejected already."""
        return self._future.done()

    def allow(self, plugin: str) -> None:
        """``plugin`` allows the pod; once no plugin is pending, the pod may proceed."""
        timer = self._pending.pop(plugin, None)
        if timer is not None:
            timer.cancel()
        if not self._pending:
            self._resolve(None)

    def reject(self, plugin: str, message: str) -> None:
        """Fail the pod at once with ``Unschedulable: message`` (first answer wins)."""
        for timer in self._pending.values():
            timer.cancel()
        self._resolve(Status(Code.UNSCHEDULABLE, message, plugin=plugin))

    async def wait(self) -> Status | None:
        """The outcome: None when every plugin allowed, else the rejection."""
        return await self._future

    def cancel_timers(self) -> None:
        for timer in self._pending.values():
            timer.cancel()

    def _on_timeout(self, plugin: str, timeout: float) -> None:
        self.reject(
            plugin,
            TIMEOUT_REASON.format(timeout=format_go_duration(timeout), plugin=plugin),
        )

    def _resolve(self, status: Status | None) -> None:
        if not self._future.done():
            self._future.set_result(status)

    def __repr__(self) -> str:
        return f"WaitingPod({self._pod_info.key}, pending={self.pending_plugins()})"


class WaitingPodsMap:
    """Waiting pods by UID, shared by every profile of a scheduler (as upstream)."""

    __slots__ = ("_pods",)

    def __init__(self) -> None:
        self._pods: dict[str, WaitingPod] = {}

    def add(self, waiting_pod: WaitingPod) -> None:
        previous = self._pods.get(waiting_pod.uid)
        if previous is not None and previous is not waiting_pod:
            # A stale entry would keep its timers alive and could reject the new attempt.
            previous.cancel_timers()
        self._pods[waiting_pod.uid] = waiting_pod

    def get(self, uid: str) -> WaitingPod | None:
        return self._pods.get(uid)

    def remove(self, uid: str) -> WaitingPod | None:
        return self._pods.pop(uid, None)

    def iterate(self) -> list[WaitingPod]:
        """A snapshot list, so callers may allow/reject (and thus remove) while iterating."""
        return list(self._pods.values())

    def __iter__(self) -> Iterator[WaitingPod]:
        return iter(self.iterate())

    def __len__(self) -> int:
        return len(self._pods)

    def __contains__(self, uid: object) -> bool:
        return uid in self._pods
