"""The soak's invariants as pure functions of what the checker observed.

Each function takes plain observations (API objects as dicts from the wire, timestamps,
samples) and returns the violations it finds, so every invariant is unit-tested on a
crafted violation (``tests/unit/soak/``) apart from the processes that produce the
observations (``checker.py`` feeds them continuously).  Times are seconds on one clock
(the soak process's ``time.monotonic()``) unless a name says otherwise.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from scheduler.objects.pod import is_terminal, pod_key, pod_requests
from scheduler.objects.quantity import QuantityError
from scheduler.objects.resources import Resource

# The invariants, by the name a violation carries.
OVERCOMMIT = "node-overcommitted"
DEVICE_SHARED = "device-in-two-claims"
REBOUND = "pod-bound-twice"
STANDBY_BIND = "bound-by-standby"
PENDING_TOO_LONG = "schedulable-pod-pending-too-long"
ATTEMPTS = "attempts-beyond-backoff"
CACHE_DIFF = "cache-differs-from-cluster"
RSS_GROWTH = "rss-not-flat"
CPU_BUSY = "cpu-busy-while-idle"
LOG_LINE = "unexplained-log-line"
REPLICA_EXIT = "replica-exited"

INVARIANTS: tuple[str, ...] = (
    OVERCOMMIT, DEVICE_SHARED, REBOUND, STANDBY_BIND, PENDING_TOO_LONG, ATTEMPTS,
    CACHE_DIFF, RSS_GROWTH, CPU_BUSY, LOG_LINE, REPLICA_EXIT,
)


@dataclass(frozen=True)
class Violation:
    """One broken invariant with its evidence: when (seconds into the soak), what, which
    objects."""

    invariant: str
    at: float
    message: str
    objects: tuple[str, ...] = ()
    evidence: Mapping[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"invariant": self.invariant, "at": round(self.at, 3), "message": self.message,
                "objects": list(self.objects), "evidence": dict(self.evidence)}


# --- nodes: no resource overcommitted, no device in two claims ----------------------------


def _node_name(node: Mapping[str, Any]) -> str:
    return str((node.get("metadata") or {}).get("name") or "")


def counts_on_node(pod: Mapping[str, Any]) -> bool:
    """A bound pod holds its node's resources until it is gone or terminal (a pod being
    deleted still runs until the kubelet has stopped it)."""
    return bool((pod.get("spec") or {}).get("nodeName")) and not is_terminal(pod)


def node_overcommit(node: Mapping[str, Any], pods: Iterable[Mapping[str, Any]],
                    *, at: float) -> list[Violation]:
    """cpu, memory, pods and extended resources of the pods bound to ``node`` within its
    allocatable."""
    name = _node_name(node)
    try:
        allocatable = Resource.from_resource_list((node.get("status") or {}).get("allocatable"),
                                                  where=f"Node {name}: status.allocatable")
    except QuantityError:
        return []  # a malformed node: the scheduler keeps it out; nothing to hold it to
    used = Resource()
    holders: list[str] = []
    for pod in pods:
        if (pod.get("spec") or {}).get("nodeName") != name or not counts_on_node(pod):
            continue
        try:
            used.add(pod_requests(pod))
        except (QuantityError, ValueError):
            continue
        holders.append(pod_key(pod))
    over: dict[str, tuple[int, int]] = {}
    if used.milli_cpu > allocatable.milli_cpu:
        over["cpu (m)"] = (used.milli_cpu, allocatable.milli_cpu)
    if used.memory > allocatable.memory:
        over["memory"] = (used.memory, allocatable.memory)
    if len(holders) > allocatable.allowed_pod_number:
        over["pods"] = (len(holders), allocatable.allowed_pod_number)
    for scalar, amount in used.scalar_resources.items():
        if amount > allocatable.scalar_resources.get(scalar, 0):
            over[scalar] = (amount, allocatable.scalar_resources.get(scalar, 0))
    if not over:
        return []
    what = ", ".join(f"{r} {u} > {a}" for r, (u, a) in sorted(over.items()))
    return [Violation(OVERCOMMIT, at, f"node {name} overcommitted: {what}",
                      (f"Node {name}", *sorted(holders)),
                      {"node": name, "over": {r: list(v) for r, v in over.items()}})]


def allocated_devices(claim: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """(driver, pool, device) of each device a ResourceClaim's allocation holds."""
    allocation = (claim.get("status") or {}).get("allocation") or {}
    results = (allocation.get("devices") or {}).get("results") or []
    return [(str(r.get("driver")), str(r.get("pool")), str(r.get("device")))
            for r in results if isinstance(r, Mapping)]


