"""Extenders and DRA (issue 24): an extender sees a pod with claims as kube-scheduler sends
it (the pod as the informer holds it: ``spec.resourceClaims``, the generated claim's name in
``status.resourceClaimStatuses``), and only the nodes the framework's filters kept, the
DynamicResources filter among them (upstream runs extenders after the plugins' Filter)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from scheduler.config.types import Extender
from tests.integration.extender_server import FakeExtender
from tests.integration.harness import scheduler_config
from tests.integration.scenarios import api, node, pod, scenario, wait_bound
from tests.unit.dra.builders import device, gpu_class, resource_slice

DRA = "/apis/resource.k8s.io/v1"
NODES = ["node-a", "node-b", "node-c"]


@pytest.fixture
async def fake() -> AsyncIterator[FakeExtender]:
    ext = FakeExtender()
    await ext.start()
    yield ext
    await ext.stop()


def _bare(obj: dict[str, Any]) -> dict[str, Any]:
    return {**obj, "metadata": {"name": obj["metadata"]["name"]}}


async def test_extender_gets_the_claim_pod_and_only_nodes_with_its_device(
    sandbox_factory: Any, tmp_path: Path, fake: FakeExtender
) -> None:
    cfg = scheduler_config()
    cfg.extenders = [Extender(url_prefix=fake.url, filter_verb="filter",
                              node_cache_capable=False)]
    template = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                "metadata": {"name": "one-gpu", "namespace": "default"},
                "spec": {"spec": {"devices": {"requests": [
                    {"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}}}}
    objects = [
        (f"{DRA}/deviceclasses", _bare(gpu_class())),
        (f"{DRA}/resourceslices", _bare(resource_slice("b-gpus", node="node-b",
                                                       devices=[device("gpu-0")]))),
        (f"{DRA}/namespaces/default/resourceclaimtemplates", template),
    ]
    async with scenario(sandbox_factory, tmp_path, [node(n) for n in NODES], config=cfg,
                        objects=objects) as env:
        p = api(pod("trainer").req(cpu="100m", memory="64Mi"))
        p["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]
        p["spec"]["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
        await env.cluster.create_pod(p)
        assert await wait_bound(env.cluster, ["trainer"], timeout=20) == {"trainer": "node-b"}
        (args,) = fake.calls("filter")
        # not nodeCacheCapable: whole Node objects, only the one the DRA filter kept
        assert [n["metadata"]["name"] for n in args["Nodes"]["items"]] == ["node-b"]
        sent = args["Pod"]
        assert sent["spec"]["resourceClaims"] == p["spec"]["resourceClaims"]
        assert sent["spec"]["containers"][0]["resources"]["claims"] == [{"name": "gpu"}]
        [status] = sent["status"]["resourceClaimStatuses"]
        assert status["name"] == "gpu" and status["resourceClaimName"].startswith("trainer-gpu")
        assert sent["metadata"]["uid"]
