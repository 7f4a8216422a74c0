"""Fuzz: malformed pods, nodes, PVs, PVCs, StorageClasses, PDBs and PodGroups written through
the sandbox's raw-write fault (``POST /sandbox/v1/raw``: stored as a looser API server would
have stored them) among well-formed pods, against the real daemon (``python -m scheduler
run``) over HTTP, its JSON logs captured.  Issue 12's invariants:

* no node overcommitted: for every node and resource, the requests of the pods bound to it
  (a malformed bound pod counted as docs/reliability.md says: its malformed quantities dropped, a
  request above its limit counted at the limit) stay within allocatable;
* no phantom usage: afterwards a pod asking for exactly what is left on a node fits there;
* every malformed pending pod is told why: a FailedScheduling event and a PodScheduled=False
  ``SchedulerError`` condition naming the field, and it is never bound;
* every well-formed pod is bound (plain, extended-resource, gang, PVC- and EBS-mounting
  pods), and a preemptor evicts its way onto a full node (reading a malformed PDB);
* no traceback (nor any error-level line) in the daemon's log, and each malformed node is
  logged once.

The corruptions are drawn by a seeded generator (``SEED``), so a failure reproduces; the
sizes keep it to a few hundred objects and a few seconds.
"""

from __future__ import annotations

import copy
import json
import random
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from scheduler.sandbox import Sandbox
from scheduler.sandbox.testing import SandboxAdmin
from tests.builders import NodeBuilder, PodBuilder, set_path
from tests.integration.harness import Cluster, for_api, user_client, wait_until
from tests.integration.procs import (
    SchedulerProcess,
    configmap_config_text,
    create_pod_group,
    gang_pod,
    install_crd,
    pod_group,
    scheduler_processes,
    write_config,
)
from tests.integration.scenarios import claim, storage_class, zonal_pv

SEED = 20261124
SCHEDULER = "py-scheduler"
GPU = "example.com/gpu"
HOSTNAME = "kubernetes.io/hostname"
WELL_FORMED = 80
MALFORMED_PENDING = 160
MALFORMED_BOUND = 24

# (path, value, field the report must name) over a pending 100m/64Mi pod
PENDING_CORRUPTIONS: list[tuple[str, Any, str]] = [
    ("spec.containers[0].resources.requests.cpu", "abc",
     "spec.containers[0].resources.requests.cpu"),
    ("spec.containers[0].resources.requests.cpu", "-2",
     "spec.containers[0].resources.requests.cpu"),
    ("spec.containers[0].resources.requests.cpu", [1], "spec.containers[0].resources.requests.cpu"),
    ("spec.containers[0].resources.requests", "1", "spec.containers[0].resources.requests"),
    ("spec.containers[0].resources", 5, "spec.containers[0].resources"),
    ("spec.containers[0].resources.requests", {"cpu": "100m", GPU: "0.5"},
     f"spec.containers[0].resources.requests.{GPU}"),
    ("spec.containers[0].resources.requests", {"cpu": "100m", GPU: "-1"},
     f"spec.containers[0].resources.requests.{GPU}"),
    ("spec.containers[0].resources.limits", {"cpu": "50m"},
     "spec.containers[0].resources.requests.cpu"),
    ("spec.resources", {"requests": {"cpu": "-2"}}, "spec.resources.requests.cpu"),
    ("spec.overhead", {"cpu": "-1"}, "spec.overhead.cpu"),
    ("spec.overhead", "1", "spec.overhead"),
    ("spec.initContainers", [{"name": "i", "resources": {"requests": {"memory": "lots"}}}],
     "spec.initContainers[0].resources.requests.memory"),
    ("spec.containers", {"name": "c"}, "spec.containers"),
    ("spec.containers", [7], "spec.containers[0]"),
    ("spec.volumes", [7], "spec.volumes[0]"),
    ("spec.volumes", [{"name": "v", "persistentVolumeClaim": "claim"}],
     "spec.volumes[0].persistentVolumeClaim"),
    ("spec.volumes", [{"name": "v", "persistentVolumeClaim": {"claimName": 3}}],
     "spec.volumes[0].persistentVolumeClaim.claimName"),
    ("spec.volumes", "data", "spec.volumes"),
    ("spec.schedulingGates", "gate", "spec.schedulingGates"),
    ("spec.schedulingGates", {"name": "gate"}, "spec.schedulingGates"),
    ("spec.schedulingGates", [5], "spec.schedulingGates[0]"),
    ("spec.schedulingGates", [{"value": "x"}], "spec.schedulingGates[0].name"),
    ("spec.containers[0].ports", [{"containerPort": 80, "hostPort": "80"}],
     "spec.containers[0].ports[0].hostPort"),
    ("spec.tolerations", "all", "spec.tolerations"),
    ("spec.tolerations", [{"key": 1}], "spec.tolerations[0].key"),
    ("spec.affinity", [], "spec.affinity"),
    ("spec.affinity", {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                                           [{"labelSelector": "app=x", "topologyKey": "z"}]}},
     "spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0]"
     ".labelSelector"),
    ("spec.affinity", {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                                        {"nodeSelectorTerms": "x"}}},
     "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
     ".nodeSelectorTerms"),
    ("spec.topologySpreadConstraints", [{"maxSkew": 0, "topologyKey": "z",
                                         "whenUnsatisfiable": "DoNotSchedule"}],
     "spec.topologySpreadConstraints[0].maxSkew"),
    ("spec.topologySpreadConstraints", [{"maxSkew": 1, "topologyKey": "z",
                                         "whenUnsatisfiable": "Sometimes"}],
     "spec.topologySpreadConstraints[0].whenUnsatisfiable"),
    ("spec.nodeSelector", ["a"], "spec.nodeSelector"),
    ("spec.priority", "high", "spec.priority"),
    ("metadata.labels", ["a"], "metadata.labels"),
]

