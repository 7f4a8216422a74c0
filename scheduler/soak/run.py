"""One soak: a sandbox process, scheduler replicas, the mix, the checker, until the duration
ends or an invariant breaks.

The loop ticks once a second: it reads the replicas' new log lines and ``/proc`` samples
into the checker, restarts replicas that exited (as a kubelet would), draws the mix's next
action, injects an API fault or causes a leader change when their turn comes, and every
``quiet_every`` seconds holds a quiet point (no action, no fault) where the cache comparer
runs and CPU must be near idle.  A violation stops it at once.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import signal
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scheduler.exit_codes import EXIT_LOST_LEASE
from scheduler.soak import invariants as inv
from scheduler.soak.checker import Checker, Limits
from scheduler.soak.mix import SCHEDULER_NAME, Faults, Mix
from scheduler.soak.replicas import Replica, proc_usage

LEASE_NAME = "py-scheduler"
LEASE_NAMESPACE = "kube-system"
# Leader election a little tighter than upstream's defaults (15/10/2 s) so a soak sees
# several hand-overs, loose enough for a loaded 2-core machine.
LEASE_DURATION, RENEW_DEADLINE, RETRY_PERIOD = 8, 6, 1
PAUSE_SECONDS = LEASE_DURATION * 2
# The cache comparer against a fresh LIST of the cluster (scheduler/explain/debug.py).
COMPARE_ROUTE = "/debug/cache/compare?fresh=true"
TICK = 1.0
STARTUP_TIMEOUT = 300.0
# A replica that started or was resumed this recently is catching up, not idle.
SETTLE_SECONDS = 30.0
LEADER_CHANGES = ("pause", "kill", "term")


def config_text() -> str:
    """The replicas' KubeSchedulerConfiguration: the default plugins plus Coscheduling (the
    PodGroup gangs), leader election on, upstream's backoff (1 s doubling to 10 s)."""
    return f"""\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
podInitialBackoffSeconds: 1
podMaxBackoffSeconds: 10
leaderElection:
  leaderElect: true
  leaseDuration: {LEASE_DURATION}s
  renewDeadline: {RENEW_DEADLINE}s
  retryPeriod: {RETRY_PERIOD}s
  resourceName: {LEASE_NAME}
  resourceNamespace: {LEASE_NAMESPACE}
profiles:
  - schedulerName: {SCHEDULER_NAME}
    plugins:
      multiPoint:
        enabled:
          - name: Coscheduling
      queueSort:
        enabled:
          - name: Coscheduling
        disabled:
          - name: "*"
    pluginConfig:
      - name: Coscheduling
        args:
          permitWaitingTimeSeconds: 30
"""


@dataclass
class Sample:
    t: float
    rss: dict[str, int]
    pending: int
    binds: int
    attempts: int
    leader: str = ""  # "<replica>#<incarnation>" of the lease holder then ("" if none)
    pods: int = 0  # in the cluster (the scheduler's working set grows with them)


@dataclass
class Timeline:
    """When the mix's periodic ingredients come: faults, leader changes, quiet points."""

    duration: float
    fault_every: float
    leader_every: float
    quiet_every: float

    @classmethod
    def for_duration(cls, duration: float) -> Timeline:
        # A two-minute soak still sees every ingredient at least once: faults every 15 s, a
        # leader change at a third and two thirds, a quiet point mid-way and at the end.
        return cls(duration=duration, fault_every=15.0 if duration < 600 else 20.0,
                   leader_every=min(duration / 3, 600.0),
                   quiet_every=min(duration / 2, 300.0))


@dataclass
class Totals:
    """Counters of the replicas, summed over their incarnations (a restart resets them)."""

    by_incarnation: dict[tuple[str, int], dict[str, float]] = field(default_factory=dict)

    def update(self, identity: str, incarnation: int, values: dict[str, float]) -> None:
        self.by_incarnation[(identity, incarnation)] = values

    def total(self, name: str) -> float:
        return sum(v.get(name, 0.0) for v in self.by_incarnation.values())


