"""The scheduling cycle and the binding cycle of one pod.

The scheduling cycle is synchronous CPU work on the event loop: snapshot, PreFilter, Filter
over an adaptive sample of nodes, PostFilter on failure, Score, pick a host, assume the pod in
the cache, Reserve, Permit.  Because the pod is assumed before binding, the next cycle already
sees its resources taken, so cycles need not wait for the API server.

The binding cycle runs as its own asyncio task: WaitOnPermit, PreBind, Bind (a POST of a
v1.Binding), PostBind.  Any failure after assume takes the same road back: Unreserve in
reverse order, forget the assumed pod, requeue it with backoff, and move other unschedulable
pods (the resources it held came back).

As upstream's ``schedule_one.go``, the scheduling cycle returns a result and a Status, and
every failure of either cycle goes through one handler (``handle_scheduling_failure``): it
requeues the pod, applies the result's nomination (clearing it unless preemption nominated),
and tells the user.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Collection, Coroutine, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import structlog

from scheduler.cache.cache import CacheError
from scheduler.config import features
from scheduler.extenders import ExtenderError, Extenders
from scheduler.find_nodes import (  # the node-finding half of the cycle
    MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND,
    MIN_FEASIBLE_NODES_TO_FIND,
    MIN_FILTER_CHUNK,
    _record_rejection,
    _StatusError,
    effective_percentage,
    filter_nodes_from,
    num_feasible_nodes_to_find,
    select_host,
    select_host_from_columns,
)
from scheduler.framework.batching import Batch, BatchCache, wrapped_slice
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.errors import AlreadyBoundError, PodGoneError
from scheduler.framework.events import ASSIGNED_POD_DELETE
from scheduler.framework.node_info import NodeInfo
from scheduler.framework.status import Code, Status
from scheduler.framework.types import (
    NO_NODES_AVAILABLE,
    Diagnosis,
    FitError,
    QueuedPodInfo,
)
from scheduler.logging import DEBUG
from scheduler.objects.pod import PodInfo

if TYPE_CHECKING:
    from scheduler.framework.runtime import Framework
    from scheduler.framework.types import ScoreTable
    from scheduler.scheduler import Scheduler

log = structlog.get_logger(__name__)

REASON_UNSCHEDULABLE = "Unschedulable"
REASON_SCHEDULER_ERROR = "SchedulerError"

# The feature gate that nominates a pod before a long binding cycle (KEP-5278).
NOMINATED_NODE_NAME_FOR_EXPECTATION = "NominatedNodeNameForExpectation"


class NoNodesAvailableError(Exception):
    def __str__(self) -> str:
        return NO_NODES_AVAILABLE


@dataclass(slots=True)
class ScheduleResult:
    """Where the pod goes, and what a failure does to its nomination (upstream
    ScheduleResult with its nominatingInfo): None leaves ``status.nominatedNodeName`` and the
    nominator alone, a node name nominates the pod there, "" clears the nomination."""

    suggested_host: str = ""
    evaluated_nodes: int = 0
    feasible_nodes: int = 0
    nominating: str | None = None


# ScheduleResult.nominating for failures that must drop the pod's nomination (upstream
# clearNominatedNode).
CLEAR_NOMINATION = ""


@dataclass(slots=True, frozen=True)
class Attempt:
    """One scheduling attempt's bookkeeping, handed from the cycle to the failure handler."""

    started: float  # time.perf_counter() at the start, for the attempt duration metric
    pod_scheduling_cycle: int  # the queue's cycle when the pod was popped (moveRequestCycle)