# (path, value, milli-CPU the cache must count) over a 100m pod bound to a well-formed node
BOUND_CORRUPTIONS: list[tuple[str, Any, int]] = [
    ("spec.containers[0].resources.requests.cpu", "-2", 0),
    ("spec.containers[0].resources.requests.cpu", "abc", 0),
    ("spec.containers[0].resources.limits", {"cpu": "50m"}, 50),
    ("spec.overhead", {"cpu": "-1"}, 100),
    ("spec.containers[0].resources.requests", {"cpu": "100m", GPU: "0.5"}, 100),
    ("spec.volumes", [7], 100),
    ("spec.volumes", [{"name": "v", "persistentVolumeClaim": "claim"}], 100),
    ("spec.affinity", {"podAntiAffinity": "x"}, 100),
    ("spec.schedulingGates", [5], 100),
]

# (path, value) over a well-formed node
NODE_CORRUPTIONS: list[tuple[str, Any]] = [
    ("status.allocatable.cpu", "four"),
    ("status.allocatable.memory", "-8Gi"),
    ("status.capacity", ["cpu"]),
    ("spec.taints", {"key": "a", "effect": "NoSchedule"}),
    ("spec.taints", ["NoSchedule"]),
    ("metadata.labels", "zone=a"),
    ("spec.unschedulable", "no"),
]

# (kind builder name, path, value)
PV_CORRUPTIONS: list[tuple[str, Any]] = [
    ("spec.capacity.storage", "big"),
    ("spec.capacity", "10Gi"),
    ("spec.accessModes", "ReadWriteOnce"),
    ("spec.nodeAffinity.required", {"nodeSelectorTerms": [5]}),
    ("spec.claimRef", "claim-good"),
    ("spec", []),
]
PVC_CORRUPTIONS: list[tuple[str, Any]] = [
    ("spec.resources.requests.storage", "-5Gi"),
    ("spec.resources", "5Gi"),
    ("spec.selector", {"matchLabels": "x"}),
    ("spec.storageClassName", 7),
]
POD_GROUP_CORRUPTIONS: list[tuple[str, Any]] = [
    ("spec.minMember", "three"),
    ("spec.minMember", -1),
    ("spec.minResources", {"cpu": "x"}),
    ("spec.scheduleTimeoutSeconds", "10s"),
    ("spec", "gang"),
]


