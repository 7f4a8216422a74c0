"""StorageCapacityScoring end to end over HTTP against the sandbox: the CSIStorageCapacity
objects a CSI driver publishes reach the scheduler through its informer, and a pod whose claim
is still to be provisioned goes to the node whose pool has the most free capacity (the default
``shape`` of VolumeBindingArgs)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.builders import csi_driver
from tests.integration.scenarios import (
    api,
    claim,
    node,
    pod,
    scenario,
    storage_class,
    wait_bound,
    wait_claims_bound,
)

DRIVER = "csi.example.com"
CSI_DRIVERS = "/apis/storage.k8s.io/v1/csidrivers"
CAPACITIES = "/apis/storage.k8s.io/v1/namespaces/default/csistoragecapacities"


def _driver() -> tuple[str, dict[str, Any]]:
    return CSI_DRIVERS, csi_driver(DRIVER, storage_capacity=True, attach_required=False)


def _capacity(zone: str, capacity: str) -> tuple[str, dict[str, Any]]:
    return CAPACITIES, {
        "apiVersion": "storage.k8s.io/v1", "kind": "CSIStorageCapacity",
        "metadata": {"name": f"pool-{zone}", "namespace": "default"},
        "storageClassName": "csi-wffc", "capacity": capacity,
        "nodeTopology": {"matchLabels": {"topology.kubernetes.io/zone": zone}}}


@pytest.mark.parametrize(("free_a", "free_b", "want"), [
    ("20Gi", "100Gi", "b0"),
    ("100Gi", "20Gi", "a0"),
], ids=["zone-b-has-more", "zone-a-has-more"])
async def test_a_claim_to_provision_goes_where_the_pool_has_most_free_capacity(
    sandbox_factory: Any, tmp_path: Path, free_a: str, free_b: str, want: str
) -> None:
    nodes = [node("a0", zone="zone-a"), node("b0", zone="zone-b")]
    objects = [_driver(), storage_class("csi-wffc", provisioner=DRIVER),
               _capacity("zone-a", free_a), _capacity("zone-b", free_b),
               claim("data", storage_class_name="csi-wffc", size="10Gi")]
    async with scenario(sandbox_factory, tmp_path, nodes, objects=objects) as env:
        await env.cluster.create_pod(api(pod("db").pvc("data", "data")))
        placement = await wait_bound(env.cluster, ["db"])
        assert placement == {"db": want}
        await wait_claims_bound(env.cluster, ["data"])