class SchedulingCycle:
    """Runs scheduling cycles for a Scheduler; one instance per Scheduler."""

    def __init__(self, sched: Scheduler) -> None:
        self.sched = sched
        self.next_start_node_index = 0
        # Opportunistic batching (framework/batching.py); None turns it off.
        self.batches: BatchCache | None = BatchCache()
        self._batch: Batch | None = None  # the current cycle's, set after PreFilter
        ops = sched.metrics.ops
        self._algorithm_duration = ops.scheduling_algorithm_duration.labels()
        self._scheduled_after_flush = ops.pod_scheduled_after_flush
        # NominatedNodeNameForExpectation, read once as upstream reads its gates at start.
        self.nominate_for_binding = features.DEFAULT.enabled(NOMINATED_NODE_NAME_FOR_EXPECTATION)

    # --- scheduling cycle ------------------------------------------------------------------

    def schedule_one(self, qpi: QueuedPodInfo) -> Coroutine[Any, Any, None] | None:
        """One pod: the scheduling cycle, then either the one failure handler or a binding
        task (upstream ScheduleOne).  Synchronous unless an extender is interested in the
        pod: then the rest of the cycle is returned as a coroutine for the loop to await
        (extender calls are I/O; nothing else schedules meanwhile, other tasks run)."""
        sched = self.sched
        pod_info = qpi.pod_info
        pod = pod_info.pod
        fwk = sched.framework_for_pod(pod)
        if fwk is None:
            sched.queue.done(pod_info.uid)
            return None
        if self._skip_pod_schedule(pod_info):
            sched.queue.done(pod_info.uid)
            return None
        attempt = Attempt(
            started=time.perf_counter(), pod_scheduling_cycle=sched.queue.scheduling_cycle()
        )
        state = fwk.new_cycle_state()  # samples ~10% of cycles for per-plugin metrics
        extenders = sched.extenders
        # A plain list check: the path without extenders pays nothing more per cycle.
        if extenders.all and (extenders.in_cycle_for(pod) or extenders.preempts_for(pod)):
            return self._schedule_one_with_extenders(fwk, state, qpi, attempt, extenders)
        result, assumed_info, status = self.scheduling_cycle(fwk, state, qpi)
        self._finish_scheduling_cycle(
            fwk, state, qpi, result=result, assumed_info=assumed_info, status=status,
            attempt=attempt,
        )
        return None

    async def _schedule_one_with_extenders(
        self,
        fwk: Framework,
        state: CycleState,
        qpi: QueuedPodInfo,
        attempt: Attempt,
        extenders: Extenders,
    ) -> None:
        result, assumed_info, status = await self.scheduling_cycle_with_extenders(
            fwk, state, qpi, extenders
        )
        self._finish_scheduling_cycle(
            fwk, state, qpi, result=result, assumed_info=assumed_info, status=status,
            attempt=attempt,
        )

    def _finish_scheduling_cycle(
        self,
        fwk: Framework,
        state: CycleState,
        qpi: QueuedPodInfo,
        *,
        result: ScheduleResult,
        assumed_info: PodInfo | None,
        status: Status,
        attempt: Attempt,
    ) -> None:
        """The failure handler, or the binding task."""
        if not status.is_success() or assumed_info is None:
            self.handle_scheduling_failure(
                fwk, qpi, status, nominating=result.nominating, attempt=attempt
            )
            return
        if qpi.flushed:
            self._scheduled_after_flush.inc()
        self.sched.start_binding(
            self.binding_cycle(
                fwk, state, qpi, assumed_info=assumed_info, result=result, attempt=attempt
            ),
            uid=qpi.pod_info.uid,
            name=f"bind:{qpi.pod_info.key}",
        )

    def scheduling_cycle(
        self, fwk: Framework, state: CycleState, qpi: QueuedPodInfo
    ) -> tuple[ScheduleResult, PodInfo | None, Status]:
        """Find a node, assume the pod there, Reserve and Permit (upstream schedulingCycle).

        Returns the result (its ``nominating`` says what to do with the pod's nomination on
        failure), the assumed pod's info (None until assumed) and a Status: Success, a
        rejection carrying a FitError, or an Error.
        """
        started = time.perf_counter()
        try:
            result = self.schedule_pod(fwk, state, qpi.pod_info)
        except Exception as exc:
            return self._schedule_failed(fwk, state, qpi.pod_info, exc)
        # scheduler_scheduling_algorithm_duration_seconds: a host found (upstream observes it
        # on success only, before assume).
        self._algorithm_duration.observe(time.perf_counter() - started)
        return self._assume_reserve_permit(fwk, state, qpi.pod_info, result)

    async def scheduling_cycle_with_extenders(
        self, fwk: Framework, state: CycleState, qpi: QueuedPodInfo, extenders: Extenders
    ) -> tuple[ScheduleResult, PodInfo | None, Status]:
        """scheduling_cycle with the extenders' Filter, Prioritize and Preempt verbs."""
        started = time.perf_counter()
        try:
            result = await self.schedule_pod_with_extenders(fwk, state, qpi.pod_info, extenders)
        except Exception as exc:
            if isinstance(exc, FitError) and fwk.has_post_filter_plugins():
                await self._preempt_with_extenders(fwk, state, qpi.pod_info, exc, extenders)
            return self._schedule_failed(fwk, state, qpi.pod_info, exc)
        self._algorithm_duration.observe(time.perf_counter() - started)
        return self._assume_reserve_permit(fwk, state, qpi.pod_info, result)

    async def _preempt_with_extenders(
        self,
        fwk: Framework,
        state: CycleState,
        pod_info: PodInfo,
        fit_error: FitError,
        extenders: Extenders,
    ) -> None:
        """Before PostFilter: the preemption plugin's dry run, then the extenders' preempt
        verb narrowing its candidates (upstream's callExtenders). The plugin is whichever
        PostFilter plugin offers the framework's ExtenderPreemption seam; it keeps the
        outcome in the cycle state for its PostFilter."""
        preemption = fwk.extender_preemption()
        if preemption is None or not extenders.preempts_for(pod_info.pod):
            return
        try:
            victims = preemption.preemption_victims(
                state, pod_info, fit_error.diagnosis.node_to_status)
        except Exception as exc:
            log.exception("preemption dry run failed", pod=pod_info.key)
            preemption.narrow_preemption(state, Status.from_error(exc))
            return
        if victims is None:
            return
        nodes = {n.name: n for n in self.sched.snapshot.list()}
        try:
            kept = await extenders.process_preemption(pod_info, victims, nodes)
        except ExtenderError as exc:
            preemption.narrow_preemption(state, Status(Code.ERROR, str(exc), error=exc))
            return
        preemption.narrow_preemption(state, dict(kept))

    def _schedule_failed(
        self, fwk: Framework, state: CycleState, pod_info: PodInfo, exc: Exception
    ) -> tuple[ScheduleResult, None, Status]:
        """No host: a FitError goes to PostFilter; anything else clears the nomination
        (upstream clearNominatedNode)."""
        if isinstance(exc, FitError):
            return self._post_filter(fwk, state, pod_info, exc)
        if isinstance(exc, NoNodesAvailableError):
            status = Status(Code.UNSCHEDULABLE, str(exc), error=exc)
        elif isinstance(exc, _StatusError):
            status = exc.status
        elif isinstance(exc, ExtenderError):
            # Already logged with its URL and cause by the extender client.
            status = Status(Code.ERROR, str(exc), error=exc)
        else:  # a bug in our code: report it on the pod, keep going
            log.exception("scheduling cycle failed", pod=pod_info.key, profile=fwk.profile_name)
            status = Status.from_error(exc)
        return ScheduleResult(nominating=CLEAR_NOMINATION), None, status

    def _assume_reserve_permit(
        self, fwk: Framework, state: CycleState, pod_info: PodInfo, result: ScheduleResult
    ) -> tuple[ScheduleResult, PodInfo | None, Status]:
        sched = self.sched
        # Assume: the cache counts the pod on its node before binding, so the next cycle does
        # not hand out the same resources.
        host = result.suggested_host
        assumed_info = assumed_pod_info(pod_info, host)
        try:
            sched.cache.assume_pod(assumed_info)
        except Exception as exc:
            log.exception("assume failed", pod=pod_info.key)
            return ScheduleResult(nominating=CLEAR_NOMINATION), None, Status.from_error(exc)

        status = fwk.run_reserve_plugins_reserve(state, assumed_info, host)
        if status is not None and not status.is_success():
            fwk.run_reserve_plugins_unreserve(state, assumed_info, host)
            self._forget(assumed_info.pod)
            return ScheduleResult(nominating=CLEAR_NOMINATION), assumed_info, rejected_on_node(
                status, pod_key=pod_info.key, node_name=host
            )

        status = fwk.run_permit_plugins(state, assumed_info, host)
        if status is not None and not status.is_success() and not status.is_wait():
            fwk.run_reserve_plugins_unreserve(state, assumed_info, host)
            self._forget(assumed_info.pod)
            return ScheduleResult(nominating=CLEAR_NOMINATION), assumed_info, rejected_on_node(
                status, pod_key=pod_info.key, node_name=host
            )

        # A pod that was nominated elsewhere now has a real place.
        sched.nominator.delete_nominated_pod_if_exists(pod_info.pod)
        return result, assumed_info, Status(Code.SUCCESS)

    def _post_filter(
        self, fwk: Framework, state: CycleState, pod_info: PodInfo, fit_error: FitError
    ) -> tuple[ScheduleResult, None, Status]:
        """No node fits: run PostFilter (preemption) so a later cycle may fit.  Without
        PostFilter plugins the nomination is cleared; with them, a PostFilter result decides
        (a node, or "" to clear) and no result leaves it alone."""
        nominating: str | None = CLEAR_NOMINATION
        diagnosis = fit_error.diagnosis
        if fwk.has_post_filter_plugins():
            nominating = None
            result, status = fwk.run_post_filter_plugins(
                state, pod_info, diagnosis.node_to_status
            )
            if status is not None and status.code == Code.ERROR:
                log.error("post filter failed", pod=pod_info.key, error=status.message())
            elif status is not None and not status.is_success():
                diagnosis.post_filter_msg = status.message()
                if status.plugin:
                    diagnosis.unschedulable_plugins.add(status.plugin)
            if result is not None:
                nominating = result.nominated_node_name
        return (
            ScheduleResult(nominating=nominating),
            None,
            Status(Code.UNSCHEDULABLE, str(fit_error), error=fit_error),
        )

    def _skip_pod_schedule(self, pod_info: PodInfo) -> bool:
        """A pod being deleted, or one already assumed (an update raced the cycle), is skipped."""
        meta = pod_info.pod.get("metadata") or {}
        if meta.get("deletionTimestamp"):
            return True
        return bool(self.sched.cache.is_assumed_pod(pod_info.pod))

    def schedule_pod(self, fwk: Framework, state: CycleState, pod_info: PodInfo) -> ScheduleResult:
        sched = self.sched
        sched.cache.update_snapshot(sched.snapshot)
        all_nodes = sched.snapshot.list()
        if not all_nodes:
            raise NoNodesAvailableError()

        feasible, diagnosis = self.find_nodes_that_fit(fwk, state, pod_info, all_nodes)
        if not feasible:
            raise FitError(pod_key=pod_info.key, num_all_nodes=len(all_nodes),
                           diagnosis=diagnosis)
        if len(feasible) == 1:
            return ScheduleResult(feasible[0].name, 1 + diagnosis.num_rejected, 1)

        table = self._score(fwk, state, pod_info, feasible)
        if table is None:
            # Every node scores 0, so select_host would pick uniformly among all of them:
            # the same draw without building a score column per feasible node.
            host = feasible[sched.rng.randrange(len(feasible))].name
        else:
            host = select_host_from_columns(table.names, table.totals, sched.rng,
                                            best=table.best)
        return ScheduleResult(host, len(feasible) + diagnosis.num_rejected, len(feasible))

    async def schedule_pod_with_extenders(
        self, fwk: Framework, state: CycleState, pod_info: PodInfo, extenders: Extenders
    ) -> ScheduleResult:
        """schedule_pod with the extenders' Filter after the Filter plugins and their
        Prioritize added to the Score plugins' totals (upstream's generic scheduler)."""
        sched = self.sched
        sched.cache.update_snapshot(sched.snapshot)
        all_nodes = sched.snapshot.list()
        if not all_nodes:
            raise NoNodesAvailableError()

        feasible, diagnosis = self.find_nodes_that_fit(fwk, state, pod_info, all_nodes)
        nominated = _nominated_node_name(pod_info.pod)
        from_nominated = (bool(nominated) and len(feasible) == 1
                          and feasible[0].name == nominated and not diagnosis.num_rejected)
        feasible = await extenders.filter(pod_info, feasible, diagnosis)
        if not feasible and from_nominated:
            # The extenders turned the nominated node down: search every node, as upstream.
            feasible, diagnosis = self.find_nodes_that_fit(
                fwk, state, pod_info, all_nodes, try_nominated=False
            )
            feasible = await extenders.filter(pod_info, feasible, diagnosis)
        if not feasible:
            raise FitError(pod_key=pod_info.key, num_all_nodes=len(all_nodes),
                           diagnosis=diagnosis)
        if len(feasible) == 1:
            return ScheduleResult(feasible[0].name, 1 + diagnosis.num_rejected, 1)

        table = self._score(fwk, state, pod_info, feasible)
        names = [n.name for n in feasible] if table is None else table.names
        totals = [0] * len(feasible) if table is None else table.totals
        added = await extenders.prioritize(pod_info, feasible)
        if added is not None:
            totals = [a + b for a, b in zip(totals, added)]
        host = select_host(list(zip(names, totals)), sched.rng)
        return ScheduleResult(host, len(feasible) + diagnosis.num_rejected, len(feasible))

    def _score(
        self, fwk: Framework, state: CycleState, pod_info: PodInfo, feasible: list[NodeInfo]
    ) -> ScoreTable | None:
        """PreScore and Score; None when the profile has no Score plugin."""
        status = fwk.run_pre_score_plugins(state, pod_info, feasible)
        if status is not None and not status.is_success():
            raise _StatusError(status)
        batch, self._batch = self._batch, None
        if not fwk.has_score_plugins():
            return None
        table, status = (batch or fwk).score_table(state, pod_info, feasible)
        if status is not None and not status.is_success():
            raise _StatusError(status)
        return table

    def find_nodes_that_fit(
        self,
        fwk: Framework,
        state: CycleState,
        pod_info: PodInfo,
        all_nodes: list[NodeInfo],
        *,
        try_nominated: bool = True,
    ) -> tuple[list[NodeInfo], Diagnosis]:
        diagnosis = Diagnosis()
        self._batch = None
        pre_result, status, rejectors = fwk.run_pre_filter_plugins(state, pod_info, all_nodes)
        if rejectors:  # in place: the Diagnosis keeps its set
            diagnosis.unschedulable_plugins.update(rejectors)
        if status is not None and not status.is_success():
            if not status.is_rejected():
                raise _StatusError(status)
            # Every node gets the PreFilter status so PostFilter (preemption) sees them all
            # (expanded when read).
            diagnosis.reject_all(all_nodes, status)
            diagnosis.pre_filter_msg = status.message()
            diagnosis.pre_filter_status = status
            if status.plugin:
                diagnosis.unschedulable_plugins.add(status.plugin)
            if status.code == Code.PENDING and status.plugin:
                diagnosis.pending_plugins.add(status.plugin)
            return [], diagnosis

        # A pod nominated by an earlier preemption tries its nominated node first.
        nominated = _nominated_node_name(pod_info.pod) if try_nominated else ""
        if nominated:
            nominated_info = self.sched.snapshot.get(nominated)
            if nominated_info is not None and nominated_info.node is not None:
                status = self._filter_node(fwk, state, pod_info, nominated_info)
                if status is None or status.is_success():
                    return [nominated_info], diagnosis

        nodes = all_nodes
        if pre_result is not None and pre_result.node_names is not None:
            nodes = self._restrict(all_nodes, pre_result.node_names)
        feasible = self._find_nodes_that_pass_filters(fwk, state, pod_info, nodes, diagnosis)
        if not feasible and len(nodes) < len(all_nodes) and pre_result is not None \
                and pre_result.shortcut:
            # The narrowing was a shortcut for the plugins' own Filter answers: the nodes it
            # left out are filtered now, each gets its status as without the shortcut.
            allowed = pre_result.node_names or set()
            rest = [n for n in all_nodes if n.name not in allowed]
            feasible = self._find_nodes_that_pass_filters(fwk, state, pod_info, rest, diagnosis)
        elif not feasible and len(nodes) < len(all_nodes):
            # Nodes a PreFilter result ruled out are counted in the message, as upstream's
            # absent-nodes status does ("N node(s) didn't satisfy plugin(s) [NodeAffinity]").
            excluded = Status(
                Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                f"node(s) didn't satisfy plugin(s) [{' '.join(sorted(rejectors))}]",
            )
            for node_info in all_nodes:
                diagnosis.node_to_status.setdefault(node_info.name, excluded)
        return feasible, diagnosis

    def _restrict(self, all_nodes: list[NodeInfo], allowed: Collection[str]) -> list[NodeInfo]:
        """The nodes of a PreFilter result, in the snapshot's order.  A few nodes of many
        (a gang's topology domain: 50 of 5000) are looked up by their snapshot position
        instead of walking every node (a third of a gang member's cycle at 5000 nodes)."""
        snapshot = self.sched.snapshot
        if len(allowed) * 16 < len(all_nodes) and all_nodes is snapshot.node_info_list:
            positions = snapshot.positions
            return [all_nodes[i] for i in sorted(
                positions[name] for name in allowed if name in positions)]
        return [n for n in all_nodes if n.name in allowed]

    def _filter_node(
        self, fwk: Framework, state: CycleState, pod_info: PodInfo, node_info: NodeInfo
    ) -> Status | None:
        if self.sched.has_nominated_pods():
            return fwk.run_filter_plugins_with_nominated_pods(state, pod_info, node_info)
        return fwk.run_filter_plugins(state, pod_info, node_info)

    def ranks_feasible_nodes(self, fwk: Framework) -> bool:
        """Whether more than one feasible node is worth finding: a Score plugin, or an
        extender that prioritizes or filters them (upstream hasScoring /
        hasExtenderFilters)."""
        return fwk.has_score_plugins() or any(
            e.is_filter() or e.is_prioritizer() for e in self.sched.extenders.all
        )

    def _find_nodes_that_pass_filters(
        self,
        fwk: Framework,
        state: CycleState,
        pod_info: PodInfo,
        nodes: list[NodeInfo],
        diagnosis: Diagnosis,
    ) -> list[NodeInfo]:
        num_all = len(nodes)
        if num_all == 0:
            return []
        to_find = num_feasible_nodes_to_find(
            effective_percentage(
                fwk.percentage_of_nodes_to_score, self.sched.config.percentage_of_nodes_to_score
            ),
            num_all,
        )
        if not self.ranks_feasible_nodes(fwk):
            # Nothing would choose between feasible nodes: the first one found is as good as
            # any (upstream findNodesThatPassFilters with neither hasScoring nor an extender
            # filter).
            to_find = 1
        if not fwk.has_filter_plugins():
            start = self.next_start_node_index % num_all
            picked = wrapped_slice(nodes, start, min(to_find, num_all))
            self.next_start_node_index = (start + to_find) % num_all
            return picked

        start = self.next_start_node_index % num_all
        with_nominated_pods = self.sched.has_nominated_pods()
        if self.batches is not None:
            snapshot = self.sched.snapshot
            self._batch = self.batches.begin(
                fwk, state, pod_info, num_nodes=len(snapshot.list()),
                image_generation=snapshot.image_generation, snapshot=snapshot)
        feasible, processed = filter_nodes_from(
            fwk, state, pod_info, nodes, start=start, to_find=to_find, diagnosis=diagnosis,
            with_nominated_pods=with_nominated_pods, batch=self._batch,
        )
        self.next_start_node_index = (start + processed) % num_all
        return feasible

    # --- failure ---------------------------------------------------------------------------

    def handle_scheduling_failure(
        self,
        fwk: Framework,
        qpi: QueuedPodInfo,
        status: Status,
        *,
        nominating: str | None,
        attempt: Attempt,
    ) -> None:
        """The one failure handler (upstream handleSchedulingFailure): requeue the pod, update
        its nomination, and tell the user why (event + PodScheduled=False condition).

        ``nominating``: None leaves the nomination alone; a node name nominates the pod there;
        "" clears it.
        """
        sched = self.sched
        rejected = status.is_rejected()
        reason = REASON_UNSCHEDULABLE if rejected else REASON_SCHEDULER_ERROR
        message = failure_message(status)
        sched.record_attempt(
            fwk.profile_name, "unschedulable" if rejected else "error", attempt.started
        )
        fit_error = status.error if isinstance(status.error, FitError) else None
        if fit_error is not None:
            qpi.unschedulable_plugins = set(fit_error.diagnosis.unschedulable_plugins)
            qpi.pending_plugins = set(fit_error.diagnosis.pending_plugins)
        elif rejected and status.plugin:
            qpi.unschedulable_plugins = {status.plugin}
            qpi.pending_plugins = set()
        else:
            qpi.unschedulable_plugins = set()
            qpi.pending_plugins = set()
        if rejected:
            qpi.consecutive_errors = 0
            log.info("unable to schedule pod; waiting", pod=qpi.key, reason=message)
        else:
            qpi.consecutive_errors += 1
            log.warning("error scheduling pod; retrying", pod=qpi.key, error=message)

        # The pod may have been deleted or bound by someone else meanwhile: then there is
        # nothing to requeue (the informer already told the queue).
        pod = qpi.pod_info.pod
        current = sched.current_pod(pod)
        if current is None or (current.get("spec") or {}).get("nodeName"):
            sched.queue.done(qpi.pod_info.uid)
            return
        if current is not pod and current["metadata"].get("resourceVersion") != pod[
            "metadata"
        ].get("resourceVersion"):
            # Requeue the newest version: the update may be what makes it schedulable.
            try:
                qpi.pod_info = PodInfo.from_pod(current)
            except Exception as exc:
                log.warning("pod became malformed", pod=qpi.key, error=str(exc))
        try:
            sched.queue.add_unschedulable_if_not_present(qpi, attempt.pod_scheduling_cycle)
        except Exception:
            log.exception("requeue failed", pod=qpi.key)
        sched.queue.done(qpi.pod_info.uid)
        # Before the next cycle, not when the status update comes back: a stale nomination
        # would keep the pod's requests reserved on that node against pods of equal or lower
        # priority meanwhile (None: from the pod's status, as upstream's ModeNoop).
        sched.nominator.add_nominated_pod(qpi.pod_info, nominating)
        sched.diagnoses.record(
            qpi, status, profile=fwk.profile_name, message=message,
            nominated_node=nominating or "",
        )
        # The full message: the event recorder cuts the event's note to upstream's 1024 bytes
        # (1020 + " ..."); the condition's message is never cut (upstream
        # handleSchedulingFailure / truncateMessage).
        sched.report_unschedulable(
            fwk, qpi.pod_info, reason=reason, message=message,
            nominated_node=nominating,
            plugins=sorted(qpi.unschedulable_plugins),
        )

    def _forget(self, assumed_pod: dict[str, Any]) -> None:
        try:
            self.sched.cache.forget_pod(assumed_pod)
        except CacheError as exc:
            # Upstream logs and goes on: the informer already put the bound pod in the cache
            # (add_pod replaced the assumed copy), so the cache agrees with the cluster.
            cached = self.sched.cache.get_pod(assumed_pod)
            log.error(
                "scheduler cache forget failed", pod=_key(assumed_pod),
                assumed_node=(assumed_pod.get("spec") or {}).get("nodeName", ""),
                actual_node="" if cached is None else cached["spec"].get("nodeName", ""),
                error=str(exc),
            )
        except Exception:
            log.exception("forget failed", pod=_key(assumed_pod))

    # --- binding cycle ---------------------------------------------------------------------

    async def binding_cycle(
        self,
        fwk: Framework,
        state: CycleState,
        qpi: QueuedPodInfo,
        *,
        assumed_info: PodInfo,
        result: ScheduleResult,
        attempt: Attempt,
    ) -> None:
        """WaitOnPermit, PreBind, Bind, PostBind; any failure goes through
        ``handle_binding_cycle_error`` (upstream bindingCycle)."""
        sched = self.sched
        node_name = result.suggested_host
        nominated = False
        nomination: asyncio.Task[bool] | None = None
        try:
            status: Status | None = None
            if self.nominate_for_binding:
                status, nomination = self._nominate_if_binding_takes_long(
                    fwk, state, assumed_info, node_name)
            if status is None or status.is_success():
                status = await fwk.wait_on_permit(assumed_info)
            if nomination is not None and (status is None or status.is_success()):
                # Written before PreBind.  Not awaited on a rejection at Permit: giving the
                # reserved room back goes first, the clear follows the write.
                nominated = await nomination
                nomination = None
            if status is not None and status.is_rejected():
                status = rejected_on_node(status, pod_key=assumed_info.key, node_name=node_name)
            if status is None or status.is_success():
                sched.check_still_leading()
                status = await fwk.run_pre_bind_plugins(state, assumed_info, node_name)
            if status is None or status.is_success():
                # Leadership is checked again by bind, right before the binders run.
                status = await sched.bind(fwk, state, assumed_info, node_name)
        except asyncio.CancelledError:
            # Shutdown or lost leadership: give the resources back and stop.
            if nomination is not None:
                nomination.cancel()
            fwk.run_reserve_plugins_unreserve(state, assumed_info, node_name)
            self._forget(assumed_info.pod)
            sched.queue.done(assumed_info.uid)
            raise
        except Exception as exc:
            log.exception("binding cycle failed", pod=assumed_info.key, node=node_name)
            status = Status.from_error(exc)

        if status is None or status.is_success():
            try:
                sched.cache.finish_binding(assumed_info.pod)
            except Exception:
                log.exception("finish binding failed", pod=assumed_info.key)
            sched.record_attempt(fwk.profile_name, "scheduled", attempt.started)
            sched.record_scheduled(qpi)
            if DEBUG.enabled:
                log.debug("successfully bound pod to node", pod=assumed_info.key,
                          node=node_name, evaluated_nodes=result.evaluated_nodes,
                          feasible_nodes=result.feasible_nodes)
            fwk.run_post_bind_plugins(state, assumed_info, node_name)
            sched.queue.done(assumed_info.uid)
            sched.report_scheduled(assumed_info, node_name, profile=fwk.profile_name)
            return
        self.handle_binding_cycle_error(
            fwk, state, qpi, assumed_info=assumed_info, result=result, status=status,
            attempt=attempt,
        )
        if nomination is not None:
            # The write is still under way: clear the nomination once it is done.
            sched.clear_nomination(qpi.pod_info.pod, after=nomination)
        elif nominated and not _nominated_node_name(qpi.pod_info.pod):
            # The failure handler clears the nomination through the pod it requeued; if the
            # informer had not delivered our own write yet, that pod shows none: clear it.
            sched.clear_nomination(qpi.pod_info.pod)

    def _nominate_if_binding_takes_long(
        self, fwk: Framework, state: CycleState, assumed_info: PodInfo, node_name: str
    ) -> tuple[Status | None, asyncio.Task[bool] | None]:
        """NominatedNodeNameForExpectation: when PreBind has work (a PreBindPreFlight answers
        Success) or the pod waits at Permit, write ``status.nominatedNodeName`` before waiting,
        so other components see where the pod is about to be bound.  A plain pod (every
        preflight Skip, no wait) is bound soon anyway and costs no write.  Returns the
        preflight's failure (an Error; a rejection is not a valid answer and counts as one)
        and the write under way (a task answering whether the pod was nominated): it runs
        while the pod waits at Permit, and the cycle awaits it before PreBind."""
        pre = fwk.run_pre_bind_pre_flights(state, assumed_info, node_name)
        if pre is not None and (pre.code == Code.ERROR or pre.is_rejected()):
            if pre.is_rejected():
                pre = Status(Code.ERROR, pre.message(), plugin=pre.plugin)
            return pre, None
        if pre is None or fwk.will_wait_on_permit(assumed_info):
            return None, asyncio.create_task(
                self.sched.nominate_for_binding(assumed_info, node_name),
                name=f"nominate:{assumed_info.key}",
            )
        return None, None

    def handle_binding_cycle_error(
        self,
        fwk: Framework,
        state: CycleState,
        qpi: QueuedPodInfo,
        *,
        assumed_info: PodInfo,
        result: ScheduleResult,
        status: Status,
        attempt: Attempt,
    ) -> None:
        """Failure after assume: undo, give the resources back, requeue."""
        sched = self.sched
        assumed_pod = assumed_info.pod
        fwk.run_reserve_plugins_unreserve(state, assumed_info, result.suggested_host)
        self._forget(assumed_pod)

        # Forgetting the assumed pod gives its resources back: an AssignedPodDelete for the
        # others.
        def move_others() -> None:
            sched.queue.move_all_to_active_or_backoff_queue(
                ASSIGNED_POD_DELETE, assumed_pod, None,
                precheck=lambda other: other.pod_info.uid != assumed_info.uid,
            )

        if isinstance(status.error, (AlreadyBoundError, PodGoneError)):
            # Bound by someone else first (not ours to retry; the informer brings it back as
            # an assigned pod), or deleted meanwhile.
            log.info("pod bound elsewhere or deleted while binding; not retrying",
                     pod=assumed_info.key, detail=str(status.error))
            sched.queue.done(assumed_info.uid)
            move_others()
            return
        # For a rejection (Permit timeout, a gang rejected) the move happens after the pod
        # itself is requeued, as upstream defers it, so the move does not count as a move
        # request during the pod's own cycle and send it straight back to backoffQ.
        if not status.is_rejected():
            move_others()
        self.handle_scheduling_failure(
            fwk, qpi, status, nominating=CLEAR_NOMINATION, attempt=attempt
        )
        if status.is_rejected():
            move_others()


