"""Upstream scheduler_perf's ``SchedulingThroughput``, computed from the bench's bind times.

The CI floors we print beside our figure (680 pods/s for SchedulingBasic at 5000 nodes...)
are floors on that metric's "Average", so our comparable figure must follow the same rules.
Upstream's throughput collector (``test/integration/scheduler_perf/util.go``) starts just
before the measured pods are created and, every second until the workload's barrier sees
every measured pod scheduled, counts the measured pods that have a node:

- a tick at which no measured pod is scheduled yet records nothing;
- the first tick with a scheduled pod records nothing either: it is the baseline (creating
  and sampling start independently, so that first interval is an outlier);
- a tick with no new scheduled pod records nothing yet; the next tick that sees new pods
  records ``new pods / time since the last recorded tick`` once per interval it covers;
- the Average is the mean of the recorded samples; percentile q is the sorted samples'
  ``ceil(n * q / 100)``-th.

The barrier (``waitUntilPodsScheduledInNamespace``) polls every second from the moment the
creator returns, and stopping the collector is what ends the sampling: a tick that falls
after the last bind but before that poll still records the last, partial second.

Here the ticks are replayed after the run from the bind timestamps the bench recorded (no
sampling task competing with the scheduler for its core), so the rules above are a pure
function of (bind times, start, stop) and tested with injected timestamps.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import dataclass

SAMPLE_INTERVAL_S = 1.0  # upstream's throughputSampleInterval
BARRIER_POLL_S = 1.0  # upstream's waitUntilPodsScheduledInNamespace poll period


@dataclass(frozen=True)
class Throughput:
    """The recorded per-interval samples (pods/s, in time order) and their summary."""

    samples: tuple[float, ...]

    @property
    def average(self) -> float | None:
        """Upstream's "Average"; None when the run was too short to record a sample
        (upstream then reports no SchedulingThroughput at all)."""
        return sum(self.samples) / len(self.samples) if self.samples else None

    def percentile(self, q: float) -> float | None:
        if not self.samples:
            return None
        ordered = sorted(self.samples)
        return ordered[max(0, math.ceil(len(ordered) * q / 100) - 1)]


def barrier_stop(*, creation_finished: float, last_bind: float,
                 poll: float = BARRIER_POLL_S) -> float:
    """When upstream's barrier would stop the collector: the first of its polls (at
    ``creation_finished``, then every ``poll`` seconds) that sees every pod scheduled."""
    if last_bind <= creation_finished:
        return creation_finished
    return creation_finished + math.ceil((last_bind - creation_finished) / poll) * poll


def scheduling_throughput(bind_times: Sequence[float], *, start: float, stop: float,
                          interval: float = SAMPLE_INTERVAL_S) -> Throughput:
    """Replay upstream's collector: ticks at ``start + k * interval`` (k >= 1) up to
    ``stop``, each counting the binds at or before it (see the module docstring)."""
    if interval <= 0:
        raise ValueError(f"interval must be positive, got {interval}")
    times = sorted(bind_times)
    samples: list[float] = []
    started = False
    last_count = 0
    last_tick = start
    skipped = 0
    k = 1
    while (tick := start + k * interval) <= stop:
        k += 1
        count = bisect.bisect_right(times, tick)
        if count == 0:
            continue
        if not started:
            started, last_count, last_tick = True, count, tick
            continue
        new = count - last_count
        if new == 0:
            skipped += 1
            continue
        rate = new / (tick - last_tick)
        samples.extend([rate] * (skipped + 1))
        last_count, last_tick, skipped = count, tick, 0
    return Throughput(tuple(samples))
