"""`helm install` of the chart into a sandbox, by the real Helm engine (helm-python-sdk) with its
default release storage (Secrets, which Helm sends as protobuf), then upgrade and uninstall.

Helm runs blocking on a worker thread; the in-process sandbox serves on the test's loop.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from helm_python import Chart, Config, HelmReleaseError

from scheduler.client.api import NotFound
from scheduler.sandbox import Sandbox
from tests.deploy import support
from tests.deploy.support import CHART, Obj, find
from tests.integration.harness import user_client

RELEASE = "py-scheduler"
NAMESPACE = "scheduling"
RELEASE_SECRET = "sh.helm.release.v1.py-scheduler.v{}"


def object_path(obj: Obj) -> str:
    """The REST path of a rendered object (the kinds the chart renders)."""
    group_version = obj["apiVersion"]
    base = f"/api/{group_version}" if "/" not in group_version else f"/apis/{group_version}"
    plural = {"Deployment": "deployments", "ServiceAccount": "serviceaccounts",
              "ConfigMap": "configmaps", "Service": "services", "Role": "roles",
              "RoleBinding": "rolebindings", "ClusterRole": "clusterroles",
              "ClusterRoleBinding": "clusterrolebindings",
              "CustomResourceDefinition": "customresourcedefinitions"}[obj["kind"]]
    ns = obj["metadata"].get("namespace")
    where = f"/namespaces/{ns}" if ns else ""
    return f"{base}{where}/{plural}/{obj['metadata']['name']}"


async def exists(client: Any, path: str) -> bool:
    try:
        await client.get(path)
    except NotFound:
        return False
    return True


async def test_install_upgrade_uninstall_into_the_sandbox(sandbox: Sandbox, tmp_path: Path) -> None:
    kubeconfig = sandbox.write_kubeconfig(tmp_path / "kubeconfig")
    helm = Config(kubeconfig_path=str(kubeconfig), namespace=NAMESPACE)
    chart = Chart.load(CHART)
    try:
        release = await asyncio.to_thread(
            helm.install, chart, RELEASE, {}, namespace=NAMESPACE, create_namespace=True,
            timeout=60)
        assert (release["status"], release["revision"]) == ("deployed", 1)
        expected = support.render(release=RELEASE, namespace=NAMESPACE)
        async with user_client(kubeconfig) as cluster:
            client = cluster.client
            for obj in expected:
                live = await client.get(object_path(obj))
                assert live["metadata"]["labels"] == obj["metadata"]["labels"], obj["kind"]
            deploy = await client.get(object_path(find(expected, "Deployment")))
            (ctr,) = deploy["spec"]["template"]["spec"]["containers"]
            assert ctr["livenessProbe"]["httpGet"]["scheme"] == "HTTPS"
            # Default storage: the release is a Secret in the release namespace.
            secret = await client.get(
                f"/api/v1/namespaces/{NAMESPACE}/secrets/{RELEASE_SECRET.format(1)}")
            assert secret["type"] == "helm.sh/release.v1"
            assert secret["metadata"]["labels"]["owner"] == "helm"
            assert secret["metadata"]["labels"]["status"] == "deployed"

            release = await asyncio.to_thread(
                helm.upgrade, chart, RELEASE, {"replicaCount": 1, "metrics": {
                    "readers": [{"kind": "ServiceAccount", "name": "prometheus-k8s",
                                 "namespace": "monitoring"}]}},
                namespace=NAMESPACE, timeout=60)
            assert (release["status"], release["revision"]) == ("deployed", 2)
            deploy = await client.get(object_path(find(expected, "Deployment")))
            assert deploy["spec"]["replicas"] == 1
            binding = await client.get("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/"
                                       "py-scheduler-kube-py-scheduler-metrics-reader")
            assert binding["subjects"][0]["name"] == "prometheus-k8s"
            history = await asyncio.to_thread(helm.history, RELEASE)
            assert [r["revision"] for r in history] == [1, 2]

            await asyncio.to_thread(helm.uninstall, RELEASE, timeout=60)
            crds = [o for o in expected if o["kind"] == "CustomResourceDefinition"]
            assert len(crds) == 2
            for obj in expected:
                # the CRDs stay (helm.sh/resource-policy: keep), and with them every
                # PodGroup and ElasticQuota
                assert await exists(client, object_path(obj)) == any(obj is c for c in crds), \
                    obj["kind"]
            for revision in (1, 2):
                assert not await exists(client, f"/api/v1/namespaces/{NAMESPACE}/secrets/"
                                                 f"{RELEASE_SECRET.format(revision)}")
    finally:
        helm.close()
        chart.close()


@pytest.mark.sandbox(nodes=1, scheduler_prereqs=True)
async def test_a_crd_installed_outside_the_release_needs_crds_install_false(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    """`kube-py-scheduler sandbox` (and scheduler-plugins in a cluster) already has the PodGroup
    CRD: Helm refuses to adopt an object it does not own, naming it; crds.install=false
    installs the rest."""
    kubeconfig = sandbox.write_kubeconfig(tmp_path / "kubeconfig")
    helm = Config(kubeconfig_path=str(kubeconfig), namespace=NAMESPACE)
    chart = Chart.load(CHART)
    try:
        with pytest.raises(HelmReleaseError, match='CustomResourceDefinition '
                           '"(podgroups|elasticquotas).scheduling.x-k8s.io" .* exists and cannot be imported'):
            await asyncio.to_thread(helm.install, chart, RELEASE, {}, namespace=NAMESPACE,
                                    create_namespace=True, timeout=60)
        release = await asyncio.to_thread(
            helm.install, chart, RELEASE, {"crds": {"install": False}}, namespace=NAMESPACE,
            create_namespace=True, timeout=60)
        assert (release["status"], release["revision"]) == ("deployed", 1)
    finally:
        helm.close()
        chart.close()
