"""Default-profile plugin parity end to end (issue 4): the real scheduler against the sandbox
places pods where kube-scheduler would and refuses them with kube-scheduler's exact
FailedScheduling wording (filter reasons, then the preemption message).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from scheduler.config.load import parse_config_text
from tests.integration.harness import scheduler_config, wait_until
from tests.integration.scenarios import (
    HOSTNAME,
    NO_VICTIMS,
    NOT_HELPFUL,
    SCHEDULER,
    ZONE,
    api,
    claim,
    count_by,
    failed_message,
    get_claim,
    get_volume,
    node,
    pod,
    preemption_fit_error,
    refusal_notes,
    scenario,
    storage_class,
    volume_zone,
    wait_bound,
    wait_claims_bound,
    wait_failed,
    zonal_pv,
)

TAINT = ("dedicated", "gpu", "NoSchedule")
UNTOLERATED = "node(s) had untolerated taint {dedicated: gpu}"
NODE_AFFINITY = "node(s) didn't match Pod's node affinity/selector"
ANTI_AFFINITY = "node(s) didn't match pod anti-affinity rules"
PORTS = "node(s) didn't have free ports for the requested pod ports"
SPREAD = "node(s) didn't match pod topology spread constraints"


# --- 1. taints and tolerations ---------------------------------------------------------------


async def test_taints_repel_pods_without_tolerations(sandbox_factory: Any, tmp_path: Path
                                                      ) -> None:
    nodes = [node("tainted", taints=[TAINT]), node("plain-1"), node("plain-2")]
    async with scenario(sandbox_factory, tmp_path, nodes) as env:
        names = [f"plain-{i}" for i in range(6)]
        await env.cluster.create_pods([api(pod(n)) for n in names])
        placement = await wait_bound(env.cluster, names)
        assert "tainted" not in placement.values(), placement
        assert count_by(placement, lambda n: n) == {"plain-1": 3, "plain-2": 3}

        # The tainted node is now the least allocated: a pod tolerating the taint goes there.
        await env.cluster.create_pod(api(pod("tolerant").toleration(
            "dedicated", "Equal", "gpu", "NoSchedule")))
        assert (await wait_bound(env.cluster, ["tolerant"]))["tolerant"] == "tainted"

        # A pod whose nodeSelector matches no node: the tainted node reports its taint
        # (TaintToleration filters before NodeAffinity), the others the selector.
        await env.cluster.create_pod(api(pod("nowhere").node_selector(disktype="nvme")))
        await wait_failed(env.cluster, "nowhere", failed_message(
            3, [(1, UNTOLERATED), (2, NODE_AFFINITY)],
            preemption=preemption_fit_error(3, NOT_HELPFUL)))


async def test_all_nodes_tainted_refused_with_upstream_message(sandbox_factory: Any,
                                                               tmp_path: Path) -> None:
    nodes = [node(f"n{i}", taints=[TAINT]) for i in range(3)]
    async with scenario(sandbox_factory, tmp_path, nodes) as env:
        await env.cluster.create_pod(api(pod("refused")))
        expected = ("0/3 nodes are available: 3 node(s) had untolerated taint {dedicated: gpu}. "
                    "preemption: 0/3 nodes are available: 3 Preemption is not helpful for "
                    "scheduling.")
        assert failed_message(3, [(3, UNTOLERATED)],
                              preemption=preemption_fit_error(3, NOT_HELPFUL)) == expected
        await wait_failed(env.cluster, "refused", expected)

        # A toleration by key only (operator Exists) is enough.
        await env.cluster.create_pod(api(pod("exists").toleration("dedicated", "Exists")))
        await wait_bound(env.cluster, ["exists"])


async def test_exact_wording_after_preemption_message(sandbox_factory: Any, tmp_path: Path
                                                      ) -> None:
    """Three kinds of preemption message in one place: each ends the note with a single
    period (kube-scheduler >= 1.30 appends the PostFilter message as is)."""
    async with scenario(sandbox_factory, tmp_path,
                        [node("only", cpu="2", memory="8Gi", taints=[TAINT])]) as env:
        def tolerant(name: str, cpu: str = "100m") -> Any:
            return pod(name, cpu=cpu).toleration("dedicated", "Equal", "gpu", "NoSchedule")

        await env.cluster.create_pod(api(tolerant("port-owner").host_port(8080)))
        await wait_bound(env.cluster, ["port-owner"])
        await env.cluster.create_pod(api(pod("untolerated")))
        await env.cluster.create_pod(api(tolerant("port-taker").host_port(8080)))
        await env.cluster.create_pod(api(tolerant("polite", cpu="4").priority(1000)
                                         .preemption_policy("Never")))
        expected = {
            "untolerated": "0/1 nodes are available: 1 node(s) had untolerated taint "
                           "{dedicated: gpu}. preemption: 0/1 nodes are available: "
                           "1 Preemption is not helpful for scheduling.",
            "port-taker": "0/1 nodes are available: 1 node(s) didn't have free ports for the "
                          "requested pod ports. preemption: 0/1 nodes are available: "
                          "1 No preemption victims found for incoming pod.",
            "polite": "0/1 nodes are available: 1 Insufficient cpu. "
                      "preemption: not eligible due to preemptionPolicy=Never.",
        }
        got = {name: set(await refusal_notes(env.cluster, name)) for name in expected}
        assert got == {name: {note} for name, note in expected.items()}


# --- 2. node affinity and nodeSelector -------------------------------------------------------


async def test_node_affinity_and_selector(sandbox_factory: Any, tmp_path: Path) -> None:
    nodes = [node("a", zone="zone-a", labels={"disktype": "ssd"}),
             node("b", zone="zone-b"), node("c", zone="zone-c")]
    async with scenario(sandbox_factory, tmp_path, nodes) as env:
        required = [f"req-{i}" for i in range(3)]
        await env.cluster.create_pods([
            api(pod(n).required_node_affinity([
                {"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["zone-b"]}]}]))
            for n in required])
        await env.cluster.create_pod(api(pod("ssd").node_selector(disktype="ssd")))
        placement = await wait_bound(env.cluster, [*required, "ssd"])
        assert placement == {**{n: "b" for n in required}, "ssd": "a"}

        # Preferred affinity for the busiest node outweighs LeastAllocated (weight 2 x 100).
        await env.cluster.create_pod(api(pod("prefers-b").preferred_node_affinity(
            50, {"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["zone-b"]}]})))
        assert (await wait_bound(env.cluster, ["prefers-b"]))["prefers-b"] == "b"

        # NotIn / DoesNotExist terms are honoured too.
        await env.cluster.create_pod(api(pod("not-a-not-b").required_node_affinity([
            {"matchExpressions": [{"key": ZONE, "operator": "NotIn", "values": ["zone-a"]},
                                  {"key": "disktype", "operator": "DoesNotExist"},
                                  {"key": HOSTNAME, "operator": "NotIn", "values": ["b"]}]}])))
        assert (await wait_bound(env.cluster, ["not-a-not-b"]))["not-a-not-b"] == "c"

        await env.cluster.create_pod(api(pod("no-match").required_node_affinity([
            {"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["zone-z"]}]}])))
        await wait_failed(env.cluster, "no-match", failed_message(
            3, [(3, NODE_AFFINITY)], preemption=preemption_fit_error(3, NOT_HELPFUL)))
        await env.cluster.create_pod(api(pod("no-label").node_selector(disktype="nvme")))
        await wait_failed(env.cluster, "no-label", failed_message(
            3, [(3, NODE_AFFINITY)], preemption=preemption_fit_error(3, NOT_HELPFUL)))


# --- 3. required pod anti-affinity -----------------------------------------------------------


def replica(name: str, app: str) -> Any:
    return pod(name).labels(app=app).pod_anti_affinity_required({"app": app}, HOSTNAME)


async def test_anti_affinity_spreads_replicas_one_per_node(sandbox_factory: Any,
                                                          tmp_path: Path) -> None:
    nodes = [node(f"n{i}", zone=f"zone-{'abc'[i % 3]}") for i in range(4)]
    async with scenario(sandbox_factory, tmp_path, nodes) as env:
        first = [f"web-{i}" for i in range(4)]
        await env.cluster.create_pods([api(replica(n, "web")) for n in first])
        placement = await wait_bound(env.cluster, first)
        assert sorted(placement.values()) == ["n0", "n1", "n2", "n3"], placement

        await env.cluster.create_pod(api(replica("web-4", "web")))
        await wait_failed(env.cluster, "web-4", failed_message(
            4, [(4, ANTI_AFFINITY)], preemption=preemption_fit_error(4, NO_VICTIMS)))

        # Pods of another app are not affected by web's anti-affinity.
        await env.cluster.create_pod(api(pod("other").labels(app="other")))
        await wait_bound(env.cluster, ["other"])

        # One replica goes away: the refused one takes its node.
        freed = placement["web-2"]
        await env.cluster.delete_pod("web-2")
        assert (await wait_bound(env.cluster, ["web-4"]))["web-4"] == freed


# --- 4. topology spread ----------------------------------------------------------------------


async def test_topology_spread_across_three_zones(sandbox_factory: Any, tmp_path: Path
                                                  ) -> None:
    # zone-a has four nodes, b and c one each: LeastAllocated alone would put most replicas
    # in zone-a; the spread constraint caps every zone at three.
    nodes = [*(node(f"a{i}", zone="zone-a") for i in range(4)),
             node("b0", zone="zone-b"), node("c0", zone="zone-c")]
    zone_of = {n["metadata"]["name"]: n["metadata"]["labels"][ZONE] for n in nodes}
    async with scenario(sandbox_factory, tmp_path, nodes) as env:
        def spread(name: str) -> Any:
            return pod(name).labels(app="spread").topology_spread(
                1, ZONE, "DoNotSchedule", {"app": "spread"})
        # Two replicas already run on one node of zone-a (bound by someone else).
        await env.cluster.create_pods([api(spread(f"s-{i}").node("a0")) for i in range(2)])
        names = [f"s-{i}" for i in range(2, 9)]
        await env.cluster.create_pods([api(spread(n)) for n in names])
        placement = await wait_bound(env.cluster, [f"s-{i}" for i in range(9)])
        assert count_by(placement, zone_of.__getitem__) == {
            "zone-a": 3, "zone-b": 3, "zone-c": 3}, placement

        # Replicas that must run in zone-a but count every zone (nodeAffinityPolicy Ignore):
        # one more is fine (skew 4 - 3), the next would make the skew 2 and is refused.
        def zone_a(name: str) -> Any:
            return pod(name).labels(app="spread").node_selector({ZONE: "zone-a"}) \
                .topology_spread(1, ZONE, "DoNotSchedule", {"app": "spread"},
                                 node_affinity_policy="Ignore")
        await env.cluster.create_pod(api(zone_a("s-9")))
        assert zone_of[(await wait_bound(env.cluster, ["s-9"]))["s-9"]] == "zone-a"
        await env.cluster.create_pod(api(zone_a("s-10")))
        await wait_failed(env.cluster, "s-10", failed_message(
            6, [(2, NODE_AFFINITY), (4, SPREAD)],
            preemption=failed_message(6, [(2, NOT_HELPFUL), (4, NO_VICTIMS)])))


# --- 5. host ports ---------------------------------------------------------------------------


async def test_host_port_conflict(sandbox_factory: Any, tmp_path: Path) -> None:
    async with scenario(sandbox_factory, tmp_path, [node("only")]) as env:
        await env.cluster.create_pod(api(pod("first").host_port(8080)))
        await wait_bound(env.cluster, ["first"])
        await env.cluster.create_pod(api(pod("second").host_port(8080)))
        await wait_failed(env.cluster, "second", failed_message(
            1, [(1, PORTS)], preemption=preemption_fit_error(1, NO_VICTIMS)))

        # Same port over UDP does not conflict.
        await env.cluster.create_pod(api(pod("udp").host_port(8080, "UDP")))
        await wait_bound(env.cluster, ["udp"])

        await env.cluster.delete_pod("first")
        await wait_bound(env.cluster, ["second"])


# --- 7. preemption ---------------------------------------------------------------------------


def low(name: str, node_name: str, priority: int, app: str = "low") -> dict[str, Any]:
    """A running pod that fills half of a 2-CPU node, bound directly (as by another
    scheduler) so that the test chooses where it runs."""
    return api(pod(name, cpu="1", memory="1Gi").labels(app=app).priority(priority)
               .node(node_name))


def high(name: str) -> Any:
    return pod(name, cpu="1", memory="1Gi").priority(1000)


async def _nomination_then_binding(env: Any, name: str) -> tuple[str, str]:
    """Watch the preemptor until it is bound; (first nominatedNodeName seen, node)."""
    nominated = ""

    async def bound() -> bool:
        nonlocal nominated
        current = await env.cluster.get_pod(name)
        assert current is not None
        nominated = nominated or current["status"].get("nominatedNodeName", "")
        return bool(current["spec"].get("nodeName"))

    await wait_until(bound, timeout=15, interval=0.01, message=f"{name} bound")
    return nominated, await env.cluster.node_name(name)


async def _running(env: Any, names: list[str]) -> None:
    async def all_running() -> bool:
        pods = {p["metadata"]["name"]: p for p in await env.cluster.list_pods("default")}
        return all(pods.get(n, {}).get("status", {}).get("phase") == "Running" for n in names)
    await wait_until(all_running, timeout=10, message=f"{names} running")


async def _remaining(env: Any) -> set[str]:
    return {p["metadata"]["name"] for p in await env.cluster.list_pods("default")
            if not p["metadata"].get("deletionTimestamp")}


async def test_high_priority_pod_preempts_on_a_full_cluster(sandbox_factory: Any,
                                                            tmp_path: Path) -> None:
    nodes = [node("n0", cpu="2", memory="8Gi"), node("n1", cpu="2", memory="8Gi")]
    async with scenario(sandbox_factory, tmp_path, nodes) as env:
        # n1's pods matter less (lower priority): the victim comes from n1.
        lows = [low("n0-a", "n0", 100), low("n0-b", "n0", 100),
                low("n1-a", "n1", 10), low("n1-b", "n1", 10)]
        await env.cluster.create_pods(lows)
        await _running(env, [p["metadata"]["name"] for p in lows])

        await env.cluster.create_pod(api(high("vip")))
        nominated, bound_to = await _nomination_then_binding(env, "vip")
        assert nominated == "n1"
        assert bound_to == "n1"
        remaining = await _remaining(env)
        # Exactly one 1-CPU victim is enough, and it was on n1.
        assert remaining >= {"n0-a", "n0-b", "vip"}
        assert len(remaining & {"n1-a", "n1-b"}) == 1, remaining
        [victim] = {"n1-a", "n1-b"} - remaining
        preempted = [e for e in await env.cluster.events_for(victim)
                     if e["reason"] == "Preempted"]
        assert preempted, await env.cluster.events_for(victim)
        failed = [e["note"] for e in await env.cluster.events_for("vip")
                  if e["reason"] == "FailedScheduling"]
        assert failed and failed[0] == "0/2 nodes are available: 2 Insufficient cpu.", failed


async def test_preemption_spares_pods_protected_by_a_pdb(sandbox_factory: Any,
                                                         tmp_path: Path) -> None:
    nodes = [node("n0", cpu="2", memory="8Gi"), node("n1", cpu="2", memory="8Gi")]
    pdb = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
           "metadata": {"name": "protected", "namespace": "default"},
           "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "protected"}}}}
    pdbs = "/apis/policy/v1/namespaces/default/poddisruptionbudgets"
    async with scenario(sandbox_factory, tmp_path, nodes, objects=[(pdbs, pdb)]) as env:
        # Without the PDB, n0 would be chosen (lower victim priority); with it, n1.
        lows = [low("n0-a", "n0", 10, "protected"), low("n0-b", "n0", 10, "protected"),
                low("n1-a", "n1", 20), low("n1-b", "n1", 20)]
        await env.cluster.create_pods(lows)
        await _running(env, [p["metadata"]["name"] for p in lows])
        # What the disruption controller would write (the sandbox runs no controllers).
        current = await env.cluster.client.get(f"{pdbs}/protected")
        current["status"] = {"observedGeneration": current["metadata"].get("generation", 1),
                             "disruptionsAllowed": 0, "currentHealthy": 2,
                             "desiredHealthy": 2, "expectedPods": 2}
        await env.cluster.client.update(f"{pdbs}/protected/status", current)
        store = env.parts.informers.informer("poddisruptionbudgets").store
        await wait_until(lambda: (store.get_by_key("default/protected") or {}).get(
            "status", {}).get("expectedPods") == 2, timeout=5, message="PDB status seen")

        await env.cluster.create_pod(api(high("vip")))
        nominated, bound_to = await _nomination_then_binding(env, "vip")
        assert (nominated, bound_to) == ("n1", "n1")
        remaining = await _remaining(env)
        assert {"n0-a", "n0-b"} <= remaining, remaining
        assert len(remaining & {"n1-a", "n1-b"}) == 1, remaining


async def test_preemption_policy_never_does_not_preempt(sandbox_factory: Any,
                                                        tmp_path: Path) -> None:
    nodes = [node("n0", cpu="2", memory="8Gi"), node("n1", cpu="2", memory="8Gi")]
    async with scenario(sandbox_factory, tmp_path, nodes) as env:
        lows = [low(f"{n}-{s}", n, 10) for n in ("n0", "n1") for s in "ab"]
        await env.cluster.create_pods(lows)
        await _running(env, [p["metadata"]["name"] for p in lows])

        await env.cluster.create_pod(api(high("polite").preemption_policy("Never")))
        await wait_failed(env.cluster, "polite", failed_message(
            2, [(2, "Insufficient cpu")],
            preemption="not eligible due to preemptionPolicy=Never."))
        await asyncio.sleep(0.5)
        assert await _remaining(env) == {"n0-a", "n0-b", "n1-a", "n1-b", "polite"}
        current = await env.cluster.get_pod("polite")
        assert current is not None and not current["status"].get("nominatedNodeName")

        # Room made by someone else is used.
        await env.cluster.delete_pod("n0-a")
        assert (await wait_bound(env.cluster, ["polite"]))["polite"] == "n0"


# --- 8. per-profile plugin config ------------------------------------------------------------

PACKING_CONFIG = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection:
  leaderElect: false
profiles:
- schedulerName: py-scheduler
- schedulerName: py-packer
  pluginConfig:
  - name: NodeResourcesFit
    args:
      scoringStrategy:
        type: MostAllocated
        resources:
        - name: cpu
          weight: 1
        - name: memory
          weight: 1
"""


