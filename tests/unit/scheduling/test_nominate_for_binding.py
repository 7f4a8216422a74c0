"""NominatedNodeNameForExpectation (KEP-5278, beta on by default): before a binding cycle that
will take long -- a PreBind plugin has work (its PreBindPreFlight answers Success) or the pod
waits at Permit -- the pod's ``status.nominatedNodeName`` is written with the chosen node, before
WaitOnPermit and PreBind; a plain pod costs no write; a failed binding cycle clears it."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import pytest

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import PermitPlugin, PreBindPlugin
from scheduler.framework.runtime import Framework
from scheduler.framework.status import Code, Status
from scheduler.framework.types import QueuedPodInfo
from scheduler.metrics import SchedulerMetrics
from scheduler.objects.pod import PodInfo
from scheduler.queue.nominator import Nominator
from scheduler.schedule_one import ScheduleResult, SchedulingCycle, assumed_pod_info, Attempt
from tests.builders import PodBuilder
from tests.unit.framework.fakeplugins import Env

NODE = "n1"
SKIP = Status(Code.SKIP)


@dataclass
class _Queue:
    requeued: list[str] = field(default_factory=list)

    def done(self, uid: str) -> None: ...

    def add_unschedulable_if_not_present(self, qpi: QueuedPodInfo, cycle: int) -> None:
        self.requeued.append(qpi.key)

    def move_all_to_active_or_backoff_queue(self, *args: Any, **kw: Any) -> None: ...


@dataclass
class _Cache:
    def finish_binding(self, pod: dict[str, Any]) -> None: ...

    def forget_pod(self, pod: dict[str, Any]) -> None: ...


@dataclass
class _Diagnoses:
    def record(self, *args: Any, **kw: Any) -> None: ...


@dataclass
class _Sched:
    """The Scheduler's collaborators of a binding cycle; API writes go to ``log`` with the
    plugin calls, so their order shows."""

    log: list[tuple[str, str]]
    informer_pod: dict[str, Any] | None = None  # what the informer shows (None: as scheduled)
    metrics: SchedulerMetrics = field(default_factory=SchedulerMetrics)
    queue: _Queue = field(default_factory=_Queue)
    cache: _Cache = field(default_factory=_Cache)
    diagnoses: _Diagnoses = field(default_factory=_Diagnoses)
    nominator: Nominator = field(default_factory=Nominator)
    write_done: asyncio.Event | None = None  # holds the nomination write until set


    def check_still_leading(self) -> None: ...

    async def nominate_for_binding(self, pod_info: PodInfo, node_name: str) -> bool:
        self.log.append(("api", f"nominate {node_name}"))
        if self.write_done is not None:
            await self.write_done.wait()
        return True

    def clear_nomination(self, pod: dict[str, Any], *, after: Any = None) -> None:
        self.log.append(("api", "clear nomination" if after is None else "clear after write"))

    async def bind(self, fwk: Framework, state: CycleState, pod_info: PodInfo,
                   node_name: str) -> Status | None:
        self.log.append(("api", f"bind {node_name}"))
        return None

    def current_pod(self, pod: dict[str, Any]) -> dict[str, Any] | None:
        return self.informer_pod if self.informer_pod is not None else pod

    def record_attempt(self, *args: Any) -> None: ...

    def record_scheduled(self, qpi: QueuedPodInfo) -> None: ...

    def report_scheduled(self, pod_info: PodInfo, node_name: str, *,
                         profile: str | None = None) -> None: ...

    def report_unschedulable(self, fwk: Framework, pod_info: PodInfo, *, reason: str,
                             message: str, nominated_node: str | None,
                             plugins: list[str]) -> None:
        # The real one writes the nomination only when it differs from the pod's.
        current = str((pod_info.pod.get("status") or {}).get("nominatedNodeName") or "")
        if nominated_node is not None and nominated_node != current:
            self.log.append(("api", f"condition+nomination {nominated_node!r}"))
        else:
            self.log.append(("api", "condition"))


def _pod(nominated: str = "", *, rv: int = 1) -> dict[str, Any]:
    b = PodBuilder("p").uid("u-p").resource_version(rv)
    if nominated:
        b.set("status.nominatedNodeName", nominated)
    return b.obj()


async def _bind(env: Env, plugins: list[str], *, gate: bool = True,
                informer_pod: dict[str, Any] | None = None,
                sched: _Sched | None = None) -> _Sched:
    fwk = env.framework(multi=plugins)
    sched = sched or _Sched(env.log, informer_pod=informer_pod)
    cycle = SchedulingCycle(sched)  # type: ignore[arg-type]  # the cycle's collaborators
    cycle.nominate_for_binding = gate
    qpi = QueuedPodInfo(PodInfo.from_pod(_pod()), timestamp=0.0)
    assumed = assumed_pod_info(qpi.pod_info, NODE)
    state = fwk.new_cycle_state()
    status = fwk.run_permit_plugins(state, assumed, NODE)
    assert status is None or status.code == Code.WAIT
    await cycle.binding_cycle(fwk, state, qpi, assumed_info=assumed,
                              result=ScheduleResult(suggested_host=NODE),
                              attempt=Attempt(started=0.0, pod_scheduling_cycle=0))
    return sched


def _order(env: Env) -> list[str]:
    return [what if who == "api" else f"{who}.{what}" for who, what in env.log
            if who == "api" or what in ("pre_bind", "permit")]


@pytest.mark.parametrize(
    ("plugins", "gate", "order"),
    [
        pytest.param({"Volumes": {"pre_bind_pre_flight": None}}, True,
                     ["nominate n1", "Volumes.pre_bind", "bind n1"],
                     id="a-pvc-to-bind-nominates-before-prebind"),
        pytest.param({"Custom": {}}, True,
                     ["nominate n1", "Custom.pre_bind", "bind n1"],
                     id="a-prebind-without-preflight-has-work"),
        pytest.param({"Volumes": {"pre_bind_pre_flight": SKIP}}, True, ["bind n1"],
                     id="a-plain-pod-costs-no-write-and-skips-prebind"),
        pytest.param({"Volumes": {"pre_bind_pre_flight": None}}, False,
                     ["Volumes.pre_bind", "bind n1"], id="gate-off"),
    ],
)
async def test_nomination_before_prebind(plugins: dict[str, dict[str, Any]], gate: bool,
                                         order: list[str]) -> None:
    env = Env()
    for name, behaviour in plugins.items():
        env.add(name, [PreBindPlugin], **behaviour)
    await _bind(env, list(plugins), gate=gate)
    assert _order(env) == order


async def test_a_gang_member_waiting_at_permit_is_nominated_before_it_waits() -> None:
    env = Env()
    env.add("Volumes", [PreBindPlugin], pre_bind_pre_flight=SKIP)  # nothing for PreBind
    env.add("Gang", [PermitPlugin], permit=(Status(Code.WAIT), 30.0))
    writes_while_waiting: list[list[str]] = []

    async def allow_the_gang() -> None:
        while not env.instances["Gang"].handle.iterate_waiting_pods():
            await asyncio.sleep(0)
        await asyncio.sleep(0)  # the binding task runs up to WaitOnPermit
        writes_while_waiting.append([w for who, w in env.log if who == "api"])
        for wp in env.instances["Gang"].handle.iterate_waiting_pods():
            wp.allow("Gang")

    allower = asyncio.create_task(allow_the_gang())
    await _bind(env, ["Volumes", "Gang"])
    await allower
    assert writes_while_waiting == [["nominate n1"]]
    assert _order(env) == ["Gang.permit", "nominate n1", "bind n1"]
    assert env.calls("pre_bind") == []


@pytest.mark.parametrize(
    ("informer_pod", "writes"),
    [
        pytest.param(_pod(nominated=NODE, rv=2), ["condition+nomination ''"],
                     id="informer-saw-the-nomination"),
        pytest.param(None, ["condition", "clear nomination"], id="informer-behind"),
    ],
)
async def test_a_failed_binding_cycle_clears_the_nomination(
        informer_pod: dict[str, Any] | None, writes: list[str]) -> None:
    env = Env()
    env.add("Volumes", [PreBindPlugin], pre_bind_pre_flight=None,
            pre_bind=Status(Code.ERROR, "provisioning failed"))
    sched = await _bind(env, ["Volumes"], informer_pod=informer_pod)
    api = [w for who, w in env.log if who == "api"]
    assert api == ["nominate n1", *writes]
    assert sched.queue.requeued == ["default/p"]
    assert sched.nominator.nominated_node_for(_pod()) is None


async def test_a_preflight_error_fails_the_cycle_before_any_write() -> None:
    env = Env()
    env.add("Volumes", [PreBindPlugin], pre_bind_pre_flight=Status(Code.ERROR, "no state"))
    sched = await _bind(env, ["Volumes"])
    assert [w for who, w in env.log if who == "api"] == ["condition"]
    assert env.calls("pre_bind") == []
    assert sched.queue.requeued == ["default/p"]


@pytest.mark.parametrize(("flag", "on"), [("", True),
                                          ("NominatedNodeNameForExpectation=false", False)])
def test_the_gate_is_read_when_the_cycle_is_built(flag: str, on: bool) -> None:
    from scheduler.config import features

    try:
        features.DEFAULT.set(flag)
        cycle = SchedulingCycle(_Sched([]))  # type: ignore[arg-type]
        assert cycle.nominate_for_binding is on
    finally:
        features.DEFAULT.reset()


async def test_a_rejection_at_permit_gives_the_room_back_before_the_write_ends() -> None:
    """The write runs while the pod waits; a rejected gang member is requeued (its reserved
    room given back) without waiting for it, and the clear follows the write."""
    env = Env()
    env.add("Gang", [PermitPlugin], permit=(Status(Code.WAIT), 30.0))
    sched = _Sched(env.log, write_done=asyncio.Event())

    async def reject_the_gang() -> None:
        while ("api", "nominate n1") not in env.log:
            await asyncio.sleep(0)
        for wp in env.instances["Gang"].handle.iterate_waiting_pods():
            wp.reject("Gang", "optimistic rejection in PostFilter")

    rejecter = asyncio.create_task(reject_the_gang())
    # The write never ends unless the test lets it: a cycle that awaited it would hang (the
    # timeout only turns that into a failure).
    await asyncio.wait_for(_bind(env, ["Gang"], sched=sched), timeout=30)
    await rejecter
    assert sched.queue.requeued == ["default/p"]
    assert [w for who, w in env.log if who == "api"] == [
        "nominate n1", "condition", "clear after write"]
    assert sched.write_done is not None
    sched.write_done.set()
    await asyncio.sleep(0)
