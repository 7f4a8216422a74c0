from __future__ import annotations

import base64
from pathlib import Path

import pytest
import yaml

from scheduler.client.connection import (
    ConfigurationError,
    TokenFileCredentials,
    load_connection,
    load_incluster,
)
from tests.unit.client.conftest import FakeClock

CA_PEM = """-----BEGIN CERTIFICATE-----
MIIBdzCCAR2gAwIBAgIUQ7Y2Kq0YJxZQn2mB1Qx9Qm1q8wQwCgYIKoZIzj0EAwIw
-----END CERTIFICATE-----
"""


def write_kubeconfig(path: Path, *, server: str = "https://10.0.0.1:6443", user: dict[str, object] | None = None,
                     cluster_extra: dict[str, object] | None = None, contexts: tuple[str, ...] = ("main",)) -> Path:
    cfg = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": server, **(cluster_extra or {})}}],
        "users": [{"name": "u", "user": user if user is not None else {"token": "abc"}}],
        "contexts": [{"name": n, "context": {"cluster": "c", "user": "u"}} for n in contexts],
        "current-context": contexts[0],
    }
    path.write_text(yaml.safe_dump(cfg))
    return path


def test_explicit_kubeconfig_with_token_and_insecure(tmp_path: Path) -> None:
    kc = write_kubeconfig(tmp_path / "kc", cluster_extra={"insecure-skip-tls-verify": True})
    conn = load_connection(kubeconfig=str(kc), environ={})
    assert conn.host == "https://10.0.0.1:6443"
    assert conn.authorization() == "Bearer abc"
    assert conn.verify_ssl is False
    ctx = conn.ssl_context()
    assert not isinstance(ctx, bool) and ctx.check_hostname is False


def test_kubeconfig_plain_http_and_context(tmp_path: Path) -> None:
    kc = write_kubeconfig(tmp_path / "kc", server="http://127.0.0.1:8080", contexts=("a", "b"))
    conn = load_connection(kubeconfig=str(kc), context="b", environ={})
    assert conn.host == "http://127.0.0.1:8080" and conn.ssl_context() is True
    with pytest.raises(ConfigurationError, match="kubeconfig"):
        load_connection(kubeconfig=str(kc), context="nope", environ={})


def test_kubeconfig_client_cert_and_ca_data(tmp_path: Path) -> None:
    b64 = base64.b64encode(CA_PEM.encode()).decode()
    kc = write_kubeconfig(
        tmp_path / "kc",
        user={"client-certificate-data": b64, "client-key-data": b64},
        cluster_extra={"certificate-authority-data": b64},
    )
    conn = load_connection(kubeconfig=str(kc), environ={})
    assert conn.authorization() is None
    assert conn.ca_file and Path(conn.ca_file).read_text() == CA_PEM
    assert conn.cert_file and conn.key_file


def test_exec_plugin_token(tmp_path: Path) -> None:
    script = tmp_path / "cred.sh"
    script.write_text('#!/bin/sh\necho \'{"apiVersion":"client.authentication.k8s.io/v1beta1","kind":"ExecCredential","status":{"token":"from-exec"}}\'\n')
    script.chmod(0o755)
    kc = write_kubeconfig(tmp_path / "kc", user={"exec": {"apiVersion": "client.authentication.k8s.io/v1beta1", "command": str(script)}})
    conn = load_connection(kubeconfig=str(kc), environ={})
    assert conn.authorization() == "Bearer from-exec"


def test_missing_explicit_kubeconfig_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError):
        load_connection(kubeconfig=str(tmp_path / "missing"), environ={})


def _incluster_files(tmp_path: Path) -> tuple[Path, Path]:
    token, ca = tmp_path / "token", tmp_path / "ca.crt"
    token.write_text("tok-1\n")
    ca.write_text(CA_PEM)
    return token, ca


def test_incluster_preferred_over_kubeconfig_env(tmp_path: Path) -> None:
    token, ca = _incluster_files(tmp_path)
    kc = write_kubeconfig(tmp_path / "kc")
    env = {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443", "KUBECONFIG": str(kc)}
    conn = load_connection(kubeconfig=None, environ=env, incluster_token_file=str(token), incluster_ca_file=str(ca))
    assert conn.source == "in-cluster"
    assert conn.host == "https://10.96.0.1:443"
    assert conn.authorization() == "Bearer tok-1"
    assert conn.ca_file == str(ca)


def test_incluster_ipv6_host(tmp_path: Path) -> None:
    token, ca = _incluster_files(tmp_path)
    env = {"KUBERNETES_SERVICE_HOST": "fd00::1", "KUBERNETES_SERVICE_PORT": "443"}
    assert load_incluster(environ=env, token_file=str(token), ca_file=str(ca)).host == "https://[fd00::1]:443"


def test_incluster_token_is_reread(tmp_path: Path) -> None:
    token, _ = _incluster_files(tmp_path)
    clock = FakeClock()
    creds = TokenFileCredentials(str(token), clock=clock)
    assert creds.authorization() == "Bearer tok-1"
    token.write_text("tok-2")
    clock.advance(30)
    assert creds.authorization() == "Bearer tok-1"  # cached for a minute
    clock.advance(31)
    assert creds.authorization() == "Bearer tok-2"
    token.unlink()  # transient failure keeps the last good token
    clock.advance(61)
    assert creds.authorization() == "Bearer tok-2"


def test_fallback_to_kubeconfig_env_then_home(tmp_path: Path) -> None:
    kc = write_kubeconfig(tmp_path / "kc", server="https://env:6443")
    conn = load_connection(kubeconfig=None, environ={"KUBECONFIG": str(kc), "HOME": str(tmp_path)})
    assert conn.host == "https://env:6443"
    home = tmp_path / "home"
    (home / ".kube").mkdir(parents=True)
    write_kubeconfig(home / ".kube" / "config", server="https://home:6443")
    conn = load_connection(kubeconfig=None, environ={"HOME": str(home)})
    assert conn.host == "https://home:6443"


def test_nothing_found_lists_sources(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError) as ei:
        load_connection(
            kubeconfig=None,
            environ={"HOME": str(tmp_path), "KUBECONFIG": str(tmp_path / "nope")},
            incluster_token_file=str(tmp_path / "t"),
        )
    msg = str(ei.value)
    assert "in-cluster" in msg and "$KUBECONFIG" in msg and "~/.kube/config" in msg