def shared_devices(claims: Iterable[Mapping[str, Any]], *, at: float) -> list[Violation]:
    """No device is in the allocation of two claims (devices here are never shareable)."""
    holders: dict[tuple[str, str, str], list[str]] = {}
    for claim in claims:
        meta = claim.get("metadata") or {}
        key = f"{meta.get('namespace')}/{meta.get('name')}"
        for device in set(allocated_devices(claim)):
            holders.setdefault(device, []).append(key)
    out = []
    for device, keys in sorted(holders.items()):
        if len(keys) > 1:
            out.append(Violation(
                DEVICE_SHARED, at, f"device {'/'.join(device)} allocated to {len(keys)} claims",
                tuple(f"ResourceClaim {k}" for k in sorted(keys)),
                {"device": list(device), "claims": sorted(keys)}))
    return out


# --- bindings: once, by the leader ---------------------------------------------------------


def rebinding(first_node: Mapping[str, str], pod: Mapping[str, Any], *, at: float
              ) -> list[Violation]:
    """A pod (by uid) once seen on a node never appears on another one."""
    uid = str((pod.get("metadata") or {}).get("uid") or "")
    node = str((pod.get("spec") or {}).get("nodeName") or "")
    before = first_node.get(uid)
    if not node or before is None or before == node:
        return []
    return [Violation(REBOUND, at, f"pod {pod_key(pod)} bound to {node} after {before}",
                      (f"Pod {pod_key(pod)}",), {"uid": uid, "first": before, "now": node})]


@dataclass(frozen=True)
class Bind:
    """A binding as observed: when the checker first saw the pod's nodeName, and the
    replica whose ``Scheduled`` event reports it (its reportingInstance)."""

    at: float
    pod: str
    node: str
    instance: str


def holder_at(history: Sequence[tuple[float, str]], t: float) -> str:
    """The lease holder at ``t`` from ``(time, holder)`` changes in time order."""
    holder = ""
    for when, who in history:
        if when > t:
            break
        holder = who
    return holder


def standby_binds(binds: Iterable[Bind], history: Sequence[tuple[float, str]],
                  instance_of: Mapping[str, str], *, slack: float, at: float
                  ) -> list[Violation]:
    """Every bind is made by the replica holding the lease: a bind observed more than
    ``slack`` seconds after its replica stopped holding the lease (another replica took it,
    by the lease's history) is a bind by a standby.  ``instance_of`` maps a lease identity
    to the reportingInstance of its events."""
    out = []
    for b in binds:
        holder = holder_at(history, b.at)
        if not holder or instance_of.get(holder) == b.instance:
            continue
        earlier = holder_at(history, b.at - slack)
        if instance_of.get(earlier) == b.instance:
            continue  # within the slack of a hand-over: a bind already in flight
        out.append(Violation(
            STANDBY_BIND, at, f"pod {b.pod} bound to {b.node} by {b.instance} while "
            f"{holder} held the lease", (f"Pod {b.pod}",),
            {"binder": b.instance, "holder": holder, "bound_at": round(b.at, 3)}))
    return out


# --- latency and attempts -------------------------------------------------------------------


def overdue_pending(pending_since: Mapping[str, float], *, now: float, bound: float,
                    at: float) -> list[Violation]:
    """Every schedulable pod is bound within ``bound`` seconds of being created (or of the
    moment it became schedulable)."""
    late = sorted(k for k, since in pending_since.items() if now - since > bound)
    if not late:
        return []
    return [Violation(PENDING_TOO_LONG, at,
                      f"{len(late)} schedulable pod(s) pending over {bound:g}s: "
                      + ", ".join(late[:10]), tuple(f"Pod {k}" for k in late[:50]),
                      {"pods": {k: round(now - pending_since[k], 1) for k in late[:50]}})]


