"""The offline Framework (``tests.offline.default_framework``) samples per-plugin timing as
the daemon does, from a seeded generator: the offline benches' Python call counts are then
the same in every run of one build."""

from __future__ import annotations

from scheduler.cache.snapshot import Snapshot
from tests.offline import default_framework


def _sampled(seed: int) -> list[bool]:
    fwk = default_framework(Snapshot(), sample_seed=seed)
    return [fwk.new_cycle_state().record_plugin_metrics for _ in range(200)]


def test_the_same_seed_times_the_same_cycles() -> None:
    first = _sampled(0)
    assert first == _sampled(0)
    # about upstream's 10 %, and another seed draws other cycles
    assert 5 <= sum(first) <= 40
    assert _sampled(1) != first