def scrape(text: str) -> dict[str, float]:
    """The counters the summary reports, from a replica's /metrics."""
    from prometheus_client.parser import text_string_to_metric_families

    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == "scheduler_schedule_attempts_total":
                key = f"attempts_{s.labels.get('result')}"
                out[key] = out.get(key, 0.0) + s.value
            elif s.name == "scheduler_event_handling_duration_seconds_count":
                out["events_handled"] = out.get("events_handled", 0.0) + s.value
            elif s.name == "scheduler_preemption_attempts_total":
                out["preemption_attempts"] = out.get("preemption_attempts", 0.0) + s.value
    return out


class Soak:
    def __init__(self, args: argparse.Namespace, *, out: Any) -> None:
        self.args = args
        self.out = out
        self.rng = random.Random(args.seed)
        # Warm-up: a minute, two in a long soak (a leader leads ~10 minutes between changes).
        self.limits = Limits(warmup=min(max(60.0, args.duration * 0.1), 120.0))
        self.timeline = Timeline.for_duration(args.duration)
        self.faults = Faults()
        self.samples: list[Sample] = []
        self.totals = Totals()
        self.replicas: list[Replica] = []
        self.expected_exit: dict[str, set[int]] = {}
        self.restart_at: dict[str, float] = {}
        self.leading_since: dict[str, float] = {}
        self.rss_baseline: dict[tuple[str, int], int] = {}
        # (identity, incarnation) of every process that has led: its leader baseline stays
        # once it steps down (a former leader keeps what it grew while leading)
        self.has_led: set[tuple[str, int]] = set()
        self.rss_first: dict[str, int] = {}
        self.rss_last: dict[str, int] = {}
        self.compares: list[dict[str, Any]] = []
        self.idle_cpu: list[dict[str, Any]] = []
        self.leader_actions: list[str] = []
        self.log: list[str] = []
        self.stop_reason = ""
        self.leader_change_count = 0
        self.evidence: dict[str, Any] = {}
        self.resume_at: dict[str, float] = {}
        self.resumed_at: dict[str, float] = {}
        # --memory-every: each replica's /debug/memory, written to workdir/memory/.
        self.memory_every: float | None = getattr(args, "memory_every", None)
        self.memory_dir: Path | None = None
        self.memory_reports = 0

    def say(self, text: str) -> None:
        print(text, file=self.out, flush=True)

    # ------------------------------------------------------------ the whole run

    async def run(self) -> dict[str, Any]:
        from scheduler.client.api import ApiClient
        from scheduler.client.connection import load_connection
        from scheduler.sandbox.testing import SandboxProcess

        workdir = Path(tempfile.mkdtemp(prefix="soak-"))
        sandbox = SandboxProcess(nodes=self.args.nodes, node_cpu="16", node_memory="64Gi",
                                 dra_devices=["gpu=4"], scheduler_prereqs=True,
                                 watch_history=100000, workdir=workdir)
        await asyncio.to_thread(sandbox.start)
        self.say(f"soak: seed {self.args.seed}, {self.args.duration:g}s, {self.args.nodes} "
                 f"nodes, {self.args.replicas} replicas; sandbox {sandbox.url}; logs in "
                 f"{workdir}")
        config = workdir / "config.yaml"
        config.write_text(config_text())
        client = ApiClient(load_connection(kubeconfig=str(sandbox.kubeconfig_path)), qps=0)
        self.replicas = [Replica(identity=f"soak-replica-{i}", kubeconfig=sandbox.kubeconfig_path,
                                 config=config, logdir=workdir,
                                 tracemalloc=getattr(self.args, "tracemalloc", 0))
                         for i in range(self.args.replicas)]
        if self.memory_every:
            self.memory_dir = workdir / "memory"
            self.memory_dir.mkdir()
        instance_of = {r.identity: f"{SCHEDULER_NAME}-{r.identity}" for r in self.replicas}
        checker = Checker(client, limits=self.limits, lease_namespace=LEASE_NAMESPACE,
                          lease_name=LEASE_NAME, instance_of=instance_of)
        informer_tasks: list[asyncio.Task[None]] = []
        try:
            for informer in checker.start():
                informer_tasks.append(asyncio.create_task(
                    informer.run(), name=f"soak-checker:{informer.resource_name}"))
            base_nodes = [f"node-{i:04d}" for i in range(self.args.nodes)]
            mix = Mix(client, rng=self.rng, base_nodes=base_nodes, admin=sandbox.admin,
                      faults=self.faults, on_schedulable=checker.make_schedulable)
            for r in self.replicas:
                r.start(now=checker.now())
            await self._wait_leader(checker)
            await mix.setup()
            await self._loop(checker, mix)
            if checker.violations:
                self.evidence = await asyncio.to_thread(self._gather_evidence, checker)
        finally:
            for r in self.replicas:
                await asyncio.to_thread(r.stop)
            await checker.stop()
            for task in informer_tasks:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
            await client.close()
            await asyncio.to_thread(sandbox.stop)
        return self.summary(checker, mix, workdir)

    async def _wait_leader(self, checker: Checker) -> None:
        """The soak's clock starts once the replicas are up and one leads (starting Python
        processes on a loaded machine takes a while; that is not the scheduler's latency)."""
        deadline = checker.now() + STARTUP_TIMEOUT
        while not (checker.leader() and all(r.find_port() for r in self.replicas)):
            if checker.now() > deadline or any(not r.alive() for r in self.replicas):
                raise RuntimeError(f"no replica leads after {STARTUP_TIMEOUT:g}s; logs in "
                                   f"{self.replicas[0].logdir}")
            await asyncio.sleep(0.2)
        shift = checker.now()
        checker.restart_clock()
        for r in self.replicas:
            r.started_at -= shift
        self.say(f"[     0s] {checker.leader()} leads; the mix starts")

    async def _loop(self, checker: Checker, mix: Mix) -> None:
        tl = self.timeline
        next_fault = tl.fault_every / 2
        next_leader = tl.leader_every
        next_quiet = tl.quiet_every
        next_progress = 10.0
        next_scrape = 0.0
        next_memory = self.memory_every or float("inf")
        # Every ingredient at least once, even in a short soak: a preemptor, the partly
        # fitting gang and (later) the node that lets it fit, a gang, a volume pod.
        first_pass = [(tl.duration * 0.08, mix.preempt), (tl.duration * 0.12, mix.partial_gang),
                      (tl.duration * 0.16, mix.add_gang), (tl.duration * 0.2, mix.add_volume_pod),
                      (tl.duration * 0.45, mix.partial_gang)]
        while True:
            now = checker.now()
            if now >= tl.duration:
                break
            self._resume_paused(now)
            if mix.latency_until and time.monotonic() >= mix.latency_until:
                await mix.clear_faults()
            await self._observe(checker, now)
            if now >= next_scrape:
                await asyncio.to_thread(self._scrape)
                next_scrape = now + 5
            if now >= next_memory:
                await asyncio.to_thread(self.write_memory_reports, checker, now)
                next_memory = now + (self.memory_every or float("inf"))
            if checker.violations:
                self.stop_reason = "violation"
                return
            if now >= next_quiet and tl.duration - now > 30:
                await self._quiet_point(checker, mix)
                next_quiet = checker.now() + tl.quiet_every
                if checker.violations:
                    self.stop_reason = "violation"
                    return
                continue
            if now >= next_leader and self.args.replicas > 1:
                changed = await self._leader_change(checker)
                next_leader = now + (tl.leader_every if changed else 5.0)
            elif now >= next_fault:
                what = await mix.inject_fault()
                self.log.append(f"{now:7.1f}s fault: {what}")
                next_fault = now + tl.fault_every * (0.5 + self.rng.random())
            elif first_pass and now >= first_pass[0][0]:
                what = await mix.do(first_pass.pop(0)[1])
                self.log.append(f"{now:7.1f}s {what}")
            elif self.rng.random() < 0.7:
                what = await mix.step()
                self.log.append(f"{now:7.1f}s {what}")
            if now >= next_progress:
                self.say(self._progress(checker, now))
                next_progress = now + 10
            await asyncio.sleep(TICK)
        await self._quiet_point(checker, mix, final=True)
        self.stop_reason = "violation" if checker.violations else "duration"

    # ------------------------------------------------------------ observing

    async def _observe(self, checker: Checker, now: float) -> None:
        recent = self.faults.recent(self.faults_clock(), self.limits.fault_cause_window)
        rss: dict[str, int] = {}
        leader = checker.leader()
        for r in self.replicas:
            checker.log_lines(r.identity, r.new_lines(), recent_faults=recent)
            if not r.alive() and r.proc is not None:
                code = r.reap()
                expected = self.expected_exit.pop(r.identity, set())
                if code is not None and code not in expected:
                    checker.record([inv.Violation(
                        inv.REPLICA_EXIT, now, f"{r.identity} exited with {code}", (),
                        {"replica": r.identity, "log": str(r.log_path)})])
                self.restart_at.setdefault(r.identity, now + 1)
            if r.proc is None and now >= self.restart_at.get(r.identity, float("inf")):
                del self.restart_at[r.identity]
                r.start(now=now)
            if leader == r.identity and self.leading_since.get(r.identity) is None:
                self.leading_since[r.identity] = now
                self.has_led.add((r.identity, r.incarnation))
            elif leader != r.identity:
                self.leading_since.pop(r.identity, None)
            usage = r.usage()
            if usage is not None and not r.paused:
                rss[r.identity] = usage[0]
                self._check_rss(checker, r, usage[0], now)
        checker.periodic()
        incarnation = {r.identity: r.incarnation for r in self.replicas}
        self.samples.append(Sample(now, rss, checker.pending_total(),
                                   len(checker.observed.binds), checker.attempts_total,
                                   f"{leader}#{incarnation[leader]}" if leader in incarnation
                                   else "", checker.pods_total()))

    def faults_clock(self) -> float:
        return time.monotonic()

    def _check_rss(self, checker: Checker, r: Replica, rss: int, now: float) -> None:
        """Per incarnation and role: the baseline is its RSS once it has run (or led) for
        the warm-up; from then on within the tolerance of it."""
        since = max(r.started_at, self.leading_since.get(r.identity, r.started_at))
        led = r.identity in self.leading_since or (r.identity, r.incarnation) in self.has_led
        key = (r.identity, -r.incarnation if led else r.incarnation)
        if now - since < self.limits.warmup:
            return
        if key not in self.rss_baseline:
            self.rss_baseline[key] = rss
            if r.identity == checker.leader():
                self.rss_first.setdefault("leader", rss)
            return
        if r.identity == checker.leader():
            self.rss_last["leader"] = rss
        if r.tracemalloc:
            return  # tracing's own memory grows with what it traces: not the daemon's RSS
        checker.record(inv.rss_growth([(now, rss)], baseline=self.rss_baseline[key],
                                      tolerance=self.limits.rss_tolerance,
                                      replica=r.identity, at=now))

    def write_memory_reports(self, checker: Checker, now: float) -> None:
        """``--memory-every``: each live replica's /debug/memory as
        ``memory/<t>s-<replica>-<incarnation>-<role>.json`` (its growth since it started)."""
        if self.memory_dir is None:
            return
        leader = checker.leader()
        for r in self.replicas:
            report = r.memory_report()
            if report is None:
                continue
            role = "leader" if r.identity == leader else "standby"
            report.update(soakSeconds=round(now, 1), replica=r.identity,
                          incarnation=r.incarnation, role=role)
            path = self.memory_dir / f"{now:05.0f}s-{r.identity}-{r.incarnation}-{role}.json"
            path.write_text(json.dumps(report, indent=1))
            self.memory_reports += 1

    def _scrape(self) -> None:
        for r in self.replicas:
            r.find_port()
            status, body = r.get("/metrics")
            if status == 200:
                self.totals.update(r.identity, r.incarnation, scrape(body))

    def _progress(self, checker: Checker, now: float) -> str:
        rss = self.samples[-1].rss if self.samples else {}
        mem = " ".join(f"{k[-1]}:{v / 2**20:.0f}M" for k, v in sorted(rss.items()))
        return (f"[{now:6.0f}s] bound {len(checker.observed.binds)}, pending "
                f"{checker.pending_total()} ({checker.schedulable_pending()} schedulable), "
                f"attempts {int(self.totals.total('attempts_scheduled') + self.totals.total('attempts_unschedulable') + self.totals.total('attempts_error'))}, "
                f"faults {sum(self.faults.counts.values())}, leader "
                f"{checker.leader() or '-'} ({checker.leader_changes()} changes), rss {mem}, "
                f"violations {len(checker.violations)}")

    # ------------------------------------------------------------ leader changes

    async def _leader_change(self, checker: Checker) -> bool:
        """Cause a leader change, in turn: pause the leader past its lease (SIGSTOP, SIGCONT
        later: it must find the lease lost and bind nothing meanwhile), kill it (SIGKILL:
        the standby takes over when the lease expires), stop it (SIGTERM: it hands the lease
        over).  Killed and stopped replicas restart once a standby leads."""
        leader = next((r for r in self.replicas if r.identity == checker.leader() and r.alive()
                       and not r.paused), None)
        if leader is None:
            return False
        if not all(r.is_candidate() for r in self.replicas if r is not leader):
            return False  # no standby ready yet (one restarting): HA has nobody to fail over to
        how = LEADER_CHANGES[self.leader_change_count % len(LEADER_CHANGES)]
        self.leader_change_count += 1
        now = checker.now()
        self.faults.note(f"leader-{how}", self.faults_clock())
        self.log.append(f"{now:7.1f}s leader change: {how} {leader.identity}")
        self.say(f"[{now:6.0f}s] leader change: {how} {leader.identity}")
        if how == "kill":
            leader.kill()  # reaped here: its exit is ours
            self.restart_at[leader.identity] = now + LEASE_DURATION + 4
        elif how == "term":
            await asyncio.to_thread(leader.stop)
            self.restart_at[leader.identity] = checker.now() + RETRY_PERIOD * 3 + 2
        else:
            # Resumed, it finds the lease lost and exits (3): restarted as a standby.
            self.expected_exit[leader.identity] = {EXIT_LOST_LEASE, 0}
            leader.signal(signal.SIGSTOP)
            self.faults.note("pause", self.faults_clock())
            self.resume_at[leader.identity] = now + PAUSE_SECONDS
        return True

    def _resume_paused(self, now: float, *, force: bool = False) -> None:
        for r in self.replicas:
            if r.paused and (force or now >= self.resume_at.get(r.identity, float("inf"))):
                self.resume_at.pop(r.identity, None)
                self.faults.note("pause", self.faults_clock())
                r.signal(signal.SIGCONT)
                self.resumed_at[r.identity] = now

    # ------------------------------------------------------------ quiet points

    async def _quiet_point(self, checker: Checker, mix: Mix, *, final: bool = False) -> None:
        """No action, no fault: every schedulable pod gets bound, then the cache must equal
        the cluster and CPU must be near idle."""
        now = checker.now()
        self.say(f"[{now:6.0f}s] quiet point{' (final)' if final else ''}")
        with contextlib.suppress(Exception):
            await mix.clear_faults()
        self._resume_paused(checker.now(), force=True)  # a paused replica comes back first

        async def settle(seconds: float) -> None:
            end = checker.now() + seconds
            while checker.now() < end and not checker.violations:
                await self._observe(checker, checker.now())
                await asyncio.sleep(TICK)

        deadline = checker.now() + self.limits.pending_bound
        while checker.schedulable_pending() and checker.now() < deadline \
                and not checker.violations:
            await settle(TICK)
        await settle(3.0)
        if checker.violations:
            return
        await self._compare(checker)
        await self._idle_cpu(checker, settle)
        checker.check_all_nodes()

    async def _compare(self, checker: Checker) -> None:
        leader = next((r for r in self.replicas if r.identity == checker.leader()), None)
        if leader is None:
            return
        answer: dict[str, Any] = {}
        for _ in range(4):  # informers may lag a fresh list by a moment: ask again
            status, body = await asyncio.to_thread(leader.get, COMPARE_ROUTE, timeout=30)
            if status != 200:
                self.compares.append({"at": checker.now(), "replica": leader.identity,
                                      "status": status, "available": False})
                return
            answer = json.loads(body)
            if not answer.get("differences"):
                break
            await asyncio.sleep(2)
        self.compares.append({"at": round(checker.now(), 1), "replica": leader.identity,
                              "available": True, "differences": len(answer.get("differences")
                                                                    or []),
                              "nodes": answer.get("nodes"), "pods": answer.get("pods")})
        checker.record(inv.cache_differences(answer, replica=leader.identity,
                                             at=checker.now()))

    async def _idle_cpu(self, checker: Checker, settle: Any) -> None:
        if checker.schedulable_pending():
            return
        before = {r.identity: (r.pid, proc_usage(r.pid)) for r in self.replicas if r.alive()}
        t = checker.now()
        await settle(5.0)
        wall = checker.now() - t
        for r in self.replicas:
            pid, usage0 = before.get(r.identity, (0, None))
            usage1 = proc_usage(pid) if pid else None
            if usage0 is None or usage1 is None or r.pid != pid:
                continue
            if t - max(r.started_at, self.resumed_at.get(r.identity, -1e9)) < SETTLE_SECONDS:
                continue  # starting, or just resumed from a pause: catching up, not idle
            cpu = usage1[1] - usage0[1]
            self.idle_cpu.append({"at": round(t, 1), "replica": r.identity,
                                  "cpu_fraction": round(cpu / wall, 3)})
            if checker.schedulable_pending() == 0:
                checker.record(inv.cpu_busy(cpu, wall, threshold=self.limits.idle_cpu,
                                            replica=r.identity, at=checker.now()))

    def _gather_evidence(self, checker: Checker) -> dict[str, Any]:
        """What the replicas say about the objects of the first violations (the leader's
        ``/debug/pods`` diagnosis of each pod, its queue, a comparison of its cache with a
        fresh list), and where their logs are."""
        out: dict[str, Any] = {"logs": [str(r.log_path) for r in self.replicas]}
        leader = next((r for r in self.replicas if r.identity == checker.leader()), None)
        if leader is None:
            return out
        pods: dict[str, Any] = {}
        for v in checker.violations[:3]:
            for obj in v.objects[:10]:
                kind, _, key = obj.partition(" ")
                ns, _, name = key.partition("/")
                if kind == "Pod" and name:
                    status, body = leader.get(f"/debug/pods/{ns}/{name}")
                    pods[key] = json.loads(body) if status == 200 else f"{status}: {body[:200]}"
        out["debug_pods"] = pods
        status, body = leader.get("/debug/queue")
        out["debug_queue"] = json.loads(body) if status == 200 else f"{status}"
        status, body = leader.get(COMPARE_ROUTE, timeout=30)
        out["cache_compare"] = json.loads(body) if status == 200 else f"{status}"
        return out

    # ------------------------------------------------------------ the summary

    def summary(self, checker: Checker, mix: Mix, workdir: Path) -> dict[str, Any]:
        lat = checker.observed.latencies
        attempts = {k: int(self.totals.total(f"attempts_{k}"))
                    for k in ("scheduled", "unschedulable", "error")}
        return {
            "seed": self.args.seed,
            "duration_s": self.args.duration,
            "elapsed_s": round(checker.now(), 1),
            "nodes": self.args.nodes,
            "replicas": self.args.replicas,
            "stopped_by": self.stop_reason,
            "pods_scheduled": len(checker.observed.binds),
            "pods_seen": checker.observed.pods_seen,
            "events_handled": int(self.totals.total("events_handled")),
            "faults": dict(sorted(self.faults.counts.items())),
            "faults_total": sum(self.faults.counts.values()),
            "leader_changes": checker.leader_changes(),
            "rss_leader_start_mib": round(self.rss_first.get("leader", 0) / 2**20, 1),
            "rss_leader_end_mib": round(self.rss_last.get("leader", 0) / 2**20, 1),
            "latency_p50_s": round(percentile(lat, 50), 3),
            "latency_p99_s": round(percentile(lat, 99), 3),
            "attempts": attempts,
            "failed_attempts_logged": checker.attempts_total,
            "cache_compares": self.compares,
            "idle_cpu": self.idle_cpu,
            "mix_actions": dict(sorted(mix.actions_done.items())),
            "mix_action_errors": dict(sorted(mix.action_errors.items())),
            "binds_without_event": checker.observed.binds_without_instance,
            "limits": {"pending_bound_s": self.limits.pending_bound,
                       "attempts_window_s": self.limits.attempts_window,
                       "max_attempts_per_window": inv.max_attempts(
                           self.limits.attempts_window, self.limits.initial_backoff),
                       "rss_tolerance": self.limits.rss_tolerance,
                       "warmup_s": self.limits.warmup,
                       "idle_cpu_fraction": self.limits.idle_cpu},
            "violations": [v.as_dict() for v in checker.violations],
            "evidence": self.evidence,
            "workdir": str(workdir),
            "rss_by_term": leader_terms(self.samples, warmup=self.limits.warmup),
            "memory_reports": self.memory_reports,
            "timeline": [{"t": round(s.t, 1), "rss": s.rss, "pending": s.pending,
                          "binds": s.binds, "attempts": s.attempts, "leader": s.leader,
                          "pods": s.pods}
                         for s in self.samples],
            "actions": self.log[-2000:],
        }


