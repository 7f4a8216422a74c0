"""The collector tuning of running schedulers: set by the first, restored by the last."""

from __future__ import annotations

import gc

from scheduler.app import GC_YOUNG_THRESHOLD, _GcTuning


def test_nested_schedulers_keep_the_tuning_until_the_last_one_stops() -> None:
    before = gc.get_threshold()
    tuning = _GcTuning()
    try:
        tuning.enter()
        first = object.__new__(type("Tracked", (), {}))  # a tracked object, frozen by enter
        tuning.enter()
        assert gc.get_threshold() == (GC_YOUNG_THRESHOLD, *before[1:])
        assert gc.get_freeze_count() > 0 and gc.is_tracked(first)
        tuning.exit()
        assert gc.get_threshold() == (GC_YOUNG_THRESHOLD, *before[1:])
        assert gc.get_freeze_count() > 0
    finally:
        tuning.exit()
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0