def max_attempts(window: float, initial_backoff: float) -> int:
    """The most attempts a pod may make in ``window`` seconds: one per backoff period (the
    shortest, the initial one, is the generous bound), plus one in flight at each end."""
    return int(window // initial_backoff) + 2


def attempts_over_backoff(times: Sequence[float], *, window: float, initial_backoff: float
                          ) -> tuple[int, float] | None:
    """(attempts, start) of the first ``window`` holding more attempts than backoff
    allows, for one pod's attempt times in order; None when none does."""
    limit = max_attempts(window, initial_backoff)
    start = 0
    for end, t in enumerate(times):
        while t - times[start] > window:
            start += 1
        if end - start + 1 > limit:
            return end - start + 1, times[start]
    return None


def attempt_violations(attempts: Mapping[str, Sequence[float]], *, window: float,
                       initial_backoff: float, at: float) -> list[Violation]:
    out = []
    for key, times in sorted(attempts.items()):
        found = attempts_over_backoff(times, window=window, initial_backoff=initial_backoff)
        if found is not None:
            n, start = found
            out.append(Violation(
                ATTEMPTS, at, f"pod {key}: {n} attempts within {window:g}s from {start:.1f}s "
                f"(backoff allows {max_attempts(window, initial_backoff)})", (f"Pod {key}",),
                {"attempts": n, "window_start": round(start, 3)}))
    return out


# --- the cache comparer --------------------------------------------------------------------


def cache_differences(answer: Mapping[str, Any], *, replica: str, at: float) -> list[Violation]:
    """The scheduler's ``/debug/cache/compare`` answer: its cache equals a fresh list of
    the cluster when ``differences`` is empty."""
    differences = list(answer.get("differences") or [])
    if not differences:
        return []
    return [Violation(CACHE_DIFF, at, f"{replica}: cache differs from the cluster in "
                      f"{len(differences)} place(s): {differences[0]}", (),
                      {"replica": replica, "differences": differences[:50],
                       "nodes": answer.get("nodes"), "pods": answer.get("pods")})]


# --- the processes: memory, CPU, logs ------------------------------------------------------


def rss_growth(samples: Sequence[tuple[float, int]], *, baseline: int, tolerance: float,
               replica: str, at: float) -> list[Violation]:
    """RSS after warm-up within ``tolerance`` (0.10 = 10 %) above the ``baseline`` taken at
    the end of the warm-up."""
    limit = baseline * (1 + tolerance)
    for t, rss in samples:
        if rss > limit:
            return [Violation(RSS_GROWTH, at, f"{replica}: RSS {rss / 2**20:.1f} MiB at "
                              f"{t:.0f}s is over {1 + tolerance:.2f}x its warm-up "
                              f"{baseline / 2**20:.1f} MiB", (),
                              {"replica": replica, "rss": rss, "baseline": baseline,
                               "sample_at": round(t, 1)})]
    return []


def cpu_busy(cpu_seconds: float, wall_seconds: float, *, threshold: float, replica: str,
             at: float) -> list[Violation]:
    """With nothing pending, a replica uses at most ``threshold`` of a core."""
    if wall_seconds <= 0 or cpu_seconds / wall_seconds <= threshold:
        return []
    return [Violation(CPU_BUSY, at, f"{replica}: {cpu_seconds / wall_seconds:.0%} of a core "
                      f"over {wall_seconds:.1f}s with nothing pending (limit "
                      f"{threshold:.0%})", (), {"replica": replica, "cpu": cpu_seconds,
                                                "wall": wall_seconds})]


# Error lines the soak itself causes, by the fault that causes them: a paused or killed
# leader loses its lease, injected API failures fail writes.  Anything else at error level,
# and any traceback, has no cause the soak can name.
CAUSED_BY: Mapping[str, tuple[str, ...]] = {
    "failed to renew the leader lease within the renew deadline": ("pause", "api-latency",
                                                                   "api-errors"),
    "lost the leader lease; stopping at once": ("pause", "api-latency", "api-errors"),
    "the leader lease was not renewed within the renew deadline; stopping scheduling": (
        "pause", "api-latency", "api-errors"),
}


# The message of every failure the sandbox injects ("injected fault: InternalError").
INJECTED = "injected fault"


def unexplained_log_line(line: str, *, recent_faults: Iterable[str]) -> str | None:
    """The reason a scheduler log line (JSON) breaks "no traceback, no error without a
    cause", or None.  ``recent_faults``: the kinds of fault injected lately."""
    try:
        record = json.loads(line)
    except ValueError:
        # Not a log record: Python prints tracebacks (and crashes) as plain text.
        return "traceback" if "Traceback (most recent call last)" in line else None
    if not isinstance(record, dict):
        return None
    if record.get("exception") or "Traceback (most recent call last)" in line:
        return "traceback"
    if str(record.get("level", "")).lower() not in ("error", "critical"):
        return None
    causes = CAUSED_BY.get(str(record.get("event", "")), ())
    if set(causes) & set(recent_faults):
        return None
    if INJECTED in line and "api-errors" in recent_faults:
        return None  # the error names the sandbox's injected failure as its cause
    return "error without a cause"
