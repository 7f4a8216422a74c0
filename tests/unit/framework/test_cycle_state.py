"""CycleState's read, get and write are its own dict's methods, bound per instance: a clone
reads what was written before it and is changed independently of the original."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.framework.cycle_state import CycleState


class _Counted:
    def __init__(self, n: int) -> None:
        self.n = n

    def clone(self) -> _Counted:
        return _Counted(self.n)


@pytest.mark.parametrize(("written", "clone_writes", "original_after", "clone_after"), [
    ({"a": 1}, {}, {"a": 1}, {"a": 1}),
    ({"a": 1}, {"a": 2}, {"a": 1}, {"a": 2}),
    ({}, {"b": 3}, {}, {"b": 3}),
])
def test_a_clone_reads_what_was_written_and_writes_its_own(
    written: dict[str, Any], clone_writes: dict[str, Any],
    original_after: dict[str, Any], clone_after: dict[str, Any],
) -> None:
    state = CycleState()
    for key, value in written.items():
        state.write(key, value)
    copy = state.clone()
    for key, value in clone_writes.items():
        copy.write(key, value)
    for key in ("a", "b"):
        assert state.get(key) == original_after.get(key)
        assert copy.get(key, "none") == clone_after.get(key, "none")
        if key in original_after:
            assert state.read(key) == original_after[key]
        else:
            with pytest.raises(KeyError):
                state.read(key)


def test_a_cloned_value_with_clone_is_copied() -> None:
    state = CycleState()
    state.write("n", _Counted(1))
    copy = state.clone()
    copy.read("n").n = 5
    assert state.read("n").n == 1
    state.delete("n")
    assert state.get("n") is None and copy.read("n").n == 5
