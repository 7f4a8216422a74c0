"""Upstream's SchedulingThroughput rules, replayed from injected bind timestamps."""

from __future__ import annotations

import pytest

from scheduler.bench.throughput import Throughput, barrier_stop, scheduling_throughput


def _steady(rate: int, *, start: float, seconds: float) -> list[float]:
    """Binds spread evenly: ``rate`` per second from ``start`` for ``seconds``."""
    return [start + (i + 0.5) / rate for i in range(int(rate * seconds))]


@pytest.mark.parametrize(
    ("binds", "stop", "samples"),
    [
        pytest.param([], 10.0, (), id="nothing-bound"),
        # Ticks at 1, 2, 3, 4: the tick at 1 is the baseline; three 100 pods/s samples.
        pytest.param(_steady(100, start=0.0, seconds=4.0), 4.0, (100.0, 100.0, 100.0),
                     id="steady-first-tick-is-the-baseline"),
        # Nothing bound at the ticks 1 and 2 (the informer and the first cycles): sampling
        # starts with the baseline at 3, so the slow start is not averaged in.
        pytest.param([2.5, *_steady(50, start=3.0, seconds=2.0)], 5.0, (50.0, 50.0),
                     id="empty-ticks-then-baseline"),
        # 10 pods by 1, none until 3, 30 more by 3: one sample per covered interval, each
        # the rate over the whole span (15/s), not a 0 and a 30.
        pytest.param([0.5] * 10 + [2.5] * 30, 3.0, (15.0, 15.0), id="stall-is-spread"),
        # Ticks after the stop are not taken: the bind at 3.5 is never sampled.
        pytest.param([0.5, 1.5, 2.5, 3.5], 3.0, (1.0, 1.0), id="stop-ends-sampling"),
        # A tick exactly at a bind counts that bind.
        pytest.param([1.0, 2.0], 2.0, (1.0,), id="bind-on-the-tick"),
        # Trailing ticks without new pods record nothing (no zero samples).
        pytest.param([0.5, 1.5], 6.0, (1.0,), id="idle-tail-records-nothing"),
    ],
)
def test_samples_follow_upstreams_rules(binds: list[float], stop: float,
                                        samples: tuple[float, ...]) -> None:
    got = scheduling_throughput(binds, start=0.0, stop=stop)
    assert got.samples == pytest.approx(samples)


def test_ticks_count_from_the_start_and_ignore_bind_order() -> None:
    binds = [105.9, 100.2, 101.5, 102.5, 103.5, 104.7]
    got = scheduling_throughput(binds, start=100.0, stop=106.0)
    # ticks 101 (baseline: 1 pod), 102 (+1), 103 (+1), 104 (+1), 105 (+1), 106 (+1)
    assert got.samples == pytest.approx((1.0,) * 5)


def test_interval_must_be_positive() -> None:
    with pytest.raises(ValueError, match="interval"):
        scheduling_throughput([1.0], start=0.0, stop=2.0, interval=0)


@pytest.mark.parametrize(
    ("samples", "average", "p50", "p90", "p99"),
    [
        pytest.param((), None, None, None, None, id="no-samples"),
        pytest.param((7.0,), 7.0, 7.0, 7.0, 7.0, id="one"),
        # sorted[ceil(n*q/100)-1] over 1..10
        pytest.param(tuple(float(v) for v in (10, 2, 9, 3, 8, 4, 7, 5, 6, 1)),
                     5.5, 5.0, 9.0, 10.0, id="ten"),
        pytest.param((100.0, 300.0, 200.0), 200.0, 200.0, 300.0, 300.0, id="three"),
    ],
)
def test_summary_is_upstreams(samples: tuple[float, ...], average: float | None,
                              p50: float | None, p90: float | None, p99: float | None) -> None:
    t = Throughput(samples)
    assert (t.average, t.percentile(50), t.percentile(90), t.percentile(99)) == (
        average, p50, p90, p99)


@pytest.mark.parametrize(
    ("creation_finished", "last_bind", "stop"),
    [
        pytest.param(10.0, 9.0, 10.0, id="bound-before-creation-ended"),
        pytest.param(10.0, 10.0, 10.0, id="bound-as-creation-ended"),
        pytest.param(10.0, 10.2, 11.0, id="next-poll"),
        pytest.param(10.0, 12.0, 12.0, id="on-a-poll"),
        pytest.param(10.0, 12.01, 13.0, id="just-after-a-poll"),
    ],
)
def test_barrier_stops_at_its_first_poll_seeing_every_pod(
        creation_finished: float, last_bind: float, stop: float) -> None:
    assert barrier_stop(creation_finished=creation_finished,
                        last_bind=last_bind) == pytest.approx(stop)
