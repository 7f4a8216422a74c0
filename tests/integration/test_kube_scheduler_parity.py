"""Behaviour users can see that must match kube-scheduler's (issue 12, part 1).

Each test names the upstream function whose behaviour it pins, and runs the daemon against the
sandbox over HTTP.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from scheduler.config.types import PluginRef
from scheduler.metrics import SchedulerMetrics
from tests.builders import NodeBuilder, PodBuilder
from tests.integration.harness import (
    for_api,
    running_scheduler,
    scheduler_config,
    user_client,
    wait_until,
)

SCHEDULER = "py-scheduler"


def pod(name: str, *, cpu: str = "100m", priority: int | None = None) -> PodBuilder:
    builder = PodBuilder(name).scheduler_name(SCHEDULER).req(cpu=cpu, memory="64Mi")
    if priority is not None:
        builder.priority(priority)
    return builder


async def failed_events(cluster: Any, name: str) -> list[dict[str, Any]]:
    return [e for e in await cluster.events_for(name) if e["reason"] == "FailedScheduling"]


def pod_scheduled_condition(pod_obj: dict[str, Any] | None) -> dict[str, Any]:
    for condition in ((pod_obj or {}).get("status") or {}).get("conditions") or []:
        if condition.get("type") == "PodScheduled":
            return dict(condition)
    return {}


async def test_event_note_is_cut_as_truncateMessage_and_the_condition_keeps_it_all(
    sandbox_factory: Any, tmp_path: Path
) -> None:
    """upstream handleSchedulingFailure / truncateMessage: the event's note is cut to 1020
    characters plus " ..."; the PodScheduled condition carries the whole message."""
    sb = await sandbox_factory(nodes=0)
    kc = sb.write_kubeconfig(tmp_path / "kc")
    async with user_client(kc) as cluster, running_scheduler(kc):
        # 30 nodes, each with its own long taint: the histogram runs well past 1024 bytes.
        for i in range(30):
            await cluster.create_node(for_api(
                NodeBuilder(f"n-{i:02d}").capacity(cpu="4", memory="8Gi", pods=110)
                .taint(f"example.com/a-rather-long-taint-key-number-{i:02d}", "v").obj()))
        await cluster.create_pod(for_api(pod("p").obj()))

        await wait_until(lambda: failed_events(cluster, "p"), timeout=10,
                         message="FailedScheduling event")

        async def condition_message() -> str:
            return str(pod_scheduled_condition(await cluster.get_pod("p")).get("message") or "")

        await wait_until(condition_message, timeout=10, message="PodScheduled condition")
        full = await condition_message()
        assert full.startswith("0/30 nodes are available: ")
        assert len(full) > 1024 and full.endswith("."), full
        [event] = await failed_events(cluster, "p")
        assert event["note"] == full[:1020] + " ...", event["note"][-40:]


async def test_profile_without_score_plugins_takes_the_first_feasible_node(
    sandbox_factory: Any, tmp_path: Path
) -> None:
    """upstream findNodesThatPassFilters: with no Score plugin (hasScoring false) and no
    extender, it looks for one feasible node only; the next search starts after it, so pods
    spread over the nodes in turn (with the adaptive count they would pick among ten
    equal-scored nodes at random)."""
    sb = await sandbox_factory(nodes=10, node_cpu="8", node_memory="16Gi")
    kc = sb.write_kubeconfig(tmp_path / "kc")
    config = scheduler_config()
    config.profiles[0].plugins.score.disabled.append(PluginRef("*"))
    async with user_client(kc) as cluster, running_scheduler(kc, config=config) as parts:
        assert not parts.scheduler.profiles[SCHEDULER].has_score_plugins()
        names = [f"p-{i}" for i in range(10)]
        await cluster.create_pods([for_api(pod(n).obj()) for n in names])

        async def nodes_of_all() -> list[str]:
            nodes = [await cluster.node_name(n) for n in names]
            return nodes if all(nodes) else []

        await wait_until(nodes_of_all, timeout=15, message="all ten pods bound")
        assert len(set(await nodes_of_all())) == 10


async def test_failure_without_postfilter_clears_a_stale_nomination(
    sandbox_factory: Any, tmp_path: Path
) -> None:
    """upstream schedulingCycle returns clearNominatedNode when no PostFilter plugin runs,
    and handleSchedulingFailure patches status.nominatedNodeName to "" and drops the pod
    from the nominator: its requests stop being held on that node against pods of equal or
    lower priority."""
    sb = await sandbox_factory(nodes=1, node_cpu="4", node_memory="8Gi")
    kc = sb.write_kubeconfig(tmp_path / "kc")
    config = scheduler_config()
    config.profiles[0].plugins.post_filter.disabled.append(PluginRef("*"))
    async with user_client(kc) as cluster, running_scheduler(kc, config=config) as parts:
        [node] = [n["metadata"]["name"] for n in await cluster.list_nodes()]
        # Nominated to the node by an earlier preemption, and now unable to fit anywhere.
        big = for_api(pod("big", cpu="3", priority=10).node_selector(gone="yes").obj())
        big["status"] = {"phase": "Pending", "nominatedNodeName": node}
        sb.raw_put(big)

        await wait_until(lambda: failed_events(cluster, "big"), timeout=10,
                         message="FailedScheduling event")

        async def nomination_cleared() -> bool:
            current = await cluster.get_pod("big") or {}
            return not (current.get("status") or {}).get("nominatedNodeName")

        await wait_until(nomination_cleared, timeout=10, message="nominatedNodeName cleared")
        stored = await cluster.get_pod("big")
        assert stored is not None and stored["metadata"].get("uid")
        assert parts.scheduler.nominator.nominated_node_for(stored) is None
        # The 3 CPUs the stale nomination held are free for a lower-priority pod.
        await cluster.create_pod(for_api(pod("small", cpu="2", priority=0).obj()))
        await wait_until(lambda: cluster.node_name("small"), timeout=10, message="small bound")


async def test_preemptor_is_held_out_of_the_queue_while_its_preemption_runs(
    sandbox_factory: Any, tmp_path: Path
) -> None:
    """upstream DefaultPreemption.PreEnqueue / Executor.prepareCandidateAsync: while the
    victims' API calls run the preemptor stays out of the queue (no attempt, no Filter pass,
    no FailedScheduling event); the victim's deletion brings it back, and it binds."""
    sb = await sandbox_factory(nodes=1, node_cpu="1", node_memory="4Gi")
    kc = sb.write_kubeconfig(tmp_path / "kc")
    metrics = SchedulerMetrics()
    async with user_client(kc) as cluster, running_scheduler(kc, metrics=metrics):
        await cluster.create_pod(for_api(pod("victim", cpu="800m", priority=0).obj()))
        await wait_until(lambda: cluster.node_name("victim"), timeout=10, message="victim bound")
        sb.faults.add_latency(2.0, "delete", "pods")  # the preemption stays in flight
        await cluster.create_pod(for_api(pod("preemptor", cpu="800m", priority=100).obj()))
        await wait_until(lambda: cluster.node_name("preemptor"), timeout=20,
                         message="preemptor bound after its victim left")
        notes = [e["note"] for e in await failed_events(cluster, "preemptor")]
        assert not [n for n in notes if "waiting for the preemption" in n], notes
        unschedulable = metrics.schedule_attempts.labels("unschedulable", SCHEDULER)
        assert unschedulable.value == 1


