"""Reserve, Permit (and waiting on it), PreBind, Bind and PostBind: the runtime from the
chosen node to the binding (upstream ``RunReservePlugins*``, ``RunPermitPlugins``,
``WaitOnPermit``, ``RunPreBindPlugins``, ``RunBindPlugins``, ``RunPostBindPlugins``).

An extension point with no plugin in the profile still records its duration observation
(with the same result label), as zero seconds without reading the clock: these run once
per pod and most profiles leave some of them empty."""

from __future__ import annotations

import time

import structlog

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.errors import guard_error as _guard_error
from scheduler.framework.errors import rejection_or_error as _rejection_or_error
from scheduler.framework.instrumentation import (  # extension point labels, as upstream's
    BIND, PERMIT, POST_BIND, PRE_BIND, PRE_BIND_PRE_FLIGHT, RESERVE, UNRESERVE, timeout_first,
)
from scheduler.framework.runtime_base import RuntimeBase, plugin_raised
from scheduler.framework.status import Code, Status
from scheduler.framework.waiting_pods import MAX_PERMIT_TIMEOUT_SECONDS, WaitingPod
from scheduler.objects.pod import PodInfo

log = structlog.get_logger("scheduler.framework.runtime")


class BindingSteps(RuntimeBase):
    """Reserve, Permit, PreBind, Bind and PostBind of ``Framework``."""

    # --- Reserve / Permit ------------------------------------------------------------------

    def run_reserve_plugins_reserve(
        self, state: CycleState, pod_info: PodInfo, node_name: str
    ) -> Status | None:
        if not self._reserve:
            self._instr.unrun[RESERVE][0] += 1
            return None
        start = time.perf_counter()
        sampled = state.record_plugin_metrics
        final: Status | None = None
        for name, plugin in self._reserve:
            if sampled:
                s = self._instr.call(
                    RESERVE, name, sampled, pod_info.key, plugin.reserve, state, pod_info,
                    node_name,
                )
            else:  # the instrumented call without its timing: one call level less per plugin
                try:
                    s = plugin.reserve(state, pod_info, node_name)
                except Exception as exc:
                    s = plugin_raised(RESERVE, name, pod_info.key, exc)
            if s is not None and s.code != Code.SUCCESS:
                final = _rejection_or_error(s, "Reserve", name)
                break
        self._instr.observe_point(RESERVE, final, start)
        return final

    def run_reserve_plugins_unreserve(
        self, state: CycleState, pod_info: PodInfo, node_name: str
    ) -> None:
        """Unreserve every reserve plugin in reverse order; never raises."""
        if not self._reserve:
            self._instr.unrun[UNRESERVE][0] += 1
            return
        start = time.perf_counter()
        sampled = state.record_plugin_metrics
        for name, plugin in reversed(self._reserve):
            self._instr.call_quietly(
                UNRESERVE, name, sampled, pod_info.key, plugin.unreserve,
                state, pod_info, node_name,
            )
        self._instr.observe_point(UNRESERVE, None, start)

    def run_permit_plugins(
        self, state: CycleState, pod_info: PodInfo, node_name: str
    ) -> Status | None:
        """None when every plugin allows; Wait (the pod is registered as waiting, with one
        timer per waiting plugin) when some asked to wait and none rejected; the rejection
        or an Error otherwise.  Must run on the event loop when a plugin may answer Wait."""
        if not self._permit:
            self._instr.unrun[PERMIT][0] += 1
            return None
        start = time.perf_counter()
        sampled = state.record_plugin_metrics
        wait_times: dict[str, float] = {}
        final: Status | None = None
        for name, plugin in self._permit:
            timeout, s = self._instr.call_with_result(
                PERMIT, name, sampled, pod_info.key, timeout_first(plugin.permit),
                state, pod_info, node_name,
            )
            if s is None or s.code == Code.SUCCESS:
                continue
            if s.is_rejected():
                s.plugin = name
                final = s
                break
            if s.code == Code.WAIT:
                wait_times[name] = min(float(timeout or 0.0), MAX_PERMIT_TIMEOUT_SECONDS)
                continue
            final = _guard_error(s, f"running Permit plugin {name!r}", name)
            break
        if final is None and wait_times:
            try:
                self.waiting_pods.add(WaitingPod(pod_info, wait_times))
            except RuntimeError as exc:  # no running event loop to time the wait
                final = Status.from_error(exc)
        if final is None and wait_times:
            final = Status(
                Code.WAIT,
                f"one or more plugins asked to wait and no plugin rejected pod {pod_info.name!r}",
            )
        self._instr.observe_point(PERMIT, final, start)
        return final

    def will_wait_on_permit(self, pod_info: PodInfo) -> bool:
        """Whether the pod is waiting at Permit (upstream WillWaitOnPermit)."""
        return self.waiting_pods.get(pod_info.uid) is not None

    async def wait_on_permit(self, pod_info: PodInfo) -> Status | None:
        """Block until a waiting pod is allowed (None) or rejected; None if it is not waiting."""
        waiting_pod = self.waiting_pods.get(pod_info.uid)
        if waiting_pod is None:
            return None
        start = time.perf_counter()
        try:
            status = await waiting_pod.wait()
        finally:
            waiting_pod.cancel_timers()
            if self.waiting_pods.get(pod_info.uid) is waiting_pod:
                self.waiting_pods.remove(pod_info.uid)
        self._instr.observe_permit_wait(status, time.perf_counter() - start)
        if status is None or status.code == Code.SUCCESS:
            return None
        if status.is_rejected():
            return status
        return _guard_error(status, "waiting on permit for pod", status.plugin)

    # --- binding cycle ---------------------------------------------------------------------

    def run_pre_bind_pre_flights(
        self, state: CycleState, pod_info: PodInfo, node_name: str
    ) -> Status | None:
        """Ask every PreBind plugin whether its PreBind has work for the pod (upstream
        RunPreBindPreFlights): Success (None) when one or more will work, Skip when all skip
        (the skipped ones are remembered in ``state``, and their PreBind is not run), an
        Error when one fails or answers anything but Success, Skip or Error."""
        if not self._pre_bind:
            state.skip_pre_bind_plugins = set()
            final_skip = Status(Code.SKIP)
            self._instr.unrun[PRE_BIND_PRE_FLIGHT][0] += 1  # (Skip: final_skip's code)
            return final_skip
        start = time.perf_counter()
        sampled = state.record_plugin_metrics
        final: Status | None = None
        skipped: set[str] = set()
        work = False  # one or more answered Success
        for name, plugin in self._pre_bind:
            if sampled:
                s = self._instr.call(
                    PRE_BIND_PRE_FLIGHT, name, sampled, pod_info.key, plugin.pre_bind_pre_flight,
                    state, pod_info, node_name,
                )
            else:  # the instrumented call without its timing, as Reserve's
                try:
                    s = plugin.pre_bind_pre_flight(state, pod_info, node_name)
                except Exception as exc:
                    s = plugin_raised(PRE_BIND_PRE_FLIGHT, name, pod_info.key, exc)
            if s is None or s.code == Code.SUCCESS:
                work = True
            elif s.code == Code.SKIP:
                skipped.add(name)
            elif s.code == Code.ERROR:
                final = _guard_error(s, f"running PreBindPreFlight {name!r}", name)
                break
            else:
                final = Status(
                    Code.ERROR,
                    f"PreBindPreFlight {name} returned {s.code.label!r}, which is unsupported. "
                    "It is supposed to return Success, Skip, or Error status",
                    plugin=name,
                )
                break
        else:
            state.skip_pre_bind_plugins = skipped
            if not work:
                final = Status(Code.SKIP)
        self._instr.observe_point(PRE_BIND_PRE_FLIGHT, final, start)
        return final

    async def run_pre_bind_plugins(
        self, state: CycleState, pod_info: PodInfo, node_name: str
    ) -> Status | None:
        if not self._pre_bind:
            self._instr.unrun[PRE_BIND][0] += 1
            return None
        start = time.perf_counter()
        sampled = state.record_plugin_metrics
        final: Status | None = None
        skipped = state.skip_pre_bind_plugins
        for name, plugin in self._pre_bind:
            if name in skipped:
                continue
            s = await self._instr.call_async(
                PRE_BIND, name, sampled, pod_info.key, plugin.pre_bind, state, pod_info, node_name
            )
            if s is not None and s.code != Code.SUCCESS:
                final = _rejection_or_error(s, "PreBind", name)
                break
        self._instr.observe_point(PRE_BIND, final, start)
        return final

    async def run_bind_plugins(
        self, state: CycleState, pod_info: PodInfo, node_name: str
    ) -> Status | None:
        """The first bind plugin that does not Skip decides; Skip when all of them skip.
        An Error keeps its ``error`` (AlreadyBoundError, PodGoneError) for the caller."""
        start = time.perf_counter()
        sampled = state.record_plugin_metrics
        final: Status | None
        for name, plugin in self._bind:
            s = await self._instr.call_async(
                BIND, name, sampled, pod_info.key, plugin.bind, state, pod_info, node_name
            )
            if s is not None and s.code == Code.SKIP:
                continue
            if s is None or s.code == Code.SUCCESS:
                final = None
            elif s.is_rejected():
                s.plugin = name
                final = s
            else:
                final = _guard_error(s, f"running Bind plugin {name!r}", name)
            break
        else:
            final = Status(Code.SKIP)
        self._instr.observe_point(BIND, final, start)
        return final

    def run_post_bind_plugins(self, state: CycleState, pod_info: PodInfo, node_name: str) -> None:
        """Informational; never raises."""
        if not self._post_bind:
            self._instr.unrun[POST_BIND][0] += 1
            return
        start = time.perf_counter()
        sampled = state.record_plugin_metrics
        for name, plugin in self._post_bind:
            self._instr.call_quietly(
                POST_BIND, name, sampled, pod_info.key, plugin.post_bind,
                state, pod_info, node_name,
            )
        self._instr.observe_point(POST_BIND, None, start)