def leader_terms(samples: list[Sample], *, warmup: float) -> list[dict[str, Any]]:
    """The leader's RSS per term (a run of samples with one lease holder, ``replica#n`` for
    its n-th process): at the term's start, once warm (``warmup`` into the term, as the
    RSS invariant's baseline) and at its end, in MiB; a term shorter than the warm-up has
    no warm figure."""
    terms: list[dict[str, Any]] = []
    current: list[Sample] = []

    def close() -> None:
        if not current:
            return
        holder = current[0].leader
        replica = holder.rpartition("#")[0]
        rss = [(s.t, s.rss[replica]) for s in current if replica in s.rss]
        if not rss:
            return
        warm = next((r for t, r in rss if t - current[0].t >= warmup), None)
        terms.append({"leader": holder, "from_s": round(current[0].t, 1),
                      "to_s": round(current[-1].t, 1),
                      "rss_start_mib": round(rss[0][1] / 2**20, 1),
                      "rss_warm_mib": None if warm is None else round(warm / 2**20, 1),
                      "rss_end_mib": round(rss[-1][1] / 2**20, 1),
                      "pods_start": current[0].pods, "pods_end": current[-1].pods})

    for sample in samples:
        if current and sample.leader != current[0].leader:
            close()
            current = []
        if sample.leader:
            current.append(sample)
        elif current:
            close()
            current = []
    close()
    return terms


def percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))]


async def run_soak(args: argparse.Namespace, *, out: Any) -> dict[str, Any]:
    soak = Soak(args, out=out)
    return await soak.run()

