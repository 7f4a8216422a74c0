"""A KWOK-style kubelet simulation, and the simulated nodes it serves.

Why: schedulers and gang logic react to pods becoming Running / Succeeded and to graceful
deletion, but no kubelet exists here. A pod bound to a *simulated* node becomes Running
shortly after binding (status writes are batched per tick so they do not compete with the
binding rate), finishes after ``run-seconds`` if annotated, and a deleted pod disappears
after its grace period, capped at ``max_grace`` seconds of real time.

Like the real kubelet it watches the API (an in-process ``Informer`` on the store: pods,
nodes, ResourceClaims) instead of being told about writes, and keeps its own index of pods per
node from the events: a bound Pending pod on a simulated node is started, a pod whose
deletion set ``deletionTimestamp`` with a grace period is removed once that period is over
(the API server keeps such a pod, finalizers or not, until the kubelet confirms with a zero
grace period), a new node starts the pods already bound to it, a written claim starts the
pods that waited for it.

A node is simulated unless it carries the annotation
``sandbox.kube-py-scheduler.io/simulated: "false"`` (the sandbox's own nodes carry "true";
nodes created by clients are simulated by default, so tests can add nodes freely).

A pod with ``spec.resourceClaims`` starts only once each of its claims exists (a generated one
owned by the pod), is allocated for the pod's node (``status.allocation.nodeSelector``) and
reserved for the pod, as the kubelet's DRA manager requires before it prepares the devices;
until then it stays Pending and is looked at again whenever one of its claims changes. The
claim the scheduler made for a pod's extended resources (DRAExtendedResource, named in
``status.extendedResourceClaimStatus``) is waited for the same way.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .resources import ResourceType
from .store import ADDED, DELETED, Event, Informer
from .util import SIMULATED as SIMULATED
from .util import is_simulated_node, iso_at, now_iso, set_condition
from .wakeloop import wake_loop

if TYPE_CHECKING:
    from .registry import Registry

Obj = dict[str, Any]
log = logging.getLogger("scheduler.sandbox")

RUN_SECONDS = "sandbox.kube-py-scheduler.io/run-seconds"
EXIT_CODE = "sandbox.kube-py-scheduler.io/exit-code"
ZONES = ("zone-a", "zone-b", "zone-c")
KUBELET_VERSION = "v1.37.0-sandbox"


def make_node(
    i: int,
    *,
    cpu: str = "32",
    memory: str = "128Gi",
    pods: str = "110",
    labels: dict[str, str] | None = None,
    width: int = 4,
    topology: bool = True,
) -> Obj:
    """Node ``i``, Ready, labelled as a kubelet labels it, and (``topology``) with a zone
    (``ZONES`` round robin) and a region; without them as upstream scheduler_perf's
    node-default template, which has no topology labels."""
    name = f"node-{i:0{width}d}"
    n = i + 1  # keep node-0000 off the network address
    ip = f"10.{(n >> 16) & 255}.{(n >> 8) & 255}.{n & 255}"
    res = {"cpu": cpu, "memory": memory, "pods": pods, "ephemeral-storage": "100Gi"}
    now = now_iso()
    cond = [
        {"type": t, "status": "False", "reason": f"KubeletHas{r}", "message": m,
         "lastHeartbeatTime": now, "lastTransitionTime": now}
        for t, r, m in (
            ("MemoryPressure", "SufficientMemory", "kubelet has sufficient memory available"),
            ("DiskPressure", "NoDiskPressure", "kubelet has no disk pressure"),
            ("PIDPressure", "SufficientPID", "kubelet has sufficient PID available"),
        )
    ]
    cond.append({"type": "Ready", "status": "True", "reason": "KubeletReady",
                 "message": "kubelet is posting ready status", "lastHeartbeatTime": now,
                 "lastTransitionTime": now})
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "beta.kubernetes.io/os": "linux",
                "beta.kubernetes.io/arch": "amd64",
                **({"topology.kubernetes.io/zone": ZONES[i % 3],
                    "topology.kubernetes.io/region": "region-1"} if topology else {}),
                "node.kubernetes.io/instance-type": "sandbox",
                **(labels or {}),
            },
            "annotations": {SIMULATED: "true"},
        },
        "spec": {"podCIDR": f"10.{128 + ((i >> 8) & 127)}.{i & 255}.0/24"},
        "status": {
            "capacity": dict(res),
            "allocatable": dict(res),
            "conditions": cond,
            "addresses": [{"type": "InternalIP", "address": ip}, {"type": "Hostname", "address": name}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "machineID": f"sandbox-{i}",
                "systemUUID": f"sandbox-{i}",
                "bootID": f"sandbox-{i}",
                "kernelVersion": "6.1.0-sandbox",
                "osImage": "Sandbox Linux",
                "containerRuntimeVersion": "sandbox://1.0",
                "kubeletVersion": KUBELET_VERSION,
                "kubeProxyVersion": KUBELET_VERSION,
                "operatingSystem": "linux",
                "architecture": "amd64",
            },
            "phase": "Running",
        },
    }


class KubeletSim:
    def __init__(
        self,
        registry: Registry,
        *,
        tick: float = 0.01,
        max_grace: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.registry = registry
        self.tick = tick
        self.max_grace = max_grace
        self.clock = clock
        self._start: dict[tuple[str, str], str] = {}
        self._timers: list[tuple[float, int, str, str, str, str]] = []
        self._seq = itertools.count()
        self._terminating: set[tuple[str, str]] = set()
        self._ips = itertools.count(1)
        self._wake = asyncio.Event()
        # (namespace, claim name) -> pods (ns, name, uid) that wait for that claim
        self._claim_waiters: dict[tuple[str, str], set[tuple[str, str, str]]] = {}
        cat = registry.catalog
        self.pods_rt = cat.builtin("", "pods")
        self.nodes_rt = cat.builtin("", "nodes")
        self.claims_rt = cat.builtin("resource.k8s.io", "resourceclaims")
        self.informer = Informer(registry.store, wake=self._wake,
                                 types=(self.pods_rt, self.nodes_rt, self.claims_rt), keep=self._keep)
        # pods per node, kept from the watch events (the kubelet's own pod source)
        self._node_of: dict[tuple[str, str], str] = {}
        self._by_node: dict[str, set[tuple[str, str]]] = {}

    # ------------------------------------------------------------ policy

    def node(self, name: str) -> Obj | None:
        e = self.registry.ts_of("", "nodes").get("", name)
        return e.obj if e is not None else None

    is_simulated = staticmethod(is_simulated_node)

    # ------------------------------------------------------------ the watch

    def sync_watch(self) -> None:
        """Apply the initial list (when the watches (re)open) and the events since the last call."""
        for rt, entries in self.informer.open():
            if rt is self.pods_rt:
                self._node_of.clear()
                self._by_node.clear()
                for e in entries:
                    try:
                        self._pod_event(ADDED, e.obj)
                    except (AttributeError, KeyError, TypeError, ValueError):
                        log.warning("kubelet: ignoring malformed pod %s", e.obj.get("metadata"))
        for rt, ev in self.informer.drain():
            try:
                if rt is self.pods_rt:
                    self._pod_event(ev.type, ev.obj)
                elif rt is self.nodes_rt:
                    if ev.type == ADDED:
                        self.node_added(ev.obj)
                elif ev.type != DELETED:
                    self.claim_changed(ev.obj)
            except (AttributeError, KeyError, TypeError, ValueError) as err:
                # a malformed object (written around validation): named, skipped, the rest goes on
                md = ev.obj.get("metadata")
                md = md if isinstance(md, dict) else {}
                log.warning("kubelet: ignoring malformed %s %s/%s: %r", rt.plural,
                            md.get("namespace", ""), md.get("name", ""), err)

    def _keep(self, rt: ResourceType, ev: Event) -> bool:
        """Chosen before queueing: bound pods (a removal carries the last state, so a bound
        pod's removal is kept too), new nodes, every claim."""
        if rt is self.pods_rt:
            spec = ev.obj.get("spec")
            return not isinstance(spec, dict) or bool(spec.get("nodeName"))
        return rt is not self.nodes_rt or ev.type == ADDED

    def _pod_event(self, typ: str, pod: Obj) -> None:
        md = pod["metadata"]
        key = (md.get("namespace", ""), md["name"])
        node = "" if typ == DELETED else str((pod.get("spec") or {}).get("nodeName") or "")
        old = self._node_of.get(key, "")
        if node != old:
            if old:
                pods = self._by_node.get(old)
                if pods is not None:
                    pods.discard(key)
                    if not pods:
                        del self._by_node[old]
            if node:
                self._node_of[key] = node
                self._by_node.setdefault(node, set()).add(key)
            else:
                self._node_of.pop(key, None)
        if typ == DELETED:
            self._terminating.discard(key)
            return
        if md.get("deletionTimestamp"):
            grace = md.get("deletionGracePeriodSeconds")
            if (key not in self._terminating and isinstance(grace, (int, float)) and grace > 0
                    and node and self.is_simulated(self.node(node))):
                self.pod_terminating(pod, float(grace))
            return
        self.pod_changed(pod)

    def pod_changed(self, pod: Obj) -> None:
        spec = pod.get("spec") or {}
        md = pod["metadata"]
        if not spec.get("nodeName") or md.get("deletionTimestamp"):
            return
        if (pod.get("status") or {}).get("phase", "Pending") != "Pending":
            return
        if not self.is_simulated(self.node(spec["nodeName"])):
            return
        self._start[(md.get("namespace", ""), md["name"])] = md["uid"]
        self._wake.set()

    def node_added(self, node: Obj) -> None:
        if not self.is_simulated(node):
            return
        pods = self.registry.ts(self.pods_rt)
        for ns, name in sorted(self._by_node.get(node["metadata"]["name"], ())):
            e = pods.get(ns, name)
            if e is not None:
                self.pod_changed(e.obj)

    def claim_changed(self, claim: Obj) -> None:
        """A ResourceClaim was written: pods waiting for it may start now."""
        md = claim["metadata"]
        waiters = self._claim_waiters.pop((md.get("namespace", ""), md["name"]), None)
        if waiters:
            for ns, name, uid in waiters:
                self._start[(ns, name)] = uid
            self._wake.set()

    def claims_ready(self, pod: Obj, node: Obj) -> tuple[bool, list[str]]:
        """Whether the pod's claims let it start on ``node``, and the claims to wait for
        (a claim not generated yet is waited for through the pod's own status update)."""
        from scheduler.objects.errors import ObjectError
        from scheduler.objects.node_affinity import node_selector_matches

        from .claimcontroller import ClaimNotFound, claim_name, is_for_pod, reserved_for_pod

        md = pod["metadata"]
        ns = md.get("namespace", "")
        claims_rt = self.registry.catalog.builtin("resource.k8s.io", "resourceclaims")
        blocked: list[str] = []
        ready = True
        names: list[tuple[str | None, bool]] = []
        for pc in (pod.get("spec") or {}).get("resourceClaims") or []:
            if not isinstance(pc, dict):
                continue
            try:
                names.append(claim_name(pod, pc))
            except ClaimNotFound:
                ready = False
        # DRAExtendedResource: the claim the scheduler made for the pod's extended resources
        extended = extended_claim_name(pod)
        if extended:
            names.append((extended, True))
        for cname, check_owner in names:
            if cname is None:
                continue
            e = self.registry.ts(claims_rt).get(ns, cname)
            claim = e.obj if e is not None else None
            ok = claim is not None and (not check_owner or is_for_pod(pod, claim))
            if ok:
                assert claim is not None
                alloc = (claim.get("status") or {}).get("allocation")
                try:
                    ok = (isinstance(alloc, dict) and reserved_for_pod(pod, claim)
                          and node_selector_matches(alloc.get("nodeSelector"), node))
                except ObjectError:
                    ok = False
            if not ok:
                ready = False
                blocked.append(cname)
        return ready, blocked

    def pod_terminating(self, pod: Obj, grace: float) -> None:
        md = pod["metadata"]
        key = (md.get("namespace", ""), md["name"])
        self._terminating.add(key)
        self._start.pop(key, None)
        self._schedule(min(grace, self.max_grace), "remove", key[0], key[1], md["uid"])

    def _schedule(self, delay: float, action: str, ns: str, name: str, uid: str) -> None:
        heapq.heappush(self._timers, (self.clock() + delay, next(self._seq), action, ns, name, uid))
        self._wake.set()

    # ------------------------------------------------------------ the loop

    async def run(self, *, iterations: int | None = None) -> None:
        # a tick lets a burst of bindings accumulate, so status writes are batched
        try:
            await wake_loop(self._wake, self.step, delay=self.tick, what="kubelet simulation",
                            before=self.sync_watch, timeout=self._until_due, iterations=iterations)
        finally:
            self.informer.close()

    def _until_due(self) -> float | None:
        """How long the loop may wait for a wake: not at all while pods wait to start, until
        the next timer is due, or for ever."""
        if self._start:
            return 0.0
        if self._timers:
            return max(0.0, self._timers[0][0] - self.clock())
        return None

    def step(self) -> None:
        """Apply everything due now: what the watch delivered, pending starts, completions,
        removals."""
        self.sync_watch()
        starts, self._start = self._start, {}
        for (ns, name), uid in starts.items():
            self._run_pod(ns, name, uid)
        now = self.clock()
        while self._timers and self._timers[0][0] <= now:
            _, _, action, ns, name, uid = heapq.heappop(self._timers)
            if action == "remove":
                self._terminating.discard((ns, name))
                self._remove(ns, name, uid)
            elif action == "finish":
                self._finish(ns, name, uid)

    def _current(self, ns: str, name: str, uid: str) -> Obj | None:
        e = self.registry.ts_of("", "pods").get(ns, name)
        if e is None or e.obj["metadata"]["uid"] != uid:
            return None
        return e.obj

    def _write(self, old: Obj, new: Obj) -> None:
        reg = self.registry
        reg.store.write(reg.ts(self.pods_rt), new, old)

    def _run_pod(self, ns: str, name: str, uid: str) -> None:
        pod = self._current(ns, name, uid)
        if pod is None or pod["metadata"].get("deletionTimestamp"):
            return
        spec = pod.get("spec") or {}
        status = dict(pod.get("status") or {})
        if status.get("phase", "Pending") != "Pending":
            return
        node = self.node(spec.get("nodeName", ""))
        if not self.is_simulated(node):
            return
        assert node is not None
        if spec.get("resourceClaims") or extended_claim_name(pod):
            try:
                ready, blocked = self.claims_ready(pod, node)
            except (AttributeError, KeyError, TypeError, ValueError):
                ready, blocked = False, []  # a malformed pod or claim never starts (it is not evaluable)
            if not ready:
                for cname in blocked:
                    self._claim_waiters.setdefault((ns, cname), set()).add((ns, name, uid))
                return
        now = now_iso()
        n = next(self._ips)
        pod_ip = f"10.{244 + ((n >> 16) & 7)}.{(n >> 8) & 255}.{n & 255}"
        host_ip = next((a["address"] for a in (node.get("status") or {}).get("addresses") or []
                        if a.get("type") == "InternalIP"), "10.0.0.1")
        # one pass instead of set_condition per type: this runs once per bound pod
        want = ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled")
        conds = []
        have = set()
        for c in status.get("conditions") or []:
            t = c.get("type")
            if t in want:
                have.add(t)
                if c.get("status") != "True":
                    c = {"type": t, "status": "True", "lastProbeTime": None, "lastTransitionTime": now}
            conds.append(c)
        conds.extend({"type": t, "status": "True", "lastProbeTime": None, "lastTransitionTime": now}
                     for t in want if t not in have)
        status.update({
            "phase": "Running",
            "conditions": conds,
            "hostIP": host_ip,
            "hostIPs": [{"ip": host_ip}],
            "podIP": pod_ip,
            "podIPs": [{"ip": pod_ip}],
            "startTime": now,
            "containerStatuses": [
                {"name": c.get("name", ""), "image": c.get("image", ""),
                 "imageID": f"sandbox://{c.get('image', '')}",
                 "containerID": f"sandbox://{uid[:8]}-{c.get('name', '')}",
                 "ready": True, "started": True, "restartCount": 0,
                 "state": {"running": {"startedAt": now}}}
                for c in spec.get("containers") or []
            ],
        })
        if spec.get("initContainers"):
            status["initContainerStatuses"] = [
                {"name": c.get("name", ""), "image": c.get("image", ""), "ready": True,
                 "restartCount": 0, "imageID": f"sandbox://{c.get('image', '')}",
                 "state": {"terminated": {"exitCode": 0, "reason": "Completed",
                                          "startedAt": now, "finishedAt": now}}}
                for c in spec["initContainers"]
            ]
        self._write(pod, {**pod, "metadata": dict(pod["metadata"]), "status": status})
        ann = pod["metadata"].get("annotations") or {}
        if RUN_SECONDS in ann:
            try:
                secs = float(ann[RUN_SECONDS])
            except ValueError:
                return
            self._schedule(max(0.0, secs), "finish", ns, name, uid)

    def _finish(self, ns: str, name: str, uid: str) -> None:
        pod = self._current(ns, name, uid)
        if pod is None or (pod.get("status") or {}).get("phase") != "Running":
            return
        ann = pod["metadata"].get("annotations") or {}
        try:
            code = int(ann.get(EXIT_CODE, "0"))
        except ValueError:
            code = 1
        now = now_iso()
        status = dict(pod.get("status") or {})
        reason = "Completed" if code == 0 else "Error"
        status["phase"] = "Succeeded" if code == 0 else "Failed"
        conds = list(status.get("conditions") or [])
        for t in ("Ready", "ContainersReady"):
            conds = set_condition(conds, {"type": t, "status": "False", "reason": "PodCompleted",
                                          "lastProbeTime": None, "lastTransitionTime": now})
        status["conditions"] = conds
        status["containerStatuses"] = [
            {**cs, "ready": False, "started": False,
             "state": {"terminated": {"exitCode": code, "reason": reason,
                                      "startedAt": ((cs.get("state") or {}).get("running") or {}).get("startedAt", now),
                                      "finishedAt": now, "containerID": cs.get("containerID", "")}}}
            for cs in status.get("containerStatuses") or []
        ]
        self._write(pod, {**pod, "metadata": dict(pod["metadata"]), "status": status})

    def _remove(self, ns: str, name: str, uid: str) -> None:
        """The grace period is over: the kubelet's delete with a zero grace period. A pod
        that finalizers still hold stays, with ``deletionGracePeriodSeconds: 0`` (it goes
        when its last finalizer does)."""
        pod = self._current(ns, name, uid)
        if pod is None:
            return
        reg = self.registry
        md = pod["metadata"]
        if md.get("finalizers"):
            if md.get("deletionGracePeriodSeconds"):
                reg.store.write(reg.ts(self.pods_rt), {**pod, "metadata": {**md, "deletionGracePeriodSeconds": 0}}, pod)
            return
        reg.remove_now(self.pods_rt, ns, name)


def deletion_time(grace: float, clock: Callable[[], float] = time.time) -> str:
    return iso_at(clock() + grace)


def extended_claim_name(pod: Obj) -> str:
    """``status.extendedResourceClaimStatus.resourceClaimName``, or ""."""
    st = (pod.get("status") or {}).get("extendedResourceClaimStatus")
    name = st.get("resourceClaimName") if isinstance(st, dict) else None
    return name if isinstance(name, str) else ""
