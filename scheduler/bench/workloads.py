"""The benchmark's workloads: upstream scheduler_perf's shapes by their names, plus ours.

Each shape follows the upstream configuration it is named after (node and pod templates,
pods that exist before the measurement, churn while measuring) at 5000 nodes, and scales
its existing pods with the node count so the same shape runs on a tiny cluster in tests.
Existing pods are created already bound (``spec.nodeName``): upstream schedules them before
it starts measuring, so only the measured pods are timed either way.
``upstream_floor`` is the scheduler_perf CI floor of the Go kube-scheduler for the shape
(minimum average pods/s at 5000 nodes), printed beside our figure.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

MEASURED_NAMESPACE = "sched-1"
EXISTING_NAMESPACE = "sched-0"
CHURN_NAMESPACE = "sched-churn"
GANG_LABEL = "scheduling.x-k8s.io/pod-group"
PAUSE = "registry.k8s.io/pause:3.10"
# The nodes' zones as the sandbox labels them (zone-a/b/c round robin), for the shapes whose
# nodes have zones (Workload.node_zones).
ZONES = ("zone-a", "zone-b", "zone-c")
REFERENCE_NODES = 5000


def pod(name: str, *, namespace: str, scheduler_name: str, cpu: str = "100m",
        memory: str = "500Mi", labels: dict[str, str] | None = None,
        priority: int | None = None, node_name: str = "") -> dict[str, Any]:
    """Upstream's pod-default template (100m / 500Mi, requests = limits) with a name."""
    spec: dict[str, Any] = {
        "schedulerName": scheduler_name,
        "containers": [{
            "name": "pause", "image": PAUSE, "ports": [{"containerPort": 80}],
            "resources": {"requests": {"cpu": cpu, "memory": memory},
                          "limits": {"cpu": cpu, "memory": memory}},
        }],
    }
    if priority is not None:
        spec["priority"] = priority
    if node_name:
        spec["nodeName"] = node_name
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "labels": dict(labels or {})},
            "spec": spec}


Template = Callable[[int, str], dict[str, Any]]  # (index, scheduler name) -> pod


@dataclass(frozen=True)
class Churn:
    """Upstream's churn op with ``number`` 1: every interval, ``mode="create"`` creates one
    object of each kind; ``"recreate"`` creates them, or deletes them when they exist (so
    each kind is there every other interval)."""

    mode: str
    interval_s: float
    kinds: tuple[str, ...]  # "high-priority-pod", "large-pod", "node", "service"


@dataclass(frozen=True)
class Workload:
    name: str
    upstream_floor: float | None  # pods/s, Go kube-scheduler's CI floor at 5000 nodes
    measured_pods: int  # at 5000 nodes (upstream's count); --pods overrides
    measured: Template
    existing_pods: int = 0  # at 5000 nodes, scaled with the node count
    existing: Template | None = None
    gated_pods: int = 0  # at 5000 nodes, scaled; created before and never ungated
    churn: Churn | None = None
    node_cpu: str = "4"  # upstream's node-default: 4 CPU, 32Gi, 110 pods
    node_memory: str = "32Gi"
    node_pods: str = "110"
    # Zone (and region) labels on the nodes: upstream's node-default template has none, and
    # only the shapes that label their nodes with a zone (labelNodePrepareStrategy:
    # TopologySpreading, NodeAffinity) keep the sandbox's zones, with our own shapes, which
    # have no upstream template. Without them the default PodTopologySpread constraints
    # skip the zone key, as upstream's do.
    node_zones: bool = False
    gang_size: int = 0
    # Gangs mixed with plain pods: every other block of gang_size pods is plain pods.
    gang_mixed: bool = False
    # Gangs required to stay in one rack (nodes labelled RACK_KEY, RACK_SIZE nodes a rack).
    gang_topology: bool = False
    # examples/extenders' HTTP extender, in its own process, filters and prioritizes
    extender: bool = False
    # simulated DRA driver devices (sandbox --dra-devices); the measured pods then each use
    # a claim from the ResourceClaimTemplate ``claim_template()`` (one device)
    dra_devices: str = ""
    # every measured pod is created (pending) before the scheduler starts: its informers
    # list them all; measured from the first bind to the last
    backlog: bool = False
    note: str = ""
    aliases: tuple[str, ...] = field(default=())
    # Upstream's steady state (createPods with ``steadyState: true``): this many measured
    # pods kept in the namespace, each deleted once scheduled and replaced at once (upstream
    # replaces a whole batch once all of it is scheduled), for ``steady_duration_s`` (``--pods`` caps the scheduled pods); 0: every measured pod
    # is created once (``steady.py``).
    steady_batch: int = 0
    steady_duration_s: float = 10.0
    # ResourceClaims allocated before the measurement (upstream's allocResourceClaims), as a
    # function of the devices the cluster has; None: none.
    allocated_claims: Callable[[int], int] | None = None
    # The existing pods are deleted while the measured pods are scheduled, one every
    # 1/rate s (upstream's deletePods opcode with deletePodsPerSecond); 0: they stay.
    delete_existing_per_s: float = 0.0
    # The existing and gated pods scale with the measured pods (upstream's small variants of
    # a shape on a fixed node count) instead of with the node count.
    scale_with_pods: bool = False
    # The floor run's pods are upstream's light-pod (no requests) like this shape's.
    light: bool = False

    def scaled(self, count: int, nodes: int) -> int:
        return 0 if count == 0 else max(1, round(count * nodes / REFERENCE_NODES))

    def before(self, count: int, *, nodes: int, pods: int) -> int:
        """How many of ``count`` (existing or gated pods at upstream's size) a run on
        ``nodes`` nodes with ``pods`` measured pods creates."""
        if self.scale_with_pods:
            return 0 if count == 0 else max(1, round(count * pods / self.measured_pods))
        return self.scaled(count, nodes)


