"""Wiring: profiles → frameworks, informers → handlers → cache/queue, and the run loop.

One ``Scheduler`` owns every long-lived piece and the single stop path.  The scheduling loop
pops one pod at a time and runs its scheduling cycle synchronously; binding cycles run as
named asyncio tasks so the next pod is scheduled while earlier ones are being bound.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import random
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from typing import Any, cast

import structlog

from scheduler.cache.cache import Cache
from scheduler.cache.snapshot import Snapshot
from scheduler.client.api import NotFound
from scheduler.client.api_dispatcher import (
    ApiDispatcher,
    CallOverwritten,
    CallSkipped,
    PodBindingCall,
    PodStatusPatchCall,
)
from scheduler.client.informer import InformerFactory
from scheduler.client.pod_status import StatusPatcher, update_nominated_node_name
from scheduler.client.slots import Slots
from scheduler.config import features
from scheduler.config.load import apply_extender_ignored_resources
from scheduler.config.types import KubeSchedulerConfiguration
from scheduler.eventhandlers import MOVE_ONLY_RESOURCES, EventHandlers
from scheduler.extenders import EXTENDER_NAME, Extenders
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.events import ActionType, ClusterEvent, EventResource, QueueingHintFn
from scheduler.framework.interfaces import ApiClient, EventRecorder
from scheduler.framework.registry import Registry
from scheduler.framework.runtime import Framework
from scheduler.framework.status import Code, Status
from scheduler.framework.types import QueuedPodInfo
from scheduler.framework.waiting_pods import WaitingPodsMap
from scheduler.explain.diagnoses import DiagnosisStore
from scheduler.metrics import Children, SchedulerMetrics
from scheduler.objects.errors import ObjectError
from scheduler.objects.pod import PodInfo
from scheduler.queue.nominator import Nominator
from scheduler.queue.scheduling_queue import SchedulingQueue
from scheduler.schedule_one import SchedulingCycle
from scheduler.server import HealthState

log = structlog.get_logger(__name__)

# Bind POSTs in flight at once; the client's QPS limiter is the real throttle.
DEFAULT_MAX_CONCURRENT_BINDS = 64
# How long a graceful stop waits for in-flight binding cycles.
DEFAULT_STOP_GRACE_SECONDS = 10.0
SCHEDULED_REASON = "Scheduled"
FAILED_SCHEDULING_REASON = "FailedScheduling"


# Cycles run back to back before the event loop runs informers and binding tasks: at most
# this many, and no longer than CYCLE_RUN_SECONDS (the scheduler's clock).  Upstream's
# scheduling loop is a goroutine beside the informers; here the loop's I/O between two
# cycles (watch decoding, HTTP writes, the informers' handlers) evicts the cycle's working
# set (NodeInfos, kept windows and scores) from the CPU caches, and a cycle run after it cost
# up to twice one run right after another (docs/benchmarks.md, issue 23's fourth round).
CYCLES_PER_YIELD = 16
CYCLE_RUN_SECONDS = 0.004


class LostLeadershipError(Exception):
    """Raised inside binding cycles once the lease is lost: never bind without it."""


def _always() -> bool:
    return True


# The binds in flight: a counter (``client.slots``), not an ``asyncio.Semaphore``.
BindSlots = Slots


RecorderFactory = Callable[[str], EventRecorder]
PodConditionWriter = Callable[..., Coroutine[Any, Any, Any]]


class Scheduler:
    def __init__(
        self,
        *,
        config: KubeSchedulerConfiguration,
        client: ApiClient,
        informers: InformerFactory,
        recorder_factory: RecorderFactory,
        update_pod_condition: PodConditionWriter,
        registry: Registry,
        metrics: SchedulerMetrics | None = None,
        clock: Callable[[], float] = time.monotonic,
        rng: random.Random | None = None,
        max_concurrent_binds: int = DEFAULT_MAX_CONCURRENT_BINDS,
        health: HealthState | None = None,
        read_only: bool = False,
    ) -> None:
        self.config = config
        # A Scheduler that only looks (explain's): it tells no pod's owner anything, so a
        # malformed pod it meets is neither logged nor written about (it never runs a cycle).
        self.read_only = read_only
        self.client = client
        self.informers = informers
        # Always real metrics (a private registry when the caller has none): no None guards.
        self.metrics = metrics = metrics if metrics is not None else SchedulerMetrics()
        # Per-pod metric updates go through cached children (see metrics.Children).
        self._bind_results = Children(metrics.bind_requests)
        # (result, profile) -> the attempts counter's and duration histogram's children: one
        # lookup per attempt for both.
        self._attempt_children: dict[tuple[str, str], tuple[Any, Any]] = {}
        self._sli_durations = Children(metrics.pod_scheduling_sli_duration)
        self._pod_attempts = metrics.pod_scheduling_attempts.labels()
        self.clock = clock
        self.rng = rng or random.Random()
        self.health = health or HealthState()
        self._update_pod_condition = update_pod_condition
        self._bind_slots = Slots(max_concurrent_binds, what="bind slots")
        self._binding_tasks: dict[str, asyncio.Task[None]] = {}
        self._side_tasks: set[asyncio.Task[Any]] = set()
        self._leading = True
        # Whether the leader lease is still ours by the local clock (``lease_check``, set by
        # the app when it elects; None: no leader election, always ours).
        self._lease_check: Callable[[], bool] | None = None
        self._stopping = False
        self.cache = Cache(clock=clock, metrics=metrics)
        self.snapshot = Snapshot()
        self.nominator = Nominator(pod_lookup=self.current_pod)
        self.recorders: dict[str, EventRecorder] = {}
        # The last failed attempt of each pending pod, for /debug/pods and explain.
        self.diagnoses = DiagnosisStore()
        # One map for all profiles, as upstream: a pod waiting at Permit is found by UID
        # whichever profile put it there.
        waiting_pods = self._waiting_pods = WaitingPodsMap()

        # Configs built in code get the extenders' ignored resources too (load does it for
        # files); idempotent.
        apply_extender_ignored_resources(config)
        self.profiles: dict[str, Framework] = {}
        for profile in config.profiles:
            recorder = recorder_factory(profile.scheduler_name)
            self.recorders[profile.scheduler_name] = recorder
            self.profiles[profile.scheduler_name] = Framework(
                profile=profile,
                registry=registry,
                snapshot_provider=lambda: self.snapshot,
                listers=informers.listers,
                client=client,
                event_recorder=recorder,
                nominator=self.nominator,
                activate=self._activate,
                clock=clock,
                metrics=metrics,
                waiting_pods=waiting_pods,
                rng=self.rng,
            )
        first = next(iter(self.profiles.values()))
        # Extenders are global (not per profile); they have no cluster events, so a pod one
        # rejected is requeued by any event, as upstream registers them.
        self.extenders = Extenders(config.extenders, metrics=metrics)
        extender_hints: list[tuple[ClusterEvent, str, QueueingHintFn | None]] = (
            [(ClusterEvent(EventResource.WILDCARD, ActionType.ALL, "*"), EXTENDER_NAME, None)]
            if self.extenders else []
        )
        self.queue = SchedulingQueue(
            less=first.queue_sort_less,
            sort_key=first.queue_sort_key,
            pre_enqueue=self._run_pre_enqueue,
            hints={name: fwk.events_to_register() + extender_hints
                   for name, fwk in self.profiles.items()},
            profile_of=self._profile_of,
            pod_initial_backoff=float(config.pod_initial_backoff_seconds),
            pod_max_backoff=float(config.pod_max_backoff_seconds),
            clock=clock,
            metrics=metrics,
            nominator=self.nominator,
        )
        self.cycle = SchedulingCycle(self)
        self.handlers = EventHandlers(self)
        # SchedulerAsyncAPICalls: status patches, nominations and bindings go through one
        # dispatcher, coalesced per pod.  It runs as many calls at once as binding cycles may
        # bind (upstream: `parallelism`), so binding throughput is not lowered by it.
        self.api_dispatcher: ApiDispatcher | None = None
        if features.DEFAULT.enabled("SchedulerAsyncAPICalls") and not read_only:
            self.api_dispatcher = ApiDispatcher(
                parallelism=max(config.parallelism, max_concurrent_binds), metrics=metrics)
        self._register_handlers()

    # --- wiring ----------------------------------------------------------------------------

    def _register_handlers(self) -> None:
        h = self.handlers
        self.informers.informer("pods").add_handler(
            on_add=h.on_pod_add, on_update=h.on_pod_update, on_delete=h.on_pod_delete
        )
        self.diagnoses.watch(self.informers.informer("pods"))
        dispatcher = self.api_dispatcher
        if dispatcher is not None:
            # A newer pod rebases its queued status patch (upstream's SyncObject): a patch the
            # new version already shows is dropped.
            self.informers.informer("pods").add_handler(
                on_update=dispatcher.sync_update, on_delete=dispatcher.forget_object)
        self.informers.informer("nodes").add_handler(
            on_add=h.on_node_add, on_update=h.on_node_update, on_delete=h.on_node_delete
        )
        for resource, (add, update, delete) in MOVE_ONLY_RESOURCES.items():
            on_add, on_update, on_delete = h.mover(add, update, delete)
            self.informers.informer(resource).add_handler(
                on_add=on_add, on_update=on_update, on_delete=on_delete
            )

    def _profile_of(self, pod: dict[str, Any]) -> str:
        return str((pod.get("spec") or {}).get("schedulerName") or "default-scheduler")

    def framework_for_pod(self, pod: dict[str, Any]) -> Framework | None:
        return self.profiles.get(self._profile_of(pod))

    def _run_pre_enqueue(self, pod_info: PodInfo) -> Status | None:
        fwk = self.profiles.get(pod_info.scheduler_name)  # (framework_for_pod, parsed)
        if fwk is None:
            return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "no profile for this pod")
        return fwk.run_pre_enqueue_plugins(pod_info)

    def _activate(self, pods: Iterable[dict[str, Any]]) -> None:
        self.queue.activate(pods)

    def current_pod(self, pod: dict[str, Any]) -> dict[str, Any] | None:
        """The informer's latest copy of this pod (None if it is gone or was recreated)."""
        meta = pod.get("metadata") or {}
        latest: dict[str, Any] | None = self.informers.informer("pods").store.get_by_key(
            f"{meta.get('namespace', '')}/{meta.get('name', '')}"
        )
        if latest is None or latest["metadata"].get("uid") != meta.get("uid"):
            return None
        return latest

    def has_nominated_pods(self) -> bool:
        return self.nominator.has_nominated_pods()

    def reject_waiting_pod(self, uid: str) -> bool:
        if self._waiting_pods.get(uid) is None:
            return False  # (every bound or deleted pod asks; nearly none waits at Permit)
        # The waiting-pods map is shared, so asking one framework is enough.
        return next(iter(self.profiles.values())).reject_waiting_pod(uid)

    def is_binding(self, uid: str) -> bool:
        return uid in self._binding_tasks

    # --- leadership --------------------------------------------------------------------------

    @property
    def lease_check(self) -> Callable[[], bool]:
        """Whether the leader lease is still ours by the local clock."""
        return self._lease_check or _always

    @lease_check.setter
    def lease_check(self, check: Callable[[], bool]) -> None:
        self._lease_check = check

    def check_still_leading(self) -> None:
        """Raise LostLeadershipError once leadership is lost.  Called before PreBind and
        right before the binders run (after any wait for a bind slot or behind another
        call of the pod): never bind without the lease."""
        lease = self._lease_check
        if not self._leading or (lease is not None and not lease()):
            raise LostLeadershipError("lost the leader lease; refusing to bind")

    def lose_leadership(self) -> None:
        """Stop binding at once: cancel every in-flight binding cycle."""
        self._leading = False
        for task in list(self._binding_tasks.values()):
            task.cancel()
        self.queue.close()

    # --- binding -----------------------------------------------------------------------------

    def start_binding(self, coro: Coroutine[Any, Any, None], *, uid: str, name: str) -> None:
        """Run a binding cycle as a named task, tracked by pod UID until it ends."""
        # The loop's create_task with the name (asyncio.create_task is a wrapper that names
        # the task after making it: two Python calls more per pod).
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self._binding_tasks[uid] = task

        def done(t: asyncio.Task[None]) -> None:
            self._binding_tasks.pop(uid, None)
            if not t.cancelled() and t.exception() is not None:
                log.error("binding task crashed", task=name, error=repr(t.exception()))

        task.add_done_callback(done)

    async def bind(
        self, fwk: Framework, state: CycleState, pod_info: PodInfo, node_name: str
    ) -> Status | None:
        slots = self._bind_slots
        if not slots.try_take():
            await slots.take()
        try:
            # After the wait for a slot, if any; the binders run with no wait after this
            # check unless the dispatcher queues the binding (then they check again).
            self.check_still_leading()
            dispatcher = self.api_dispatcher
            if dispatcher is None:
                status = await self._run_binders(fwk, state, pod_info, node_name)
            else:
                # The binding outranks any status patch of the pod still queued (dropped) and
                # waits for one being written.  Nothing queued and a slot free: it runs now,
                # in this task (the dispatcher's run_now): the Bind plugins' coroutine itself
                # when no extender binds (what _run_binders would await, one level less).
                uid = pod_info.uid
                try:
                    if dispatcher.would_run_now(uid):
                        binders = (
                            functools.partial(self._run_binders, fwk, state, pod_info, node_name)
                            if self.extenders.all else
                            functools.partial(fwk.run_bind_plugins, state, pod_info, node_name))
                        status = await dispatcher.run_now(PodBindingCall(uid, binders))
                    else:
                        status = await dispatcher.add(PodBindingCall(uid, functools.partial(
                            self._run_binders_checked, fwk, state, pod_info, node_name)))
                except (CallSkipped, CallOverwritten) as exc:
                    status = Status(Code.ERROR, f"binding not executed: {exc}")
        finally:
            slots.give()
        result = "success" if status is None or status.is_success() else "error"
        self._bind_results(result).inc()
        return status

    async def _run_binders_checked(
        self, fwk: Framework, state: CycleState, pod_info: PodInfo, node_name: str
    ) -> Status | None:
        """The binders of a binding the dispatcher queued: leadership is checked again when
        its turn comes."""
        self.check_still_leading()
        return await self._run_binders(fwk, state, pod_info, node_name)

    async def _run_binders(
        self, fwk: Framework, state: CycleState, pod_info: PodInfo, node_name: str
    ) -> Status | None:
        # An interested binder extender binds instead of the Bind plugins (upstream).
        status = await self.extenders.bind(pod_info, node_name) if self.extenders.all else None
        if status is None:
            status = await fwk.run_bind_plugins(state, pod_info, node_name)
        return status

    def _status_patch(
        self, pod: dict[str, Any], *, conditions: list[dict[str, Any]] | None = None,
        nominated_node_name: str | None = None, always: bool = False,
    ) -> PodStatusPatchCall:
        return PodStatusPatchCall(pod, client=self._status_patcher(), conditions=conditions,
                                  nominated_node_name=nominated_node_name, always=always)

    async def nominate_for_binding(self, pod_info: PodInfo, node_name: str) -> bool:
        """Write ``status.nominatedNodeName = node_name`` before a binding cycle that will take
        long (NominatedNodeNameForExpectation), so other components (cluster autoscaler) see
        where the pod is about to go.  True when the pod is nominated there; a failure is
        logged and binding goes on, as upstream (it is not worth stopping a binding)."""
        try:
            if self.api_dispatcher is None:
                await update_nominated_node_name(self._status_patcher(), pod_info.pod, node_name)
            else:
                pod = self.current_pod(pod_info.pod) or pod_info.pod
                with contextlib.suppress(CallSkipped, CallOverwritten):
                    # Skipped: the pod shows the nomination already; overwritten: a newer
                    # patch of the pod carries it.
                    await self.api_dispatcher.add(
                        self._status_patch(pod, nominated_node_name=node_name))
        except NotFound:
            # Deleted while binding (a user's or a controller's delete): nothing is wrong
            # with the scheduler; the binding fails on its own and is not retried.
            log.info("pod deleted before its nomination was written", pod=pod_info.key,
                     nominated_node_name=node_name)
            return False
        except Exception as exc:
            log.error("failed to update the nominated node name in the binding cycle",
                      pod=pod_info.key, nominated_node_name=node_name, error=str(exc))
            return False
        return True

    def _status_patcher(self) -> StatusPatcher:
        # The daemon's client is scheduler.client.api.ApiClient (pods/status patches).
        return cast(StatusPatcher, self.client)

    def clear_nomination(
        self, pod: dict[str, Any], *, after: Awaitable[bool] | None = None
    ) -> None:
        """Clear ``status.nominatedNodeName`` in the background, after the nominating write
        ``after`` if it is still under way (a binding cycle that nominated the pod failed and
        the failure handler's pod did not show the nomination), unless the pod is gone or
        bound meanwhile."""
        meta = pod.get("metadata") or {}
        key = f"{meta.get('namespace', '')}/{meta.get('name', '')}"

        async def clear() -> None:
            if after is not None and not await after:
                return
            current = self.current_pod(pod)
            if current is None or (current.get("spec") or {}).get("nodeName"):
                return
            if self.api_dispatcher is None:
                await update_nominated_node_name(self._status_patcher(), current, "", always=True)
            else:
                with contextlib.suppress(CallSkipped, CallOverwritten):
                    await self.api_dispatcher.add(
                        self._status_patch(current, nominated_node_name="", always=True))

        self._spawn_side_task(clear(), name=f"pod-nomination:{key}")

    # --- reporting ---------------------------------------------------------------------------

    def record_attempt(self, profile: str, result: str, started: float) -> None:
        children = self._attempt_children.get((result, profile))
        if children is None:
            children = self._attempt_children[result, profile] = (
                self.metrics.schedule_attempts.labels(result, profile),
                self.metrics.scheduling_attempt_duration.labels(result, profile))
        children[0].inc()
        children[1].observe(time.perf_counter() - started)

    def record_scheduled(self, qpi: QueuedPodInfo) -> None:
        attempts = max(qpi.attempts, 1)
        self._pod_attempts.observe(attempts)
        if qpi.initial_attempt_timestamp is not None:
            self._sli_durations(str(attempts)).observe(
                max(0.0, self.clock() - qpi.initial_attempt_timestamp)
            )

    def report_scheduled(self, pod_info: PodInfo, node_name: str, *,
                         profile: str | None = None) -> None:
        """The ``Scheduled`` event; ``profile``: the pod's profile when the caller knows it."""
        recorder = self.recorders.get(profile or self._profile_of(pod_info.pod))
        if recorder is not None:
            recorder.event(
                pod_info.pod, type="Normal", reason=SCHEDULED_REASON, action="Binding",
                message=f"Successfully assigned {pod_info.key} to {node_name}",
            )

    def report_unschedulable(
        self,
        fwk: Framework,
        pod_info: PodInfo,
        *,
        reason: str,
        message: str,
        nominated_node: str | None,
        plugins: list[str],
    ) -> None:
        recorder = self.recorders.get(fwk.profile_name)
        if recorder is not None:
            recorder.event(
                pod_info.pod, type="Warning", reason=FAILED_SCHEDULING_REASON,
                action="Scheduling", message=message,
            )
        condition = {
            "type": "PodScheduled",
            "status": "False",
            "reason": reason,
            "message": message,
        }
        if self.api_dispatcher is not None:
            # None leaves status.nominatedNodeName alone, "" clears it.
            self.api_dispatcher.add(self._status_patch(
                pod_info.pod, conditions=[condition], nominated_node_name=nominated_node))
            return
        self._spawn_side_task(
            self._update_pod_condition(
                self.client, pod_info.pod, condition=condition,
                # None leaves status.nominatedNodeName alone, "" clears it.
                nominated_node_name=nominated_node,
            ),
            name=f"pod-condition:{pod_info.key}",
        )

    def report_malformed_pod(self, pod: dict[str, Any], error: ObjectError) -> None:
        """A pod we cannot parse: tell its owner precisely, never crash."""
        if self.read_only:
            return
        meta = pod.get("metadata") or {}
        key = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
        log.warning("cannot schedule malformed pod", pod=key, error=str(error))
        recorder = self.recorders.get(self._profile_of(pod))
        message = f"pod is malformed and cannot be scheduled: {error}"
        if recorder is not None:
            recorder.event(
                pod, type="Warning", reason=FAILED_SCHEDULING_REASON, action="Scheduling",
                message=message,
            )
        condition = {
            "type": "PodScheduled",
            "status": "False",
            "reason": "SchedulerError",
            "message": message,
        }
        if self.api_dispatcher is not None:
            self.api_dispatcher.add(self._status_patch(pod, conditions=[condition]))
            return
        self._spawn_side_task(
            self._update_pod_condition(self.client, pod, condition=condition),
            name=f"pod-condition:{key}",
        )

    def _spawn_side_task(self, coro: Coroutine[Any, Any, Any], *, name: str) -> None:
        task = asyncio.create_task(coro, name=name)
        self._side_tasks.add(task)

        def done(t: asyncio.Task[Any]) -> None:
            self._side_tasks.discard(t)
            if not t.cancelled() and t.exception() is not None:
                log.warning("side task failed", task=name, error=repr(t.exception()))

        task.add_done_callback(done)

    # --- run / stop --------------------------------------------------------------------------

    async def wait_for_sync(self, timeout: float | None = None) -> None:
        await self.informers.wait_for_cache_sync(timeout)
        self.health.synced = True

    async def run(self, *, iterations: int | None = None) -> None:
        """Schedule pods until stopped (or for ``iterations`` pops, for tests)."""
        queue_task = asyncio.create_task(self.queue.run(), name="scheduling-queue-flush")
        cache_task = asyncio.create_task(self.cache.run(), name="scheduler-cache-maintenance")
        clock = self.clock
        try:
            done = 0
            run = 0  # cycles since the loop last ran other tasks
            run_started = clock()
            while not self._stopping and (iterations is None or done < iterations):
                qpi = await self.queue.pop()
                if qpi is None:
                    break
                done += 1
                if not self._leading:
                    break
                if not self.lease_check():
                    # Not renewed within the renew deadline (the process was paused): a
                    # standby may lead already, so stop here rather than schedule.
                    log.error("the leader lease was not renewed within the renew deadline; "
                              "stopping scheduling")
                    self.lose_leadership()
                    break
                started = time.perf_counter()
                pending = self.cycle.schedule_one(qpi)
                if pending is not None:
                    # An extender is interested: its calls are awaited here, one cycle at
                    # a time as always, while informers and binding tasks go on.
                    await pending
                await self._pod_group_pass(qpi, started=started)
                # Let informers and binding tasks run, every few cycles (pop returns a ready
                # pod without yielding; it waits, and the loop runs them, when none is).
                run += 1
                if run >= CYCLES_PER_YIELD or clock() - run_started >= CYCLE_RUN_SECONDS:
                    await asyncio.sleep(0)
                    run = 0
                    run_started = clock()
        finally:
            for task in (queue_task, cache_task):
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    def _holds_a_place(self, fwk: Framework, uid: str) -> bool:
        """The pod's attempt got it a node: waiting at Permit, or binding."""
        return fwk.get_waiting_pod(uid) is not None or self.is_binding(uid)

    async def _pod_group_pass(self, qpi: QueuedPodInfo, *, started: float) -> None:
        """After a gang member's cycle: if it got a place, try the group's other queued
        members now, back to back, before any other pod (one pass against the same snapshot:
        upstream's PodGroup cycle); stop at the first that gets none.  The group's plugin is
        then told the pass is over, so a group that did not complete releases what it holds
        at once rather than holding it while waiting for members.  One pod group attempt
        (scheduler_podgroup_schedule_attempts_total) per pass."""
        pod_info = qpi.pod_info
        fwk = self.framework_for_pod(pod_info.pod)
        if fwk is None:
            return
        holds = self._holds_a_place(fwk, pod_info.uid)
        group = fwk.pod_group_members(pod_info)
        if group is None:
            return
        plugin, members = group
        result = "error"
        try:
            for member in members if holds else ():
                if self._stopping or not self._leading:
                    break
                taken = self.queue.take([member])
                if not taken:
                    continue
                sibling = taken[0]
                pending = self.cycle.schedule_one(sibling)
                if pending is not None:
                    await pending
                if not self._holds_a_place(fwk, sibling.pod_info.uid):
                    break
            complete = fwk.pod_group_pass_done(plugin, pod_info)
            result = "scheduled" if complete else "unschedulable"
            if not complete:
                # The members tried now back off from now: restart the others' backoff too,
                # or members that failed apart stay out of step for ever (each pass finds the
                # others still backing off: the soak's partly fitting gang never bound once
                # its node came).  Only delays: no pod is tried sooner than its backoff.
                self.queue.restart_backoff(m for m in members if m is not pod_info.pod)
        finally:
            self.metrics.podgroup_schedule_attempts.labels(result, fwk.profile_name).inc()
            self.metrics.podgroup_scheduling_attempt_duration.labels(
                result, fwk.profile_name).observe(time.perf_counter() - started)

    async def stop(self, *, grace_seconds: float = DEFAULT_STOP_GRACE_SECONDS) -> None:
        """Stop taking pods; let in-flight bindings finish (bounded); then cancel the rest."""
        self._stopping = True
        self.queue.close()
        pending = list(self._binding_tasks.values())
        if pending:
            _, still = await asyncio.wait(pending, timeout=grace_seconds)
            for task in still:
                task.cancel()
            if still:
                await asyncio.gather(*still, return_exceptions=True)
        # Plugins with background work (preemption's victim deletion) stop with us.
        for fwk in self.profiles.values():
            for plugin in fwk.plugins.values():
                stop = getattr(plugin, "stop", None)
                if stop is not None and asyncio.iscoroutinefunction(stop):
                    with contextlib.suppress(Exception):
                        await stop()
        await self.extenders.close()
        if self.api_dispatcher is not None:
            # Queued status patches are written (bounded), then the dispatcher stops.
            await self.api_dispatcher.drain(2.0)
            await self.api_dispatcher.close()
        side = list(self._side_tasks)
        if side:
            _, still_side = await asyncio.wait(side, timeout=2.0)
            for task in still_side:
                task.cancel()