def rejected_on_node(status: Status, *, pod_key: str, node_name: str) -> Status:
    """A Reserve, Permit or WaitOnPermit rejection as upstream reports it: a FitError over the
    one node the pod was assumed on ("0/1 nodes are available: 1 <reason>."), so the user
    reads the same sentence as for a Filter rejection.  Errors pass through unchanged."""
    if not status.is_rejected():
        return status
    diagnosis = Diagnosis(node_to_status={node_name: status})
    if status.plugin:
        diagnosis.unschedulable_plugins.add(status.plugin)
        if status.code == Code.PENDING:
            diagnosis.pending_plugins.add(status.plugin)
    fit_error = FitError(pod_key=pod_key, num_all_nodes=1, diagnosis=diagnosis)
    return Status(status.code, str(fit_error), plugin=status.plugin, error=fit_error)


def failure_message(status: Status) -> str:
    """What the user is told: the status' reasons, or its error (a FitError's histogram)."""
    if status.error is not None and not status.reasons:
        return str(status.error)
    return status.message()


def assumed_pod_info(pod_info: PodInfo, node_name: str) -> PodInfo:
    """The pod as assumed on ``node_name``: its PodInfo, parsed and validated when queued,
    for a copy of the pod with spec.nodeName set (never parsed twice; upstream copies the
    QueuedPodInfo).  The pod dict is a shallow copy with a new spec, as objects from the
    informer are shared."""
    pod = dict(pod_info.pod)
    pod["spec"] = dict(pod_info.pod.get("spec") or {})
    pod["spec"]["nodeName"] = node_name
    return pod_info.with_node_name(pod)


def _nominated_node_name(pod: dict[str, Any]) -> str:
    return str((pod.get("status") or {}).get("nominatedNodeName") or "")


def _key(pod: dict[str, Any]) -> str:
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"
