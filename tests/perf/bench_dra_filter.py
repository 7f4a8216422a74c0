"""What the DynamicResources Filter costs per node: the structured allocator over one node's
devices, for upstream's scheduler_perf DRA shape (500 nodes of 10 devices, one claim of one
device from the class) at three fill levels (empty, half, all but 10 devices allocated).
Run by hand: ``python -m tests.perf.bench_dra_filter``; figures go to docs/dra.md.
"""

from __future__ import annotations

import random
import time

from scheduler.dra.allocator import Allocated, allocate, prepare
from scheduler.dra.inventory import Inventory
from scheduler.plugins.dynamicresources.plugin import HELD_COUNT_AFTER
from tests.unit.dra.builders import claim, device, exactly, gpu_class, node, resource_slice

NODES = 500
PER_NODE = 10


def run(fill: str) -> str:
    nodes = [node(f"n{i}") for i in range(NODES)]
    inv = Inventory([resource_slice(f"s{i}", node=f"n{i}",
                                    devices=[device(f"gpu-{j}", attrs={"index": j})
                                             for j in range(PER_NODE)])
                     for i in range(NODES)])
    ids = [("gpu.example.com", f"n{i}", f"gpu-{j}") for i in range(NODES) for j in range(PER_NODE)]
    random.Random(0).shuffle(ids)
    held = {"empty": 0, "half": len(ids) // 2, "full": len(ids) - 10}[fill]
    in_use = set(ids[:held])
    prepared = prepare([claim("c", exactly("r"))], {"gpu": gpu_class()})
    warm = inv.held_by_node(in_use)
    for n in nodes:  # warm: CEL results cached on the devices, node device lists built
        allocate(prepared, node=n, inventory=inv, in_use=in_use, held=warm)
    rounds = 20
    per_node = float("inf")
    for _ in range(3):  # the best of three: the machine is shared
        t0 = time.process_time()
        fits = 0
        for _ in range(rounds):
            held, unfit = None, 0  # as the plugin does: counted after 16 nodes without room
            for n in nodes:
                if held is None and unfit >= HELD_COUNT_AFTER:
                    held = inv.held_by_node(in_use)
                out = allocate(prepared, node=n, inventory=inv, in_use=in_use, held=held)
                fits += isinstance(out, Allocated)
                unfit += not isinstance(out, Allocated)
        per_node = min(per_node, (time.process_time() - t0) / (rounds * NODES))
    return (f"{fill:5}: {1e6 * per_node:6.1f} us of CPU per node, "
            f"{1e3 * per_node * NODES:5.2f} ms for all {NODES} nodes ({fits // rounds} fit)")


if __name__ == "__main__":
    for fill in ("empty", "half", "full"):
        print(run(fill))
