"""The soak's checker: watches the sandbox over HTTP (informers on pods, nodes, claims,
events and the leader lease) and holds the invariants of ``invariants.py`` on every change;
the replicas' logs, metrics and ``/proc`` samples are fed to it by the run loop.

Handlers run on the informers' event loop, one event at a time; a violation is recorded
with its evidence and the run loop stops the soak on the first one.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from scheduler.client.api import ApiClient, resource_path
from scheduler.client.informer import DeletedFinalStateUnknown, Informer, InformerFactory
from scheduler.objects.pod import is_terminal, pod_key
from scheduler.soak import invariants as inv
from scheduler.soak.mix import EXPECT, NAMESPACE

# "unable to schedule pod; waiting" / "error scheduling pod; retrying": one line per failed
# attempt of a pod (its key in "pod").
ATTEMPT_EVENTS = ("unable to schedule pod; waiting", "error scheduling pod; retrying")


@dataclass
class Limits:
    """The bounds the soak states (and its summary prints)."""

    pending_bound: float = 60.0  # seconds from schedulable to bound
    attempts_window: float = 60.0
    initial_backoff: float = 1.0
    standby_slack: float = 1.0  # a bind in flight at a hand-over
    rss_tolerance: float = 0.10
    warmup: float = 60.0  # seconds after a replica starts (or starts leading)
    idle_cpu: float = 0.25  # of a core, with nothing schedulable pending
    fault_cause_window: float = 30.0  # an error line within this of its cause is caused


@dataclass
class Observed:
    """Counters and time series for the summary and the plot."""

    binds: list[float] = field(default_factory=list)  # times of binds
    latencies: list[float] = field(default_factory=list)  # first seen -> bound
    pods_seen: int = 0
    scheduled_events: int = 0
    binds_without_instance: int = 0


class Checker:
    def __init__(self, client: ApiClient, *, limits: Limits, lease_namespace: str,
                 lease_name: str, instance_of: dict[str, str],
                 clock: Callable[[], float] = time.monotonic, t0: float | None = None) -> None:
        self.client = client
        self.limits = limits
        self.clock = clock
        self.t0 = clock() if t0 is None else t0
        self.instance_of = instance_of
        self.lease_key = f"{lease_namespace}/{lease_name}"
        self.violations: list[inv.Violation] = []
        self.observed = Observed()
        self.factory = InformerFactory(client, resources=("pods", "nodes", "resourceclaims"))
        self.events = Informer(client, path=resource_path("events.k8s.io/v1", "events"),
                               resource_name="events", kind="Event",
                               api_version="events.k8s.io/v1")
        self.leases = Informer(client, path=resource_path("coordination.k8s.io/v1", "leases"),
                               resource_name="leases", kind="Lease",
                               api_version="coordination.k8s.io/v1")
        self.first_seen: dict[str, float] = {}  # pod uid -> when first seen
        self.first_node: dict[str, str] = {}  # pod uid -> first node seen
        self.pending_since: dict[str, float] = {}  # schedulable pending pods, by key
        self.schedulable_from: dict[str, float] = {}  # "any" pods made schedulable by the mix
        self.bind_of: dict[str, inv.Bind] = {}  # pod uid -> its bind
        self.lease_history: list[tuple[float, str]] = []
        self.attempts: dict[str, list[float]] = defaultdict(list)
        self.attempts_total = 0

    def now(self) -> float:
        return self.clock() - self.t0

    def restart_clock(self) -> None:
        """Time 0 is now (the soak starts once a replica leads); the lease's holder stays."""
        self.t0 = self.clock()
        holder = self.leader()
        self.lease_history = [(0.0, holder)] if holder else []

    # ------------------------------------------------------------ lifecycle

    def start(self) -> list[Informer]:
        pods = self.factory.informer("pods")
        pods.add_handler(self._pod_added, self._pod_updated, self._pod_deleted)
        self.factory.informer("nodes").add_handler(self._node_changed,
                                                   lambda _o, n: self._node_changed(n))
        self.factory.informer("resourceclaims").add_handler(
            self._claim_changed, lambda _o, n: self._claim_changed(n))
        self.events.add_handler(self._event, lambda _o, n: self._event(n))
        self.leases.add_handler(self._lease, lambda _o, n: self._lease(n))
        self.factory.start()
        return [self.events, self.leases]

    async def stop(self) -> None:
        self.events.stop()
        self.leases.stop()
        await self.factory.stop()

    def record(self, found: Iterable[inv.Violation]) -> None:
        self.violations.extend(found)

    # ------------------------------------------------------------ pods

    def _ours(self, pod: dict[str, Any]) -> bool:
        return (pod.get("metadata") or {}).get("namespace") == NAMESPACE

    def _schedulable(self, pod: dict[str, Any]) -> bool:
        labels = (pod.get("metadata") or {}).get("labels") or {}
        return labels.get(EXPECT) == "bound" or pod_key(pod) in self.schedulable_from

    def make_schedulable(self, keys: list[str]) -> None:
        """The mix made these ``any`` pods schedulable (e.g. the partial gang's node came)."""
        now = self.now()
        pods = self.factory.informer("pods").store
        for key in keys:
            self.schedulable_from[key] = now
            ns, _, name = key.partition("/")
            pod = pods.get(name, ns)
            if pod is not None and not (pod.get("spec") or {}).get("nodeName"):
                self.pending_since[key] = now

    def _pod_added(self, pod: dict[str, Any]) -> None:
        if not self._ours(pod):
            return
        uid = str(pod["metadata"].get("uid"))
        now = self.now()
        self.first_seen.setdefault(uid, now)
        self.observed.pods_seen += 1
        node = (pod.get("spec") or {}).get("nodeName")
        if node:
            self._bound(pod, now)
        elif self._schedulable(pod) and not is_terminal(pod):
            self.pending_since[pod_key(pod)] = now

    def _pod_updated(self, old: dict[str, Any], pod: dict[str, Any]) -> None:
        if not self._ours(pod):
            return
        if (pod.get("spec") or {}).get("nodeName"):
            uid = str(pod["metadata"].get("uid"))
            self.record(inv.rebinding(self.first_node, pod, at=self.now()))
            if uid not in self.first_node:
                self._bound(pod, self.now())
        if is_terminal(pod):
            self.pending_since.pop(pod_key(pod), None)

    def _pod_deleted(self, pod: dict[str, Any] | DeletedFinalStateUnknown) -> None:
        obj = pod.obj if isinstance(pod, DeletedFinalStateUnknown) else pod
        if not isinstance(obj, dict):
            return
        key = pod_key(obj)
        self.pending_since.pop(key, None)
        self.schedulable_from.pop(key, None)
        uid = str((obj.get("metadata") or {}).get("uid"))
        self.first_seen.pop(uid, None)
        self.first_node.pop(uid, None)
        self.bind_of.pop(uid, None)

    def _bound(self, pod: dict[str, Any], now: float) -> None:
        uid = str(pod["metadata"].get("uid"))
        node = str(pod["spec"]["nodeName"])
        self.first_node[uid] = node
        self.pending_since.pop(pod_key(pod), None)
        self.observed.binds.append(now)
        labels = pod["metadata"].get("labels") or {}
        if labels.get(EXPECT) == "bound" and uid in self.first_seen:
            # Creation -> bound, for pods that could be bound from the start (a pod that
            # waits for the mix, e.g. for an evicted filler's room, is not the scheduler's).
            self.observed.latencies.append(now - self.first_seen[uid])
        self.bind_of[uid] = inv.Bind(now, pod_key(pod), node, "")
        node_obj = self._node(node)
        if node_obj is not None:
            self.record(inv.node_overcommit(node_obj, self._pods_on(node), at=now))

    def _node(self, name: str) -> dict[str, Any] | None:
        return self.factory.informer("nodes").store.get(name)

    def _pods_on(self, node: str) -> list[dict[str, Any]]:
        return [p for p in self.factory.informer("pods").store.list()
                if (p.get("spec") or {}).get("nodeName") == node]

    def _node_changed(self, node: dict[str, Any]) -> None:
        name = str((node.get("metadata") or {}).get("name"))
        self.record(inv.node_overcommit(node, self._pods_on(name), at=self.now()))

    def _claim_changed(self, claim: dict[str, Any]) -> None:
        if inv.allocated_devices(claim):
            self.record(inv.shared_devices(
                self.factory.informer("resourceclaims").store.list(), at=self.now()))

    # ------------------------------------------------------------ who bound, who led

    def _event(self, event: dict[str, Any]) -> None:
        if event.get("reason") != "Scheduled":
            return
        regarding = event.get("regarding") or {}
        uid = str(regarding.get("uid") or "")
        bind = self.bind_of.get(uid)
        if bind is None or bind.instance:
            return
        self.observed.scheduled_events += 1
        bind = inv.Bind(bind.at, bind.pod, bind.node, str(event.get("reportingInstance") or ""))
        self.bind_of[uid] = bind
        self.record(inv.standby_binds([bind], self.lease_history, self.instance_of,
                                      slack=self.limits.standby_slack, at=self.now()))

    def _lease(self, lease: dict[str, Any]) -> None:
        md = lease.get("metadata") or {}
        if f"{md.get('namespace')}/{md.get('name')}" != self.lease_key:
            return
        holder = str((lease.get("spec") or {}).get("holderIdentity") or "")
        if not self.lease_history or self.lease_history[-1][1] != holder:
            self.lease_history.append((self.now(), holder))

    def leader(self) -> str:
        return self.lease_history[-1][1] if self.lease_history else ""

    def leader_changes(self) -> int:
        holders = [h for _, h in self.lease_history if h]
        return sum(1 for a, b in zip(holders, holders[1:], strict=False) if a != b)

    # ------------------------------------------------------------ fed by the run loop

    def log_lines(self, replica: str, lines: Iterable[str], *, recent_faults: set[str]
                  ) -> None:
        import json

        now = self.now()
        for line in lines:
            reason = inv.unexplained_log_line(line, recent_faults=recent_faults)
            if reason is not None:
                self.record([inv.Violation(inv.LOG_LINE, now, f"{replica}: {reason}: "
                                           f"{line[:300]}", (), {"replica": replica,
                                                                 "line": line[:4000]})])
            if any(e in line for e in ATTEMPT_EVENTS):
                try:
                    key = str(json.loads(line).get("pod"))
                except (ValueError, AttributeError):
                    continue
                self.attempts[key].append(now)
                self.attempts_total += 1

    def periodic(self) -> None:
        """The checks over time: pending bound, attempts within backoff."""
        now = self.now()
        self.record(inv.overdue_pending(self.pending_since, now=now,
                                        bound=self.limits.pending_bound, at=now))
        horizon = now - self.limits.attempts_window * 2
        for key in list(self.attempts):
            times = [t for t in self.attempts[key] if t >= horizon]
            if times:
                self.attempts[key] = times
            else:
                del self.attempts[key]
        self.record(inv.attempt_violations(self.attempts, window=self.limits.attempts_window,
                                           initial_backoff=self.limits.initial_backoff, at=now))
        # Binds whose Scheduled event never came (an injected 503 on events): uncheckable.
        for uid, b in list(self.bind_of.items()):
            if not b.instance and now - b.at > 30:
                self.observed.binds_without_instance += 1
                del self.bind_of[uid]
            elif b.instance and now - b.at > 30:
                del self.bind_of[uid]

    def schedulable_pending(self) -> int:
        return len(self.pending_since)

    def pods_total(self) -> int:
        """Pods in the cluster now (any phase), from the checker's own watch."""
        return len(self.factory.informer("pods").store.list())

    def pending_total(self) -> int:
        return sum(1 for p in self.factory.informer("pods").store.list()
                   if self._ours(p) and not (p.get("spec") or {}).get("nodeName")
                   and not is_terminal(p))

    def check_all_nodes(self) -> None:
        pods = self.factory.informer("pods").store.list()
        by_node: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for p in pods:
            n = (p.get("spec") or {}).get("nodeName")
            if n:
                by_node[str(n)].append(p)
        now = self.now()
        for node in self.factory.informer("nodes").store.list():
            self.record(inv.node_overcommit(node, by_node.get(node["metadata"]["name"], []),
                                            at=now))
        self.record(inv.shared_devices(self.factory.informer("resourceclaims").store.list(),
                                       at=now))
