"""An out-of-tree plugin package installed with pip changes placements on the sandbox,
configured only through the config file: the "Write a plugin" page (docs/plugins.md), run as
written (examples/plugins)."""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import importlib.util
import json
import shlex
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from scheduler.app import build_components
from scheduler.client.connection import load_connection
from scheduler.config.types import PluginRef
from scheduler.framework import FilterPlugin, PodInfo, Status
from scheduler.framework.registry import Registry
from scheduler.metrics import SchedulerMetrics
from scheduler.plugins.registry import in_tree_registry
from tests.docs.readme import REPO, section_blocks
from tests.integration.harness import scheduler_config, user_client, wait_until
from tests.integration.scenarios import api, node, pod, wait_bound

SECTION = "Write a plugin"
PAGE = "docs/plugins.md"
EXAMPLE = REPO / "examples" / "plugins"
GPU = "example.com/gpu-model"


def readme_commands() -> list[str]:
    (block,) = section_blocks(SECTION, lang="bash", page=PAGE)
    return block.commands()


def as_argv(command: str) -> list[str]:
    """A documented command as this test runs it: the same program through this interpreter
    (``kube-py-scheduler`` is ``python -m scheduler``; ``pip``, ``python -m pip``)."""
    argv = shlex.split(command)
    if argv[0] == "kube-py-scheduler":
        return [sys.executable, "-m", "scheduler", *argv[1:]]
    if argv[0] == "pip":
        return [sys.executable, "-m", "pip", *argv[1:]]
    if argv[:2] == ["python", "-m"]:
        return [sys.executable, *argv[1:]]
    raise AssertionError(f"unexpected documented command {command!r}")


def _can_build_offline() -> bool:
    return all(importlib.util.find_spec(m) is not None for m in ("setuptools", "wheel"))


@pytest.fixture(scope="module")
def installed() -> Iterator[None]:
    """The page's install command (without build isolation when setuptools and wheel are
    here, so no index is needed)."""
    command = readme_commands()[0]
    assert command == "pip install --no-deps examples/plugins"
    argv = as_argv(command)
    if _can_build_offline():
        argv.insert(argv.index("--no-deps") + 1, "--no-build-isolation")
    argv.insert(argv.index("install") + 1, "--force-reinstall")
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    importlib.invalidate_caches()
    yield


def test_readme_blocks_are_the_example_package() -> None:
    (code,) = section_blocks(SECTION, lang="python", page=PAGE)
    assert code.text == (EXAMPLE / "label_preference.py").read_text()
    (toml,) = section_blocks(SECTION, lang="toml", page=PAGE)
    assert toml.text in (EXAMPLE / "pyproject.toml").read_text()
    (yaml_block,) = section_blocks(SECTION, lang="yaml", page=PAGE)
    assert yaml_block.text == (EXAMPLE / "scheduler-config.yaml").read_text()


def test_plugins_command_lists_it_with_its_origin(installed: None) -> None:
    command = readme_commands()[1]
    table = subprocess.run(as_argv(command), cwd=REPO, capture_output=True, text=True,
                           timeout=60)
    assert table.returncode == 0, table.stderr
    (line,) = [x for x in table.stdout.splitlines() if x.startswith("LabelPreference ")]
    assert line.split() == ["LabelPreference", "kube-py-scheduler-label-preference", "0.1.0",
                            "score", "py-scheduler,py-scheduler-gpu"]
    as_json = subprocess.run([*as_argv(command), "-o", "json"], cwd=REPO,
                             capture_output=True, text=True, timeout=60)
    rows = {r["name"]: r for r in json.loads(as_json.stdout)["plugins"]}
    assert rows["NodeResourcesFit"]["origin"] == "in-tree"
    assert rows["NodeResourcesFit"]["extensionPoints"] == ["preFilter", "filter", "preScore",
                                                           "score"]
    # enabled in the default-plugins profile only through the v1 defaults
    assert rows["Coscheduling"]["enabledIn"] == []
    assert rows["LabelPreference"]["enabledIn"] == ["py-scheduler", "py-scheduler-gpu"]


def test_example_package_tests_pass(installed: None) -> None:
    done = subprocess.run(as_argv(readme_commands()[2]), cwd=REPO, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-3000:]
    assert " passed" in done.stdout


@contextlib.asynccontextmanager
async def daemon(command: str, kubeconfig: Path) -> AsyncIterator[asyncio.subprocess.Process]:
    """The page's run command against ``kubeconfig`` (its /tmp/kc), on a free metrics port;
    SIGTERM at the end must exit 0."""
    argv = [kubeconfig.as_posix() if a == "/tmp/kc" else a for a in as_argv(command)]
    argv += ["--metrics-bind-address", "127.0.0.1:0"]
    proc = await asyncio.create_subprocess_exec(*argv, cwd=REPO,
                                                stderr=asyncio.subprocess.PIPE)
    try:
        yield proc
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
        try:
            code = await asyncio.wait_for(proc.wait(), timeout=30)
        except TimeoutError:
            proc.kill()
            raise
        assert proc.stderr is not None
        stderr = (await proc.stderr.read()).decode()
        assert code == 0, stderr[-3000:]


