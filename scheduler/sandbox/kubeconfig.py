"""Kubeconfig files pointing at a sandbox, usable by kubectl and ``load_kube_config`` as is."""

from __future__ import annotations

import os
from pathlib import Path

import yaml


def kubeconfig_dict(url: str, token: str | None, *, name: str = "sandbox") -> dict[str, object]:
    user: dict[str, str] = {"token": token} if token else {}
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": {"server": url}}],
        "users": [{"name": name, "user": user}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": name, "namespace": "default"}}],
        "current-context": name,
        "preferences": {},
    }


def write_kubeconfig(path: str | os.PathLike[str], url: str, token: str | None) -> Path:
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(p.name + ".tmp")
    tmp.write_text(yaml.safe_dump(kubeconfig_dict(url, token), sort_keys=False))
    os.chmod(tmp, 0o600)
    tmp.replace(p)
    return p
