"""PreFilter, Filter and PostFilter: the half of the runtime that finds the nodes a pod fits
(upstream ``RunPreFilterPlugins``, ``RunFilterPlugins``, ``RunPostFilterPlugins`` and the
PreFilter extensions), with the batched Filter walk over many nodes."""

from __future__ import annotations

import time
from collections.abc import Collection, Mapping
from typing import cast

import structlog

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.errors import guard_error as _guard_error
from scheduler.framework.instrumentation import (  # extension point labels, as upstream's
    FILTER, POST_FILTER, PRE_FILTER, PRE_FILTER_EXTENSION_ADD_POD, PRE_FILTER_EXTENSION_REMOVE_POD,
)
from scheduler.framework.node_info import NodeInfo
from scheduler.framework.nominated import filter_with_nominated_pods
from scheduler.framework.runtime_base import FilterFn, RuntimeBase, plugin_raised
from scheduler.framework.status import Code, Status
from scheduler.framework.types import PostFilterResult, PreFilterResult, ReprieveFilter
from scheduler.objects.pod import PodInfo

log = structlog.get_logger("scheduler.framework.runtime")

# The codes the per-plugin loops compare by identity (an enum attribute costs a class lookup).
_SKIP = Code.SKIP
_SUCCESS = Code.SUCCESS