async def test_binding_cycle_error_clears_the_nomination(
    sandbox_factory: Any, tmp_path: Path
) -> None:
    """upstream handleBindingCycleError hands clearNominatedNode to the failure handler: a
    failed bind clears status.nominatedNodeName; the retry then binds the pod."""
    sb = await sandbox_factory(nodes=1, node_cpu="4", node_memory="8Gi")
    kc = sb.write_kubeconfig(tmp_path / "kc")
    async with user_client(kc) as cluster, running_scheduler(kc):
        [node] = [n["metadata"]["name"] for n in await cluster.list_nodes()]
        sb.faults.fail("create", "pods", subresource="binding", code=500, times=1)
        nominated = for_api(pod("nominated", cpu="1", priority=10).obj())
        nominated["status"] = {"phase": "Pending", "nominatedNodeName": node}
        sb.raw_put(nominated)

        await wait_until(lambda: cluster.node_name("nominated"), timeout=15,
                         message="bound on the retry")
        notes = [e["note"] for e in await failed_events(cluster, "nominated")]
        assert notes, "the failed bind was reported"

        async def nomination_cleared() -> bool:
            current = await cluster.get_pod("nominated") or {}
            return not (current.get("status") or {}).get("nominatedNodeName")

        await wait_until(nomination_cleared, timeout=10, message="nominatedNodeName cleared")


