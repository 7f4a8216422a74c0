"""The blocks of docs/deploy.md that the page runner cannot run as they are.

- "The image": no Docker engine runs here, so the build and push lines are checked for what
  they promise: the build context is this repository (its Dockerfile), the tag is the
  project's version and the chart's appVersion, the push pushes what was built, and every
  install way of the page (the kustomize overlay, the helm line, the helm-less render)
  points the Deployment at exactly that image, which the chart renders.
- "With Helm": no helm binary either; the line runs through the Helm engine
  (helm-python-sdk), as tests/docs/test_readme_install.py runs the README's, against a
  sandbox, with the line's `--set` values.

The other blocks of the page (the overlay, the helm-less render) run as written in
tests/docs/test_pages.py.
"""

from __future__ import annotations

import asyncio
import shlex
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml
from helm_python import Chart, Config, parse_set_string

from scheduler.sandbox import Sandbox
from tests.deploy import support
from tests.docs.markdown import REPO, section_blocks
from tests.integration.harness import user_client

PAGE = "docs/deploy.md"


def _argv(section: str, index: int = 0) -> list[list[str]]:
    return [shlex.split(c) for c in section_blocks(section, lang="bash", page=PAGE)[index]
            .commands()]


def _set_values(argv: list[str]) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for i, arg in enumerate(argv):
        if arg == "--set":
            _merge(values, parse_set_string(argv[i + 1]))
    return values


def _merge(into: dict[str, Any], more: dict[str, Any]) -> None:
    for key, value in more.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into[key] = value


def _image(values: dict[str, Any]) -> str:
    return f"{values['image']['repository']}:{values['image']['tag']}"


def test_image_commands_build_what_every_install_pulls() -> None:
    build, push = _argv("The image")
    assert build[:2] == ["docker", "build"] and build[-1] == "."
    assert (REPO / "Dockerfile").is_file()  # the context is the repository root
    image = build[build.index("-t") + 1]
    assert push == ["docker", "push", image]
    repository, _, tag = image.rpartition(":")
    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    chart = yaml.safe_load((support.CHART / "Chart.yaml").read_text())
    assert tag == version == chart["appVersion"]

    # every way of the page installs that image
    (overlay,) = [b for b in section_blocks("With kubectl", lang="yaml", page=PAGE)]
    (swap,) = yaml.safe_load(overlay.text)["images"]
    default_image = support.find(support.load_docs((REPO / "manifests" / "deployment.yaml")
                                                   .read_text()), "Deployment")
    (container,) = default_image["spec"]["template"]["spec"]["containers"]
    assert container["image"].rpartition(":")[0] == swap["name"]
    assert f"{swap['newName']}:{swap['newTag']}" == image
    helm_line = _argv("With Helm")[0]
    (render_line,) = [a for a in _argv("Without a helm binary") if a[:2] == ["python",
                                                                           "deploy/helm/render.py"]]
    for argv in (helm_line, render_line):
        values = _set_values(argv)
        assert _image(values) == image, argv
        (deploy,) = [o for o in support.render(values) if o["kind"] == "Deployment"]
        assert [c["image"] for c in support.containers(deploy)] == [image]


@pytest.mark.sandbox(nodes=1, scheduler_prereqs=False)
async def test_helm_line_installs_the_chart_with_the_pushed_image(
        sandbox: Sandbox, kubeconfig: Path) -> None:
    (argv,) = _argv("With Helm")
    assert argv[:2] == ["helm", "install"]
    release, chart_path = argv[2], argv[3]
    namespace = argv[argv.index("-n") + 1]
    assert "--create-namespace" in argv
    values = _set_values(argv)
    # no flag left that this test does not honour
    assert len(argv) == 7 + 2 * sum(1 for a in argv if a == "--set"), argv
    helm = Config(kubeconfig_path=str(kubeconfig), namespace=namespace)
    chart = Chart.load(REPO / chart_path)
    try:
        installed: dict[str, Any] = await asyncio.to_thread(
            helm.install, chart, release, values, namespace=namespace, create_namespace=True,
            timeout=60)
    finally:
        helm.close()
        chart.close()
    assert installed["status"] == "deployed"
    async with user_client(kubeconfig) as cluster:
        deploy = await cluster.client.get(
            f"/apis/apps/v1/namespaces/{namespace}/deployments/{release}-kube-py-scheduler")
    assert [c["image"] for c in support.containers(deploy)] == [_image(values)]
