"""CapacityScheduling in the shipped profile: the PreFilter rules (max, sum of used within the
sum of mins, nominated pods), Reserve/Unreserve, preemption reclaiming borrowed capacity, PDBs,
namespaces without quota, malformed quotas, registration and the shipped profile."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.config.defaults import default_config, shipped_config
from scheduler.config.errors import ConfigError
from scheduler.framework import events as ev
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.status import Code
from scheduler.objects.pod import PodInfo
from scheduler.plugins import names
from scheduler.plugins.capacityscheduling.plugin import (
    NAME,
    REASON_OVER_MAX,
    REASON_OVER_MIN,
    CapacityScheduling,
)
from scheduler.plugins.registry import in_tree_registry
from tests.builders import NodeBuilder, PodBuilder
from tests.fakes import FakeHandle, in_tree_framework
from tests.unit.plugins.capacityscheduling.harness import (
    HIGH,
    LOW,
    Cluster,
    code,
    node,
    pod,
    quota,
)
from tests.unit.plugins.defaultpreemption.harness import pdb

A = quota("team-a", min={"cpu": "2"}, max={"cpu": "4"})
B = quota("team-b", min={"cpu": "2"}, max={"cpu": "4"})


def test_registration_and_args() -> None:
    assert NAME == names.CAPACITY_SCHEDULING == CapacityScheduling.NAME
    assert in_tree_registry().get(NAME) is CapacityScheduling
    with pytest.raises(ConfigError, match="CapacityScheduling.args.foo"):
        CapacityScheduling({"foo": 1}, FakeHandle())


def _plugins_at(profile: Any, point: str) -> list[str]:
    fwk = in_tree_framework(profile, snapshot_provider=lambda: None, listers=None, nominator=None)
    return [name for name, _ in fwk._points[point]]


def test_shipped_profile_enables_it_and_plain_defaults_do_not() -> None:
    shipped = shipped_config().profiles[0]
    assert _plugins_at(shipped, "postFilter") == ["DynamicResources", "CapacityScheduling",
                                                  "Coscheduling"]
    assert "CapacityScheduling" in _plugins_at(shipped, "preFilter")
    assert "CapacityScheduling" in _plugins_at(shipped, "reserve")
    plain = default_config().profiles[0]
    assert _plugins_at(plain, "postFilter") == ["DynamicResources", "DefaultPreemption"]
    assert "CapacityScheduling" not in _plugins_at(plain, "preFilter")


def test_events_requeue_on_quota_changes_and_freed_pods() -> None:
    plugin = CapacityScheduling(None, FakeHandle())
    events = {e.event for e in plugin.events_to_register()}
    assert {ev.ELASTIC_QUOTA_ADD, ev.ELASTIC_QUOTA_UPDATE, ev.ELASTIC_QUOTA_DELETE,
            ev.ASSIGNED_POD_DELETE, ev.ASSIGNED_POD_UPDATE} == events


# --- PreFilter ------------------------------------------------------------------------------

CASES: list[tuple[str, list[dict[str, Any]], list[dict[str, Any]], dict[str, Any], str]] = [
    ("no quota: as before", [], [pod("x", "free", "3", node_name="n1")], pod("p", "free", "1"), ""),
    ("within max and mins", [A, B], [pod("a1", "team-a", "1", node_name="n1")],
     pod("p", "team-a", "1"), ""),
    ("over its max", [quota("team-a", min={"cpu": "1"}, max={"cpu": "2"}), B],
     [pod("a1", "team-a", "1500m", node_name="n1")], pod("p", "team-a", "1"),
     REASON_OVER_MAX.format(namespace="team-a", name="p", quota="team-a")),
    ("borrowing within the sum of mins", [A, B], [pod("a1", "team-a", "2", node_name="n1")],
     pod("p", "team-a", "1"), ""),
    ("sum of used over the sum of mins", [A, B],
     [pod("a1", "team-a", "3", node_name="n1"), pod("b1", "team-b", "1", node_name="n2")],
     pod("p", "team-b", "1"), REASON_OVER_MIN.format(namespace="team-b", name="p")),
    ("terminal pods do not count", [A, B],
     [pod("a1", "team-a", "3", node_name="n1", phase="Succeeded"),
      pod("b1", "team-b", "1", node_name="n2")], pod("p", "team-b", "1"), ""),
    ("a quota without max is unlimited", [quota("team-a", min={"cpu": "8"})],
     [pod("a1", "team-a", "7", node_name="n1")], pod("p", "team-a", "1"), ""),
    ("a resource max leaves out counts as 0", [quota("team-a", min={"cpu": "1"}, max={"cpu": "4"})],
     [], {**pod("p", "team-a", "1"), "spec": {**pod("p", "team-a", "1")["spec"], "containers": [
         {"name": "c", "image": "i", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}},
     REASON_OVER_MAX.format(namespace="team-a", name="p", quota="team-a")),
    ("an extended resource max leaves out is unlimited",
     [quota("team-a", min={"cpu": "1", "example.com/gpu": "4"}, max={"cpu": "4"})], [],
     {**pod("p", "team-a", "1"), "spec": {**pod("p", "team-a", "1")["spec"], "containers": [
         {"name": "c", "image": "i", "resources": {"requests": {"cpu": "1", "example.com/gpu": "2"},
                                                   "limits": {"example.com/gpu": "2"}}}]}}, ""),
    ("malformed quota (min above max) is ignored",
     [quota("team-a", min={"cpu": "5"}, max={"cpu": "1"})], [pod("a1", "team-a", "3", node_name="n1")],
     pod("p", "team-a", "1"), ""),
    ("malformed quota (not a quantity) is ignored",
     [quota("team-a", min={"cpu": "lots"}, max={"cpu": "1"})], [], pod("p", "team-a", "2"), ""),
]


@pytest.mark.parametrize(("quotas", "pods", "incoming", "want"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_pre_filter(quotas: list[dict[str, Any]], pods: list[dict[str, Any]],
                    incoming: dict[str, Any], want: str) -> None:
    cluster = Cluster([node("n1"), node("n2")], pods, quotas=quotas)
    status = cluster.pre_filter(incoming)
    if not want:
        assert code(status) == Code.SUCCESS, status
    else:
        assert status is not None and status.code == Code.UNSCHEDULABLE
        assert status.reasons == [want] and status.plugin == NAME


def test_nominated_pods_of_the_same_quota_count_when_at_least_as_important() -> None:
    quotas = [quota("team-a", min={"cpu": "1"}, max={"cpu": "2"}), B]
    cluster = Cluster([node("n1")], [], quotas=quotas)
    for name, priority in (("hi", HIGH), ("lo", LOW - 1)):
        cluster.nominator.add_nominated_pod(
            PodInfo.from_pod(pod(name, "team-a", "1500m", priority=priority)), "n1")
    status = cluster.pre_filter(pod("p", "team-a", "1", priority=LOW))
    assert status is not None and status.reasons == [
        REASON_OVER_MAX.format(namespace="team-a", name="p", quota="team-a")]
    # only the lower-priority nominated pod: it does not count
    cluster.nominator.delete_nominated_pod_if_exists(pod("hi", "team-a", "1500m"))
    assert code(cluster.pre_filter(pod("p", "team-a", "1", priority=LOW))) == Code.SUCCESS


def test_a_malformed_update_keeps_the_last_valid_quota() -> None:
    cluster = Cluster([node("n1")], [pod("a1", "team-a", "1500m", node_name="n1")],
                      quotas=[quota("team-a", min={"cpu": "1"}, max={"cpu": "2"})])
    assert code(cluster.pre_filter(pod("p", "team-a", "1"))) == Code.UNSCHEDULABLE
    cluster.listers.objects["elasticquotas"] = [
        quota("team-a", min={"cpu": "-1"}, max={"cpu": "20"}, rv="2")]
    assert code(cluster.pre_filter(pod("p", "team-a", "1"))) == Code.UNSCHEDULABLE
    cluster.listers.objects["elasticquotas"] = [quota("team-a", min={"cpu": "3"}, max={"cpu": "20"}, rv="3")]
    assert code(cluster.pre_filter(pod("p", "team-a", "1"))) == Code.SUCCESS
    cluster.listers.objects["elasticquotas"] = []  # deleted: no quota any more
    assert code(cluster.pre_filter(pod("p", "team-a", "100"))) == Code.SUCCESS


def test_reserve_counts_until_the_snapshot_has_the_pod_and_unreserve_forgets() -> None:
    cluster = Cluster([node("n1")], [], quotas=[quota("team-a", min={"cpu": "1"}, max={"cpu": "2"})])
    first = PodInfo.from_pod(pod("a1", "team-a", "1500m"))
    cluster.plugin.reserve(CycleState(), first, "n1")
    used = cluster.plugin.usage().get("team-a")
    assert used is not None and used.used.milli_cpu == 1500
    assert code(cluster.pre_filter(pod("p", "team-a", "1"))) == Code.UNSCHEDULABLE
    cluster.plugin.reserve(CycleState(), first, "n1")  # twice: counted once
    assert cluster.plugin.usage().get("team-a").used.milli_cpu == 1500  # type: ignore[union-attr]
    cluster.plugin.unreserve(CycleState(), first, "n1")
    assert cluster.plugin.usage().get("team-a").used.milli_cpu == 0  # type: ignore[union-attr]
    assert code(cluster.pre_filter(pod("p", "team-a", "1"))) == Code.SUCCESS


def test_namespace_selector_extension_covers_several_namespaces() -> None:
    shared = quota("team-a", min={"cpu": "1"}, max={"cpu": "2"},
                   annotations={"scheduling.x-k8s.io/namespace-selector": "team=a"})
    namespaces = [{"metadata": {"name": n, "labels": {"team": "a"}}} for n in ("a-dev", "a-prod")]
    cluster = Cluster([node("n1")], [pod("x", "a-dev", "1500m", node_name="n1")],
                      quotas=[shared], namespaces=namespaces)
    status = cluster.pre_filter(pod("p", "a-prod", "1"))
    assert status is not None and status.reasons == [
        REASON_OVER_MAX.format(namespace="a-prod", name="p", quota="team-a")]
    assert code(cluster.pre_filter(pod("p", "other", "1"))) == Code.SUCCESS


# --- PostFilter: preemption by quota ----------------------------------------------------------


async def test_a_quota_within_its_min_reclaims_borrowed_capacity_whatever_the_priority() -> None:
    # team-a runs 4 cpu on a 4-cpu node (min 2: it borrowed team-b's 2); team-b wants its min.
    pods = [pod(f"a{i}", "team-a", "1", node_name="n1", priority=HIGH) for i in range(4)]
    cluster = Cluster([node("n1")], pods, quotas=[A, B])
    result, status, first = cluster.schedule(pod("b1", "team-b", "2", priority=LOW))
    assert first is not None and first.reasons == [REASON_OVER_MIN.format(namespace="team-b", name="b1")]
    assert code(status) == Code.SUCCESS and result is not None and result.nominated_node_name == "n1"
    assert len(await cluster.victims()) == 2  # exactly what was borrowed


async def test_over_its_min_a_quota_preempts_only_its_own_lower_priority_pods() -> None:
    pods = [pod("a-low1", "team-a", "1", node_name="n1", priority=LOW),
            pod("a-low2", "team-a", "1", node_name="n1", priority=LOW),
            pod("b1", "team-b", "1", node_name="n1", priority=LOW),
            pod("b2", "team-b", "1", node_name="n1", priority=LOW)]
    cluster = Cluster([node("n1")], pods, quotas=[A, B])
    result, status, _ = cluster.schedule(pod("a-high", "team-a", "2", priority=HIGH))
    assert code(status) == Code.SUCCESS and result is not None
    assert await cluster.victims() == ["a-low1", "a-low2"]


async def test_over_its_min_with_no_lower_priority_pod_of_its_own_nothing_is_preempted() -> None:
    pods = [pod("a1", "team-a", "2", node_name="n1", priority=HIGH),
            pod("b1", "team-b", "2", node_name="n1", priority=LOW)]
    cluster = Cluster([node("n1")], pods, quotas=[A, B])
    _, status, _ = cluster.schedule(pod("a2", "team-a", "1", priority=HIGH))
    assert code(status) == Code.UNSCHEDULABLE
    assert await cluster.victims() == []


async def test_pdbs_steer_preemption_to_the_node_that_violates_none() -> None:
    # team-a borrowed 2 cpu on each of two full nodes; on n1 its pods are PDB-guarded.
    pods = [pod(f"a{i}", "team-a", "1", node_name="n1" if i < 2 else "n2",
                labels={"app": "guarded" if i < 2 else "free"}) for i in range(4)]
    cluster = Cluster([node("n1", cpu="2"), node("n2", cpu="2")], pods, quotas=[A, B],
                      pdbs=[pdb("guard", match={"app": "guarded"}, namespace="team-a")])
    result, status, _ = cluster.schedule(pod("b1", "team-b", "2"))
    assert code(status) == Code.SUCCESS and result is not None
    assert result.nominated_node_name == "n2"
    assert await cluster.victims() == ["a2", "a3"]


async def test_victims_never_take_a_lender_below_its_min() -> None:
    # team-a uses 3 (min 2): only 1 cpu is borrowed, so at most one of its pods may go.
    pods = [pod(f"a{i}", "team-a", "1", node_name="n1") for i in range(3)]
    cluster = Cluster([node("n1", cpu="3")], pods, quotas=[A, B])
    _, status, _ = cluster.schedule(pod("b1", "team-b", "2"))
    assert code(status) == Code.UNSCHEDULABLE  # freeing 1 cpu is not enough for 2
    assert await cluster.victims() == []
    _, status, _ = cluster.schedule(pod("b2", "team-b", "1"))
    assert code(status) == Code.SUCCESS
    assert len(await cluster.victims()) == 1


async def test_without_quota_lower_priority_pods_without_quota_are_preempted_as_before() -> None:
    pods = [pod("q1", "team-a", "2", node_name="n1", priority=LOW),
            pod("f1", "free", "2", node_name="n1", priority=LOW)]
    cluster = Cluster([node("n1")], pods, quotas=[A, B])
    _, status, _ = cluster.schedule(pod("p", "free", "2", priority=HIGH))
    assert code(status) == Code.SUCCESS
    assert await cluster.victims() == ["f1"]  # the quota's pod is not a pod without quota


async def test_with_no_quota_at_all_it_is_default_preemption() -> None:
    pods = [pod("x", "free", "3", node_name="n1", priority=LOW)]
    cluster = Cluster([node("n1")], pods)
    _, status, _ = cluster.schedule(pod("p", "free", "2", priority=HIGH))
    assert code(status) == Code.SUCCESS and status is not None and status.plugin in ("", NAME)
    assert await cluster.victims() == ["x"]


async def test_issue_683_a_lender_gets_its_min_back_when_every_unit_is_used() -> None:
    # scheduler-plugins #683: 5 GPUs; team A (min 4, max 5) runs 5; team B (min 1) wants 1.
    # sum(used) + 1 > sum(min) rejects B in PreFilter; reclaim must still free one GPU.
    gpu = "nvidia.com/gpu"
    quotas = [quota("team-a", min={gpu: "4"}, max={gpu: "5"}),
              quota("team-b", min={gpu: "1"}, max={gpu: "5"})]
    n1 = NodeBuilder("n1").capacity(cpu="8", memory="64Gi", pods=110, **{gpu: 5}).obj()

    def gpu_pod(name: str, ns: str, node_name: str = "") -> dict[str, Any]:
        b = PodBuilder(name, ns).uid(f"uid-{ns}-{name}").req(**{gpu: 1}).limits(**{gpu: 1})
        return (b.node(node_name) if node_name else b).obj()

    cluster = Cluster([n1], [gpu_pod(f"a{i}", "team-a", "n1") for i in range(5)], quotas=quotas)
    result, status, first = cluster.schedule(gpu_pod("b0", "team-b"))
    assert first is not None and first.reasons == [REASON_OVER_MIN.format(namespace="team-b", name="b0")]
    assert code(status) == Code.SUCCESS and result is not None and result.nominated_node_name == "n1"
    assert len(await cluster.victims()) == 1  # team A back to its min of 4, not below


def _member(name: str, cpu: str, *, node_name: str = "") -> dict[str, Any]:
    return pod(name, "team-a", cpu, node_name=node_name,
               labels={"scheduling.x-k8s.io/pod-group": "train"})


def _group(min_member: int) -> dict[str, Any]:
    return {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
            "metadata": {"name": "train", "namespace": "team-a"}, "spec": {"minMember": min_member}}


@pytest.mark.parametrize(("max_cpu", "placed", "want_rejected"), [
    pytest.param("4", 0, "2", id="3x2 cpu cannot fit a max of 4: no member starts"),
    pytest.param("6", 0, "", id="the whole gang fits the max"),
    pytest.param("6", 1, "", id="one member placed: the other two fit"),
    pytest.param("5", 1, "1", id="one member placed: the last one would not fit"),
])
def test_a_gang_is_admitted_against_its_quota_as_a_whole(max_cpu: str, placed: int,
                                                         want_rejected: str) -> None:
    members = [_member(f"m{i}", "2", node_name="n1" if i < placed else "") for i in range(3)]
    quotas = [quota("team-a", min={"cpu": max_cpu}, max={"cpu": max_cpu})]
    cluster = Cluster([node("n1", cpu="16")], [m for m in members if m["spec"].get("nodeName")],
                      quotas=quotas, podgroups=[_group(3)])
    cluster.listers.objects["pods"] = members
    status = cluster.pre_filter(members[-1])
    if want_rejected:
        assert status is not None and status.reasons == [
            "Pod team-a/m2 is rejected in PreFilter because ElasticQuota team-a is more than Max "
            f"for PodGroup train ({want_rejected} member(s) still to place)"]
    else:
        assert code(status) == Code.SUCCESS, status


GPUS = "gpu.example.com.deviceclass.resource.k8s.io/devices"


def _claim(name: str, *, count: int = 1, allocated: int = 0) -> dict[str, Any]:
    claim: dict[str, Any] = {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "team-a"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
            "deviceClassName": "gpu.example.com", "count": count}}]}}}
    if allocated:
        claim["status"] = {"allocation": {"devices": {"results": [
            {"request": "gpu", "driver": "gpu.example.com", "pool": "n1", "device": f"gpu-{i}"}
            for i in range(allocated)]}}}
    return claim


def _claiming(name: str, claim: str, *, node_name: str = "") -> dict[str, Any]:
    p = pod(name, "team-a", "100m", node_name=node_name)
    p["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": claim}]
    return p


@pytest.mark.parametrize(("held", "asked", "max_devices", "rejected"), [
    pytest.param(2, 1, "3", False, id="2 allocated + 1 asked within 3"),
    pytest.param(2, 2, "3", True, id="2 allocated + 2 asked over 3"),
    pytest.param(0, 4, "3", True, id="one claim asking 4 over 3"),
])
def test_dra_devices_count_by_device_class(held: int, asked: int, max_devices: str,
                                           rejected: bool) -> None:
    quotas = [quota("team-a", min={"cpu": "4", GPUS: max_devices}, max={"cpu": "4", GPUS: max_devices})]
    pods = [_claiming("running", "held", node_name="n1")] if held else []
    cluster = Cluster([node("n1")], pods, quotas=quotas,
                      claims=[_claim("held", count=held, allocated=held), _claim("asked", count=asked)])
    # CapacityScheduling's own PreFilter (DynamicResources' would want the DeviceClass too)
    _, status = cluster.plugin.pre_filter(CycleState(), PodInfo.from_pod(_claiming("new", "asked")),
                                          cluster.snapshot.list())
    if rejected:
        assert status is not None and status.reasons == [
            REASON_OVER_MAX.format(namespace="team-a", name="new", quota="team-a")]
    else:
        assert code(status) == Code.SUCCESS, status
    used = cluster.plugin.usage().get("team-a")
    assert used is not None and used.used.get(GPUS) == held


# --- usage stays a recount, however the snapshot changes --------------------------------------

from hypothesis import example, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_OPS = st.lists(st.tuples(st.sampled_from(["add", "remove", "reserve", "unreserve"]),
                          st.integers(0, 11), st.sampled_from(["n1", "n2", "n3"]),
                          st.sampled_from(["team-a", "team-b", "free"]), st.integers(1, 3)),
                max_size=25)


@settings(max_examples=25, deadline=None)
@example([("reserve", 1, "n1", "team-b", 1), ("add", 1, "n1", "team-b", 1),
          ("remove", 1, "n1", "team-a", 1)])
@given(_OPS)
def test_usage_equals_a_recount_over_random_pod_streams(ops: list[tuple[str, int, str, str, int]]) -> None:
    cluster = Cluster([node("n1"), node("n2"), node("n3")], [], quotas=[A, B])
    infos = {i.name: i for i in cluster.snapshot.list()}
    placed: dict[str, tuple[str, dict[str, Any]]] = {}  # name -> (node, pod)
    reserved: dict[str, dict[str, Any]] = {}
    for action, i, node_name, ns, cpu in ops:
        name = f"p{i}"
        if action == "add" and name not in placed:
            p = pod(name, ns, str(cpu), node_name=node_name)
            infos[node_name].add_pod(PodInfo.from_pod(p))
            placed[name] = (node_name, p)
            # the snapshot now carries a pod that was reserved: the reservation is spent (as
            # an assumed pod's is once the cache has it), so removing it later counts nothing
            reserved.pop(f"{ns}/{name}", None)
        elif action == "remove" and name in placed:
            where, p = placed.pop(name)
            infos[where].remove_pod(p)
        elif action == "reserve" and name not in placed and f"{ns}/{name}" not in reserved:
            p = pod(name, ns, str(cpu))
            cluster.plugin.reserve(CycleState(), PodInfo.from_pod(p), node_name)
            reserved[f"{ns}/{name}"] = p
        elif action == "unreserve" and f"{ns}/{name}" in reserved:
            cluster.plugin.unreserve(CycleState(), PodInfo.from_pod(reserved.pop(f"{ns}/{name}")),
                                     node_name)
        usage = cluster.plugin.usage()
        for team in ("team-a", "team-b"):
            # a reserved pod the snapshot shows counts as the snapshot has it
            counted = {p["metadata"]["uid"]: p for p in reserved.values()
                       if p["metadata"]["namespace"] == team}
            counted.update({p["metadata"]["uid"]: p for _, p in placed.values()
                            if p["metadata"]["namespace"] == team})
            q = usage.get(team)
            assert q is not None
            assert q.used.milli_cpu == sum(PodInfo.from_pod(p).requests.milli_cpu
                                           for p in counted.values()), (team, ops)