class FilterSteps(RuntimeBase):
    """PreFilter, Filter (per node and batched) and PostFilter of ``Framework``."""

    # --- PreFilter / Filter ----------------------------------------------------------------

    def run_pre_filter_plugins(
        self, state: CycleState, pod_info: PodInfo, nodes: list[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status | None, set[str]]:
        """Run PreFilter plugins.  Returns the merged node restriction, the status, and the
        plugins that rejected the pod or narrowed the node set (for requeueing)."""
        self.flush_metrics()
        start = time.perf_counter()
        sampled = state.record_plugin_metrics
        skip: set[str] = set()
        result: PreFilterResult | None = None
        plugins_with_nodes: list[str] = []
        rejectors: set[str] = set()
        return_status: Status | None = None
        final: tuple[PreFilterResult | None, Status | None, set[str]] | None = None
        instr = self._instr
        for name, pre_filter, evaluations in self._pre_filter_calls:
            if sampled:
                r, s = instr.call_with_result(PRE_FILTER, name, sampled, pod_info.key,
                                              pre_filter, state, pod_info, nodes)
            else:  # the instrumented call without its timing: one call level less per plugin
                try:
                    r, s = pre_filter(state, pod_info, nodes)
                except Exception as exc:
                    r, s = None, plugin_raised(PRE_FILTER, name, pod_info.key, exc)
            evaluations.value += 1  # BulkCounterChild.inc(1) without the call
            if s is None:
                if r is None:
                    continue  # Success on every node (nearly every plugin that does not Skip)
            elif s.code == _SKIP:
                skip.add(name)
                continue
            elif s.code != _SUCCESS:
                s.plugin = name
                if s.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                    rejectors.add(name)
                    final = (None, s, rejectors)
                    break
                if s.code == Code.UNSCHEDULABLE:
                    # Keep going: preemption needs every PreFilter's state (upstream #119770).
                    rejectors.add(name)
                    return_status = s
                    continue
                final = (None, _guard_error(s, f"running PreFilter plugin {name!r}", name), set())
                break
            if r is not None and not r.all_nodes():
                plugins_with_nodes.append(name)
            result = r if result is None else result.merge(r)
            if result is not None and not result.all_nodes() and not result.node_names:
                if len(plugins_with_nodes) == 1:
                    msg = f"node(s) didn't satisfy plugin {plugins_with_nodes[0]}"
                else:
                    msg = (
                        "node(s) didn't satisfy plugin(s) "
                        f"[{' '.join(sorted(plugins_with_nodes))}] simultaneously"
                    )
                final = (
                    result,
                    Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, msg),
                    rejectors | set(plugins_with_nodes),
                )
                break
        if final is None:
            final = (result, return_status, rejectors | set(plugins_with_nodes))
        state.skip_filter_plugins = skip
        instr.observe_point(PRE_FILTER, final[1], start)
        return final

    def run_pre_filter_extension_add_pod(
        self, state: CycleState, pod_to_schedule: PodInfo, pod_to_add: PodInfo, node_info: NodeInfo
    ) -> Status | None:
        return self._run_pre_filter_extension(
            state, pod_to_schedule, pod_to_add, node_info, add=True
        )

    def run_pre_filter_extension_remove_pod(
        self,
        state: CycleState,
        pod_to_schedule: PodInfo,
        pod_to_remove: PodInfo,
        node_info: NodeInfo,
    ) -> Status | None:
        return self._run_pre_filter_extension(
            state, pod_to_schedule, pod_to_remove, node_info, add=False
        )

    def _run_pre_filter_extension(
        self,
        state: CycleState,
        pod_to_schedule: PodInfo,
        other: PodInfo,
        node_info: NodeInfo,
        *,
        add: bool,
    ) -> Status | None:
        point = PRE_FILTER_EXTENSION_ADD_POD if add else PRE_FILTER_EXTENSION_REMOVE_POD
        sampled = state.record_plugin_metrics
        skip = state.skip_filter_plugins
        for name, plugin in self._pre_filter:
            if name in skip:
                continue
            ext = plugin.pre_filter_extensions()
            if ext is None:
                continue
            status = self._instr.call(
                point, name, sampled, pod_to_schedule.key,
                ext.add_pod if add else ext.remove_pod,
                state, pod_to_schedule, other, node_info,
            )
            if status is not None and status.code != Code.SUCCESS:
                operation = "AddPod" if add else "RemovePod"
                return _guard_error(
                    status, f"running {operation} on PreFilter plugin {name!r}", name
                )
        return None

    def _filter_plan(self, state: CycleState) -> list[tuple[int, str, FilterFn]]:
        """The cycle's Filter plugins minus those its PreFilter skipped, computed once per
        cycle state (Filter runs for every node, so even a set lookup per plugin counts)."""
        if self._plan_state is not state:
            skip = state.skip_filter_plugins
            # Preemption filters each candidate node on its own clone of the state: the
            # same skip set, so the same plan.
            if skip != self._plan_skip:
                self._plan = [
                    (index, name, plugin.filter)
                    for index, (name, plugin) in enumerate(self._filter)
                    if name not in skip
                ]
                self._plan_skip = set(skip)
            self._plan_state = state
        return self._plan

    def run_filter_plugins(
        self, state: CycleState, pod_info: PodInfo, node_info: NodeInfo
    ) -> Status | None:
        """Stop at the first plugin that does not answer Success; the status names it."""
        return self._run_plan(self._filter_plan(state), state, pod_info, node_info)

    def _run_plan(
        self, plan: list[tuple[int, str, FilterFn]], state: CycleState, pod_info: PodInfo,
        node_info: NodeInfo,
    ) -> Status | None:
        """``run_filter_plugins`` over ``plan`` (the cycle's, or a part of it)."""
        sampled = state.record_plugin_metrics
        evals = self._filter_evals
        for index, name, filter_fn in plan:
            evals[index] += 1
            if sampled:
                t0 = time.perf_counter()
            status = self._filter_one(name, filter_fn, state, pod_info, node_info)
            if sampled:
                self._instr.observe_plugin(FILTER, name, status, t0)
            if status is not None and status.code != Code.SUCCESS:
                if not status.is_rejected():
                    # Filter plugins may only answer Success or a rejection.
                    return _guard_error(status, f"running {name!r} filter plugin", name)
                status.plugin = name
                return status
        return None

    def run_filter_plugins_on_nodes(
        self, state: CycleState, pod_info: PodInfo, nodes: list[NodeInfo], *,
        only: Collection[str] | None = None,
    ) -> list[Status | None]:
        """``run_filter_plugins`` for many nodes: plugin by plugin over the nodes every
        earlier plugin passed, so each node's status names its first rejecting plugin.

        One ``filter_nodes`` call per plugin replaces one Python call per node and plugin,
        the dominant cost of a cycle on a large cluster.  In cycles sampled for the
        per-plugin duration metric, each node counts as one Filter call lasting the batch's
        mean, under its own status code.  ``only``: run just these of the cycle's plugins
        (opportunistic batching runs the ones that sign apart from the others).
        """
        sampled = state.record_plugin_metrics
        size = len(nodes)  # of ``batch``, kept beside it (a len() call per plugin less)
        statuses: list[Status | None] = [None] * size
        alive = list(range(size))
        batch = nodes
        evals = self._filter_evals
        plan = self._filter_plan(state)
        if only is not None:
            plan = [entry for entry in plan if entry[1] in only]
        for index, name, _ in plan:
            evals[index] += size
            plugin = self._filter[index][1]
            t0 = time.perf_counter() if sampled else 0.0
            try:
                results = plugin.filter_nodes(state, pod_info, batch)
                if len(results) != size:
                    raise RuntimeError(
                        f"filter_nodes answered {len(results)} statuses for {size} nodes"
                    )
            except Exception:
                # Find the node (or nodes) that made it raise, one Filter call each.
                results = [
                    self._filter_one(name, plugin.filter, state, pod_info, n) for n in batch
                ]
            if sampled:
                self._instr.observe_filter_batch(name, results, time.perf_counter() - t0)
            if not any(results):
                continue
            kept: list[int] = []
            for i, status in zip(alive, results):
                if status is None or status.code == Code.SUCCESS:
                    kept.append(i)
                    continue
                if not status.is_rejected():
                    status = _guard_error(status, f"running {name!r} filter plugin", name)
                else:
                    status.plugin = name
                statuses[i] = status
            if not kept:
                break
            alive = kept
            batch = [nodes[i] for i in kept]
            size = len(batch)
        return statuses

    @staticmethod
    def _filter_one(
        name: str, filter_fn: FilterFn, state: CycleState, pod_info: PodInfo,
        node_info: NodeInfo,
    ) -> Status | None:
        """One Filter call; a plugin that raises answers an Error status naming it."""
        try:
            return filter_fn(state, pod_info, node_info)
        except Exception as exc:
            log.exception(
                "Filter plugin raised", plugin=name, pod=pod_info.key, node=node_info.name
            )
            return Status.from_error(exc, plugin=name)

    def run_filter_plugins_with_nominated_pods(
        self, state: CycleState, pod_info: PodInfo, node_info: NodeInfo
    ) -> Status | None:
        """Upstream's two-pass Filter with the node's nominated pods (``nominated.py``)."""
        return filter_with_nominated_pods(
            state, pod_info, node_info, nominator=self._nominator,
            run_filter=self.run_filter_plugins,
            add_pod_extension=self.run_pre_filter_extension_add_pod,
        )

    def reprieve_filter(
        self, state: CycleState, *, leave_out: Collection[str]
    ) -> ReprieveFilter:
        """For preemption's dry run on clones of ``state``: the plan's plugins split into
        those in ``leave_out`` (whose answer depends on the node object and the pod only)
        and the others, each as a Filter; see ``ReprieveFilter``."""
        skip = state.skip_filter_plugins
        active = any(name not in skip and plugin.pre_filter_extensions() is not None
                     for name, plugin in self._pre_filter)
        plan = self._filter_plan(state)
        dependent = [entry for entry in plan if entry[1] not in leave_out]
        run = self._plan_runner(dependent)
        nominator, add_pod = self._nominator, self.run_pre_filter_extension_add_pod
        # A live view of the nodes holding nominated pods (None: ask the nominator per node).
        nominated_nodes = self.nodes_with_nominated_pods()

        def run_with_nominated(
            state: CycleState, pod_info: PodInfo, node_info: NodeInfo
        ) -> Status | None:
            if nominated_nodes is not None and node_info.name not in nominated_nodes:
                return run(state, pod_info, node_info)
            return filter_with_nominated_pods(state, pod_info, node_info, nominator=nominator,
                                              run_filter=run, add_pod_extension=add_pod)

        last = max((i for i, entry in enumerate(plan) if entry[1] in leave_out), default=-1)
        return ReprieveFilter(
            dependent=run_with_nominated,
            independent=self._plan_runner([entry for entry in plan if entry[1] in leave_out]),
            dependent_names=tuple(entry[1] for entry in dependent),
            extensions=active, nominated_nodes=nominated_nodes,
            after_independent=frozenset(entry[1] for entry in plan[last + 1:]))

    def _plan_runner(self, plan: list[tuple[int, str, FilterFn]]) -> FilterFn:
        """``run_filter_plugins`` over a part of the cycle's plan."""
        run_plan = self._run_plan

        def run(state: CycleState, pod_info: PodInfo, node_info: NodeInfo) -> Status | None:
            return run_plan(plan, state, pod_info, node_info)

        return run

    def nodes_with_nominated_pods(self) -> Collection[str] | None:
        """Names of the nodes holding nominated pods, or None when the nominator cannot
        tell (then every node takes the two-pass filter)."""
        names = getattr(self._nominator, "nominated_node_names", None)
        return None if names is None else cast("Collection[str]", names())

    def run_post_filter_plugins(
        self, state: CycleState, pod_info: PodInfo, node_to_status: Mapping[str, Status]
    ) -> tuple[PostFilterResult | None, Status | None]:
        """Run until one plugin succeeds, fails hard or answers UnschedulableAndUnresolvable;
        otherwise Unschedulable with every plugin's reasons."""
        self.flush_metrics()
        start = time.perf_counter()
        sampled = state.record_plugin_metrics
        result: PostFilterResult | None = None
        reasons: list[str] = []
        rejector = ""
        rejector_said = False
        final: tuple[PostFilterResult | None, Status | None] | None = None
        for name, plugin in self._post_filter:
            r, s = self._instr.call_with_result(
                POST_FILTER, name, sampled, pod_info.key, plugin.post_filter,
                state, pod_info, node_to_status,
            )
            if s is None or s.code == Code.SUCCESS:
                final = (r, s)
                break
            if s.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                s.plugin = name
                final = (r, s)
                break
            if not s.is_rejected():
                final = (None, _guard_error(s, f"running PostFilter plugin {name!r}", name))
                break
            if r is not None:
                # A result is a nomination to apply, an empty one included (it clears the
                # pod's); no result leaves it alone (upstream's ModeNoop).
                result = r
            reasons.extend(s.reasons)
            # A plugin that rejects without a reason (DynamicResources for a pod without
            # claims) does not name the rejection while a later one says why.
            if not rejector or (not rejector_said and s.reasons):
                rejector, rejector_said = name, bool(s.reasons)
        if final is None:
            final = (result, Status(Code.UNSCHEDULABLE, *reasons, plugin=rejector))
        self._instr.observe_point(POST_FILTER, final[1], start)
        return final
