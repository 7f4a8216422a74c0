"""The soak's seeded, ever-changing mix: workloads, node churn, API faults, leader changes.

Every action is drawn from one ``random.Random(seed)``: the same seed makes the same
sequence of decisions (the timing of what the scheduler does with them is its own).  Pods
carry the label ``EXPECT``: ``bound`` (it fits somewhere whatever the mix does, so it must
be bound within the soak's bound) or ``any`` (it may legitimately wait: the fillers a
preemptor evicts, the gang that only partly fits).  Capacity is kept ample for ``bound``
pods: base nodes are never removed (only the extra ones the mix adds), at most one is
cordoned and one tainted at a time.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from scheduler.client.api import ApiClient, ApiError, NotFound

NAMESPACE = "soak"
SCHEDULER_NAME = "py-scheduler"
EXPECT = "soak.kube-py-scheduler.io/expect"
POOL = "soak.kube-py-scheduler.io/pool"
POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
RUN_SECONDS = "sandbox.kube-py-scheduler.io/run-seconds"
GPU_CLASS = "gpu.example.com"
STORAGE_CLASS = "soak-wffc"
LOW, HIGH = "soak-low", "soak-high"
TAINT_KEY = "soak.kube-py-scheduler.io/tainted"
# The partly fitting gang: three members of 10 CPU pinned to a pool of 16-CPU nodes that
# has two nodes (two members fit) until the mix adds a third.
PARTIAL_GANG, PARTIAL_MEMBERS, PARTIAL_CPU = "gang-partial", 3, "10"
POOL_NODE_CPU = "16"
PREEMPT_NODE_CPU = "8"

# At most this many Jobs, gangs and volume pods are kept: adding one more first deletes the
# oldest of its kind (a TTL controller's or a team's cleanup), so the cluster settles at a
# steady size. Without it the mix made ~2.5 objects for each one ``cleanup`` deleted, the
# cluster grew all run (14 to 285 pods in 20 minutes) and the scheduler's RSS with it,
# which says nothing about whether the scheduler leaks.
KEEP = {"job": 8, "gang": 4, "vol": 6}

API_CORE = "/api/v1"
PODGROUPS = "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{ns}/podgroups"


def _meta(name: str, *, labels: dict[str, str] | None = None,
          namespace: str | None = NAMESPACE) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    if labels:
        meta["labels"] = labels
    return meta


def pod_spec(*, cpu: str, memory: str = "64Mi", priority_class: str | None = None,
             pool: str | None = None, claims: bool = False,
             pvc: str | None = None) -> dict[str, Any]:
    """A pod spec for our scheduler; ``pool`` pins it to (and tolerates) a pool of nodes."""
    container: dict[str, Any] = {"name": "c", "image": "registry.k8s.io/pause:3.10",
                                 "resources": {"requests": {"cpu": cpu, "memory": memory}}}
    spec: dict[str, Any] = {"schedulerName": SCHEDULER_NAME, "containers": [container],
                            "terminationGracePeriodSeconds": 0}
    if priority_class:
        spec["priorityClassName"] = priority_class
    if pool:
        spec["nodeSelector"] = {POOL: pool}
        spec["tolerations"] = [{"key": POOL, "operator": "Equal", "value": pool,
                                "effect": "NoSchedule"}]
    if claims:
        spec["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]
        container["resources"]["claims"] = [{"name": "gpu"}]
    if pvc:
        spec["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": pvc}}]
        container["volumeMounts"] = [{"name": "data", "mountPath": "/data"}]
    return spec


def pod(name: str, *, expect: str, labels: dict[str, str] | None = None,
        annotations: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    meta = _meta(name, labels={EXPECT: expect, **(labels or {})})
    if annotations:
        meta["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": pod_spec(**spec)}


def deployment(name: str, replicas: int, *, expect: str, **spec: Any) -> dict[str, Any]:
    labels = {"app": name, EXPECT: expect}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": _meta(name),
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": labels},
                                  "spec": pod_spec(**spec)}}}


def job(name: str, *, parallelism: int, run_seconds: int, cpu: str) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": _meta(name),
            "spec": {"parallelism": parallelism, "completions": parallelism,
                     "backoffLimit": 0,
                     "template": {"metadata": {"labels": {EXPECT: "bound", "job": name},
                                               "annotations": {RUN_SECONDS: str(run_seconds)}},
                                  "spec": {**pod_spec(cpu=cpu), "restartPolicy": "Never"}}}}


def pod_group(name: str, min_member: int) -> dict[str, Any]:
    return {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
            "metadata": _meta(name), "spec": {"minMember": min_member}}


def node(name: str, *, cpu: str, pool: str | None = None, memory: str = "64Gi",
         pods: str = "110") -> dict[str, Any]:
    labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux"}
    spec: dict[str, Any] = {}
    if pool:
        labels[POOL] = pool
        spec["taints"] = [{"key": POOL, "value": pool, "effect": "NoSchedule"}]
    alloc = {"cpu": cpu, "memory": memory, "pods": pods}
    return {"apiVersion": "v1", "kind": "Node", "metadata": _meta(name, labels=labels,
                                                                  namespace=None),
            "spec": spec,
            "status": {"capacity": dict(alloc), "allocatable": dict(alloc),
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def fixtures() -> list[tuple[str, dict[str, Any]]]:
    """(collection path, object) of what the mix needs before it starts."""
    return [
        (f"{API_CORE}/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                    "metadata": {"name": NAMESPACE}}),
        ("/apis/scheduling.k8s.io/v1/priorityclasses",
         {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
          "metadata": {"name": LOW}, "value": 0}),
        ("/apis/scheduling.k8s.io/v1/priorityclasses",
         {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
          "metadata": {"name": HIGH}, "value": 1000}),
        ("/apis/storage.k8s.io/v1/storageclasses",
         {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
          "metadata": {"name": STORAGE_CLASS}, "provisioner": "soak.example.com/csi",
          "volumeBindingMode": "WaitForFirstConsumer"}),
        (f"/apis/resource.k8s.io/v1/namespaces/{NAMESPACE}/resourceclaimtemplates",
         {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
          "metadata": _meta("one-gpu"),
          "spec": {"spec": {"devices": {"requests": [
              {"name": "gpu", "exactly": {"deviceClassName": GPU_CLASS}}]}}}}),
        (f"{API_CORE}/nodes", node("gang-pool-0", cpu=POOL_NODE_CPU, pool="gang")),
        (f"{API_CORE}/nodes", node("gang-pool-1", cpu=POOL_NODE_CPU, pool="gang")),
        (f"{API_CORE}/nodes", node("preempt-pool-0", cpu=PREEMPT_NODE_CPU, pool="preempt")),
    ]


# Deployments the mix scales: name -> (spec kwargs, expect, min, max replicas).
DEPLOYMENTS: dict[str, tuple[dict[str, Any], str, int, int]] = {
    "web-a": ({"cpu": "100m"}, "bound", 2, 30),
    "web-b": ({"cpu": "250m", "memory": "256Mi"}, "bound", 1, 16),
    "web-c": ({"cpu": "50m", "priority_class": LOW}, "bound", 0, 24),
    "gpu": ({"cpu": "100m", "claims": True}, "bound", 0, 8),
    # Fills the preemption pool (4 x 2 CPU on 8 CPU); a preemptor evicts some of them.
    "filler": ({"cpu": "2", "priority_class": LOW, "pool": "preempt"}, "any", 4, 4),
}


@dataclass
class MixState:
    """What the mix has made and may undo."""

    replicas: dict[str, int] = field(default_factory=dict)
    jobs: list[str] = field(default_factory=list)
    gangs: list[str] = field(default_factory=list)
    volume_pods: list[str] = field(default_factory=list)
    preemptors: list[str] = field(default_factory=list)
    extra_nodes: list[str] = field(default_factory=list)
    cordoned: str = ""
    tainted: str = ""
    partial_since: float | None = None  # the partly fitting gang exists since
    partial_node: bool = False  # its third pool node exists
    partial_generation: int = 0
    counter: int = 0

    def next_name(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}-{self.counter}"


@dataclass
class Faults:
    """What the soak injected, by kind; and when each kind was last injected."""

    counts: Counter[str] = field(default_factory=Counter)
    last: dict[str, float] = field(default_factory=dict)

    def note(self, kind: str, now: float) -> None:
        self.counts[kind] += 1
        self.last[kind] = now

    def recent(self, now: float, within: float) -> set[str]:
        return {k for k, t in self.last.items() if now - t <= within}


FAULT_KINDS = ("api-errors", "watch-drop", "api-latency", "watch-410")

Action = Callable[[], Awaitable[str]]


class Mix:
    """Draws and runs the mix's actions against the API (the user's side of the soak)."""

    def __init__(self, client: ApiClient, *, rng: random.Random, base_nodes: list[str],
                 admin: Any, faults: Faults, on_schedulable: Callable[[list[str]], None],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.client = client
        self.rng = rng
        self.base_nodes = base_nodes
        self.admin = admin
        self.faults = faults
        self.on_schedulable = on_schedulable
        self.clock = clock
        self.state = MixState()
        self.actions_done: Counter[str] = Counter()
        self.action_errors: Counter[str] = Counter()
        self.latency_until = 0.0  # when the injected latency is cleared (monotonic)

    # ------------------------------------------------------------ setup

    async def setup(self) -> None:
        for path, obj in fixtures():
            with contextlib.suppress(ApiError):  # exists already (a sandbox's prereqs)
                await self.client.create(path, obj)
        for name, (spec, expect, low, high) in DEPLOYMENTS.items():
            replicas = low if name == "filler" else self.rng.randint(low, (low + high) // 2)
            self.state.replicas[name] = replicas
            await self.client.create(f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments",
                                     deployment(name, replicas, expect=expect, **spec))

    # ------------------------------------------------------------ one step

    def choices(self) -> list[tuple[Action, float]]:
        s = self.state
        out: list[tuple[Action, float]] = [
            (self.scale, 6.0), (self.add_job, 2.0), (self.add_gang, 1.5),
            (self.add_volume_pod, 1.5), (self.cleanup, 2.0), (self.node_churn, 1.5),
        ]
        if not s.preemptors:
            out.append((self.preempt, 0.7))
        else:
            out.append((self.end_preempt, 0.7))
        out.append((self.partial_gang, 0.7))
        return out

    async def step(self) -> str:
        actions = self.choices()
        action = self.rng.choices([a for a, _ in actions], weights=[w for _, w in actions])[0]
        return await self.do(action)

    async def do(self, action: Action) -> str:
        """Run one action, counted; an injected fault failing the mix's own request is
        counted too and the soak goes on."""
        name = action.__name__
        try:
            what = await action()
        except (ApiError, OSError) as exc:  # an injected fault hit the mix's own request
            self.action_errors[name] += 1
            return f"{name}: {exc}"
        self.actions_done[name] += 1
        return what

    # ------------------------------------------------------------ workloads

    async def scale(self) -> str:
        name = self.rng.choice([n for n in DEPLOYMENTS if n != "filler"])
        _, _, low, high = DEPLOYMENTS[name]
        replicas = self.rng.randint(low, high)
        await self.client.patch(
            f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments/{name}",
            {"spec": {"replicas": replicas}}, patch_type="merge")
        self.state.replicas[name] = replicas
        return f"scale {name} to {replicas}"

    async def add_job(self) -> str:
        await self._keep_at_most("job")
        name = self.state.next_name("job")
        parallelism = self.rng.randint(1, 4)
        await self.client.create(f"/apis/batch/v1/namespaces/{NAMESPACE}/jobs",
                                 job(name, parallelism=parallelism,
                                     run_seconds=self.rng.randint(3, 20), cpu="200m"))
        self.state.jobs.append(name)
        return f"job {name} x{parallelism}"

    async def add_gang(self) -> str:
        await self._keep_at_most("gang")
        name = self.state.next_name("gang")
        members = self.rng.randint(2, 5)
        await self.client.create(PODGROUPS.format(ns=NAMESPACE), pod_group(name, members))
        for i in range(members):
            await self.client.create(
                f"{API_CORE}/namespaces/{NAMESPACE}/pods",
                pod(f"{name}-{i}", expect="bound", labels={POD_GROUP_LABEL: name},
                    cpu="500m"))
        self.state.gangs.append(name)
        return f"gang {name} of {members}"

    async def add_volume_pod(self) -> str:
        await self._keep_at_most("vol")
        name = self.state.next_name("vol")
        await self.client.create(
            f"{API_CORE}/namespaces/{NAMESPACE}/persistentvolumeclaims",
            {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": _meta(name),
             "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": STORAGE_CLASS,
                      "resources": {"requests": {"storage": "1Gi"}}}})
        await self.client.create(f"{API_CORE}/namespaces/{NAMESPACE}/pods",
                                 pod(name, expect="bound", cpu="100m", pvc=name))
        self.state.volume_pods.append(name)
        return f"pod {name} with a PVC"

    async def _delete(self, path: str) -> None:
        with contextlib.suppress(NotFound):
            await self.client.delete(path, params={"propagationPolicy": "Background"})

    def _made(self, kind: str) -> list[str]:
        s = self.state
        return {"job": s.jobs, "gang": s.gangs, "vol": s.volume_pods}[kind]

    async def cleanup(self) -> str:
        """Delete the oldest job, gang or volume pod (jobs are done by then)."""
        kinds = [k for k in ("job", "gang", "vol") if len(self._made(k)) > 1]
        if not kinds:
            return "nothing to clean"
        kind = self.rng.choice(kinds)
        return await self._delete_oldest(kind)

    async def _keep_at_most(self, kind: str) -> None:
        """Make room for one more of ``kind`` under ``KEEP`` (no draw from the seed)."""
        while len(self._made(kind)) >= KEEP[kind]:
            await self._delete_oldest(kind)

    async def _delete_oldest(self, kind: str) -> str:
        name = self._made(kind).pop(0)
        if kind == "job":
            await self._delete(f"/apis/batch/v1/namespaces/{NAMESPACE}/jobs/{name}")
        elif kind == "gang":
            await self._delete_gang(name)
        else:
            await self._delete(f"{API_CORE}/namespaces/{NAMESPACE}/pods/{name}")
            await self._delete(
                f"{API_CORE}/namespaces/{NAMESPACE}/persistentvolumeclaims/{name}")
        return f"delete {kind} {name}"

    async def _delete_gang(self, name: str) -> None:
        pods = await self.client.get(f"{API_CORE}/namespaces/{NAMESPACE}/pods",
                                     params={"labelSelector": f"{POD_GROUP_LABEL}={name}"})
        for p in pods.get("items") or []:
            await self._delete(f"{API_CORE}/namespaces/{NAMESPACE}/pods/"
                               f"{p['metadata']['name']}")
        await self._delete(PODGROUPS.format(ns=NAMESPACE) + f"/{name}")

    # ------------------------------------------------------------ priorities, gangs

    async def preempt(self) -> str:
        """A high-priority pod that fits the preemption pool only by evicting fillers."""
        name = self.state.next_name("vip")
        await self.client.create(f"{API_CORE}/namespaces/{NAMESPACE}/pods",
                                 pod(name, expect="bound", cpu="4", priority_class=HIGH,
                                     pool="preempt"))
        self.state.preemptors.append(name)
        return f"preemptor {name}"

    async def end_preempt(self) -> str:
        name = self.state.preemptors.pop(0)
        await self._delete(f"{API_CORE}/namespaces/{NAMESPACE}/pods/{name}")
        return f"delete preemptor {name}"

    async def partial_gang(self) -> str:
        """The gang that partly fits: create it; later add the pool node that lets it fit
        (from then on it must be bound); later delete gang and node."""
        s = self.state
        # Each generation has names of its own (see the docs' soak page: reusing them is
        # what the first hour-long soak stopped on).
        gang = f"{PARTIAL_GANG}-g{s.partial_generation}"
        pool_node = f"gang-pool-x{s.partial_generation}"
        if s.partial_since is None:
            await self.client.create(PODGROUPS.format(ns=NAMESPACE),
                                     pod_group(gang, PARTIAL_MEMBERS))
            for i in range(PARTIAL_MEMBERS):
                await self.client.create(
                    f"{API_CORE}/namespaces/{NAMESPACE}/pods",
                    pod(f"{gang}-{i}", expect="any",
                        labels={POD_GROUP_LABEL: gang}, cpu=PARTIAL_CPU, pool="gang"))
            s.partial_since = self.clock()
            return f"partly fitting gang {gang} created"
        if not s.partial_node:
            await self.client.create(f"{API_CORE}/nodes",
                                     node(pool_node, cpu=POOL_NODE_CPU, pool="gang"))
            s.partial_node = True
            self.on_schedulable([f"{NAMESPACE}/{gang}-{i}" for i in range(PARTIAL_MEMBERS)])
            return f"pool node {pool_node} added: the partial gang {gang} fits"
        await self._delete_gang(gang)
        await self._delete(f"{API_CORE}/nodes/{pool_node}")
        s.partial_since, s.partial_node = None, False
        s.partial_generation += 1
        return "partial gang and its node deleted"

    # ------------------------------------------------------------ nodes

    async def node_churn(self) -> str:
        s = self.state
        op = self.rng.choice(["add", "remove", "cordon", "taint"])
        if op == "add" or (op == "remove" and not s.extra_nodes):
            if len(s.extra_nodes) >= 4:
                op = "remove"
            else:
                name = s.next_name("extra")
                await self.client.create(f"{API_CORE}/nodes", node(name, cpu="16"))
                s.extra_nodes.append(name)
                return f"add node {name}"
        if op == "remove":
            name = s.extra_nodes.pop(0)
            await self._drain_and_delete(name)
            return f"remove node {name}"
        if op == "cordon":
            if s.cordoned:
                await self._set_unschedulable(s.cordoned, False)
                done, s.cordoned = f"uncordon {s.cordoned}", ""
                return done
            s.cordoned = self.rng.choice(self.base_nodes)
            await self._set_unschedulable(s.cordoned, True)
            return f"cordon {s.cordoned}"
        if s.tainted:
            await self.client.patch(f"{API_CORE}/nodes/{s.tainted}", {"spec": {"taints": None}},
                                    patch_type="merge")
            done, s.tainted = f"untaint {s.tainted}", ""
            return done
        s.tainted = self.rng.choice(self.base_nodes)
        await self.client.patch(
            f"{API_CORE}/nodes/{s.tainted}",
            {"spec": {"taints": [{"key": TAINT_KEY, "value": "x", "effect": "NoSchedule"}]}},
            patch_type="merge")
        return f"taint {s.tainted}"

    async def _set_unschedulable(self, name: str, value: bool) -> None:
        await self.client.patch(f"{API_CORE}/nodes/{name}",
                                 {"spec": {"unschedulable": value}},
                                 patch_type="merge")

    async def _drain_and_delete(self, name: str) -> None:
        """As an operator removes a node: its pods go first (their controllers recreate
        them elsewhere), then the node."""
        await self._set_unschedulable(name, True)
        pods = await self.client.get("/api/v1/pods", params={"fieldSelector":
                                                             f"spec.nodeName={name}"})
        for p in pods.get("items") or []:
            md = p["metadata"]
            with contextlib.suppress(NotFound):
                await self.client.delete(f"{API_CORE}/namespaces/{md['namespace']}/pods/"
                                         f"{md['name']}", params={"gracePeriodSeconds": "0"})
        await self._delete(f"{API_CORE}/nodes/{name}")

    # ------------------------------------------------------------ API faults

    async def inject_fault(self) -> str:
        # In turn, so a short soak sees each kind.
        kind = FAULT_KINDS[sum(self.faults.counts[k] for k in FAULT_KINDS) % len(FAULT_KINDS)]
        now = self.clock()
        if kind == "watch-drop":
            dropped = await self.admin.adrop_watches()
            self.faults.note(kind, now)
            return f"dropped {dropped} watches"
        if kind == "watch-410":
            await self.admin.acompact()
            await self.admin.adrop_watches()
            self.faults.note(kind, now)
            return "compacted history and dropped watches (410 on resume)"
        if kind == "api-errors":
            verb, resource, sub, code = self.rng.choice([
                ("create", "pods", "binding", 500), ("patch", "pods", "status", 500),
                ("create", "events", "*", 503), ("list", "pods", "*", 500),
                ("create", "pods", "binding", 429), ("get", "leases.coordination.k8s.io", "*",
                                                     500)])
            times = self.rng.randint(1, 3)
            await self.admin.afail(verb, resource, code=code, times=times, subresource=sub)
            self.faults.note(kind, now)
            return f"{times} x {code} on {verb} {resource}/{sub}"
        seconds = self.rng.choice([0.05, 0.2, 0.5])
        await self.admin.aadd_latency(seconds)
        self.latency_until = self.clock() + 10.0
        self.faults.note(kind, now)
        return f"{seconds}s latency on every request"

    async def clear_faults(self) -> None:
        """Remove injected failures and latency (watch faults are instantaneous)."""
        await self.admin.aclear()
        self.latency_until = 0.0


async def wait_for(predicate: Callable[[], bool], *, timeout: float,
                   interval: float = 0.2) -> bool:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(interval)
    return True
