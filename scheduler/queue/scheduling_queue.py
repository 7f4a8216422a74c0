"""The scheduling queue: which pending pod to try next, and when to retry a pod that failed.

Like kube-scheduler's PriorityQueue, pods live in exactly one of:

* activeQ — a heap ordered by the QueueSort plugin; ``pop`` takes its head;
* backoffQ — pods waiting out their backoff (initial x 2^(attempts-1), capped), ordered by
  1-second expiry windows then priority, flushed into activeQ every second; with activeQ
  empty ``pop`` takes its head as soon as its own backoff is over, before the flush
  (upstream SchedulerPopFromBackoffQ, less its popping of pods still backing off), so it
  must pass PreEnqueue before it enters;
* the unschedulable pool — pods rejected by some plugins; they leave it only when a cluster
  event those plugins registered (and whose queueing hint does not answer Skip) happens, or
  after ``max_in_unschedulable`` seconds;
* the gated set — pods a PreEnqueue plugin refused (scheduling gates ...); they re-run
  PreEnqueue when they are updated or when an event their gating plugin registered happens;

or they are in flight: popped and being scheduled (until ``done`` or a requeue).

One invariant holds whatever the events: no pod starts an attempt before the backoff of its
last failure is over.  Events and activations may move a pod towards activeQ, but a pod still
backing off waits in backoffQ (``_move_to_active``; the one exception is a Pending plugin
answering Queue for the event it waited for, as upstream's queueImmediately), and
``pop`` never takes one early.  Without it a stream of events (a gang's own rollback freeing
what it held, node churn) retries the same pods as fast as the loop turns.  And a pod is
never popped for a new attempt while its previous one is in flight (assumed or binding).  A cluster event
that arrives while a pod is in flight may be the one that makes it schedulable: the
moveRequestCycle rule sends such a pod to backoffQ rather than to the pool, so it is not stuck
waiting for an event that already happened.

Single event loop, no locks; ``pop`` is the only coroutine that waits.  The three holding
places are their own modules (upstream's ``active_queue.go``, ``backoff_queue.go``,
``unschedulable_pods.go``); this one composes them and decides, per cluster event, which pods
move where.
"""

from __future__ import annotations

import asyncio
import enum
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import structlog

from scheduler.framework.events import (
    ASSIGNED_POD_ADD,
    ASSIGNED_POD_DELETE,
    ASSIGNED_POD_UPDATE,
    BACKOFF_COMPLETE,
    FORCE_ACTIVATE,
    POD_ADD_LABEL,
    SCHEDULE_ATTEMPT_FAILURE,
    UNSCHEDULABLE_TIMEOUT,
    UNSCHEDULED_POD_UPDATE,
    ClusterEvent,
    EventResource,
    QueueingHint,
    QueueingHintFn,
    pod_update_action,
)
from scheduler.framework.status import Status
from scheduler.framework.types import QueuedPodInfo
from scheduler.logging import DEBUG
from scheduler.metrics import (
    HINT_ERROR,
    HINT_QUEUE,
    HINT_QUEUE_SKIP,
    POD_POPPED,
    Children,
    SchedulerMetrics,
)
from scheduler.objects.errors import ObjectError
from scheduler.objects.pod import PodInfo, pod_key, pod_priority
from scheduler.queue.active_queue import ActiveQueue, Less, SortKey
from scheduler.queue.backoff_queue import BackoffQueue
from scheduler.queue.nominator import Nominator, nominated_node_name
from scheduler.queue.requeue_index import RequeueIndex
from scheduler.queue.unschedulable_pods import UnschedulablePods

log = structlog.get_logger(__name__)

__all__ = [
    "ACTIVE",
    "BACKOFF",
    "GATED",
    "UNSCHEDULABLE",
    "HintEntry",
    "QueueError",
    "SchedulingQueue",
]

ACTIVE = "active"
BACKOFF = "backoff"
UNSCHEDULABLE = "unschedulable"
GATED = "gated"

# (registered event, plugin name, hint or None = always Queue)
HintEntry = tuple[ClusterEvent, str, QueueingHintFn | None]

_UPDATE_LABEL = UNSCHEDULED_POD_UPDATE.label
# scheduler_queue_incoming_pods_total{queue="active"} label of a pod popped from backoffQ.
POP_FROM_BACKOFF_Q = "PopFromBackoffQ"
# The longest ``pop`` sleeps before looking at backoffQ's head again (the flush period).
_MAX_POP_WAIT = 1.0
# ``take``: a gang member whose backoff ends this soon is tried with the member popped.
GROUP_BACKOFF_TOLERANCE_SECONDS = 1.0


