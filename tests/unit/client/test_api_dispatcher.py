"""The API dispatcher (SchedulerAsyncAPICalls): one call per pod at a time, a binding
outranking a status patch, status patches merged, no-ops skipped, a call added while another
of the same pod executes run after it on the object it left; upstream's metrics."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Awaitable, Mapping
from datetime import datetime, timezone
from typing import Any

import pytest

from scheduler.client.api_dispatcher import (
    POD_BINDING,
    POD_STATUS_PATCH,
    ApiDispatcher,
    CallOverwritten,
    CallSkipped,
    DispatcherClosed,
    PodBindingCall,
    PodStatusPatchCall,
)
from scheduler.metrics import SchedulerMetrics

NOW = datetime(2024, 1, 2, 3, 4, 5, tzinfo=timezone.utc)


def _pod(name: str = "p", *, reason: str | None = None, nnn: str = "") -> dict[str, Any]:
    status: dict[str, Any] = {"phase": "Pending", "conditions": []}
    if reason is not None:
        status["conditions"].append({"type": "PodScheduled", "status": "False",
                                     "reason": reason, "message": reason,
                                     "lastTransitionTime": "2020-01-01T00:00:00Z",
                                     "lastProbeTime": None})
    if nnn:
        status["nominatedNodeName"] = nnn
    return {"metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}"},
            "status": status}


def _condition(reason: str) -> dict[str, Any]:
    return {"type": "PodScheduled", "status": "False", "reason": reason, "message": reason}


class Patcher:
    """A pods/status endpoint: records each patch, applies it, answers the pod; ``hold``
    keeps the next patches of a pod in flight until released."""

    def __init__(self, pods: list[dict[str, Any]]) -> None:
        self.pods = {p["metadata"]["name"]: copy.deepcopy(p) for p in pods}
        self.patches: list[tuple[str, dict[str, Any]]] = []
        self.gates: dict[str, asyncio.Event] = {}
        self.started: dict[str, asyncio.Event] = {}

    def hold(self, name: str) -> None:
        self.gates[name] = asyncio.Event()
        self.started[name] = asyncio.Event()

    def release(self, name: str) -> None:
        self.gates.pop(name).set()

    async def patch_pod_status(self, namespace: str, name: str,
                               patch: Mapping[str, Any]) -> Any:
        if name in self.started:
            self.started[name].set()
        if name in self.gates:
            await self.gates[name].wait()
        self.patches.append((name, copy.deepcopy(dict(patch))))
        status = self.pods[name]["status"]
        for cond in patch["status"].get("conditions", []):
            status["conditions"] = [c for c in status["conditions"]
                                    if c["type"] != cond["type"]] + [cond]
        if "nominatedNodeName" in patch["status"]:
            status["nominatedNodeName"] = patch["status"]["nominatedNodeName"] or ""
        return copy.deepcopy(self.pods[name])


def _patch(patcher: Patcher, pod: dict[str, Any], *, reason: str | None = None,
           nnn: str | None = None, always: bool = False) -> PodStatusPatchCall:
    return PodStatusPatchCall(pod, client=patcher, now=lambda: NOW,
                              conditions=[_condition(reason)] if reason else None,
                              nominated_node_name=nnn, always=always)


async def _outcome(call: Awaitable[Any], *, result: bool = False) -> str:
    """How a call ended, in a word: "done" (or, with ``result``, its result as a string),
    or why it did not run."""
    try:
        value = await call
    except CallSkipped:
        return "skipped"
    except CallOverwritten:
        return "overwritten"
    except DispatcherClosed:
        return "closed"
    return str(value) if result else "done"


def _written(patcher: Patcher) -> list[tuple[str, str | None, str | None]]:
    """(pod, PodScheduled reason, nominatedNodeName) of each patch written."""
    out = []
    for name, patch in patcher.patches:
        status = patch["status"]
        reasons = [c["reason"] for c in status.get("conditions", [])]
        out.append((name, reasons[0] if reasons else None,
                    status.get("nominatedNodeName", "-")))
    return out


# Calls added back to back (none has run yet): (name, calls, outcomes, patches written).
# A call is ("patch", reason, nnn) or ("bind",).
QUEUED_CASES: list[tuple[str, list[tuple[Any, ...]], list[str],
                         list[tuple[str, str | None, str | None]]]] = [
    ("one patch", [("patch", "A", None)], ["done"], [("p", "A", "-")]),
    ("a later patch absorbs the earlier one: its condition wins, the nomination is kept",
     [("patch", "A", "n1"), ("patch", "B", None)], ["overwritten", "done"],
     [("p", "B", "n1")]),
    ("a later nomination replaces the earlier one",
     [("patch", None, "n1"), ("patch", None, "n2")], ["overwritten", "done"],
     [("p", None, "n2")]),
    ("a binding overwrites a queued status patch, which is never written",
     [("patch", "A", None), ("bind",)], ["overwritten", "done"], []),
    ("a status patch after a queued binding is skipped",
     [("bind",), ("patch", "A", None)], ["done", "skipped"], []),
    ("a patch with no effect on the pod is skipped", [("patch", "Old", None)], ["skipped"], []),
    ("clearing a nomination the pod does not show is skipped", [("patch", None, "")],
     ["skipped"], []),
    ("... unless the caller's copy may be older than the server's",
     [("patch", None, "", True)], ["done"], [("p", None, None)]),
    ("a later patch that undoes the earlier one's nomination leaves nothing to write",
     [("patch", None, "n1"), ("patch", "Old", "")], ["overwritten", "skipped"], []),
]


@pytest.mark.parametrize(("calls", "outcomes", "written"), [c[1:] for c in QUEUED_CASES],
                         ids=[c[0] for c in QUEUED_CASES])
async def test_calls_queued_for_one_pod(calls: list[tuple[Any, ...]], outcomes: list[str],
                                        written: list[tuple[str, str | None, str | None]]
                                        ) -> None:
    pod = _pod(reason="Old")
    patcher = Patcher([pod])
    bound: list[str] = []

    async def bind() -> str:
        bound.append("p")
        return "bound"

    dispatcher = ApiDispatcher(parallelism=4)
    futures = []
    for call in calls:
        if call[0] == "bind":
            futures.append(dispatcher.add(PodBindingCall("uid-p", bind)))
        else:
            always = len(call) > 3 and call[3]
            futures.append(dispatcher.add(_patch(patcher, pod, reason=call[1], nnn=call[2],
                                                 always=always)))
    assert [await _outcome(f) for f in futures] == outcomes
    assert _written(patcher) == written
    assert bound == (["p"] if "done" in [o for c, o in zip(calls, outcomes)
                                          if c[0] == "bind"] else [])
    await dispatcher.close()


async def test_a_call_added_while_another_of_the_pod_executes_runs_after_it() -> None:
    pod = _pod()
    patcher = Patcher([pod])
    patcher.hold("p")
    order: list[str] = []

    async def bind() -> None:
        order.append("bind")

    dispatcher = ApiDispatcher(parallelism=4)
    first = dispatcher.add(_patch(patcher, pod, reason="A", nnn="n1"))
    await patcher.started["p"].wait()  # the patch is being written
    same = dispatcher.add(_patch(patcher, pod, reason="A", nnn="n1"))
    binding = dispatcher.add(PodBindingCall("uid-p", bind))
    assert dispatcher.pending() == {"uid-p": POD_BINDING}
    assert not binding.done()
    patcher.release("p")
    assert await _outcome(first) == "done"
    # The repeat of the executing patch was absorbed by the binding that replaced it.
    assert await _outcome(same) == "overwritten"
    assert await _outcome(binding) == "done"
    assert order == ["bind"] and _written(patcher) == [("p", "A", "n1")]
    await dispatcher.close()


async def test_a_repeat_of_the_executing_patch_is_skipped_once_it_lands() -> None:
    pod = _pod()
    patcher = Patcher([pod])
    patcher.hold("p")
    dispatcher = ApiDispatcher(parallelism=4)
    first = dispatcher.add(_patch(patcher, pod, reason="A"))
    await patcher.started["p"].wait()
    # Based on the old copy it would write; the executing call's answer shows it done.
    repeat = dispatcher.add(_patch(patcher, pod, reason="A"))
    patcher.release("p")
    assert [await _outcome(first), await _outcome(repeat)] == ["done", "skipped"]
    assert _written(patcher) == [("p", "A", "-")]
    await dispatcher.close()


async def test_pods_are_written_in_parallel_up_to_parallelism() -> None:
    pods = [_pod(f"p{i}") for i in range(3)]
    patcher = Patcher(pods)
    for p in pods:
        patcher.hold(p["metadata"]["name"])
    dispatcher = ApiDispatcher(parallelism=2)
    futures = [dispatcher.add(_patch(patcher, p, reason="A")) for p in pods]
    await patcher.started["p0"].wait()
    await patcher.started["p1"].wait()
    await asyncio.sleep(0)
    assert not patcher.started["p2"].is_set()  # waits for a free slot
    patcher.release("p0")
    await patcher.started["p2"].wait()
    patcher.release("p1")
    patcher.release("p2")
    assert [await _outcome(f) for f in futures] == ["done"] * 3
    await dispatcher.close()


@pytest.mark.parametrize("handler", ["sync_object", "sync_update"])
async def test_a_newer_pod_version_drops_a_patch_it_already_shows(handler: str) -> None:
    """As ``sync_object``, so ``sync_update`` (the informer's update handler: old, new)."""
    pod = _pod()
    patcher = Patcher([pod])
    dispatcher = ApiDispatcher(parallelism=1)
    future = dispatcher.add(_patch(patcher, pod, reason="A"))
    newer = _pod(reason="A")  # an informer update, before the call ran
    if handler == "sync_object":
        dispatcher.sync_object(newer)
    else:
        dispatcher.sync_update(pod, newer)
    assert await _outcome(future) == "skipped"
    assert patcher.patches == []
    await dispatcher.close()


async def test_metrics_count_executions_and_pending_calls() -> None:
    metrics = SchedulerMetrics()
    pod = _pod()
    patcher = Patcher([pod])

    async def failing_bind() -> None:
        raise RuntimeError("apiserver said no")

    def sample(name: str, **labels: str) -> float | None:
        return metrics.registry.get_sample_value(name, labels)

    dispatcher = ApiDispatcher(parallelism=1, metrics=metrics)
    patched = dispatcher.add(_patch(patcher, pod, reason="A"))
    bound = dispatcher.add(PodBindingCall("uid-other", failing_bind))
    assert sample("scheduler_pending_async_api_calls", call_type=POD_STATUS_PATCH) == 1
    assert sample("scheduler_pending_async_api_calls", call_type=POD_BINDING) == 1
    assert await _outcome(patched) == "done"
    with pytest.raises(RuntimeError, match="apiserver said no"):
        await bound
    assert sample("scheduler_async_api_call_execution_total", call_type=POD_STATUS_PATCH,
                  result="success") == 1
    assert sample("scheduler_async_api_call_execution_total", call_type=POD_BINDING,
                  result="error") == 1
    assert sample("scheduler_async_api_call_execution_duration_seconds_count",
                  call_type=POD_BINDING, result="error") == 1
    assert sample("scheduler_pending_async_api_calls", call_type=POD_STATUS_PATCH) == 0
    assert sample("scheduler_pending_async_api_calls", call_type=POD_BINDING) == 0
    await dispatcher.close()


async def test_close_ends_queued_calls_and_refuses_new_ones() -> None:
    pods = [_pod("a"), _pod("b")]
    patcher = Patcher(pods)
    patcher.hold("a")
    dispatcher = ApiDispatcher(parallelism=1)
    executing = dispatcher.add(_patch(patcher, pods[0], reason="A"))
    queued = dispatcher.add(_patch(patcher, pods[1], reason="A"))
    await patcher.started["a"].wait()
    await dispatcher.close()
    assert [await _outcome(executing), await _outcome(queued)] == ["closed", "closed"]
    assert await _outcome(dispatcher.add(_patch(patcher, pods[1], reason="B"))) == "closed"
    assert await dispatcher.drain(0.1)


async def test_a_caller_that_stops_waiting_cancels_its_executing_binding() -> None:
    started, cancelled = asyncio.Event(), asyncio.Event()

    async def slow_bind() -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    dispatcher = ApiDispatcher(parallelism=1)

    async def binding_cycle() -> None:
        await dispatcher.add(PodBindingCall("uid-p", slow_bind))

    cycle = asyncio.create_task(binding_cycle(), name="test-binding-cycle")
    await started.wait()
    cycle.cancel()  # lost the lease: the binding cycle is cancelled
    await asyncio.wait_for(cancelled.wait(), 1)
    assert await dispatcher.drain(1)
    # The dispatcher goes on with other calls.
    done = dispatcher.add(PodBindingCall("uid-q", lambda: asyncio.sleep(0)))
    assert await _outcome(done) == "done"
    await dispatcher.close()


@pytest.mark.parametrize(("flag", "on"), [("", True), ("SchedulerAsyncAPICalls=false", False)])
async def test_the_gate_decides_whether_the_scheduler_has_a_dispatcher(flag: str,
                                                                      on: bool) -> None:
    from scheduler.app import build_components
    from scheduler.client.connection import ConnectionConfig
    from scheduler.config import features
    from scheduler.config.defaults import default_config

    try:
        features.DEFAULT.set(flag)
        parts = build_components(default_config(), ConnectionConfig(host="http://127.0.0.1:9"),
                                 metrics=SchedulerMetrics())
        assert (parts.scheduler.api_dispatcher is not None) is on
        await parts.client.close()
    finally:
        features.DEFAULT.reset()


async def test_a_deleted_pod_drops_its_queued_patch() -> None:
    from scheduler.client.informer import DeletedFinalStateUnknown

    pods = [_pod("a"), _pod("b")]
    patcher = Patcher(pods)
    dispatcher = ApiDispatcher(parallelism=1)
    queued = [dispatcher.add(_patch(patcher, p, reason="A")) for p in pods]
    dispatcher.forget_object(pods[0])
    dispatcher.forget_object(DeletedFinalStateUnknown(key="ns/b", obj=pods[1]))
    assert [await _outcome(f) for f in queued] == ["skipped", "skipped"]
    assert patcher.patches == []
    await dispatcher.close()


# --- run_now: a binding run in its caller's task when the dispatcher would start it at once


class Gate:
    """A write held until released; records the task it ran in."""

    def __init__(self, result: Any = "bound", error: Exception | None = None) -> None:
        self.started, self.open = asyncio.Event(), asyncio.Event()
        self.result, self.error = result, error
        self.task: asyncio.Task[Any] | None = None

    async def __call__(self) -> Any:
        self.task = asyncio.current_task()
        self.started.set()
        await self.open.wait()
        if self.error is not None:
            raise self.error
        return self.result


async def _run_now(dispatcher: ApiDispatcher, call: PodBindingCall) -> str:
    return await _outcome(dispatcher.run_now(call), result=True)


# (name, what is in the dispatcher before, whether run_now runs in the caller's task)
RUN_NOW_CASES: list[tuple[str, str, bool]] = [
    ("an idle dispatcher runs it in the caller's task", "idle", True),
    ("a call of the same pod queued or executing: it queues behind it", "same-pod", False),
    ("another pod's call waiting for a slot: it queues, oldest first", "queue", False),
    ("every slot taken: it queues", "slots-full", False),
]


@pytest.mark.parametrize(("before", "inline"), [c[1:] for c in RUN_NOW_CASES],
                         ids=[c[0] for c in RUN_NOW_CASES])
async def test_run_now_runs_in_the_caller_only_when_the_loop_would_start_it_at_once(
        before: str, inline: bool) -> None:
    metrics = SchedulerMetrics()
    dispatcher = ApiDispatcher(parallelism=1, metrics=metrics)
    holds: list[Gate] = []
    futures: list[asyncio.Future[Any]] = []
    if before != "idle":
        first = Gate()
        holds.append(first)
        futures.append(dispatcher.add(PodBindingCall(
            "uid-p" if before == "same-pod" else "uid-a", first)))
        await first.started.wait()
        if before == "queue":
            futures.append(dispatcher.add(PodBindingCall("uid-b", lambda: asyncio.sleep(0))))
    assert dispatcher.would_run_now("uid-p") is inline
    gate = Gate()
    caller = asyncio.create_task(_run_now(dispatcher, PodBindingCall("uid-p", gate)),
                                 name="test-binding-cycle")
    await asyncio.sleep(0)
    for hold in holds:
        hold.open.set()
    await gate.started.wait()
    assert (gate.task is caller) is inline
    gate.open.set()
    assert await caller == "bound"
    assert [await _outcome(f) for f in futures] == ["done"] * len(futures)
    assert await dispatcher.drain(1) and dispatcher.pending() == {}
    # Counted as any call: executions and durations by result, nothing left pending.
    assert metrics.registry.get_sample_value(
        "scheduler_async_api_call_execution_total",
        {"call_type": POD_BINDING, "result": "success"}) == 1 + len(futures)
    assert metrics.registry.get_sample_value(
        "scheduler_pending_async_api_calls", {"call_type": POD_BINDING}) == 0
    await dispatcher.close()


async def test_calls_added_while_a_run_now_binding_executes_wait_for_it() -> None:
    pod = _pod()
    patcher = Patcher([pod])
    dispatcher = ApiDispatcher(parallelism=4)
    gate = Gate()
    caller = asyncio.create_task(_run_now(dispatcher, PodBindingCall("uid-p", gate)),
                                 name="test-binding-cycle")
    await gate.started.wait()
    assert dispatcher.pending() == {"uid-p": POD_BINDING}
    # Less relevant than the executing binding: skipped, as with a queued one.
    assert await _outcome(dispatcher.add(_patch(patcher, pod, reason="A"))) == "skipped"
    order: list[str] = []

    async def second_bind() -> None:
        order.append("second")

    later = dispatcher.add(PodBindingCall("uid-p", second_bind))
    await asyncio.sleep(0)
    assert order == [] and not later.done()  # never two calls of one pod at once
    gate.open.set()
    assert await caller == "bound"
    assert await _outcome(later) == "done" and order == ["second"]
    assert patcher.patches == []
    await dispatcher.close()


async def test_a_run_now_failure_is_the_callers_error_and_counted() -> None:
    metrics = SchedulerMetrics()
    dispatcher = ApiDispatcher(parallelism=1, metrics=metrics)
    gate = Gate(error=RuntimeError("apiserver said no"))
    gate.open.set()
    with pytest.raises(RuntimeError, match="apiserver said no"):
        await dispatcher.run_now(PodBindingCall("uid-p", gate))
    assert metrics.registry.get_sample_value(
        "scheduler_async_api_call_execution_total",
        {"call_type": POD_BINDING, "result": "error"}) == 1
    assert dispatcher.pending() == {} and dispatcher.would_run_now("uid-p")
    await dispatcher.close()


@pytest.mark.parametrize("stopper", ["caller cancelled", "dispatcher closed"])
async def test_a_run_now_binding_stops_as_a_queued_one_would(stopper: str) -> None:
    metrics = SchedulerMetrics()
    dispatcher = ApiDispatcher(parallelism=1, metrics=metrics)
    gate = Gate()
    caller = asyncio.create_task(_run_now(dispatcher, PodBindingCall("uid-p", gate)),
                                 name="test-binding-cycle")
    await gate.started.wait()
    if stopper == "caller cancelled":
        # Lost the lease: the binding cycle is cancelled, and its write with it.
        caller.cancel()
        with pytest.raises(asyncio.CancelledError):
            await caller
        assert dispatcher.would_run_now("uid-q")  # the dispatcher goes on
    else:
        # The dispatcher stops under a waiting caller: it is told DispatcherClosed.
        await dispatcher.close()
        assert await caller == "closed"
    assert metrics.registry.get_sample_value(
        "scheduler_async_api_call_execution_total",
        {"call_type": POD_BINDING, "result": "error"}) == 1
    assert dispatcher.pending() == {}
    await dispatcher.close()