def _corrupt(obj: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    set_path(out, path, copy.deepcopy(value))
    return out


def _node(name: str, *, gpus: int = 0) -> dict[str, Any]:
    scalars = {GPU: gpus} if gpus else {}
    return for_api(NodeBuilder(name).capacity(cpu="4", memory="16Gi", pods=110, **scalars)
                   .labels({HOSTNAME: name, "topology.kubernetes.io/zone": "zone-a"}).obj())


def _pod(name: str, *, cpu: str = "100m", node: str = "", **scalars: Any) -> dict[str, Any]:
    b = PodBuilder(name).scheduler_name(SCHEDULER).req(cpu=cpu, memory="64Mi", **scalars)
    if scalars:  # extended resources: the API server wants the limit, equal to the request
        b.limits(**scalars)
    if node:
        b.node(node)
    return for_api(b.obj())


def _cpu_milli(value: str) -> int:
    return int(value[:-1]) if value.endswith("m") else int(value) * 1000


class Plan:
    """Everything the fuzz run writes, drawn from ``SEED``, with what each must become."""

    def __init__(self, rng: random.Random) -> None:
        self.good_nodes = {"n0": 2, "n1": 2, "n2": 0, "n3": 0}  # name -> GPUs
        self.bad_nodes = {f"bad-node-{i}": _corrupt(_node(f"bad-node-{i}"), path, value)
                          for i, (path, value) in enumerate(NODE_CORRUPTIONS)}
        self.well_formed = [_pod(f"good-{i}") for i in range(WELL_FORMED)]
        self.well_formed += [_pod(f"gpu-{i}", **{GPU: "1"}) for i in range(3)]
        pvc_pod = PodBuilder("pvc-user").scheduler_name(SCHEDULER).req(cpu="100m").pvc(
            "claim-good").obj()
        self.well_formed.append(for_api(pvc_pod))
        ebs_pod = PodBuilder("ebs-user").scheduler_name(SCHEDULER).req(cpu="100m").volume(
            {"name": "disk", "awsElasticBlockStore": {"volumeID": "vol-1"}}).obj()
        self.well_formed.append(for_api(ebs_pod))
        self.gang = [gang_pod(f"gang-{i}", "gang") for i in range(3)]
        # Well-formed pods that depend on a malformed object: told why, naming that object.
        self.dependents = {
            "uses-bad-claim": (for_api(PodBuilder("uses-bad-claim").scheduler_name(SCHEDULER)
                                       .req(cpu="100m").pvc("bad-pvc-1").obj()),
                               "PersistentVolumeClaim default/bad-pvc-1: spec.resources"),
            "in-bad-group": (gang_pod("in-bad-group", "bad-pg-4"),
                             "PodGroup default/bad-pg-4: spec"),
        }
        # name -> field the report must name
        self.pending: dict[str, str] = {}
        self.pending_pods: list[dict[str, Any]] = []
        for i in range(MALFORMED_PENDING):
            path, value, field = rng.choice(PENDING_CORRUPTIONS)
            name = f"bad-{i}"
            self.pending[name] = field
            self.pending_pods.append(_corrupt(_pod(name), path, value))
        # name -> (node, milli-CPU it must count for)
        self.bound: dict[str, tuple[str, int]] = {}
        self.bound_pods: list[dict[str, Any]] = []
        for i in range(MALFORMED_BOUND):
            path, value, milli = rng.choice(BOUND_CORRUPTIONS)
            name, node = f"bound-bad-{i}", rng.choice(sorted(self.good_nodes))
            self.bound[name] = (node, milli)
            self.bound_pods.append(_corrupt(_pod(name, node=node), path, value))
        _, pv = zonal_pv("pv-good", "zone-a", storage_class_name="manual", size="1Gi")
        self.bad_objects: list[dict[str, Any]] = []
        for i, (path, value) in enumerate(PV_CORRUPTIONS):
            _, base = zonal_pv(f"bad-pv-{i}", "zone-a", storage_class_name="manual")
            self.bad_objects.append(_corrupt(base, path, value))
        for i, (path, value) in enumerate(PVC_CORRUPTIONS):
            _, base = claim(f"bad-pvc-{i}", storage_class_name="manual")
            self.bad_objects.append(_corrupt(base, path, value))
        for i, (path, value) in enumerate(POD_GROUP_CORRUPTIONS):
            self.bad_objects.append(_corrupt(pod_group(f"bad-pg-{i}", 2), path, value))
        self.bad_objects.append({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                                 "metadata": {"name": "bad-sc"}, "provisioner": "x",
                                 "volumeBindingMode": 3})
        self.bad_objects.append({"apiVersion": "storage.k8s.io/v1", "kind": "CSINode",
                                 "metadata": {"name": "n1"}, "spec": {"drivers": [
                                     {"name": "ebs.csi.aws.com", "nodeID": "n1",
                                      "allocatable": {"count": "many"}}]}})
        self.bad_objects.append({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                                 "metadata": {"name": "bad-pdb", "namespace": "default"},
                                 "spec": {"selector": {"matchExpressions": "x"}}})
        self.pv = pv
        rng.shuffle(self.bad_objects)


async def _create(cluster: Cluster, path: str, obj: dict[str, Any]) -> None:
    await cluster.client.create(path, obj)


async def test_malformed_objects_never_corrupt_the_scheduler(
    sandbox_factory: Callable[..., Any], tmp_path: Path
) -> None:
    plan = Plan(random.Random(SEED))
    sb: Sandbox = await sandbox_factory(nodes=0)
    kc = sb.write_kubeconfig(tmp_path / "kc")
    admin = SandboxAdmin(sb.url, sb.token)
    config = write_config(tmp_path / "config.yaml", configmap_config_text())
    async with user_client(kc) as cluster:
        await install_crd(cluster.client)
        for name, gpus in plan.good_nodes.items():
            await cluster.create_node(_node(name, gpus=gpus))
        await cluster.create_node(_node("turned-bad"))
        for node in plan.bad_nodes.values():
            await admin.araw_put(node)
        for obj in plan.bad_objects:
            await admin.araw_put(obj)
        for pod in plan.bound_pods:  # already bound when the daemon starts: the informer path
            await admin.araw_put(pod)
        path, sc = storage_class("manual")
        await _create(cluster, path, sc)
        await _create(cluster, "/api/v1/persistentvolumes", plan.pv)
        path, pvc = claim("claim-good", storage_class_name="manual", size="1Gi")
        await _create(cluster, path, pvc)
        await create_pod_group(cluster.client, pod_group("gang", 3))

        with scheduler_processes() as procs:
            proc = SchedulerProcess(kubeconfig=kc, config=config, identity="fuzz",
                                    extra=["--leader-elect", "false"])
            procs.append(proc.start())
            proc.wait_port()
            # A node the daemon holds turns malformed: it must be withdrawn, not used.
            await admin.araw_put(_corrupt(_node("turned-bad"), "status.allocatable.cpu", "x"))
            await wait_until(lambda: proc.logged('"turned-bad"'), timeout=20,
                             message=f"turned-bad logged; log:\n{proc.log_tail()}")
            # Well-formed and malformed pods interleaved, as a busy cluster would write them.
            rng = random.Random(SEED + 1)
            writes: list[tuple[bool, dict[str, Any]]] = (
                [(False, p) for p in plan.well_formed + plan.gang]
                + [(True, p) for p in plan.pending_pods])
            rng.shuffle(writes)
            await cluster.create_pods([p for raw, p in writes if not raw]
                                      + [p for p, _ in plan.dependents.values()])
            for raw, pod in writes:
                if raw:
                    await admin.araw_put(pod)

            good_names = [p["metadata"]["name"] for p in plan.well_formed + plan.gang]

            async def pods_by_name() -> dict[str, dict[str, Any]]:
                return {p["metadata"]["name"]: p for p in await cluster.list_pods("default")}

            async def unbound() -> list[str]:
                pods = await pods_by_name()
                return [n for n in good_names
                        if not (pods.get(n) or {}).get("spec", {}).get("nodeName")]

            async def all_good_bound() -> bool:
                return not await unbound()
            try:
                await wait_until(all_good_bound, timeout=30, message="every well-formed pod bound")
            except AssertionError:
                raise AssertionError(f"not bound: {await unbound()}; log:\n{proc.log_tail()}"
                                     ) from None

            # A pod whose metadata is malformed cannot take a status patch (the API server
            # validates the whole object, as kube-apiserver does): its event is all it gets.
            event_only = {n for n, f in plan.pending.items() if f.startswith("metadata.")}

            async def all_told() -> bool:
                told = await _told(cluster, event_only)
                return all(n in told for n in plan.pending)
            try:
                await wait_until(all_told, timeout=20, message="every malformed pod told why")
            except AssertionError:
                told = await _told(cluster, event_only)
                missing = {n: plan.pending[n] for n in plan.pending if n not in told}
                raise AssertionError(f"not told: {missing}; log:\n{proc.log_tail()}") from None

            pods = await pods_by_name()
            told = await _told(cluster, event_only)
            for name, field in plan.pending.items():
                pod = pods[name]
                assert not (pod.get("spec") or {}).get("nodeName"), name
                note, condition = told[name]
                assert field in note, (name, field, note)
                if name in event_only:
                    continue
                assert (condition.get("status"), condition.get("reason")) == (
                    "False", "SchedulerError"), (name, condition)
                assert field in condition.get("message", ""), (name, condition)

            async def dependents_told() -> bool:
                notes = await _notes(cluster)
                return all(any(why in n for n in notes.get(name, ()))
                           for name, (_, why) in plan.dependents.items())
            try:
                await wait_until(dependents_told, timeout=20,
                                 message="pods using malformed objects told why")
            except AssertionError:
                notes = await _notes(cluster)
                raise AssertionError({n: notes.get(n) for n in plan.dependents}) from None

            # No overcommit, with the malformed bound pods counted as documented.
            usage = _usage(plan, pods)
            for node, used in usage.items():
                assert used["cpu"] <= 4000, (node, used)
                assert used[GPU] <= plan.good_nodes.get(node, 0), (node, used)
            assert not any(p["spec"].get("nodeName") in plan.bad_nodes | {"turned-bad": 0}
                           for p in pods.values()), "a pod was bound to a malformed node"

            # No phantom usage: a pod asking for exactly what is left fits on each node.
            fits = []
            for node in plan.good_nodes:
                free = 4000 - usage[node]["cpu"]
                assert free > 0, (node, usage[node])
                pod = PodBuilder(f"exact-{node}").scheduler_name(SCHEDULER).req(
                    cpu=f"{free}m").node_selector({HOSTNAME: node}).obj()
                fits.append(for_api(pod))
            await cluster.create_pods(fits)
            names = [p["metadata"]["name"] for p in fits]

            async def exact_bound() -> bool:
                current = await pods_by_name()
                return all(current[n]["spec"].get("nodeName") for n in names)
            await wait_until(exact_bound, timeout=20,
                             message=f"exact-fit pods bound; log:\n{proc.log_tail()}")

            # Preemption on a full node reads PDBs (a malformed one among them) and evicts
            # among pods that include the malformed bound ones; still no overcommit after.
            preemptor = for_api(PodBuilder("preemptor").scheduler_name(SCHEDULER).priority(1000)
                                .req(cpu="1").node_selector({HOSTNAME: "n0"}).obj())
            await cluster.create_pod(preemptor)

            async def preemptor_bound() -> bool:
                return await cluster.node_name("preemptor") == "n0"
            await wait_until(preemptor_bound, timeout=30,
                             message=f"preemptor bound; log:\n{proc.log_tail()}")
            usage = _usage(plan, await pods_by_name())
            assert all(u["cpu"] <= 4000 for u in usage.values()), usage

            lines = list(proc.lines)
        assert proc.poll() is not None  # stopped cleanly by scheduler_processes
    tracebacks = [line for line in lines if "Traceback" in line or '"exception"' in line
                  or '"level": "error"' in line]
    assert not tracebacks, "\n".join(tracebacks[:5])
    # Each malformed node logged once, naming the field.
    logged = Counter(_log_object(line) for line in lines if "node is malformed" in line)
    for name in [*plan.bad_nodes, "turned-bad"]:
        assert logged[name] == 1, (name, logged)
    assert sb.counters()["bindings"] >= len(good_names)


async def _notes(cluster: Cluster) -> dict[str, list[str]]:
    """name -> notes of its FailedScheduling events."""
    events = await cluster.client.get("/apis/events.k8s.io/v1/namespaces/default/events")
    out: dict[str, list[str]] = {}
    for e in events.get("items") or []:
        if e.get("reason") == "FailedScheduling":
            name = (e.get("regarding") or {}).get("name", "")
            out.setdefault(name, []).append(str(e.get("note") or ""))
    return out


async def _told(cluster: Cluster, event_only: set[str]
                ) -> dict[str, tuple[str, dict[str, Any]]]:
    """name -> (FailedScheduling note, PodScheduled condition) of pods told both (or, for
    ``event_only``, the note)."""
    events = await cluster.client.get("/apis/events.k8s.io/v1/namespaces/default/events")
    notes: dict[str, str] = {}
    for e in events.get("items") or []:
        if e.get("reason") == "FailedScheduling":
            notes[(e.get("regarding") or {}).get("name", "")] = str(e.get("note") or "")
    out: dict[str, tuple[str, dict[str, Any]]] = {}
    for pod in await cluster.list_pods("default"):
        name = pod["metadata"]["name"]
        conds = (pod.get("status") or {}).get("conditions") or []
        cond = next((c for c in conds if isinstance(c, dict)
                     and c.get("type") == "PodScheduled"), None)
        if name in notes and (cond is not None or name in event_only):
            out[name] = (notes[name], cond or {})
    return out


def _usage(plan: Plan, pods: dict[str, dict[str, Any]]) -> dict[str, Counter[str]]:
    """Per good node: milli-CPU and GPUs of the pods bound to it (malformed ones as documented)."""
    usage: dict[str, Counter[str]] = {n: Counter() for n in plan.good_nodes}
    for name, pod in pods.items():
        node = (pod.get("spec") or {}).get("nodeName")
        if node not in usage:
            continue
        if name in plan.bound:
            usage[node]["cpu"] += plan.bound[name][1]
            continue
        for c in pod["spec"]["containers"]:
            requests = (c.get("resources") or {}).get("requests") or {}
            usage[node]["cpu"] += _cpu_milli(str(requests.get("cpu", "0")))
            usage[node][GPU] += int(requests.get(GPU, 0))
    return usage


def _log_object(line: str) -> str:
    try:
        return str(json.loads(line).get("object") or "")
    except ValueError:
        return ""

