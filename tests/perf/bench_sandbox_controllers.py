"""What the sandbox's simulations cost per pod, in process (no HTTP): the DRA steady state's
pod life (created with a claim from a template, its claim generated, bound, started or
waited for by the kubelet, deleted gracefully, removed, its claim collected) in batches,
every simulation taking its turn after each step as its loop would. Only the public turns
(``step()``/``sync()``) and the registry are used, so the same script measures a tree whose
registry calls the simulations and one whose simulations watch the store.
Run by hand: ``python -m tests.perf.bench_sandbox_controllers [pods] [batch]``.
"""

from __future__ import annotations

import sys
import time
from typing import Any

from scheduler.sandbox import Sandbox, podsubresources
from tests.builders import dra_claim_template, with_pod_claims


def _pod(name: str, *, claim: bool) -> dict[str, Any]:
    p: dict[str, Any] = {"metadata": {"name": name},
                         "spec": {"containers": [{"name": "c", "image": "busybox"}]}}
    return with_pod_claims(p, ("gpu", "template", "gpu-template")) if claim else p


def run(pods: int, batch: int, *, claim: bool) -> str:
    sb = Sandbox(nodes=50, max_grace_seconds=0.0)
    reg = sb.registry
    kubelet, ctl, cc, pv = sb.kubelet, sb.controllers, sb.claim_controller, sb.pv_controller
    assert kubelet is not None and ctl is not None and cc is not None and pv is not None
    pods_rt = reg.catalog.builtin("", "pods")
    reg.create(reg.catalog.builtin("resource.k8s.io", "resourceclaimtemplates"), "default", dra_claim_template())

    def turns() -> None:
        kubelet.step()
        ctl.sync()
        cc.sync()
        pv.sync()

    turns()
    t0 = time.process_time()
    for b in range(0, pods, batch):
        names = [f"p{i}" for i in range(b, min(pods, b + batch))]
        for n in names:
            reg.create(pods_rt, "default", _pod(n, claim=claim))
        turns()
        for i, n in enumerate(names):
            podsubresources.bind(reg, "default", n, {"metadata": {"name": n},
                                                     "target": {"kind": "Node", "name": f"node-{i % 50:04d}"}})
        turns()
        for n in names:
            reg.delete(pods_rt, "default", n, {})
        turns()
        turns()
    cpu = time.process_time() - t0
    left = reg.ts(pods_rt).count
    claims = reg.ts(reg.catalog.builtin("resource.k8s.io", "resourceclaims")).count
    return (f"{pods} pods{' with a template claim' if claim else ''}, batches of {batch}: "
            f"{1e3 * cpu / pods:.3f} ms CPU per pod (left: {left} pods, {claims} claims)")


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    size = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    print(run(n, size, claim=False))
    print(run(n, size, claim=True))