async def test_preemption_that_cannot_help_clears_a_stale_nomination(
    sandbox_factory: Any, tmp_path: Path
) -> None:
    """upstream Evaluator.Preempt answers NewPostFilterResultWithNominatedNode("") when no
    candidate can help, RunPostFilterPlugins keeps that non-noop result, and
    handleSchedulingFailure clears status.nominatedNodeName and the nominator."""
    sb = await sandbox_factory(nodes=1, node_cpu="4", node_memory="8Gi")
    kc = sb.write_kubeconfig(tmp_path / "kc")
    async with user_client(kc) as cluster, running_scheduler(kc) as parts:
        [node] = [n["metadata"]["name"] for n in await cluster.list_nodes()]
        # Nominated earlier, now asking for more than the node has: no victim can help, and
        # Filter says so (more than the node's allocatable is UnschedulableAndUnresolvable).
        big = for_api(pod("big", cpu="8", priority=10).obj())
        big["status"] = {"phase": "Pending", "nominatedNodeName": node}
        sb.raw_put(big)

        async def told_not_helpful() -> bool:
            notes = [e["note"] for e in await failed_events(cluster, "big")]
            return any("preemption: 0/1 nodes are available: 1 Preemption is not helpful"
                       in n for n in notes)

        await wait_until(told_not_helpful, timeout=10, message="preemption not helpful")

        async def nomination_cleared() -> bool:
            current = await cluster.get_pod("big") or {}
            return not (current.get("status") or {}).get("nominatedNodeName")

        await wait_until(nomination_cleared, timeout=10, message="nominatedNodeName cleared")
        stored = await cluster.get_pod("big")
        assert stored is not None
        assert parts.scheduler.nominator.nominated_node_for(stored) is None


async def test_no_nodes_clears_a_stale_nomination(sandbox_factory: Any, tmp_path: Path) -> None:
    """upstream schedulingCycle returns clearNominatedNode for ErrNoNodesAvailable: the
    nominated node is gone with every other, and so is the nomination."""
    sb = await sandbox_factory(nodes=0)
    kc = sb.write_kubeconfig(tmp_path / "kc")
    async with user_client(kc) as cluster, running_scheduler(kc):
        orphan = for_api(pod("orphan", priority=10).obj())
        orphan["status"] = {"phase": "Pending", "nominatedNodeName": "removed-node"}
        sb.raw_put(orphan)

        async def told() -> bool:
            notes = [e["note"] for e in await failed_events(cluster, "orphan")]
            return "no nodes available to schedule pods" in notes

        await wait_until(told, timeout=10, message="FailedScheduling: no nodes")

        async def nomination_cleared() -> bool:
            current = await cluster.get_pod("orphan") or {}
            return not (current.get("status") or {}).get("nominatedNodeName")

        await wait_until(nomination_cleared, timeout=10, message="nominatedNodeName cleared")
