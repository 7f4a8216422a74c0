"""Leader election on a coordination.k8s.io/v1 Lease, with client-go's semantics.

Only the leader schedules and binds.  Timing follows client-go: a candidate retries every
``retry_period``; a leader renews every ``retry_period`` and gives up if it could not renew for
``renew_deadline``.  Because ``renew_deadline < lease_duration``, a leader that gives up does so
before any other replica may take the lease, so stopping its binding cycles at that moment
guarantees no two replicas ever bind at once.  Expiry is judged by the local clock from the
moment the lease record was last seen to change (client-go's observedTime), never by comparing
clocks across machines.  On a graceful stop the leader releases the lease (empty holder) so a
standby takes over within one retry period.
"""

from __future__ import annotations

import asyncio
import random
import socket
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

import structlog

from scheduler.client.api import ApiClient, ApiError, Conflict, NotFound

log = structlog.get_logger(__name__)

JITTER_FACTOR = 1.2
Sleep = Callable[[float], Awaitable[None]]


@dataclass(frozen=True)
class LeaderElectionSettings:
    name: str
    namespace: str
    identity: str
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0

    def __post_init__(self) -> None:
        if not self.lease_duration > self.renew_deadline:
            raise ValueError("leaseDuration must be greater than renewDeadline")
        if not self.renew_deadline > JITTER_FACTOR * self.retry_period:
            raise ValueError("renewDeadline must be greater than retryPeriod*1.2")
        if self.retry_period <= 0:
            raise ValueError("retryPeriod must be greater than zero")


def default_identity() -> str:
    return f"{socket.gethostname()}_{uuid.uuid4()}"


