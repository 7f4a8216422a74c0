"""VolumeLimitScaling end to end over HTTP against the sandbox: a CSIDriver with
``preventPodSchedulingIfMissing`` keeps a pod with one of its volumes off the nodes whose
CSINode has not registered the driver, and the pod goes where it is registered; when no node
has it the FailedScheduling event names the driver in upstream's words."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.builders import csi_driver
from tests.integration.scenarios import (
    NO_VICTIMS,
    api,
    failed_message,
    claim,
    node,
    pod,
    preemption_fit_error,
    scenario,
    storage_class,
    wait_bound,
    wait_failed,
)

DRIVER = "csi.example.com"
CSI_DRIVERS = "/apis/storage.k8s.io/v1/csidrivers"
CSI_NODES = "/apis/storage.k8s.io/v1/csinodes"


def _driver() -> tuple[str, dict[str, Any]]:
    return CSI_DRIVERS, csi_driver(DRIVER, attach_required=True,
                                   prevent_pod_scheduling_if_missing=True)


def _csi_node(name: str, drivers: list[str]) -> tuple[str, dict[str, Any]]:
    return CSI_NODES, {"apiVersion": "storage.k8s.io/v1", "kind": "CSINode",
                       "metadata": {"name": name},
                       "spec": {"drivers": [{"name": d, "nodeID": name,
                                             "allocatable": {"count": 8}} for d in drivers]}}


@pytest.mark.parametrize("registered", ["a0", "b0"])
async def test_a_pod_goes_only_where_its_opted_in_driver_is_registered(
    sandbox_factory: Any, tmp_path: Path, registered: str
) -> None:
    nodes = [node("a0", zone="zone-a"), node("b0", zone="zone-b")]
    objects = [_driver(), storage_class("csi-wffc", provisioner=DRIVER),
               _csi_node(registered, [DRIVER]),
               claim("data", storage_class_name="csi-wffc")]
    async with scenario(sandbox_factory, tmp_path, nodes, objects=objects) as env:
        await env.cluster.create_pod(api(pod("db").pvc("data", "data")))
        assert await wait_bound(env.cluster, ["db"]) == {"db": registered}


async def test_no_node_with_the_driver_is_refused_in_upstream_words(
    sandbox_factory: Any, tmp_path: Path
) -> None:
    nodes = [node("a0", zone="zone-a"), node("b0", zone="zone-b")]
    objects = [_driver(), storage_class("csi-wffc", provisioner=DRIVER),
               _csi_node("a0", ["other.example.com"]),
               claim("data", storage_class_name="csi-wffc")]
    async with scenario(sandbox_factory, tmp_path, nodes, objects=objects) as env:
        await env.cluster.create_pod(api(pod("db").pvc("data", "data")))
        reason = f"{DRIVER} CSI driver is not installed on the node"
        await wait_failed(env.cluster, "db", failed_message(
            2, [(2, reason)], preemption=preemption_fit_error(2, NO_VICTIMS)))