def _default(i: int, scheduler: str) -> dict[str, Any]:
    return pod(f"pod-{i}", namespace=MEASURED_NAMESPACE, scheduler_name=scheduler)


def _existing_default(i: int, scheduler: str) -> dict[str, Any]:
    return pod(f"init-{i}", namespace=EXISTING_NAMESPACE, scheduler_name=scheduler)


def _anti_affinity(namespace: str, prefix: str) -> Template:
    def make(i: int, scheduler: str) -> dict[str, Any]:
        p = pod(f"{prefix}-{i}", namespace=namespace, scheduler_name=scheduler,
                labels={"color": "green"})
        p["spec"]["affinity"] = {"podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [{
                "labelSelector": {"matchLabels": {"color": "green"}},
                "topologyKey": "kubernetes.io/hostname",
                "namespaces": [MEASURED_NAMESPACE, EXISTING_NAMESPACE],
            }]}}
        return p
    return make


def _spread(i: int, scheduler: str) -> dict[str, Any]:
    p = pod(f"spreading-{i}", namespace=MEASURED_NAMESPACE, scheduler_name=scheduler,
            labels={"color": "blue"})
    p["spec"]["topologySpreadConstraints"] = [{
        "maxSkew": 5, "topologyKey": "topology.kubernetes.io/zone",
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"color": "blue"}}}]
    return p


def _node_affinity(i: int, scheduler: str) -> dict[str, Any]:
    p = pod(f"node-affinity-{i}", namespace=MEASURED_NAMESPACE, scheduler_name=scheduler)
    # Upstream labels every node zone1 and asks for zone1 or zone2: every node matches.
    p["spec"]["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{
            "key": "topology.kubernetes.io/zone", "operator": "In", "values": list(ZONES)}]}]}}}
    return p


def _low_priority(i: int, scheduler: str) -> dict[str, Any]:
    p = pod(f"low-{i}", namespace=EXISTING_NAMESPACE, scheduler_name=scheduler, cpu="900m")
    p["spec"]["terminationGracePeriodSeconds"] = 0
    return p


def light_pod(name: str, *, namespace: str, scheduler_name: str) -> dict[str, Any]:
    """Upstream's light-pod template: one pause container, no requests, no grace period."""
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "labels": {}},
            "spec": {"schedulerName": scheduler_name,
                     "containers": [{"name": "pause", "image": PAUSE}],
                     "terminationGracePeriodSeconds": 0}}


def _light(i: int, scheduler: str) -> dict[str, Any]:
    return light_pod(f"light-{i}", namespace=MEASURED_NAMESPACE, scheduler_name=scheduler)


def _existing_light(i: int, scheduler: str) -> dict[str, Any]:
    return light_pod(f"deleting-{i}", namespace=EXISTING_NAMESPACE, scheduler_name=scheduler)


