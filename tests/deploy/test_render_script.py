"""deploy/helm/render.py, the chart rendered without a helm binary (docs/deploy.md runs it
against a sandbox in tests/docs/test_pages.py): it prints what the Helm engine renders for an
install, with ``helm template``'s value flags merged as Helm merges them, and says what it
needs when the engine is missing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.deploy import support

SCRIPT = support.REPO / "deploy" / "helm" / "render.py"


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True,
                          timeout=120, cwd=support.REPO, env=env)


def _objects(stream: str) -> list[dict[str, Any]]:
    """The stream's objects in a stable order (the chart's own order is by template path)."""
    return sorted(support.load_docs(stream), key=support.key)


@pytest.mark.parametrize(("flags", "values"), [
    ([], {}),
    (["--set", "image.repository=registry.example.com/s,image.tag=1.2.3",
      "--set", "replicaCount=3"],
     {"image": {"repository": "registry.example.com/s", "tag": "1.2.3"}, "replicaCount": 3}),
    (["--set-json", 'metrics.readers=[{"kind":"ServiceAccount","name":"p","namespace":"m"}]',
      "--set-string", "schedulerName=gpu"],
     {"metrics": {"readers": [{"kind": "ServiceAccount", "name": "p", "namespace": "m"}]},
      "schedulerName": "gpu"}),
], ids=["defaults", "set", "set-json-and-set-string"])
def test_prints_what_the_engine_renders_for_an_install(
        flags: list[str], values: dict[str, Any]) -> None:
    done = _run("rel", "deploy/helm/kube-py-scheduler", "-n", "ns", *flags)
    assert done.returncode == 0, done.stderr
    assert "# Source: kube-py-scheduler/templates/deployment.yaml" in done.stdout
    assert _objects(done.stdout) == sorted(
        support.render(values, release="rel", namespace="ns"), key=support.key)


def test_values_files_then_set_flags_win(tmp_path: Path) -> None:
    first, second = tmp_path / "a.yaml", tmp_path / "b.yaml"
    first.write_text("replicaCount: 5\nimage:\n  tag: from-a\n")
    second.write_text("image:\n  tag: from-b\n")
    done = _run("rel", str(support.CHART), "-f", str(first), "-f", str(second),
                "--set", "replicaCount=1")
    assert done.returncode == 0, done.stderr
    deploy = support.find(support.load_docs(done.stdout), "Deployment")
    assert deploy["spec"]["replicas"] == 1
    (container,) = support.containers(deploy)
    assert container["image"].endswith(":from-b")


def test_a_bad_value_flag_fails_with_helms_error() -> None:
    done = _run("rel", str(support.CHART), "--set", "image.tag")
    assert done.returncode == 2
    assert done.stderr.startswith("render.py: --set image.tag: "), done.stderr
    assert "Traceback" not in done.stderr


def test_without_the_engine_it_says_what_to_install(tmp_path: Path) -> None:
    # a module that refuses to import, shadowing helm_python
    (tmp_path / "helm_python.py").write_text("raise ImportError('not installed')\n")
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tmp_path)}
    done = _run("rel", str(support.CHART), env=env)
    assert done.returncode == 2
    assert "pip install helm-python-sdk" in done.stderr
