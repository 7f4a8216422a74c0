"""Gang scheduling end to end (issue 5): the shipped Coscheduling profile and PodGroup CRD
against the sandbox over HTTP, with the simulated kubelet running and finishing pods."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any

from scheduler.plugins.coscheduling.core import parse_rfc3339
from scheduler.sandbox import Sandbox
from tests.integration.harness import running_scheduler, user_client, wait_until
from tests.integration.procs import (
    coscheduling_config,
    create_pod_group,
    gang_pod,
    get_pod_group,
    install_crd,
    pod_group,
)


async def _setup(sandbox_factory: Any, tmp_path: Path, **kwargs: Any) -> tuple[Sandbox, Path]:
    sb: Sandbox = await sandbox_factory(**kwargs)
    kc = sb.write_kubeconfig(tmp_path / "kc")
    async with user_client(kc) as cluster:
        await install_crd(cluster.client)
    return sb, kc


async def _failed_notes(cluster: Any, name: str) -> list[str]:
    return [str(e.get("note") or "") for e in await cluster.events_for(name)
            if e["reason"] == "FailedScheduling"]


async def _bound(cluster: Any, names: list[str]) -> dict[str, str]:
    """name -> nodeName for the pods that have one."""
    pods = {p["metadata"]["name"]: p for p in await cluster.list_pods("default")}
    return {n: pods[n]["spec"]["nodeName"] for n in names
            if n in pods and pods[n]["spec"].get("nodeName")}


async def test_gang_waits_for_min_member_then_binds_all_at_once(
    sandbox_factory: Any, tmp_path: Path
) -> None:
    sb, kc = await _setup(sandbox_factory, tmp_path, nodes=3)
    async with user_client(kc) as cluster, running_scheduler(kc, config=coscheduling_config()):
        await create_pod_group(cluster.client, pod_group("trio", 3))
        await cluster.create_pods([gang_pod("trio-0", "trio"), gang_pod("trio-1", "trio")])

        async def both_refused() -> bool:
            # A member tried before the informer saw its sibling counts 1; the sibling's
            # arrival requeues it, and the next refusal counts both.
            return all(["current pods number: 2" in " ".join(await _failed_notes(cluster, n))
                        for n in ("trio-0", "trio-1")])
        await wait_until(both_refused, timeout=10,
                         message="FailedScheduling counting both members")
        for name in ("trio-0", "trio-1"):
            [note] = [n for n in await _failed_notes(cluster, name)
                      if "current pods number: 2" in n]
            # The shortfall, in scheduler-plugins' words: how many exist, how many are needed.
            assert "cannot find enough sibling pods" in note, note
            assert "current pods number: 2" in note and "minMember of group: 3" in note, note
            pod = await cluster.get_pod(name)
            assert pod is not None and not pod["spec"].get("nodeName")
            [cond] = [c for c in pod["status"]["conditions"] if c["type"] == "PodScheduled"]
            assert cond["status"] == "False" and "minMember of group: 3" in cond["message"]
        assert sb.counters()["bindings"] == 0

        # Let the two settle in the unschedulable pool: the sibling's arrival must move them.
        await asyncio.sleep(1.5)
        await cluster.create_pod(gang_pod("trio-2", "trio"))
        names = ["trio-0", "trio-1", "trio-2"]

        async def all_bound() -> bool:
            return len(await _bound(cluster, names)) == 3
        await wait_until(all_bound, timeout=5, message="all three members bound")
        assert sb.counters()["bindings"] == 3


def _waiting_names(parts: Any) -> set[str]:
    handle = parts.scheduler.profiles["py-scheduler"].handle
    return {wp.pod_info.name for wp in handle.iterate_waiting_pods()}


BIG = ["big-0", "big-1", "big-2"]


async def test_partial_gang_rejected_in_post_filter_releases_its_reservations(
    sandbox_factory: Any, tmp_path: Path
) -> None:
    # Two nodes of 2 CPUs; each member needs 1.5 CPUs, so two of the three fit. The shipped
    # profile: members wait up to 60 s at Permit (permitWaitingTimeSeconds).
    sb, kc = await _setup(sandbox_factory, tmp_path, nodes=2, node_cpu="2", node_memory="8Gi")
    async with user_client(kc) as cluster, \
            running_scheduler(kc, config=coscheduling_config()) as parts:
        await create_pod_group(cluster.client, pod_group("big", 3))
        # The plain pod queues behind the gang (later than the group): it is tried right
        # after the gang reserved both nodes and its third member failed.
        await cluster.create_pods([gang_pod(n, "big", cpu="1500m") for n in BIG])
        await cluster.create_pod(gang_pod("plain", None, cpu="1500m"))

        async def rejected() -> bool:
            notes = await _failed_notes(cluster, "big-2")
            return any("gets rejected due to Pod big-2" in n for n in notes)
        await wait_until(rejected, timeout=10, message="gang rejected in PostFilter")
        siblings = [n for name in ("big-0", "big-1") for n in await _failed_notes(cluster, name)]
        # upstream schedulingCycle / bindingCycle wrap a WaitOnPermit rejection as a FitError
        # over one node; scheduler-plugins' Coscheduling.PostFilter rejects with these words.
        assert "0/1 nodes are available: 1 optimistic rejection in PostFilter." in siblings, \
            siblings

        async def plain_bound() -> bool:
            return "plain" in await _bound(cluster, ["plain"])
        # Far sooner than the 60 s Permit timeout: the rejection released the reservations.
        await wait_until(plain_bound, timeout=10, message="the plain pod bound on freed room")
        assert await _bound(cluster, BIG) == {}, "no member of a partial gang is bound"
        assert sb.counters()["bindings"] == 1  # the plain pod's, and nothing else ever
        assert not _waiting_names(parts) & {"plain"}


async def test_partial_gang_released_when_permit_times_out(
    sandbox_factory: Any, tmp_path: Path
) -> None:
    # podGroupRejectPercentage 100: PostFilter keeps the siblings waiting, so only the
    # PodGroup's scheduleTimeoutSeconds (2 s) lets them go.  podGroupBackoffSeconds keeps
    # the timed-out gang from grabbing the room again at once: with no backoff a gang that
    # can never fit re-reserves on every retry and, sorting before later pods of equal
    # priority, starves them (the same as scheduler-plugins).
    sb, kc = await _setup(sandbox_factory, tmp_path, nodes=2, node_cpu="2", node_memory="8Gi")
    config = coscheduling_config(coscheduling_args={"podGroupRejectPercentage": 100,
                                                    "podGroupBackoffSeconds": 10})
    async with user_client(kc) as cluster, running_scheduler(kc, config=config) as parts:
        await create_pod_group(cluster.client, pod_group("big", 3, timeout=2))
        await cluster.create_pods([gang_pod(n, "big", cpu="1500m") for n in BIG])
        await wait_until(lambda: len(_waiting_names(parts)) == 2, timeout=10,
                         message="two members waiting at Permit")
        await cluster.create_pod(gang_pod("plain", None, cpu="1500m"))

        async def plain_refused() -> bool:
            return any("Insufficient cpu" in n for n in await _failed_notes(cluster, "plain"))
        # While the two wait, they hold the room: the plain pod does not fit.
        await wait_until(plain_refused, timeout=10, message="plain pod refused meanwhile")
        assert len(_waiting_names(parts)) == 2

        async def plain_bound() -> bool:
            return "plain" in await _bound(cluster, ["plain"])
        await wait_until(plain_bound, timeout=10, message="the plain pod bound after timeout")
        notes = [n for name in BIG for n in await _failed_notes(cluster, name)]
        # upstream bindingCycle: the WaitOnPermit rejection as a FitError over one node.
        assert ("0/1 nodes are available: 1 rejected due to timeout after waiting 2s at plugin "
                "Coscheduling.") in notes, notes
        assert await _bound(cluster, BIG) == {}, "no member of a partial gang is bound"
        assert sb.counters()["bindings"] == 1


async def test_two_gangs_competing_for_the_cluster_both_complete_in_turn(
    sandbox_factory: Any, tmp_path: Path
) -> None:
    # Two nodes of 2 CPUs; every member needs 1.5 CPUs: one gang of two fits at a time.
    sb, kc = await _setup(sandbox_factory, tmp_path, nodes=2, node_cpu="2", node_memory="8Gi")
    gangs = {"a": ["a-0", "a-1"], "b": ["b-0", "b-1"]}
    async with user_client(kc) as cluster, running_scheduler(kc, config=coscheduling_config()):
        for g in gangs:
            await create_pod_group(cluster.client, pod_group(g, 2, timeout=3))
        # Interleaved, all at once: the order that makes naive gang scheduling deadlock
        # (each gang holding one node while waiting for the other).
        await cluster.create_pods(
            [gang_pod(n, g, cpu="1500m", run_seconds=2)
             for pair in zip(gangs["a"], gangs["b"]) for n, g in zip(pair, "ab")])

        async def both_finished() -> bool:
            phase = {p["metadata"]["name"]: p["status"].get("phase")
                     for p in await cluster.list_pods("default")}
            return all(phase.get(n) == "Succeeded" for ms in gangs.values() for n in ms)
        await wait_until(both_finished, timeout=30, interval=0.05,
                         message="both gangs ran to completion (no deadlock)")
        # Exactly one binding per pod: no member was bound, lost and bound again.
        assert sb.counters()["bindings"] == 4
        started, finished = {}, {}
        for n in gangs["a"] + gangs["b"]:
            pod = await cluster.get_pod(n)
            assert pod is not None
            started[n] = parse_rfc3339(pod["status"]["startTime"]) or 0.0
            [cs] = pod["status"]["containerStatuses"]
            finished[n] = parse_rfc3339(cs["state"]["terminated"]["finishedAt"]) or 0.0
        # One gang at a time: the second started only once the first had finished.
        first, second = sorted(gangs.values(), key=lambda ms: min(started[n] for n in ms))
        assert min(started[n] for n in second) >= max(finished[n] for n in first), (
            started, finished)


async def test_pod_group_created_after_its_pods_schedules_them_promptly(
    sandbox_factory: Any, tmp_path: Path
) -> None:
    sb, kc = await _setup(sandbox_factory, tmp_path, nodes=3)
    names = ["late-0", "late-1", "late-2"]
    async with user_client(kc) as cluster, running_scheduler(kc, config=coscheduling_config()):
        await cluster.create_pods([gang_pod(n, "late") for n in names])

        async def not_found() -> bool:
            notes = [n for name in names for n in await _failed_notes(cluster, name)]
            return any("PodGroup default/late not found" in n for n in notes)
        await wait_until(not_found, timeout=10, message="'PodGroup not found' refusals")
        # Past every backoff: the members sit in the unschedulable pool, where only a
        # cluster event (or the 5-minute flush) can move them.
        await asyncio.sleep(2.5)
        assert await _bound(cluster, names) == {}
        await create_pod_group(cluster.client, pod_group("late", 3))

        async def all_bound() -> bool:
            return len(await _bound(cluster, names)) == 3
        await wait_until(all_bound, timeout=5, message="members bound after PodGroupAdd")
        assert sb.counters()["bindings"] == 3


async def test_status_controller_follows_the_gang_through_its_life(
    sandbox_factory: Any, tmp_path: Path
) -> None:
    from scheduler.client.connection import load_connection
    from scheduler.controllers.podgroup import run_controller

    sb, kc = await _setup(sandbox_factory, tmp_path, nodes=3)
    names = ["job-0", "job-1", "job-2"]
    stop, ready = asyncio.Event(), asyncio.Event()
    controller = asyncio.create_task(run_controller(
        kubeconfig=None, namespace=None, stop=stop, ready=ready,
        connection=load_connection(kubeconfig=str(kc))), name="test-podgroup-controller")
    try:
        await asyncio.wait_for(ready.wait(), timeout=15)
        async with user_client(kc) as cluster:
            await create_pod_group(cluster.client, pod_group("job", 3))
            seen: list[dict[str, Any]] = []

            async def status_is(phase: str, **counts: int) -> bool:
                status = (await get_pod_group(cluster.client, "job")).get("status") or {}
                if not seen or seen[-1] != status:
                    seen.append(dict(status))
                return status.get("phase") == phase and all(
                    status.get(k) == v for k, v in counts.items())

            await wait_until(lambda: status_is("Pending", running=0), timeout=10,
                             message="phase Pending for a group without pods")
            assert "scheduleStartTime" not in seen[-1]
            # Two of three: still Pending (not enough members), nothing scheduled.
            await cluster.create_pods([gang_pod(n, "job", run_seconds=3) for n in names[:2]])
            async with running_scheduler(kc, config=coscheduling_config()):
                await asyncio.sleep(1.0)
                assert await status_is("Pending", running=0)
                await cluster.create_pod(gang_pod(names[2], "job", run_seconds=3))
                await wait_until(lambda: status_is("Running", running=3, succeeded=0),
                                 timeout=10, message="phase Running with 3 running")
                assert seen[-1].get("scheduleStartTime"), seen[-1]
                await wait_until(lambda: status_is("Finished", running=0, succeeded=3),
                                 timeout=15, message="phase Finished with 3 succeeded")
        phases = [s.get("phase") for s in seen]
        order = ["Pending", "Scheduling", "Running", "Finished"]
        ranks = [order.index(p) for p in phases if p in order]
        assert ranks == sorted(ranks), f"phases went backwards: {phases}"
        assert {"Pending", "Running", "Finished"} <= set(phases), phases
        assert seen[-1]["failed"] == 0
        assert sb.counters()["bindings"] == 3
    finally:
        stop.set()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(controller, timeout=15)
