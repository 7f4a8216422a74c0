"""A kopf operator (in-process) watches the PodGroup CRD and patches status."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import kopf
import yaml
from sbhelpers import Http, crd_path, wait_for

from scheduler.sandbox import Sandbox

PG = "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/default/podgroups"


async def test_kopf_operator_handles_custom_resources(http: Http, sandbox: Sandbox) -> None:
    s, _ = await http.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                           yaml.safe_load(crd_path().read_text()))
    assert s == 201
    registry = kopf.OperatorRegistry()
    deleted: list[str] = []

    @kopf.on.login(registry=registry)
    def login(**_: Any) -> kopf.ConnectionInfo:
        return kopf.ConnectionInfo(server=sandbox.url, token=sandbox.token, default_namespace="default")

    @kopf.on.create("scheduling.x-k8s.io", "v1alpha1", "podgroups", registry=registry)
    def created(spec: Any, patch: kopf.Patch, **_: Any) -> None:
        patch.status["phase"] = "Pending"
        patch.status["running"] = 0
        patch.metadata.labels["seen-by"] = "kopf"

    @kopf.on.delete("scheduling.x-k8s.io", "v1alpha1", "podgroups", registry=registry)
    def removed(name: str, **_: Any) -> None:
        deleted.append(name)

    settings = kopf.OperatorSettings()
    settings.posting.enabled = False
    settings.watching.server_timeout = 1
    settings.queueing.idle_timeout = 1.0
    settings.queueing.exit_timeout = 1.0
    logging.getLogger("kopf").setLevel(logging.WARNING)
    stop: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    op = asyncio.create_task(kopf.operator(registry=registry, settings=settings, standalone=True,
                                           namespaces=["default"], stop_flag=stop),
                             name="kopf-operator")
    try:
        await http.post(PG, {"metadata": {"name": "k"}, "spec": {"minMember": 2}})

        async def handled() -> dict[str, Any] | None:
            _, o = await http.get(f"{PG}/k")
            return o if (o.get("status") or {}).get("phase") == "Pending" else None

        o = await wait_for(handled, timeout=15)
        assert o["metadata"]["labels"]["seen-by"] == "kopf"
        assert o["status"]["running"] == 0
        assert o["metadata"]["finalizers"]  # kopf guards its delete handler with a finalizer
        await http.delete(f"{PG}/k")

        async def gone() -> bool:
            s, _ = await http.get(f"{PG}/k")
            return s == 404

        await wait_for(gone, timeout=15)
        assert deleted == ["k"]
    finally:
        stop.set_result(None)
        try:
            await asyncio.wait_for(op, 10)
        except (asyncio.TimeoutError, asyncio.CancelledError):
            op.cancel()
