"""What the sandbox's DRA side costs, in process (no HTTP): the resourceclaim controller per
pod (plain pods it only looks at, pods whose claim it creates from a template) and the
simulated driver's slices at start. Run by hand: ``python -m tests.perf.bench_dra_sandbox``;
figures go to docs/sandbox-dra.md with the machine named.
"""

from __future__ import annotations

import time
from typing import Any

from scheduler.sandbox import Sandbox
from tests.builders import dra_claim_template, with_pod_claims


def _pod(name: str, *, claim: bool) -> dict[str, Any]:
    p: dict[str, Any] = {"metadata": {"name": name}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}
    return with_pod_claims(p, ("gpu", "template", "gpu-template")) if claim else p


def controller(plain: int, templated: int) -> str:
    sb = Sandbox(nodes=0, simulate_kubelet=False)
    reg, cc = sb.registry, sb.claim_controller
    assert cc is not None
    cc.sync()  # opens its watches
    pods = reg.catalog.builtin("", "pods")
    reg.create(reg.catalog.builtin("resource.k8s.io", "resourceclaimtemplates"), "default", dra_claim_template())
    for i in range(plain):
        reg.create(pods, "default", _pod(f"p{i}", claim=False))
    for i in range(templated):
        reg.create(pods, "default", _pod(f"c{i}", claim=True))
    t0 = time.process_time()
    cc.sync()
    cpu = time.process_time() - t0
    claims = reg.ts(reg.catalog.builtin("resource.k8s.io", "resourceclaims")).count
    assert claims == templated
    return (f"controller: {plain} plain + {templated} template pods: {1e3 * cpu:.1f} ms CPU, "
            f"{1e6 * cpu / (plain + templated):.1f} us per pod")


def driver(nodes: int, spec: str) -> str:
    t0 = time.process_time()
    Sandbox(nodes=nodes)
    base = time.process_time() - t0
    t0 = time.process_time()
    Sandbox(nodes=nodes, dra_devices=spec)
    with_driver = time.process_time() - t0
    return (f"driver: {nodes} nodes, --dra-devices {spec}: {1e3 * (with_driver - base) / nodes:.2f} ms "
            f"CPU per node's slice")


if __name__ == "__main__":
    print(controller(5000, 0))
    print(controller(0, 1000))
    print(controller(0, 5000))
    print(driver(2000, "gpu=8"))
