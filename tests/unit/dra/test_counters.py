"""Partitionable devices (DRAPartitionableDevices, beta and on by default since 1.36): devices
that consume a pool's shared counters are free only while the counters have enough left."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.dra.allocator import Allocated, Unfit, allocate
from scheduler.dra.counters import Counters
from scheduler.dra.inventory import DeviceID, Inventory
from tests.unit.dra.builders import (
    DRIVER,
    claim,
    counter_slice,
    device,
    exactly,
    gpu_class,
    node,
    resource_slice,
)

N1 = node("n1")
CLASSES = {"gpu": gpu_class()}


def mig(*, generation: int = 1, memory: str = "40Gi", extra: list[dict[str, Any]] = ()
        ) -> list[dict[str, Any]]:
    """One 40Gi GPU published as partitions: the whole GPU, two halves, four quarters."""
    parts = [device("whole", consumes={"gpu-0": {"memory": "40Gi"}})]
    parts += [device(f"half-{i}", consumes={"gpu-0": {"memory": "20Gi"}}) for i in range(2)]
    parts += [device(f"quarter-{i}", consumes={"gpu-0": {"memory": "10Gi"}})
              for i in range(4)]
    return [counter_slice("n1-counters", node="n1", generation=generation,
                          **{"gpu-0": {"memory": memory}}),
            resource_slice("n1-devices", node="n1", pool="n1", slice_count=2,
                           generation=generation, devices=parts + list(extra))]


def run(slices: list[dict[str, Any]], claims: list[dict[str, Any]],
        held: tuple[str, ...] = ()) -> Allocated | Unfit:
    inv = Inventory(slices)
    in_use: set[DeviceID] = {(DRIVER, "n1", d) for d in held}
    return allocate(claims, node=N1, inventory=inv, classes=CLASSES, in_use=in_use,
                    counters=Counters(slices, inv))


def devices_of(out: Allocated | Unfit) -> list[list[str]]:
    assert isinstance(out, Allocated), out
    return [[r["device"] for r in a["devices"]["results"]] for a in out.allocations]


MEMORY = {"whole": 40, "half-0": 20, "half-1": 20, **{f"quarter-{i}": 10 for i in range(4)}}


@pytest.mark.parametrize(("name", "claims", "held", "want"), [
    ("the first partition that fits", [claim("c", exactly("g"))], (), [["whole"]]),
    ("the whole GPU taken: nothing left", [claim("c", exactly("g"))], ("whole",), None),
    ("a half taken: the other half", [claim("c", exactly("g"))], ("half-0",), [["half-1"]]),
    ("a half taken: two more devices are two quarters",
     [claim("c", exactly("g", count=2))], ("half-0",), [["quarter-0", "quarter-1"]]),
    ("three quarters taken: one quarter left, not two",
     [claim("c", exactly("g", count=2))], ("quarter-0", "quarter-1", "quarter-2"), None),
    ("two claims of one pod share the counters: the search backs off from the whole GPU",
     [claim("a", exactly("g")), claim("b", exactly("g"))], (), [["half-0"], ["half-1"]]),
    ("five devices cannot fit in 40Gi", [claim("c", exactly("g", count=5))], (), None),
    ("four devices: the four quarters", [claim("c", exactly("g", count=4))], (),
     [["quarter-0", "quarter-1", "quarter-2", "quarter-3"]]),
])
def test_shared_counters(name: str, claims: list[dict[str, Any]], held: tuple[str, ...],
                         want: list[list[str]] | None) -> None:
    out = run(mig(), claims, held)
    if want is None:
        assert isinstance(out, Unfit), name
        return
    got = devices_of(out)
    assert got == want, name
    used = sum(MEMORY[d] for ds in got for d in ds) + sum(MEMORY[d] for d in held)
    assert used <= 40, name


def test_unfit_says_the_counters_are_used_up() -> None:
    out = run(mig(), [claim("c", exactly("g"))], ("whole",))
    assert isinstance(out, Unfit)
    assert "shared counters used up" in out.details[0]


@pytest.mark.parametrize(("slices", "problem"), [
    ([resource_slice("s", node="n1", devices=[
        device("d", consumes={"nope": {"memory": "1"}})])],
     "consumes counter set nope, which the pool does not define"),
    ([counter_slice("c", node="n1", slice_count=2, **{"gpu-0": {"cores": "4"}}),
      resource_slice("s", node="n1", slice_count=2, pool="n1", devices=[
          device("d", consumes={"gpu-0": {"memory": "1"}})])],
     "consumes counter memory of counter set gpu-0, which it lacks"),
    ([counter_slice("c1", node="n1", slice_count=3, **{"gpu-0": {"memory": "4"}}),
      counter_slice("c2", node="n1", slice_count=3, **{"gpu-0": {"memory": "4"}}),
      resource_slice("s", node="n1", slice_count=3, pool="n1", devices=[
          device("d", consumes={"gpu-0": {"memory": "1"}})])],
     "counter set gpu-0 is defined more than once"),
])
def test_an_invalid_pool_is_named_and_its_devices_unusable(slices: list[dict[str, Any]],
                                                           problem: str) -> None:
    inv = Inventory(slices)
    counters = Counters(slices, inv)
    assert any(problem in p for p in counters.problems), counters.problems
    out = run(slices, [claim("c", exactly("g"))])
    assert isinstance(out, Unfit)
    assert problem in out.details[0]


def test_only_the_newest_generation_counts() -> None:
    # generation 1 said 40Gi; generation 2 (a smaller GPU) says 10Gi: the whole device no
    # longer fits, a quarter does
    old = mig(generation=1)
    new = mig(generation=2, memory="10Gi")
    out = run(old + new, [claim("c", exactly("g"))])
    assert devices_of(out) == [["quarter-0"]]


def test_devices_without_counters_are_unaffected() -> None:
    # the whole GPU taken: its partitions are not, a device without counters is
    out = run(mig(extra=[device("plain")]), [claim("c", exactly("g", count=2))], ("whole",))
    assert isinstance(out, Unfit)
    out = run(mig(extra=[device("plain")]), [claim("c", exactly("g"))], ("whole",))
    assert devices_of(out) == [["plain"]]


def test_admin_access_ignores_the_counters() -> None:
    out = run(mig(), [claim("c", exactly("g", admin=True))], ("whole",))
    assert devices_of(out) == [["whole"]]


def test_with_the_gate_off_partitions_are_never_allocated() -> None:
    slices = mig(extra=[device("plain")])
    inv = Inventory(slices)
    out = allocate([claim("c", exactly("g"))], node=N1, inventory=inv, classes=CLASSES,
                   in_use=set(), counters=Counters(slices, inv), partitionable=False)
    assert devices_of(out) == [["plain"]]
    out = allocate([claim("c", exactly("g", count=2))], node=N1, inventory=inv,
                   classes=CLASSES, in_use=set(), counters=Counters(slices, inv),
                   partitionable=False)
    assert isinstance(out, Unfit)
    assert "DRAPartitionableDevices feature is disabled" in out.details[0]
