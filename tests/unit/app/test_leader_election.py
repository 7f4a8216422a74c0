"""Leader election timing and safety, driven with a fake Lease store and an injected clock."""

from __future__ import annotations

import copy
from datetime import datetime, timezone
from typing import Any

import pytest

from scheduler.client.api import Conflict, NotFound
from scheduler.client.leader_election import LeaderElectionSettings, LeaderElector

PATH = "/apis/coordination.k8s.io/v1/namespaces/ns/leases/py-scheduler"


class LeaseStore:
    """Just enough of the API server for leases: get, create, update with resourceVersion."""

    def __init__(self) -> None:
        self.lease: dict[str, Any] | None = None
        self.rv = 0
        self.fail = False

    async def get(self, path: str) -> dict[str, Any]:
        if self.fail:
            raise ConnectionError("unreachable")
        if self.lease is None:
            raise NotFound(404, "NotFound", "leases \"py-scheduler\" not found")
        return copy.deepcopy(self.lease)

    async def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        if self.fail:
            raise ConnectionError("unreachable")
        self.rv += 1
        self.lease = copy.deepcopy(body)
        self.lease["metadata"]["resourceVersion"] = str(self.rv)
        return copy.deepcopy(self.lease)

    async def update(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        if self.fail:
            raise ConnectionError("unreachable")
        assert self.lease is not None
        if body["metadata"].get("resourceVersion") != self.lease["metadata"]["resourceVersion"]:
            raise Conflict(409, "Conflict", "the object has been modified")
        self.rv += 1
        self.lease = copy.deepcopy(body)
        self.lease["metadata"]["resourceVersion"] = str(self.rv)
        return copy.deepcopy(self.lease)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.now += seconds


def elector(store: LeaseStore, clock: Clock, identity: str) -> LeaderElector:
    settings = LeaderElectionSettings(name="py-scheduler", namespace="ns", identity=identity)
    return LeaderElector(
        store, settings, clock=clock, sleep=clock.sleep,  # type: ignore[arg-type]
        wall_clock=lambda: datetime.fromtimestamp(1.7e9 + clock.now, tz=timezone.utc),
    )


async def test_first_candidate_creates_the_lease() -> None:
    store, clock = LeaseStore(), Clock()
    a = elector(store, clock, "a")
    assert await a.try_acquire_or_renew()
    assert store.lease is not None
    assert store.lease["spec"]["holderIdentity"] == "a"
    assert store.lease["spec"]["leaseDurationSeconds"] == 15


async def test_second_candidate_waits_until_the_lease_expires() -> None:
    store, clock = LeaseStore(), Clock()
    a, b = elector(store, clock, "a"), elector(store, clock, "b")
    assert await a.try_acquire_or_renew()
    assert not await b.try_acquire_or_renew()
    clock.now += 14.0
    assert not await b.try_acquire_or_renew(), "lease still valid from b's observation"
    clock.now += 1.5
    assert await b.try_acquire_or_renew()
    assert store.lease is not None
    assert store.lease["spec"]["holderIdentity"] == "b"
    assert store.lease["spec"]["leaseTransitions"] == 1


async def test_renewals_keep_others_out() -> None:
    store, clock = LeaseStore(), Clock()
    a, b = elector(store, clock, "a"), elector(store, clock, "b")
    assert await a.try_acquire_or_renew()
    for _ in range(10):
        clock.now += 2.0
        assert await a.try_acquire_or_renew()
        assert not await b.try_acquire_or_renew()


async def test_leader_gives_up_before_anyone_else_may_lead() -> None:
    store, clock = LeaseStore(), Clock()
    a = elector(store, clock, "a")
    assert await a.acquire()
    last_renew = clock.now
    store.fail = True
    await a.hold()  # returns when renewal failed for renew_deadline
    assert not a.is_leader
    gave_up_at = clock.now
    # Nobody else may take the lease before last_renew + lease_duration: we stopped earlier.
    assert gave_up_at < last_renew + a.settings.lease_duration


async def test_release_hands_over_without_waiting_for_expiry() -> None:
    store, clock = LeaseStore(), Clock()
    a, b = elector(store, clock, "a"), elector(store, clock, "b")
    assert await a.acquire()
    assert not await b.try_acquire_or_renew()
    await a.release()
    assert store.lease is not None
    assert store.lease["spec"]["holderIdentity"] == ""
    assert await b.try_acquire_or_renew()


async def test_conflicting_update_loses_the_race() -> None:
    store, clock = LeaseStore(), Clock()
    a, b = elector(store, clock, "a"), elector(store, clock, "b")
    assert await a.try_acquire_or_renew()
    await a.release()
    original_update = store.update

    async def racing_update(path: str, body: dict[str, Any]) -> dict[str, Any]:
        # Someone else writes between our read and our write.
        assert store.lease is not None
        store.rv += 1
        store.lease["metadata"]["resourceVersion"] = str(store.rv)
        return await original_update(path, body)

    store.update = racing_update  # type: ignore[method-assign]
    assert not await b.try_acquire_or_renew()


@pytest.mark.parametrize(
    ("duration", "deadline", "retry"),
    [(10, 10, 2), (15, 10, 9), (15, 10, 0)],
    ids=["duration-not-above-deadline", "deadline-not-above-retry-jitter", "zero-retry"],
)
def test_settings_validation(duration: float, deadline: float, retry: float) -> None:
    with pytest.raises(ValueError):
        LeaderElectionSettings(
            name="x", namespace="y", identity="z", lease_duration=duration,
            renew_deadline=deadline, retry_period=retry,
        )


async def test_healthz_fails_when_the_lease_is_long_overdue() -> None:
    store, clock = LeaseStore(), Clock()
    a = elector(store, clock, "a")
    assert await a.acquire()
    assert a.healthy() is None
    clock.now += 15 + 21
    assert a.healthy() is not None


async def test_a_leader_paused_past_its_renew_deadline_holds_no_lease_on_waking() -> None:
    # SIGSTOP for longer than the lease: on waking, before any renewal, the leader must not
    # count as holding the lease (the scheduler checks it before each cycle and bind), and
    # its renewal loop gives up at once instead of retrying for another renewDeadline.
    store, clock = LeaseStore(), Clock()
    a = elector(store, clock, "a")
    assert await a.acquire()
    assert a.holds_lease()
    clock.now += a.settings.renew_deadline - 0.1
    assert a.holds_lease()
    clock.now += a.settings.lease_duration  # paused past the lease
    assert not a.holds_lease()
    b = elector(store, clock, "b")
    assert await b.try_acquire_or_renew() is False  # b sees a renewal it never observed age
    clock.now += a.settings.lease_duration + 0.1
    assert await b.try_acquire_or_renew()
    woke_at = clock.now
    await a.hold()
    assert not a.is_leader
    assert clock.now == woke_at  # gave up at once, not after another renewDeadline of tries