def gated_pod(i: int, scheduler: str) -> dict[str, Any]:
    """Upstream's gated-pod template: one pause container, no requests, one gate."""
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"gated-{i}", "namespace": EXISTING_NAMESPACE, "labels": {}},
            "spec": {"schedulerName": scheduler,
                     "schedulingGates": [{"name": "test.k8s.io/hold"}],
                     "containers": [{"name": "pause", "image": PAUSE}]}}


def gang_member(gang_size: int, *, mixed: bool = False) -> Template:
    """Members of PodGroups gang-0, gang-1 ... in blocks of ``gang_size``; ``mixed``: every
    other block is plain pods of the same size (the odd blocks)."""
    def make(i: int, scheduler: str) -> dict[str, Any]:
        block = i // gang_size
        if mixed and block % 2 == 1:
            return pod(f"plain-{i}", namespace=MEASURED_NAMESPACE, scheduler_name=scheduler,
                       cpu="1", memory="1Gi")
        return pod(f"gang-{i}", namespace=MEASURED_NAMESPACE, scheduler_name=scheduler,
                   cpu="1", memory="1Gi", labels={GANG_LABEL: f"gang-{block}"})
    return make


def _plain(i: int, scheduler: str) -> dict[str, Any]:
    return pod(f"plain-{i}", namespace=MEASURED_NAMESPACE, scheduler_name=scheduler,
               memory="128Mi")


def _legacy_anti_affinity(i: int, scheduler: str) -> dict[str, Any]:
    app = f"aa-{i // 50}"
    p = pod(f"aa-{i}", namespace=MEASURED_NAMESPACE, scheduler_name=scheduler,
            memory="128Mi", labels={"app": app})
    p["spec"]["affinity"] = {"podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [{
            "labelSelector": {"matchLabels": {"app": app}},
            "topologyKey": "kubernetes.io/hostname"}]}}
    return p


def _legacy_spread(i: int, scheduler: str) -> dict[str, Any]:
    app = f"sp-{i // 100}"
    p = pod(f"sp-{i}", namespace=MEASURED_NAMESPACE, scheduler_name=scheduler,
            memory="128Mi", labels={"app": app})
    selector = {"matchLabels": {"app": app}}
    p["spec"]["topologySpreadConstraints"] = [
        {"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
         "whenUnsatisfiable": "DoNotSchedule", "labelSelector": selector},
        {"maxSkew": 1, "topologyKey": "kubernetes.io/hostname",
         "whenUnsatisfiable": "ScheduleAnyway", "labelSelector": selector},
    ]
    return p


CLAIM_TEMPLATE = "one-device"
DRA_DEVICE_CLASS = "gpu.example.com"  # the simulated driver's class for kind "gpu"


def claim_template() -> dict[str, Any]:
    """Upstream's DRA scheduler_perf template: one device of the test driver's class."""
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": CLAIM_TEMPLATE, "namespace": MEASURED_NAMESPACE},
            "spec": {"spec": {"devices": {"requests": [
                {"name": "req-0", "exactly": {"deviceClassName": DRA_DEVICE_CLASS}}]}}}}


def _with_claim(i: int, scheduler: str) -> dict[str, Any]:
    p = pod(f"claim-{i}", namespace=MEASURED_NAMESPACE, scheduler_name=scheduler)
    p["spec"]["resourceClaims"] = [{"name": "resource",
                                    "resourceClaimTemplateName": CLAIM_TEMPLATE}]
    p["spec"]["containers"][0]["resources"]["claims"] = [{"name": "resource"}]
    return p


STEADY_BATCH = 10  # upstream's steady-state createPods count


def _half(devices: int) -> int:
    return devices // 2


def _all_but_a_batch(devices: int) -> int:
    return max(0, devices - STEADY_BATCH)


def allocated_claim(index: int, *, node: str, device: str) -> dict[str, Any]:
    """Upstream's resourceclaim.yaml (one device of the class, in the init namespace) and
    the allocation upstream's allocResourceClaims writes: ``device`` of ``node``'s pool, for
    that node; reserved for nobody. (claim, status) : the status goes in with a second write."""
    claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
             "metadata": {"name": f"init-claim-{index}", "namespace": EXISTING_NAMESPACE},
             "spec": {"devices": {"requests": [
                 {"name": "req-0", "exactly": {"deviceClassName": DRA_DEVICE_CLASS}}]}}}
    claim["status"] = {"allocation": {
        "devices": {"results": [{"request": "req-0", "driver": DRA_DEVICE_CLASS,
                                 "pool": node, "device": device}]},
        "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": [node]}]}]},
    }}
    return claim


