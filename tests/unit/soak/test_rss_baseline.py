"""The RSS invariant's baseline per process and role: a former leader is held to what it
grew while leading, not to the smaller figure it had as a standby (a false alarm of the
45-minute soak)."""

from __future__ import annotations

import argparse
from pathlib import Path
from scheduler.soak.invariants import RSS_GROWTH, Violation
from scheduler.soak.replicas import Replica
from scheduler.soak.run import Soak

MiB = 2**20


class FakeChecker:
    def __init__(self) -> None:
        self.leader_identity: str | None = None
        self.violations: list[Violation] = []

    def leader(self) -> str | None:
        return self.leader_identity

    def record(self, violations: list[Violation]) -> None:
        self.violations.extend(violations)


def soak() -> Soak:
    args = argparse.Namespace(seed=1, duration=600.0, nodes=4, replicas=2, plot=None,
                              report=None)
    return Soak(args, out=None)


def feed(s: Soak, checker: FakeChecker, r: Replica, *, now: float, rss: int,
         leading: bool) -> None:
    # what the loop does for one replica at ``now`` (role bookkeeping, then the check)
    checker.leader_identity = r.identity if leading else "other"
    if leading and s.leading_since.get(r.identity) is None:
        s.leading_since[r.identity] = now
        s.has_led.add((r.identity, r.incarnation))
    elif not leading:
        s.leading_since.pop(r.identity, None)
    s._check_rss(checker, r, rss, now)  # type: ignore[arg-type]


def replica() -> Replica:
    return Replica("replica-0", Path("k"), Path("c"), Path("."), started_at=0.0,
                   incarnation=1)


def test_a_former_leader_keeps_its_leader_baseline() -> None:
    s, checker, r = soak(), FakeChecker(), replica()
    warm = s.limits.warmup
    feed(s, checker, r, now=warm + 1, rss=100 * MiB, leading=False)  # standby baseline
    feed(s, checker, r, now=warm + 2, rss=100 * MiB, leading=True)
    feed(s, checker, r, now=2 * warm + 3, rss=120 * MiB, leading=True)  # leader baseline
    feed(s, checker, r, now=2 * warm + 4, rss=125 * MiB, leading=False)  # steps down
    assert checker.violations == []


def test_growth_beyond_the_tolerance_is_still_caught() -> None:
    s, checker, r = soak(), FakeChecker(), replica()
    warm = s.limits.warmup
    feed(s, checker, r, now=1.0, rss=100 * MiB, leading=True)
    feed(s, checker, r, now=warm + 2, rss=120 * MiB, leading=True)
    feed(s, checker, r, now=warm + 3, rss=140 * MiB, leading=False)
    assert [v.invariant for v in checker.violations] == [RSS_GROWTH]


def test_the_standby_baseline_holds_a_process_that_never_led() -> None:
    s, checker, r = soak(), FakeChecker(), replica()
    warm = s.limits.warmup
    feed(s, checker, r, now=warm + 1, rss=100 * MiB, leading=False)
    feed(s, checker, r, now=warm + 2, rss=125 * MiB, leading=False)
    assert [v.invariant for v in checker.violations] == [RSS_GROWTH]