async def test_profiles_honour_their_scoring_strategy(sandbox_factory: Any, tmp_path: Path
                                                      ) -> None:
    config = parse_config_text(PACKING_CONFIG)
    base = scheduler_config()
    config.pod_initial_backoff_seconds = base.pod_initial_backoff_seconds
    config.pod_max_backoff_seconds = base.pod_max_backoff_seconds
    nodes = [node(f"n{i}") for i in range(3)]
    async with scenario(sandbox_factory, tmp_path, nodes, config=config) as env:
        assert set(env.parts.scheduler.profiles) == {SCHEDULER, "py-packer"}
        packed = [f"packed-{i}" for i in range(4)]
        for name in packed:  # one at a time: each sees the previous one's usage
            await env.cluster.create_pod(api(pod(name, cpu="500m", memory="2Gi",
                                                 scheduler="py-packer")))
            await wait_bound(env.cluster, [name])
        placement = await wait_bound(env.cluster, packed)
        assert len(set(placement.values())) == 1, placement
        busy = placement["packed-0"]

        spread = [f"spread-{i}" for i in range(2)]
        for name in spread:
            await env.cluster.create_pod(api(pod(name, cpu="500m", memory="2Gi")))
            await wait_bound(env.cluster, [name])
        placement = await wait_bound(env.cluster, spread)
        assert busy not in placement.values(), placement
        assert len(set(placement.values())) == 2, placement