GANG_SIZE = 8
# Gang topology workloads: a rack label on every node, RACK_SIZE nodes a rack.
RACK_KEY = "bench.kube-py-scheduler.io/rack"
RACK_SIZE = 16
REQUIRED_TOPOLOGY = "kube-py-scheduler.io/required-topology"

WORKLOADS: dict[str, Workload] = {w.name: w for w in (
    Workload("SchedulingBasic", 680, 10000, _default, existing_pods=1000,
             existing=_existing_default),
    Workload("SchedulingPodAntiAffinity", 60, 2000,
             _anti_affinity(MEASURED_NAMESPACE, "anti-affinity"), existing_pods=1000,
             existing=_anti_affinity(EXISTING_NAMESPACE, "init-anti-affinity")),
    # upstream labels these nodes moon-1/2/3 at random: 3 zones here too
    Workload("TopologySpreading", 460, 5000, _spread, existing_pods=5000,
             existing=_existing_default, node_zones=True),
    Workload("NodeAffinity", 220, 10000, _node_affinity, existing_pods=5000,
             existing=_existing_default, node_zones=True),
    Workload("PreemptionAsync", 570, 5000, _default, existing_pods=20000,
             existing=_low_priority, churn=Churn("create", 0.2, ("high-priority-pod",)),
             note="4 low-priority 900m pods per node; a 3-CPU priority-10 pod every 200 ms "
                  "preempts 3 of them"),
    # upstream's 1Node_10000GatedPods (run with --nodes 1): one node of 90000 pods, light
    # pods (no requests); 10000 gated pods, then 20000 pods scheduled and deleted at 50/s
    # while the 20000 measured pods are created
    Workload("SchedulingWhileGated", 910, 20000, _light, gated_pods=10000,
             existing_pods=20000, existing=_existing_light, delete_existing_per_s=50.0,
             node_pods="90000", scale_with_pods=True, light=True,
             note="upstream's 1Node_10000GatedPods (run with --nodes 1): one node of 90000 "
                  "pods, light pods without requests; 10000 gated pods, 20000 bound pods "
                  "deleted at 50/s (AssignedPodDelete events) while 20000 are measured; the "
                  "gated and bound pods scale with --pods"),
    # upstream's SchedulingWithMixedChurn/5000Nodes_10000Pods (the case with the floor)
    Workload("MixedChurn", 710, 10000, _default,
             churn=Churn("recreate", 1.0, ("node", "large-pod", "service")),
             note="every second a node that takes no pods (capacity pods 0), an "
                  "unschedulable 9-CPU priority-10 pod and a service are created, or "
                  "deleted if they exist (upstream's recreate with number 1)"),
    Workload("Backlog", None, 10000, _default, backlog=True,
             note="every measured pod is pending before the scheduler starts (a large Job "
                  "submitted at once, a new leader's inherited queue); measured from the "
                  "first bind to the last, the time to the first bind (informer sync "
                  "included) apart"),
    # upstream's 5000pods_500nodes: 2500 init pods scheduled (not measured), then 2500
    # measured; here the init pods' 2500 devices are held by claims allocated before
    # (allocResourceClaims' way), which leaves the measured pods the same free devices
    Workload("SchedulingWithResourceClaimTemplate", 40, 2500, _with_claim,
             dra_devices="gpu=10", allocated_claims=_half,
             note="upstream's 5000pods_500nodes: 500 nodes with 10 devices each (run with "
                  "--nodes 500), half of them held before (upstream's 2500 init pods), "
                  "2500 measured pods each get one through its own claim from a template "
                  "(the sandbox's resourceclaim controller creates them); upstream's floor "
                  "is 56 with queueing hints"),
    *(Workload(f"SteadyStateClusterResourceClaimTemplate/{fill}", floor, 100_000,
               _with_claim, dra_devices="gpu=10", steady_batch=STEADY_BATCH,
               allocated_claims=claims,
               note=f"upstream's {fill}_500nodes (run with --nodes 500): 10 devices a node, "
                    f"{what}; {STEADY_BATCH} pods kept, each with its own claim from a "
                    "template, each deleted once scheduled and replaced at once (upstream: "
                    f"batch by batch), for 10 s; upstream's floor with queueing hints is {floor_qh}")
      for fill, floor, floor_qh, claims, what in (
          ("empty", 64, 64, None, "no device allocated before"),
          ("half", 70, 60, _half, "half of them allocated to claims of no pod before"),
          ("full", 60, 60, _all_but_a_batch,
           f"all but {STEADY_BATCH} allocated to claims of no pod before"))),
    Workload("gang", None, 5000, gang_member(GANG_SIZE), node_cpu="32",
             node_memory="128Gi", gang_size=GANG_SIZE, node_zones=True,
             note="PodGroups of 8, all-or-nothing (Coscheduling)"),
    *(Workload(f"GangMixed{size}{'Topology' if topo else ''}", None, 5000,
               gang_member(size, mixed=True), node_cpu="32", node_memory="128Gi",
               node_zones=True, gang_size=size, gang_mixed=True, gang_topology=topo,
               note=f"PodGroups of {size} (1-CPU members) alternating with blocks of {size} "
                    "plain pods" + (f"; each gang required in one rack ({RACK_KEY}, "
                                    f"{RACK_SIZE} nodes a rack)" if topo else ""))
      for size in (8, 32, 128) for topo in (False, True)),
    # The bench's earlier shapes, kept for comparison with the README's older figures.
    Workload("plain", None, 5000, _plain, node_cpu="32", node_memory="128Gi",
             node_zones=True),
    Workload("anti-affinity", None, 5000, _legacy_anti_affinity, node_cpu="32",
             node_memory="128Gi", node_zones=True),
    Workload("spread", None, 5000, _legacy_spread, node_cpu="32", node_memory="128Gi",
             node_zones=True),
    Workload("extender", None, 5000, _plain, node_cpu="32", node_memory="128Gi",
             extender=True, node_zones=True,
             note="plain pods; the example HTTP extender (examples/extenders) in its own "
                  "process filters and prioritizes every pod, with node names only "
                  "(nodeCacheCapable)"),
)}


