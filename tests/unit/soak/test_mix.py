"""The soak's mix: the same seed makes the same decisions; the objects it makes are valid
for our scheduler and carry their expectation."""

from __future__ import annotations

import random
from typing import Any

import pytest

from scheduler.objects.pod import pod_requests
from scheduler.soak import mix as m


class RecordingClient:
    """The API as the mix sees it: records every write, lists nothing."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, str]] = []

    async def create(self, path: str, body: dict[str, Any], **_: Any) -> dict[str, Any]:
        self.calls.append(("create", path, body["metadata"]["name"]))
        return body

    async def patch(self, path: str, body: Any, **_: Any) -> dict[str, Any]:
        self.calls.append(("patch", path, repr(body)))
        return {}

    async def delete(self, path: str, **_: Any) -> dict[str, Any]:
        self.calls.append(("delete", path, ""))
        return {}

    async def get(self, path: str, **_: Any) -> dict[str, Any]:
        return {"items": []}


class Admin:
    def __init__(self) -> None:
        self.calls: list[str] = []

    async def adrop_watches(self) -> int:
        self.calls.append("drop")
        return 3

    async def acompact(self) -> str:
        self.calls.append("compact")
        return "1"

    async def afail(self, verb: str, resource: str, **kw: Any) -> int:
        self.calls.append(f"fail {verb} {resource} {kw['code']}")
        return 1

    async def aadd_latency(self, seconds: float) -> None:
        self.calls.append(f"latency {seconds}")

    async def aclear(self) -> None:
        self.calls.append("clear")


async def _run(seed: int, steps: int = 60) -> tuple[list[tuple[str, str, str]], list[str]]:
    client, admin = RecordingClient(), Admin()
    mix = m.Mix(client, rng=random.Random(seed), base_nodes=["node-0000", "node-0001"],  # type: ignore[arg-type]
                admin=admin, faults=m.Faults(), on_schedulable=lambda keys: None,
                clock=lambda: 0.0)
    await mix.setup()
    for i in range(steps):
        await mix.step()
        if i % 10 == 0:
            await mix.inject_fault()
    return client.calls, admin.calls


async def test_the_same_seed_makes_the_same_mix() -> None:
    assert await _run(5) == await _run(5)
    assert await _run(5) != await _run(6)


async def test_the_mix_keeps_a_steady_number_of_jobs_gangs_and_volume_pods() -> None:
    """However long the soak, the cluster does not grow: past ``KEEP``, adding one deletes
    the oldest of its kind first (the RSS invariant then measures the scheduler)."""
    client, admin = RecordingClient(), Admin()
    mix = m.Mix(client, rng=random.Random(3), base_nodes=["node-0000"],  # type: ignore[arg-type]
                admin=admin, faults=m.Faults(), on_schedulable=lambda keys: None,
                clock=lambda: 0.0)
    adders = {"job": mix.add_job, "gang": mix.add_gang, "vol": mix.add_volume_pod}
    for kind, add in adders.items():
        for _ in range(3 * m.KEEP[kind]):
            await add()
        made = mix._made(kind)
        assert len(made) == m.KEEP[kind]
        # the newest are kept; the first made was deleted first
        assert made[-1] == f"{kind}-{mix.state.counter}"
    deleted_jobs = [p for verb, p, _ in client.calls if verb == "delete" and "/jobs/" in p]
    assert len(deleted_jobs) == 2 * m.KEEP["job"]
    assert deleted_jobs[0].endswith("/jobs/job-1")


async def test_faults_come_in_turn_so_a_short_soak_sees_each_kind() -> None:
    client, admin = RecordingClient(), Admin()
    faults = m.Faults()
    mix = m.Mix(client, rng=random.Random(1), base_nodes=["n"], admin=admin,  # type: ignore[arg-type]
                faults=faults, on_schedulable=lambda keys: None, clock=lambda: 0.0)
    for _ in range(len(m.FAULT_KINDS)):
        await mix.inject_fault()
    assert set(faults.counts) == set(m.FAULT_KINDS)


@pytest.mark.parametrize(("obj", "expect"), [
    (m.pod("a", expect="bound", cpu="100m"), "bound"),
    (m.pod("b", expect="any", cpu="10", pool="gang"), "any"),
    (m.deployment("d", 2, expect="bound", cpu="100m", claims=True)["spec"]["template"], "bound"),
    (m.job("j", parallelism=2, run_seconds=3, cpu="200m")["spec"]["template"], "bound"),
])
def test_pods_are_ours_and_say_what_to_expect(obj: dict[str, Any], expect: str) -> None:
    assert obj["metadata"]["labels"][m.EXPECT] == expect
    assert obj["spec"]["schedulerName"] == m.SCHEDULER_NAME
    assert pod_requests(obj).milli_cpu > 0


def test_pool_pods_tolerate_their_pool_and_the_pool_repels_others() -> None:
    node = m.node("p", cpu="16", pool="gang")
    pod = m.pod("g", expect="any", cpu="10", pool="gang")
    assert node["spec"]["taints"][0]["key"] == m.POOL
    assert pod["spec"]["tolerations"][0]["value"] == "gang"
    assert pod["spec"]["nodeSelector"] == {m.POOL: "gang"}
    # Two pool nodes hold two of the partial gang's members, never three.
    assert 2 * int(m.PARTIAL_CPU) > int(m.POOL_NODE_CPU) >= int(m.PARTIAL_CPU)