# --- 6. volumes: WaitForFirstConsumer claims, static zonal volumes and provisioning ---------

NO_PV = "node(s) didn't find available persistent volumes to bind"


def with_claim(name: str, claim_name: str) -> dict[str, Any]:
    return api(pod(name).labels(app="db").pvc(claim_name, "data"))


async def test_statefulset_like_pods_follow_their_zonal_volumes(sandbox_factory: Any,
                                                                tmp_path: Path) -> None:
    # zone-d has room but no volumes: a pod whose claim can only use zone-local volumes
    # must never land there.
    nodes = [node(f"{z}0", zone=f"zone-{z}") for z in "abcd"] + [node("d1", zone="zone-d")]
    zone_of = {n["metadata"]["name"]: n["metadata"]["labels"][ZONE] for n in nodes}
    objects = [storage_class("local-wffc"),
               *(zonal_pv(f"pv-{z}", f"zone-{z}", storage_class_name="local-wffc")
                 for z in "abc"),
               *(claim(f"data-db-{i}", storage_class_name="local-wffc") for i in range(4))]
    async with scenario(sandbox_factory, tmp_path, nodes, objects=objects) as env:
        # WaitForFirstConsumer: nothing binds before a pod is scheduled.
        assert not (await get_claim(env.cluster, "data-db-0"))["spec"].get("volumeName")
        names = [f"db-{i}" for i in range(3)]
        await env.cluster.create_pods([with_claim(f"db-{i}", f"data-db-{i}") for i in range(3)])
        placement = await wait_bound(env.cluster, names)
        claims = await wait_claims_bound(env.cluster, [f"data-db-{i}" for i in range(3)])
        volumes = {c["spec"]["volumeName"] for c in claims.values()}
        assert volumes == {"pv-a", "pv-b", "pv-c"}, claims  # never one volume for two pods
        for i in range(3):
            pv = await get_volume(env.cluster, claims[f"data-db-{i}"]["spec"]["volumeName"])
            assert zone_of[placement[f"db-{i}"]] == volume_zone(pv), (placement, pv)
            assert pv["spec"]["claimRef"]["name"] == f"data-db-{i}"
            assert pv["status"]["phase"] == "Bound"

        # A fourth replica: every zonal volume is taken.
        await env.cluster.create_pod(with_claim("db-3", "data-db-3"))
        await wait_failed(env.cluster, "db-3", failed_message(
            5, [(5, NO_PV)], preemption=preemption_fit_error(5, NOT_HELPFUL)))
        assert not (await get_claim(env.cluster, "data-db-3"))["spec"].get("volumeName")

        # A new volume in zone-d makes room: the pod follows it there.
        await env.cluster.client.create(*zonal_pv("pv-d", "zone-d",
                                                  storage_class_name="local-wffc"))
        placement = await wait_bound(env.cluster, ["db-3"])
        assert zone_of[placement["db-3"]] == "zone-d"
        claims = await wait_claims_bound(env.cluster, ["data-db-3"])
        assert claims["data-db-3"]["spec"]["volumeName"] == "pv-d"