async def test_installed_plugin_changes_placements_on_the_sandbox(
    installed: None, sandbox_factory: Any, tmp_path: Path
) -> None:
    sb = await sandbox_factory(nodes=0)
    kc = sb.write_kubeconfig(tmp_path / "kc")
    command = readme_commands()[3]
    async with user_client(kc) as cluster:
        for name, model in (("plain-0", None), ("gpu-a100", "a100"), ("gpu-h100", "h100")):
            await cluster.create_node(node(name, labels={GPU: model} if model else {}))
        async with daemon(command, kc):
            await cluster.create_pods([
                api(pod("default-order")),
                api(pod("wants-a100").annotations({"example.com/gpu-preference": "a100"})),
                api(pod("multipoint", scheduler="py-scheduler-gpu")),
            ])
            placement = await wait_bound(cluster, ["default-order", "wants-a100",
                                                   "multipoint"], timeout=30)
    assert placement == {"default-order": "gpu-h100", "wants-a100": "gpu-a100",
                         "multipoint": "gpu-a100"}


async def test_broken_plugin_args_exit_2_naming_the_distribution(
    installed: None, tmp_path: Path
) -> None:
    config = (EXAMPLE / "scheduler-config.yaml").read_text().replace(
        "labelKey: example.com/gpu-model\n          values: [h100, a100]",
        "labelKey: \"\"\n          values: [h100, a100]")
    path = tmp_path / "broken.yaml"
    path.write_text(config)
    done = subprocess.run(
        [sys.executable, "-m", "scheduler", "run", "--config", str(path), "--kubeconfig",
         str(tmp_path / "never-read"), "--metrics-bind-address", "127.0.0.1:0"],
        capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr.strip() == (
        f"kube-py-scheduler: {path}: profiles[0]: profile 'py-scheduler': plugin "
        "'LabelPreference': labelKey: required, a node label key (from entry point "
        "'LabelPreference = label_preference:LabelPreference' of distribution "
        "kube-py-scheduler-label-preference 0.1.0)")


class Explodes(FilterPlugin):
    """Raises for pods named ``boom``: a bug in a plugin, not a rejection."""

    NAME = "Explodes"

    def __init__(self, args: Any, handle: Any) -> None:
        pass

    def filter(self, state: Any, pod_info: PodInfo, node_info: Any) -> Status | None:
        if pod_info.pod["metadata"]["name"] == "boom":
            raise RuntimeError("plugin bug")
        return None


async def test_a_plugin_raising_fails_only_that_pod(
    sandbox_factory: Any, tmp_path: Path
) -> None:
    """Programmatic registry (as embedders and tests do): the exception becomes
    Status(Error) for that pod, retried with backoff; the daemon goes on."""
    registry = in_tree_registry().merged(_one("Explodes", Explodes))
    config = scheduler_config()
    config.profiles[0].plugins.multi_point.enabled.append(PluginRef("Explodes"))
    sb = await sandbox_factory(nodes=2)
    kc = sb.write_kubeconfig(tmp_path / "kc")
    metrics = SchedulerMetrics()
    parts = build_components(config, load_connection(kubeconfig=str(kc)), metrics=metrics,
                             registry=registry)
    await parts.start(sync_timeout=15)
    loop = asyncio.create_task(parts.scheduler.run(), name="test-scheduling-loop")
    try:
        async with user_client(kc) as cluster:
            await cluster.create_pods([api(pod("boom")), api(pod("fine"))])
            await wait_bound(cluster, ["fine"])

            async def retried() -> bool:
                value = metrics.registry.get_sample_value(
                    "scheduler_schedule_attempts_total",
                    {"result": "error", "profile": config.profiles[0].scheduler_name})
                return (value or 0) >= 2

            await wait_until(retried, timeout=10, message="two failed attempts of boom")
            boom = await cluster.get_pod("boom")
            assert boom is not None and not boom["spec"].get("nodeName")
            cond = {c["type"]: c for c in boom["status"]["conditions"]}["PodScheduled"]
            assert cond["reason"] == "SchedulerError" and "plugin bug" in cond["message"]
            assert not loop.done()
    finally:
        await parts.aclose(grace_seconds=2)
        loop.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await loop


def _one(name: str, factory: Any) -> Registry:
    registry = Registry()
    registry.register(name, factory)
    return registry
