"""The DRA integration tests' shared setup: a sandbox with 4-CPU/16Gi nodes (and the
simulated driver's devices when asked), a user client and, unless told not to, the
scheduler; the resource.k8s.io objects created over HTTP; the reads their assertions share
(a pod's FailedScheduling notes, the claims' allocation results)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scheduler.config.types import KubeSchedulerConfiguration
from scheduler.sandbox import Sandbox
from tests.integration.harness import Cluster, for_api, running_scheduler, user_client
from tests.unit.dra.builders import claim_pod, gpu_class

API = "/apis/resource.k8s.io/v1"
CLAIMS = f"{API}/namespaces/default/resourceclaims"
TEMPLATES = f"{API}/namespaces/default/resourceclaimtemplates"


def pod(name: str, claim_name: str) -> dict[str, Any]:
    """``claim_pod`` as a user creates it."""
    return for_api(claim_pod(name, claim_name))


def strip(obj: dict[str, Any]) -> dict[str, Any]:
    """The object without what only the API server sets (the harness's ``for_api``)."""
    return for_api(obj)


@dataclass
class DraEnv:
    """One test's cluster: the sandbox, its kubeconfig, a user's client and the node names
    in order."""

    sandbox: Sandbox
    kubeconfig: Path
    cluster: Cluster
    nodes: list[str]

    @property
    def api(self) -> Any:
        return self.cluster.client

    async def create(self, plural: str, *objs: dict[str, Any]) -> None:
        """Create ``objs`` (builder objects, stripped here) under ``resource.k8s.io/v1``'s
        ``plural`` (``resourceclaims`` and ``resourceclaimtemplates`` in ``default``)."""
        path = {"resourceclaims": CLAIMS, "resourceclaimtemplates": TEMPLATES}.get(
            plural, f"{API}/{plural}")
        for obj in objs:
            await self.api.create(path, strip(obj))

    async def publish(self, *slices: dict[str, Any]) -> None:
        """The gpu DeviceClass and ``slices``."""
        await self.create("deviceclasses", gpu_class())
        await self.create("resourceslices", *slices)

    async def failed(self, pod_name: str) -> list[str]:
        """The notes of the pod's FailedScheduling events, oldest first."""
        return [str(e["note"]) for e in await self.cluster.events_for(pod_name)
                if e["reason"] == "FailedScheduling"]

    async def bound(self, names: list[str]) -> dict[str, str]:
        """Pod name -> node, for those of ``names`` that are bound."""
        return {n: node for n in names if (node := await self.cluster.node_name(n))}

    async def claims(self) -> list[dict[str, Any]]:
        return list((await self.api.get(CLAIMS))["items"])

    async def results(self) -> list[dict[str, Any]]:
        """Every allocated device result of every claim in ``default``."""
        return [r for c in await self.claims()
                for r in ((c.get("status") or {}).get("allocation") or {})
                .get("devices", {}).get("results", [])]


@contextlib.asynccontextmanager
async def dra_cluster(
    sandbox_factory: Any, tmp_path: Path, *, nodes: int, dra_devices: str | None = None,
    schedule: bool = True, config: KubeSchedulerConfiguration | None = None,
    before_scheduler: Callable[[Cluster], Awaitable[None]] | None = None, **sandbox: Any,
) -> AsyncIterator[DraEnv]:
    """A sandbox of ``nodes`` 4-CPU/16Gi nodes (``dra_devices``: the simulated driver's
    ``--dra-devices``; ``sandbox``: more ``Sandbox`` arguments) and a user's client on it;
    with ``schedule``, the scheduler (``config``) runs inside, started after
    ``before_scheduler`` (e.g. a CRD it needs)."""
    if dra_devices is not None:
        sandbox["dra_devices"] = dra_devices
    sb = await sandbox_factory(nodes=nodes, node_cpu="4", node_memory="16Gi", **sandbox)
    kc = sb.write_kubeconfig(tmp_path / "kc")
    async with user_client(kc) as cluster:
        names = sorted(n["metadata"]["name"] for n in await cluster.list_nodes())
        env = DraEnv(sb, kc, cluster, names)
        if before_scheduler is not None:
            await before_scheduler(cluster)
        if not schedule:
            yield env
            return
        async with running_scheduler(kc, config=config):
            yield env