def pod_groups(count: int, gang_size: int, *, mixed: bool = False,
               topology: bool = False) -> list[dict[str, Any]]:
    """The PodGroups of ``gang_member``'s pods (the last one holds what is left)."""
    groups = []
    for g in range((count + gang_size - 1) // gang_size):
        if mixed and g % 2 == 1:
            continue
        members = min(gang_size, count - g * gang_size)
        meta: dict[str, Any] = {"name": f"gang-{g}", "namespace": MEASURED_NAMESPACE}
        if topology:
            meta["annotations"] = {REQUIRED_TOPOLOGY: RACK_KEY}
        groups.append({
            "apiVersion": "scheduling.x-k8s.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": meta,
            "spec": {"minMember": members, "scheduleTimeoutSeconds": 60},
        })
    return groups


def rack_of(index: int) -> str:
    """The rack label value of the node at ``index`` (gang topology workloads)."""
    return f"rack-{index // RACK_SIZE}"


def churn_object(kind: str, index: int, *, scheduler_name: str) -> tuple[str, dict[str, Any]]:
    """(collection path, object) of one churn object, after upstream's churn templates:
    pod-high-priority (3 CPU), pod-high-priority-large-cpu (9 CPU, requests only),
    churn/node-default (no labels, capacity ``pods: 0`` and nothing else, no allocatable: a
    node that takes no pod) and churn/service-default."""
    if kind == "high-priority-pod":
        p = pod(f"high-{index}", namespace=CHURN_NAMESPACE, scheduler_name=scheduler_name,
                cpu="3", priority=10)
        return f"/api/v1/namespaces/{CHURN_NAMESPACE}/pods", p
    if kind == "large-pod":
        p = pod(f"large-{index}", namespace=CHURN_NAMESPACE, scheduler_name=scheduler_name,
                cpu="9", priority=10)
        del p["spec"]["containers"][0]["resources"]["limits"]
        return f"/api/v1/namespaces/{CHURN_NAMESPACE}/pods", p
    if kind == "node":
        return "/api/v1/nodes", {
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": f"churn-node-{index}"},
            "status": {"capacity": {"pods": "0"},
                       "conditions": [{"type": "Ready", "status": "True"}],
                       "phase": "Running"},
        }
    if kind == "service":
        return f"/api/v1/namespaces/{CHURN_NAMESPACE}/services", {
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": f"churn-svc-{index}", "namespace": CHURN_NAMESPACE},
            "spec": {"selector": {"app": "foo"},
                     "ports": [{"protocol": "TCP", "port": 8080, "targetPort": 8080}]},
        }
    raise ValueError(f"unknown churn kind {kind!r}")