class QueueError(Exception):
    """A call that does not fit the queue's state (the pod is already queued ...)."""

    def __init__(self, message: str, *, pod: str = "") -> None:
        super().__init__(message)
        self.pod = pod


class _Strategy(enum.IntEnum):
    SKIP = 0
    AFTER_BACKOFF = 1  # activeQ if the backoff is over, else backoffQ
    IMMEDIATELY = 2  # activeQ, ignoring backoff (a Pending plugin said Queue)


@dataclass(slots=True)
class _InFlight:
    """What happened to a popped pod while it was being scheduled."""

    qpi: QueuedPodInfo
    latest: dict[str, Any] | None = None  # the pod as of its last update
    updates: list[tuple[ClusterEvent, dict[str, Any], dict[str, Any]]] = field(
        default_factory=list
    )
    deleted: bool = False
    activated: bool = False


def _uid(pod: dict[str, Any]) -> str:
    meta = pod.get("metadata") or {}
    return str(meta.get("uid") or pod_key(pod))


class SchedulingQueue:
    def __init__(
        self,
        *,
        less: Less,
        sort_key: SortKey | None = None,
        pre_enqueue: Callable[[PodInfo], Status | None],
        hints: Mapping[str, Sequence[HintEntry]],
        profile_of: Callable[[dict[str, Any]], str],
        pod_initial_backoff: float = 1.0,
        pod_max_backoff: float = 10.0,
        max_in_unschedulable: float = 300.0,
        clock: Callable[[], float] = time.monotonic,
        metrics: SchedulerMetrics | None = None,
        nominator: Nominator | None = None,
        index_hints: bool = True,
    ) -> None:
        """``index_hints``: keep the waiting pods by the keys their hints name
        (``RequeueIndex``) so an event asks only the pods it can concern; False scans every
        waiting pod for every event (the same moves, slower: the reference in tests)."""
        self._less = less
        self._pre_enqueue = pre_enqueue
        self._hints: dict[str, list[HintEntry]] = {p: list(h) for p, h in hints.items()}
        self._profile_of = profile_of
        self._max_in_unschedulable = max_in_unschedulable
        self._clock = clock
        # Always a metrics object (a private one when none is given): no None checks.
        self._metrics = metrics if metrics is not None else SchedulerMetrics()
        self.nominator = nominator if nominator is not None else Nominator()

        # profile -> plugin -> events it registered (a gated pod moves only on these)
        self._plugin_events: dict[str, dict[str, list[ClusterEvent]]] = {}
        registered: list[ClusterEvent] = []
        for profile, entries in self._hints.items():
            per_plugin = self._plugin_events.setdefault(profile, {})
            for event, plugin, _hint in entries:
                per_plugin.setdefault(plugin, []).append(event)
                if event not in registered:
                    registered.append(event)
        self._registered_events = registered
        self._interest: dict[ClusterEvent, bool] = {}
        # event -> (profile, gating plugin) -> whether the plugin registered the event: the
        # registrations are fixed, and every pending pod's ADDED asked each gated group anew.
        self._opens: dict[ClusterEvent, dict[tuple[str, str], bool]] = {}

        self._active = ActiveQueue(less, key=sort_key)
        self._backoff = BackoffQueue(
            initial=pod_initial_backoff, maximum=pod_max_backoff, clock=clock, less=less, sort_key=sort_key
        )
        self._pool = UnschedulablePods(
            profile_of=profile_of, metrics=self._metrics,
            index=RequeueIndex(self._hints, profile_of=profile_of) if index_hints else None)
        self._in_flight: dict[str, _InFlight] = {}  # by pod UID

        self._incoming_pods = Children(self._metrics.queue_incoming_pods)
        self._hint_durations = Children(self._metrics.ops.queueing_hint_execution_duration)
        self._export_gauges()

        self._cycle = 0
        self._move_request_cycle = -1
        self._closed = False
        self._wakeup = asyncio.Event()

    # --- public API: informer events -------------------------------------------------------

    def add(self, pod: dict[str, Any]) -> None:
        """A new pending pod.  Raises ObjectError if it is malformed (nothing is queued)."""
        info = PodInfo.from_pod(pod)
        flight = self._in_flight.get(_uid(pod))
        existing = self._find(info.key)
        if flight is not None:
            # A relist can replay an Add for a pod we hold: treat it as an update.
            self._update(flight.qpi.pod_info.pod, pod, info)
        elif existing is not None:
            self._update(existing[1].pod_info.pod, pod, info)
        else:
            qpi = QueuedPodInfo(info, timestamp=self._clock())
            self._move_to_active(qpi, POD_ADD_LABEL)

    def update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        """A pending pod changed.  Raises ObjectError if the new version is malformed."""
        info = PodInfo.from_pod(new)
        self._update(old, new, info)
        old_node = nominated_node_name(old)
        if old_node and old_node != nominated_node_name(new):
            self._nomination_released(old)

    def _nomination_released(self, pod: dict[str, Any]) -> None:
        """The pod no longer holds its nominated node: pods of equal or lower priority, which
        counted it there as if assigned, may fit now (upstream updatePodInSchedulingQueue /
        deletePodFromSchedulingQueue with getLEPriorityPreCheck)."""
        priority = pod_priority(pod)
        self.move_all_to_active_or_backoff_queue(
            ASSIGNED_POD_DELETE, pod, None,
            precheck=lambda other: other.pod_info.priority <= priority,
        )

    def _update(self, old: dict[str, Any], new: dict[str, Any], info: PodInfo) -> None:
        flight = self._in_flight.get(_uid(new))
        if flight is not None and not flight.deleted:
            # Being scheduled: remember the change; it decides the requeue if the cycle fails.
            flight.latest = new
            flight.updates.append((self._pod_update_event(old, new), old, new))
            return
        key = info.key
        qpi = self._active.get(key)
        if qpi is not None:
            qpi.pod_info = info
            # Its priority may have changed: re-insert, keeping its place among equals.
            self._active.update(qpi)
            self.nominator.update_nominated_pod(old, info)
            return
        qpi = self._backoff.get(key)
        if qpi is not None:
            qpi.pod_info = info  # the expiry depends only on attempts and timestamp
            self.nominator.update_nominated_pod(old, info)
            return
        qpi = self._pool.gated.get(key)
        if qpi is not None:
            qpi.pod_info = info
            self.nominator.update_nominated_pod(old, info)
            self._move_to_active(qpi, _UPDATE_LABEL)  # re-runs PreEnqueue
            return
        qpi = self._pool.unschedulable.get(key)
        if qpi is not None:
            qpi.pod_info = info
            self.nominator.update_nominated_pod(old, info)
            event = self._pod_update_event(old, new)
            strategy = self._worth_requeuing(qpi, event, old, new)
            if strategy is not _Strategy.SKIP:
                self._requeue(qpi, strategy, _UPDATE_LABEL)
            else:
                self._pool.refresh(qpi)  # it stays: its keys may have changed
            return
        self._move_to_active(QueuedPodInfo(info, timestamp=self._clock()), _UPDATE_LABEL)

    @staticmethod
    def _pod_update_event(old: dict[str, Any], new: dict[str, Any]) -> ClusterEvent:
        action = pod_update_action(old, new)
        return ClusterEvent(EventResource.UNSCHEDULED_POD, action, _UPDATE_LABEL)

    def delete(self, pod: dict[str, Any], *, bound: bool = False) -> None:
        """A pending pod was deleted, or got ``bound`` (then the binding, not the deletion,
        says what changed)."""
        self.nominator.delete_nominated_pod_if_exists(pod)
        key = pod_key(pod)
        self._active.remove(key)
        self._backoff.remove(key)
        self._pool.remove(key)
        flight = self._in_flight.get(_uid(pod))
        if flight is not None:
            flight.deleted = True
        if not bound and nominated_node_name(pod):
            self._nomination_released(pod)

    def activate(self, pods: Iterable[dict[str, Any]]) -> None:
        """Move these pods to activeQ now (if unschedulable, gated or backing off)."""
        for pod in pods:
            key = pod_key(pod)
            qpi = self._pool.get(key) or self._backoff.remove(key)
            if qpi is not None:
                self._move_to_active(qpi, FORCE_ACTIVATE.label)
                continue
            flight = self._in_flight.get(_uid(pod))
            if flight is not None:
                # It comes back through add_unschedulable_if_not_present: retry it then.
                flight.activated = True
                self._move_request_cycle = self._cycle

    def move_all_to_active_or_backoff_queue(
        self,
        event: ClusterEvent,
        old: Any = None,
        new: Any = None,
        *,
        precheck: Callable[[QueuedPodInfo], bool] | None = None,
    ) -> None:
        """A cluster event happened: requeue the pods it may help (by their rejectors' hints)."""
        if not self._is_event_of_interest(event):
            return
        opens: dict[tuple[str, str], bool] | None = None
        found = self._pool.candidates(event, old, new)
        if found is not None:
            # The index's pods, in the scan's order: the others' hints would all say Skip.
            candidates = []
            for qpi, group in found:
                if group is not None:
                    if opens is None:
                        opens = self._opens.get(event) or self._opens_of(event)
                    opened = opens.get(group)
                    if opened is None:
                        opened = opens[group] = self._plugin_registered(*group, event)
                    if not opened:
                        continue
                candidates.append(qpi)
        else:
            candidates = list(self._pool.unschedulable.values())
            for group, members in self._pool.gated_groups.items():
                if opens is None:
                    opens = self._opens.get(event) or self._opens_of(event)
                opened = opens.get(group)
                if opened is None:
                    opened = opens[group] = self._plugin_registered(*group, event)
                if opened:
                    candidates.extend(members.values())
        if precheck is not None:
            candidates = [qpi for qpi in candidates if precheck(qpi)]
        self._move_pods(candidates, event, old, new)

    def assigned_pod_added(self, pod: PodInfo | dict[str, Any]) -> None:
        """A pod was bound: pods waiting for (anti-)affinity peers or spread may fit now."""
        obj = pod.pod if isinstance(pod, PodInfo) else pod
        self.move_all_to_active_or_backoff_queue(ASSIGNED_POD_ADD, None, obj)

    def assigned_pod_updated(self, old: dict[str, Any], new: dict[str, Any], *,
                             same_sizing: bool = False) -> None:
        action = pod_update_action(old, new, same_sizing=same_sizing)
        event = ClusterEvent(EventResource.POD, action, ASSIGNED_POD_UPDATE.label)
        self.move_all_to_active_or_backoff_queue(event, old, new)

    # --- public API: the scheduling loop ---------------------------------------------------

    async def pop(self) -> QueuedPodInfo | None:
        """The next pod to schedule; waits while activeQ is empty; None once closed."""
        while True:
            if self._closed:
                return None
            qpi = self._pop()
            if qpi is not None:
                return qpi
            self._wakeup.clear()
            delay = self._backoff.next_pop_in()
            if delay is None:
                await self._wakeup.wait()
                continue
            # backoffQ's head may be popped once its backoff is over: no event will say so.
            try:
                await asyncio.wait_for(self._wakeup.wait(),
                                       timeout=min(max(delay, 0.001), _MAX_POP_WAIT))
            except TimeoutError:
                pass

    def take(self, pods: Iterable[dict[str, Any]], *,
             within: float = GROUP_BACKOFF_TOLERANCE_SECONDS) -> list[QueuedPodInfo]:
        """Take these pods out of the queue for attempts now, as ``pop`` would (a gang's
        members tried in one pass with the member just popped).  Only pods held in activeQ,
        backoffQ or the unschedulable pool whose backoff ends within ``within`` seconds are
        taken (members failed together end their backoff together); gated pods, pods in
        flight and pods still backing off longer stay."""
        taken: list[QueuedPodInfo] = []
        for pod in pods:
            found = self._find(pod_key(pod))
            if found is None or found[0] == GATED:
                continue
            qpi = found[1]
            if (qpi.pod_info.uid or qpi.key) in self._in_flight:
                continue
            if self._backoff.backoff_remaining(qpi) > within:
                continue
            self._active.remove(qpi.key)
            self._backoff.remove(qpi.key)
            self._pool.remove(qpi.key)
            if qpi.initial_attempt_timestamp is None:
                qpi.initial_attempt_timestamp = self._clock()
            self._start_attempt(qpi)
            taken.append(qpi)
        return taken

    def restart_backoff(self, pods: Iterable[dict[str, Any]]) -> int:
        """Restart the backoff of these pods from now, where they are backing off (backoffQ
        or the unschedulable pool): a gang whose pass failed puts its members that were not
        tried back in step with those that were, so that their backoffs end together and
        ``take`` finds them all for the next pass.  Only ever delays a pod.  Returns how
        many were restarted."""
        now = self._clock()
        restarted = 0
        for pod in pods:
            found = self._find(pod_key(pod))
            if found is None or found[0] not in (BACKOFF, UNSCHEDULABLE):
                continue
            where, qpi = found
            if (qpi.pod_info.uid or qpi.key) in self._in_flight or qpi.timestamp >= now:
                continue
            if where == BACKOFF:
                self._backoff.remove(qpi.key)
                qpi.timestamp = now
                self._backoff.add(qpi)
            else:
                qpi.timestamp = now
            restarted += 1
        return restarted

    def pop_nowait(self) -> QueuedPodInfo | None:
        if self._closed:
            return None
        return self._pop()

    def scheduling_cycle(self) -> int:
        """Incremented by every pop; read it right after ``pop`` to get the pod's cycle."""
        return self._cycle

    def done(self, uid: str) -> None:
        """The popped pod's attempt is over (bound, or given up)."""
        self._in_flight.pop(uid, None)

    def add_unschedulable_if_not_present(
        self, qpi: QueuedPodInfo, pod_scheduling_cycle: int
    ) -> None:
        """Requeue a pod whose attempt failed (its rejecting plugins recorded in ``qpi``).

        Goes to backoffQ when a move request arrived during or after its cycle, or when no
        plugin rejected it (an error); otherwise to the unschedulable pool.  A pod deleted
        while in flight is dropped.  Raises QueueError if the pod is already queued.
        """
        key = qpi.key
        flight = self._in_flight.pop(qpi.pod_info.uid or key, None)
        if flight is not None and flight.deleted:
            return
        found = self._find(key)
        if found is not None and flight is not None and found[0] == BACKOFF:
            # A copy queued while this attempt was in flight (see ``_pop``): the attempt's
            # own outcome, with its rejectors and attempt count, replaces it.
            self._backoff.remove(key)
            found = None
        if found is not None:
            raise QueueError(f"pod {key} is already in the {found[0]} queue", pod=key)
        if flight is not None and flight.latest is not None:
            try:
                qpi.pod_info = PodInfo.from_pod(flight.latest)
            except ObjectError as exc:
                log.warning("ignoring malformed pod update", pod=key, error=str(exc))
        rejectors = qpi.unschedulable_plugins | qpi.pending_plugins
        if rejectors:
            qpi.consecutive_errors = 0
        else:
            qpi.consecutive_errors += 1
        qpi.timestamp = self._clock()
        qpi.flushed = False  # back from an attempt: a later move is no longer the flush's

        strategy = _Strategy.SKIP
        if flight is not None:
            for event, old, new in flight.updates:
                strategy = max(strategy, self._worth_requeuing(qpi, event, old, new))
            if flight.activated:
                strategy = max(strategy, _Strategy.AFTER_BACKOFF)
        if strategy is _Strategy.IMMEDIATELY:
            self._move_to_active(qpi, SCHEDULE_ATTEMPT_FAILURE, pending_resolved=True)
        elif (
            strategy is _Strategy.AFTER_BACKOFF
            or not rejectors
            or self._move_request_cycle >= pod_scheduling_cycle
        ):
            self._move_to_backoff(qpi, SCHEDULE_ATTEMPT_FAILURE)
        else:
            self._pool_put(qpi, SCHEDULE_ATTEMPT_FAILURE)

    # --- public API: background flushing -----------------------------------------------------

    def flush_backoff_completed(self) -> None:
        """Move pods whose backoff expired to activeQ."""
        for qpi in list(self._backoff.pop_completed()):
            self._move_to_active(qpi, BACKOFF_COMPLETE.label)

    def flush_unschedulable_left_over(self) -> None:
        """Pods unschedulable for longer than ``max_in_unschedulable`` get another try."""
        stale = self._pool.stale(self._clock(), self._max_in_unschedulable)
        if stale:
            for qpi in stale:
                qpi.flushed = True
            self._move_pods(stale, UNSCHEDULABLE_TIMEOUT, None, None)
            for qpi in stale:
                # A gated pod never attempts: a later move is not the flush's doing.
                qpi.flushed = qpi.flushed and not qpi.gated

    async def run(
        self,
        *,
        iterations: int | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        backoff_interval: float = 1.0,
        unschedulable_interval: float = 30.0,
    ) -> None:
        """Flush backoffQ every ``backoff_interval`` and stale unschedulable pods every
        ``unschedulable_interval`` seconds (by the queue's clock) until closed."""
        last_unschedulable = self._clock()
        done = 0
        while not self._closed and (iterations is None or done < iterations):
            self.flush_backoff_completed()
            now = self._clock()
            if now - last_unschedulable >= unschedulable_interval:
                self.flush_unschedulable_left_over()
                last_unschedulable = now
            done += 1
            await sleep(backoff_interval)

    def close(self) -> None:
        """Wake ``pop`` waiters (they return None) and stop ``run``."""
        self._closed = True
        self._wakeup.set()

    @property
    def closed(self) -> bool:
        return self._closed

    # --- inspection --------------------------------------------------------------------------

    def pending_pods(self) -> dict[str, list[dict[str, Any]]]:
        return {
            ACTIVE: [q.pod_info.pod for q in self._active.pods_in_order()],
            BACKOFF: [q.pod_info.pod for q in self._backoff.pods_in_order()],
            UNSCHEDULABLE: [q.pod_info.pod for q in self._pool.unschedulable.values()],
            GATED: [q.pod_info.pod for q in self._pool.gated.values()],
        }

    def get(self, pod: dict[str, Any]) -> QueuedPodInfo | None:
        found = self._find(pod_key(pod))
        return None if found is None else found[1]

    def queue_of(self, pod: dict[str, Any]) -> str | None:
        """``active``/``backoff``/``unschedulable``/``gated``, ``in-flight`` or None."""
        found = self._find(pod_key(pod))
        if found is not None:
            return found[0]
        return "in-flight" if _uid(pod) in self._in_flight else None

    def attempts_of(self, pod: dict[str, Any]) -> int | None:
        """How many times the pod was popped for a cycle (queued or in flight); None when
        the queue does not hold it."""
        found = self._find(pod_key(pod))
        if found is not None:
            return found[1].attempts
        for flight in self._in_flight.values():
            if flight.qpi.key == pod_key(pod):
                return flight.qpi.attempts
        return None

    def in_flight_pods(self) -> list[dict[str, Any]]:
        return [f.qpi.pod_info.pod for f in self._in_flight.values()]

    def backoff_duration(self, qpi: QueuedPodInfo) -> float:
        """initial x 2^(attempts-1), capped at max (attempts <= 1: initial)."""
        return self._backoff.backoff_duration(qpi)

    def __len__(self) -> int:
        return len(self._active) + len(self._backoff) + len(self._pool)

    # --- internals ---------------------------------------------------------------------------

    def _find(self, key: str) -> tuple[str, QueuedPodInfo] | None:
        qpi = self._active.get(key)
        if qpi is not None:
            return ACTIVE, qpi
        qpi = self._backoff.get(key)
        if qpi is not None:
            return BACKOFF, qpi
        qpi = self._pool.unschedulable.get(key)
        if qpi is not None:
            return UNSCHEDULABLE, qpi
        qpi = self._pool.gated.get(key)
        if qpi is not None:
            return GATED, qpi
        return None

    def _pop(self) -> QueuedPodInfo | None:
        while True:
            # With activeQ empty the best pod to try is backoffQ's head rather than none
            # (upstream SchedulerPopFromBackoffQ), once its backoff is over.
            qpi = self._active.pop()
            if qpi is None:
                qpi = self._backoff.pop_rejected()
                if qpi is None:
                    return None
                self._incoming(ACTIVE, POP_FROM_BACKOFF_Q)
            if (qpi.pod_info.uid or qpi.key) not in self._in_flight:
                break
            # Its previous attempt is still in flight (assumed, waiting or binding): a second
            # attempt now could place it twice.  It waits in backoffQ; the flight's outcome
            # (bound, or requeued) settles which copy stays.
            log.warning("pod queued while its attempt is in flight; not popping it",
                        pod=qpi.key)
            self._backoff.add(qpi)
        self._start_attempt(qpi)
        return qpi

    def _start_attempt(self, qpi: QueuedPodInfo) -> None:
        self._cycle += 1
        qpi.attempts += 1
        # A new attempt: the rejectors of the previous one no longer apply.
        qpi.unschedulable_plugins.clear()
        qpi.pending_plugins.clear()
        qpi.gated = False
        qpi.gating_plugin = ""
        self._in_flight[qpi.pod_info.uid or qpi.key] = _InFlight(qpi)

    def _run_pre_enqueue(self, qpi: QueuedPodInfo) -> None:
        try:
            status = self._pre_enqueue(qpi.pod_info)
        except Exception as exc:  # a plugin bug must not take the queue down
            log.exception("PreEnqueue raised", pod=qpi.key)
            status = Status.from_error(exc)
        if status is None or status.is_success():
            qpi.gated = False
            qpi.gating_plugin = ""
            return
        qpi.gated = True
        qpi.gating_plugin = status.plugin
        if status.plugin:
            qpi.unschedulable_plugins.add(status.plugin)

    def _move_to_active(self, qpi: QueuedPodInfo, label: str, *,
                        pending_resolved: bool = False) -> bool:
        """activeQ if PreEnqueue passes (True), else the gated set (False); a pod whose
        backoff is not over goes to backoffQ instead (True: it is on its way to activeQ),
        unless ``pending_resolved``: a Pending plugin said the event it waited for came (a
        Pending rejection is not a failure to penalise; upstream queueImmediately)."""
        key = qpi.pod_info.key
        self._run_pre_enqueue(qpi)
        if qpi.gated:
            self._backoff.remove(key)
            self._pool_put(qpi, label)
            return False
        if not pending_resolved and self._backoff.backoff_remaining(qpi) > 0:
            # Whatever moved it (an event, an activation), it was
            # tried too recently: it waits out its backoff (the queue's invariant).
            self._pool.remove(key)
            if key not in self._backoff:
                self._backoff.add(qpi)
                self._incoming(BACKOFF, label)
                log.debug("pod moved to backoffQ", pod=key, trigger=label)
                self._wakeup.set()
            return True
        self._backoff.remove(key)
        self._pool.remove(key)
        if qpi.initial_attempt_timestamp is None:
            qpi.initial_attempt_timestamp = self._clock()
        self._active.push(qpi)
        self._incoming(ACTIVE, label)
        if DEBUG.enabled:  # one line per pod: a dropped one costs no call
            log.debug("pod moved to activeQ", pod=key, trigger=label)
        if label in (POD_ADD_LABEL, _UPDATE_LABEL):
            # A pod arriving with status.nominatedNodeName keeps its claim on that node.
            self.nominator.add_nominated_pod(qpi.pod_info)
        self._wakeup.set()
        return True

    def _move_to_backoff(self, qpi: QueuedPodInfo, label: str) -> None:
        # A pod in backoffQ may be popped at any time: it must pass PreEnqueue first, as
        # for activeQ (upstream moveToBackoffQ).
        self._run_pre_enqueue(qpi)
        if qpi.gated:
            self._backoff.remove(qpi.key)
            self._pool_put(qpi, label)
            return
        self._pool.remove(qpi.key)
        self._backoff.add(qpi)
        self._incoming(BACKOFF, label)
        log.debug("pod moved to backoffQ", pod=qpi.key, trigger=label)
        self._wakeup.set()  # an idle popper may take it now

    def _pool_put(self, qpi: QueuedPodInfo, label: str) -> None:
        """Into the unschedulable pool, or the gated set for a gated pod."""
        if self._pool.put(qpi):
            self._incoming(UNSCHEDULABLE, label)
            if DEBUG.enabled:  # one line per gated pod's ADDED: a dropped one costs no call
                log.debug("pod moved to the unschedulable pool" if not qpi.gated
                          else "pod gated by PreEnqueue", pod=qpi.key, trigger=label,
                          plugins=sorted(qpi.unschedulable_plugins))

    def _requeue(self, qpi: QueuedPodInfo, strategy: _Strategy, label: str) -> str:
        if strategy is _Strategy.AFTER_BACKOFF and self._backoff.is_backing_off(qpi):
            self._move_to_backoff(qpi, label)
            return BACKOFF
        moved = self._move_to_active(
            qpi, label, pending_resolved=strategy is _Strategy.IMMEDIATELY)
        return ACTIVE if moved else GATED

    def _is_event_of_interest(self, event: ClusterEvent) -> bool:
        # One answer per event kind (the registrations are fixed): every bound pod and every
        # new pending pod asks, and matching it against each registration cost ~10 us with
        # the default plugins.
        answer = self._interest.get(event)
        if answer is None:
            answer = self._interest[event] = event.is_wildcard() or any(
                registered.matches(event) for registered in self._registered_events)
        return answer

    def _move_pods(
        self, pods: Iterable[QueuedPodInfo], event: ClusterEvent, old: Any, new: Any
    ) -> None:
        # Gated pods arrive here only from groups whose gating plugin registered the event
        # (move_all_to_active_or_backoff_queue asks once per group, not once per pod).
        for qpi in pods:
            strategy = self._worth_requeuing(qpi, event, old, new)
            if strategy is _Strategy.SKIP:
                continue
            self._requeue(qpi, strategy, event.label)
        # Pods in flight now will be retried soon rather than parked (moveRequestCycle).
        self._move_request_cycle = self._cycle

    def _opens_of(self, event: ClusterEvent) -> dict[tuple[str, str], bool]:
        """Whether each (profile, plugin) registered ``event``, as asked so far."""
        opens = self._opens.get(event)
        if opens is None:
            opens = self._opens[event] = {}
        return opens

    def _plugin_registered(self, profile: str, plugin: str, event: ClusterEvent) -> bool:
        """Whether ``plugin`` of ``profile`` registered an event covering ``event``."""
        events = self._plugin_events.get(profile, {}).get(plugin, ())
        return any(registered.matches(event) for registered in events)

    def _worth_requeuing(
        self, qpi: QueuedPodInfo, event: ClusterEvent, old: Any, new: Any
    ) -> _Strategy:
        rejectors = qpi.unschedulable_plugins | qpi.pending_plugins
        if not rejectors:
            return _Strategy.AFTER_BACKOFF  # failed by an error: any event may help
        if event.is_wildcard():
            # A wildcard naming a pod (ForceActivate of one pod) is for that pod only.
            if isinstance(new, dict) and _uid(new) != (qpi.pod_info.uid or qpi.key):
                return _Strategy.SKIP
            return _Strategy.AFTER_BACKOFF
        pod = qpi.pod_info.pod
        profile = self._profile_of(pod)
        entries = self._hints.get(profile)
        if entries is None:
            log.error("no queueing hints registered for the pod's profile", pod=qpi.key,
                      profile=profile)
            return _Strategy.AFTER_BACKOFF
        strategy = _Strategy.SKIP
        for registered, plugin, hint_fn in entries:
            if plugin not in rejectors or not registered.matches(event):
                continue
            hint = QueueingHint.QUEUE
            if hint_fn is not None:
                started = time.perf_counter()
                try:
                    hint = hint_fn(pod, old, new)
                    outcome = HINT_QUEUE_SKIP if hint is QueueingHint.SKIP else HINT_QUEUE
                except Exception:
                    # Never leave a pod stuck because a hint is buggy: treat it as Queue.
                    log.exception("queueing hint raised; requeueing the pod", pod=qpi.key,
                                  plugin=plugin, cluster_event=event.label)
                    hint = QueueingHint.QUEUE
                    outcome = HINT_ERROR
                self._hint_durations(plugin, event.label, outcome).observe(
                    time.perf_counter() - started)
            if hint is QueueingHint.SKIP:
                continue
            if plugin in qpi.pending_plugins:
                return _Strategy.IMMEDIATELY
            if not qpi.pending_plugins:
                return _Strategy.AFTER_BACKOFF
            strategy = _Strategy.AFTER_BACKOFF
        return strategy

    # --- metrics -----------------------------------------------------------------------------

    def _incoming(self, queue: str, label: str) -> None:
        self._incoming_pods(queue, label).inc()

    def _export_gauges(self) -> None:
        """scheduler_pending_pods{queue} read the queue's sizes when scraped: setting them
        after every change cost four label lookups and sets several times per pod."""
        gauge = self._metrics.pending_pods
        gauge.labels(queue=ACTIVE).set_function(lambda: len(self._active))
        gauge.labels(queue=BACKOFF).set_function(lambda: len(self._backoff))
        gauge.labels(queue=UNSCHEDULABLE).set_function(
            lambda: len(self._pool.unschedulable))
        gauge.labels(queue=GATED).set_function(lambda: len(self._pool.gated))
        # Upstream 1.35+ also counts pods waiting for their (Workload API) pod group to be
        # created or requeued; a gang's pods here queue one by one, so none ever waits there.
        gauge.labels(queue="incomplete").set(0)
        gauge.labels(queue="pending").set(0)
        # scheduler_queued_entities{queue,type}: every entity here is a pod (pod groups queue
        # as their pods), so type="pod" mirrors scheduler_pending_pods.
        entities = self._metrics.queued_entities
        entities.labels(queue=ACTIVE, type="pod").set_function(lambda: len(self._active))
        entities.labels(queue=BACKOFF, type="pod").set_function(lambda: len(self._backoff))
        entities.labels(queue=UNSCHEDULABLE, type="pod").set_function(
            lambda: len(self._pool.unschedulable))
        entities.labels(queue=GATED, type="pod").set_function(lambda: len(self._pool.gated))
        self._metrics.ops.inflight_events.source = self._inflight_events

    def _inflight_events(self) -> dict[str, int]:
        """scheduler_inflight_events: upstream keeps one list of the pods popped
        (``PodPopped``) and the events seen since; this queue keeps, per pod being
        scheduled, the updates of that pod (other events only mark the move request
        cycle), so it reports the pods in flight and those updates by event."""
        counts = {POD_POPPED: len(self._in_flight)}
        for flight in self._in_flight.values():
            for event, _old, _new in flight.updates:
                counts[event.label] = counts.get(event.label, 0) + 1
        return counts
