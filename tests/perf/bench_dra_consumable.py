"""What sharing a device by capacity (DRAConsumableCapacity) costs the allocator: one request
of 10Gi on a node of 8 devices of 80Gi, 4 of them full, shared by capacity, against the
same node with plain devices (4 held) and with the gate off.  ``timeit`` of ``allocate``
with the result built, best of 3 x 2000.  Run by hand:
``python -m tests.perf.bench_dra_consumable``; figures go to docs/dra.md.
"""

from __future__ import annotations

import timeit
from collections.abc import Callable
from fractions import Fraction
from typing import Any

from scheduler.dra.allocator import allocate
from scheduler.dra.inventory import Inventory
from tests.unit.dra.builders import DRIVER, claim, exactly, gpu_class, node, resource_slice

N1 = node("n1")
CLASSES = {"gpu": gpu_class()}
GI = 1024 ** 3


def _inventory(shared: bool) -> Inventory:
    devices: list[dict[str, Any]] = []
    for i in range(8):
        d: dict[str, Any] = {"name": f"d{i}", "capacity": {"memory": {"value": "80Gi"}}}
        if shared:
            d["allowMultipleAllocations"] = True
        devices.append(d)
    return Inventory([resource_slice("s", node="n1", devices=devices)])


def main(number: int = 2000) -> None:
    plain, shared = _inventory(False), _inventory(True)
    held = {(DRIVER, "n1", f"d{i}") for i in range(4)}
    consumed = {(DRIVER, "n1", f"d{i}"): {"memory": Fraction(80 * GI)} for i in range(4)}
    r = exactly("r")
    r["exactly"]["capacity"] = {"requests": {"memory": "10Gi"}}
    c_plain, c_shared = [claim("a", exactly("r"))], [claim("a", r)]
    cases: list[tuple[str, Callable[[], object]]] = [
        ("plain, 4 of 8 held", lambda: allocate(
            c_plain, node=N1, inventory=plain, classes=CLASSES, in_use=held)),
        ("shared, 4 of 8 full", lambda: allocate(
            c_shared, node=N1, inventory=shared, classes=CLASSES, in_use=set(),
            consumed=consumed)),
        ("shared devices, gate off, 4 held", lambda: allocate(
            c_shared, node=N1, inventory=shared, classes=CLASSES, in_use=held,
            consumable=False)),
    ]
    for name, fn in cases:
        def built(fn: Callable[[], object] = fn) -> None:
            getattr(fn(), "allocations")
        best = min(timeit.repeat(built, number=number, repeat=3)) / number
        print(f"{name}: {best * 1e6:.0f} us per allocate")


if __name__ == "__main__":
    main()
