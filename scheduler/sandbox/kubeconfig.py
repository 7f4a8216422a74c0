"""Kubeconfig files pointing at a sandbox, usable by kubectl and ``load_kube_config`` as is.

Each sandbox gets its own file unless the caller names one: the default path carries the
port, which no two running sandboxes share, so a second sandbox never overwrites the first
one's kubeconfig. A sandbox serving TLS puts its CA in ``certificate-authority-data``.
"""

from __future__ import annotations

import base64
import os
import tempfile
from pathlib import Path

import yaml


def default_kubeconfig_path(port: int) -> Path:
    return Path(tempfile.gettempdir()) / f"kube-py-scheduler-sandbox-{port}.kubeconfig"


def kubeconfig_dict(
    url: str, token: str | None, *, name: str = "sandbox", ca_pem: bytes | None = None
) -> dict[str, object]:
    user: dict[str, str] = {"token": token} if token else {}
    cluster: dict[str, str] = {"server": url}
    if ca_pem:
        cluster["certificate-authority-data"] = base64.b64encode(ca_pem).decode()
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": cluster}],
        "users": [{"name": name, "user": user}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": name, "namespace": "default"}}],
        "current-context": name,
        "preferences": {},
    }


def write_kubeconfig(
    path: str | os.PathLike[str], url: str, token: str | None, *, ca_pem: bytes | None = None
) -> Path:
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(p.name + ".tmp")
    tmp.write_text(yaml.safe_dump(kubeconfig_dict(url, token, ca_pem=ca_pem), sort_keys=False))
    os.chmod(tmp, 0o600)
    tmp.replace(p)
    return p