async def test_dynamic_provisioning_waits_for_the_first_consumer(sandbox_factory: Any,
                                                                 tmp_path: Path) -> None:
    nodes = [node(f"{z}0", zone=f"zone-{z}") for z in "abc"]
    zone_of = {n["metadata"]["name"]: n["metadata"]["labels"][ZONE] for n in nodes}
    objects = [storage_class("fast", provisioner="csi.example.com"),
               storage_class("fast-b", provisioner="csi.example.com", allowed_zones=["zone-b"]),
               *(claim(f"data-{i}", storage_class_name="fast") for i in range(3)),
               claim("data-b", storage_class_name="fast-b")]
    async with scenario(sandbox_factory, tmp_path, nodes, objects=objects) as env:
        assert not (await get_claim(env.cluster, "data-0"))["spec"].get("volumeName")
        names = [f"app-{i}" for i in range(3)]
        await env.cluster.create_pods([with_claim(f"app-{i}", f"data-{i}") for i in range(3)])
        await env.cluster.create_pod(with_claim("app-b", "data-b"))
        placement = await wait_bound(env.cluster, [*names, "app-b"])
        assert zone_of[placement["app-b"]] == "zone-b"  # allowedTopologies
        claims = await wait_claims_bound(env.cluster, ["data-0", "data-1", "data-2", "data-b"])
        for pod_name, claim_name in [*((f"app-{i}", f"data-{i}") for i in range(3)),
                                     ("app-b", "data-b")]:
            c = claims[claim_name]
            node_name = placement[pod_name]
            # The scheduler asked for provisioning on the pod's node ...
            assert c["metadata"]["annotations"]["volume.kubernetes.io/selected-node"] == \
                node_name
            # ... and the provisioned volume is usable from there.
            pv = await get_volume(env.cluster, c["spec"]["volumeName"])
            assert volume_zone(pv) == zone_of[node_name]
            assert pv["spec"]["claimRef"]["name"] == claim_name
