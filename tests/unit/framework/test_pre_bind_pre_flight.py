"""RunPreBindPreFlights (upstream's table in framework/runtime/framework_test.go, by meaning):
Success when one or more PreBind plugins will work, Skip when all skip (and their PreBind is
then skipped), an Error for a failing plugin or an answer other than Success, Skip or Error.
A PreBind plugin that does not implement the preflight counts as having work."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import PermitPlugin, PreBindPlugin
from scheduler.framework.status import Code, Status
from scheduler.objects.pod import PodInfo
from tests.builders import make_pod
from tests.unit.framework.fakeplugins import Env

SKIP = Status(Code.SKIP)
DEFAULT = object()  # the plugin does not implement the preflight


@pytest.mark.parametrize(
    ("answers", "code", "message", "pre_bind_runs"),
    [
        pytest.param({}, Code.SKIP, "", [], id="no-prebind-plugins"),
        pytest.param({"A": DEFAULT}, Code.SUCCESS, "", ["A"], id="not-implemented-has-work"),
        pytest.param({"A": SKIP, "B": SKIP}, Code.SKIP, "", [], id="all-skip"),
        pytest.param({"A": SKIP, "B": None}, Code.SUCCESS, "", ["B"], id="one-has-work"),
        pytest.param({"A": None, "B": Status(Code.ERROR, "boom")}, Code.ERROR,
                     "running PreBindPreFlight 'B': boom", None, id="error"),
        pytest.param({"A": RuntimeError("bug")}, Code.ERROR,
                     "running PreBindPreFlight 'A': bug", None, id="raises"),
        pytest.param({"A": Status(Code.UNSCHEDULABLE, "no")}, Code.ERROR,
                     "PreBindPreFlight A returned 'Unschedulable', which is unsupported. "
                     "It is supposed to return Success, Skip, or Error status", None,
                     id="rejection-is-unsupported"),
    ],
)
@pytest.mark.parametrize("sampled", [False, True], ids=["unsampled", "sampled"])
async def test_pre_flights(answers: dict[str, Any], code: Code, message: str,
                           pre_bind_runs: list[str] | None, sampled: bool) -> None:
    env = Env()
    for name, answer in answers.items():
        behaviour = {} if answer is DEFAULT else {"pre_bind_pre_flight": answer}
        env.add(name, [PreBindPlugin], **behaviour)
    fwk = env.framework(multi=list(answers))
    state, pod = CycleState(), PodInfo.from_pod(make_pod("p"))
    state.record_plugin_metrics = sampled  # plugins timed (sampled) or called directly
    status = fwk.run_pre_bind_pre_flights(state, pod, "n1")
    assert (status.code if status is not None else Code.SUCCESS) == code
    if message:
        assert status is not None and message in status.message()
    if pre_bind_runs is not None:
        assert await fwk.run_pre_bind_plugins(state, pod, "n1") is None
        assert env.calls("pre_bind") == pre_bind_runs


async def test_will_wait_on_permit_is_true_only_for_a_waiting_pod() -> None:
    env = Env()
    env.add("Gang", [PermitPlugin], permit=(Status(Code.WAIT), 30.0))
    fwk = env.framework(multi=["Gang"])
    pod = PodInfo.from_pod(make_pod("p"))
    assert not fwk.will_wait_on_permit(pod)
    fwk.run_permit_plugins(CycleState(), pod, "n1")
    assert fwk.will_wait_on_permit(pod)
    fwk.reject_waiting_pod(pod.uid)
    assert await fwk.wait_on_permit(pod) is not None
    assert not fwk.will_wait_on_permit(pod)