def _micro_time(now: datetime) -> str:
    return now.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    """Acquire, hold and release one Lease.  ``run`` returns when leadership ends."""

    def __init__(
        self,
        client: ApiClient,
        settings: LeaderElectionSettings,
        *,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], datetime] = lambda: datetime.now(timezone.utc),
        sleep: Sleep = asyncio.sleep,
        rng: random.Random | None = None,
    ) -> None:
        self._client = client
        self.settings = settings
        self._clock = clock
        self._wall = wall_clock
        self._sleep = sleep
        self._rng = rng or random.Random()
        self._observed_record: dict[str, Any] | None = None
        self._observed_at = 0.0
        self._lease: dict[str, Any] | None = None
        self.last_renew: float | None = None
        self.is_leader = False
        self.leader_identity = ""

    @property
    def _path(self) -> str:
        s = self.settings
        return f"/apis/coordination.k8s.io/v1/namespaces/{s.namespace}/leases/{s.name}"

    @property
    def _collection(self) -> str:
        return f"/apis/coordination.k8s.io/v1/namespaces/{self.settings.namespace}/leases"

    def _jittered(self, period: float) -> float:
        return period * (1 + self._rng.random() * (JITTER_FACTOR - 1))

    async def acquire(self, *, stop: asyncio.Event | None = None) -> bool:
        """Block until we hold the lease (True) or ``stop`` is set (False)."""
        log.info("waiting for the leader lease", lease=f"{self.settings.namespace}/"
                 f"{self.settings.name}", identity=self.settings.identity)
        while stop is None or not stop.is_set():
            if await self.try_acquire_or_renew():
                self.is_leader = True
                log.info("acquired the leader lease", identity=self.settings.identity)
                return True
            await self._sleep(self._jittered(self.settings.retry_period))
        return False

    async def hold(self, *, stop: asyncio.Event | None = None) -> None:
        """Renew until renewal fails for ``renew_deadline`` (then return) or ``stop`` is set."""
        while stop is None or not stop.is_set():
            # The deadline runs from the last renewal, not from now: a process that was
            # paused (SIGSTOP, a frozen VM) past it gives up at once on waking instead of
            # leading for another renewDeadline while a standby may already lead.
            last = self.last_renew if self.last_renew is not None else self._clock()
            deadline = last + self.settings.renew_deadline
            renewed = False
            while self._clock() < deadline:
                if await self.try_acquire_or_renew():
                    renewed = True
                    break
                if stop is not None and stop.is_set():
                    return
                await self._sleep(self.settings.retry_period)
            if not renewed:
                self.is_leader = False
                log.error("failed to renew the leader lease within the renew deadline",
                          renew_deadline=self.settings.renew_deadline)
                return
            await self._sleep(self.settings.retry_period)

    def holds_lease(self) -> bool:
        """Leading, and renewed within ``renew_deadline`` by the local clock.  Checked before
        each scheduling cycle and binding: a leader that was paused past its renew deadline
        must not act before its renewal loop has run, as another replica may lead by now."""
        return (self.is_leader and self.last_renew is not None
                and self._clock() - self.last_renew < self.settings.renew_deadline)

    def healthy(self, tolerance: float = 20.0) -> str | None:
        """For /healthz: a leader whose lease went un-renewed too long is unhealthy."""
        if not self.is_leader or self.last_renew is None:
            return None
        overdue = self._clock() - self.last_renew - self.settings.lease_duration
        if overdue > tolerance:
            return f"the leader lease was last renewed {overdue:.0f}s past its duration"
        return None

    async def try_acquire_or_renew(self) -> bool:
        now_wall = _micro_time(self._wall())
        s = self.settings
        try:
            lease = await self._client.get(self._path)
        except NotFound:
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": s.name, "namespace": s.namespace},
                "spec": {
                    "holderIdentity": s.identity,
                    "leaseDurationSeconds": int(s.lease_duration),
                    "acquireTime": now_wall,
                    "renewTime": now_wall,
                    "leaseTransitions": 0,
                },
            }
            try:
                created = await self._client.create(self._collection, body)
            except ApiError as exc:
                log.info("could not create the lease", error=str(exc))
                return False
            self._observe(created)
            self.last_renew = self._clock()
            return True
        except Exception as exc:
            log.warning("could not read the lease", error=str(exc))
            return False

        spec = dict(lease.get("spec") or {})
        record = {k: spec.get(k) for k in ("holderIdentity", "renewTime", "leaseDurationSeconds")}
        if self._observed_record != record:
            self._observed_record = record
            self._observed_at = self._clock()
        holder = spec.get("holderIdentity") or ""
        self.leader_identity = holder
        duration = float(spec.get("leaseDurationSeconds") or s.lease_duration)
        if holder and holder != s.identity and self._observed_at + duration > self._clock():
            return False  # someone else holds a lease that has not expired

        if holder != s.identity:
            spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + (
                1 if holder else 0
            )
            spec["acquireTime"] = now_wall
        spec["holderIdentity"] = s.identity
        spec["leaseDurationSeconds"] = int(s.lease_duration)
        spec["renewTime"] = now_wall
        updated = dict(lease)
        updated["spec"] = spec
        try:
            result = await self._client.update(self._path, updated)
        except Conflict:
            return False
        except Exception as exc:
            log.warning("could not update the lease", error=str(exc))
            return False
        self._observe(result)
        self.last_renew = self._clock()
        return True

    def _observe(self, lease: dict[str, Any]) -> None:
        self._lease = lease
        spec = lease.get("spec") or {}
        self._observed_record = {
            k: spec.get(k) for k in ("holderIdentity", "renewTime", "leaseDurationSeconds")
        }
        self._observed_at = self._clock()
        self.leader_identity = spec.get("holderIdentity") or ""

    async def release(self) -> None:
        """Give the lease up (graceful stop) so a standby need not wait for expiry."""
        if not self.is_leader:
            return
        self.is_leader = False
        try:
            lease = await self._client.get(self._path)
            spec = dict(lease.get("spec") or {})
            if spec.get("holderIdentity") != self.settings.identity:
                return
            now_wall = _micro_time(self._wall())
            spec.update({"holderIdentity": "", "leaseDurationSeconds": 1,
                         "renewTime": now_wall, "acquireTime": now_wall})
            await self._client.update(self._path, {**lease, "spec": spec})
            log.info("released the leader lease")
        except Exception as exc:
            log.warning("could not release the lease", error=str(exc))
