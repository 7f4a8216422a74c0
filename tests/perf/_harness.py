"""What the offline benches of ``tests/perf`` share around the cycle that ``tests.offline``
builds: warnings-only logs (set as the daemon sets them, so its per-pod debug gates apply), and the measured part of a run (after its warm-up: garbage
collected and frozen, process CPU time, an optional cProfile written to a file and its
Python call count, a figure the machine's load does not move, and which is the same from
run to run of one build: ``tests.offline.default_framework`` seeds the per-plugin timing's
sampling)."""

from __future__ import annotations

import cProfile
import gc
import pstats
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from scheduler.logging import configure_logging


def quiet_logs() -> None:
    """Only warnings and errors: the benches' lines are their output.  Through the daemon's
    own ``configure_logging`` (``--log-level warning``), which also turns off
    ``scheduler.logging.DEBUG`` so the hot paths skip their debug lines as the daemon does."""
    configure_logging(level="warning")


@dataclass
class Measured:
    cpu: float = 0.0  # process CPU seconds of the measured part
    calls: int = 0  # Python calls in it (0 without a profile)


@contextmanager
def measured(profile: str = "") -> Iterator[Measured]:
    """The block's process CPU time (and, with ``profile`` a file name, its cProfile written
    there and its Python call count), the warm-up's garbage collected and frozen first."""
    gc.collect()
    gc.freeze()
    out = Measured()
    profiler = cProfile.Profile() if profile else None
    if profiler is not None:
        profiler.enable()
    started = time.process_time()
    yield out
    out.cpu = time.process_time() - started
    if profiler is not None:
        profiler.disable()
        profiler.dump_stats(profile)
        out.calls = pstats.Stats(profiler).total_calls  # type: ignore[attr-defined]


def confirm_binding(cache: Any, assumed: dict[str, Any]) -> None:
    """What the informer's MODIFIED after a binding does to an assumed pod: its bound version
    (a new resourceVersion and the PodScheduled condition) replaces the assumed one in
    ``cache`` (a scheduler Cache), confirming the assumption."""
    bound = {**assumed, "metadata": {**assumed["metadata"], "resourceVersion": "2"},
             "status": {"conditions": [{"type": "PodScheduled", "status": "True"}]}}
    held = cache.get_pod_info(bound)
    assert held is not None
    cache.add_pod(held.with_node_name(bound))
