"""The programmatic entry: ``App`` with a caller's ``Registry`` schedules with the caller's
plugin on the sandbox, configured by name like any in-tree plugin."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from scheduler.app import App, AppOptions, StartupError
from scheduler.config.load import parse_config
from scheduler.framework import (
    ClusterEvent,
    ClusterEventWithHint,
    Code,
    CycleState,
    EnqueueExtensions,
    EventResource,
    ActionType,
    FilterPlugin,
    Handle,
    NodeInfo,
    PodInfo,
    Registry,
    Status,
)
from scheduler.plugins.registry import in_tree_registry
from scheduler.sandbox import Sandbox
from scheduler.server import ServingOptions
from tests.builders import PodBuilder
from tests.integration.harness import for_api, user_client, wait_until


class OnlyNode(FilterPlugin, EnqueueExtensions):
    """Test-only: admits one node, named in its args."""

    NAME = "OnlyNode"

    def __init__(self, args: Mapping[str, Any], handle: Handle) -> None:
        node = args.get("nodeName")
        if not isinstance(node, str) or not node:
            raise ValueError("nodeName: required string")
        self.node = node

    def filter(self, state: CycleState, pod_info: PodInfo, node_info: NodeInfo) -> Status | None:
        if node_info.name == self.node:
            return None
        return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, f"node is not {self.node}")

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [ClusterEventWithHint(ClusterEvent(EventResource.NODE, ActionType.ADD, "NodeAdd"))]


def _options(kubeconfig: Path, node: str, **args: Any) -> AppOptions:
    config = parse_config({
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "leaderElection": {"leaderElect": False},
        "profiles": [{
            "schedulerName": "py-scheduler",
            "plugins": {"multiPoint": {"enabled": [{"name": "OnlyNode"}]}},
            "pluginConfig": [{"name": "OnlyNode", "args": {"nodeName": node, **args}}],
        }],
    })
    return AppOptions(config=config, config_source="<test>", kubeconfig=str(kubeconfig),
                      context=None,
                      serving=ServingOptions(host="127.0.0.1", port=0, secure=False))


def _registry() -> Registry:
    registry = in_tree_registry()
    registry.register(OnlyNode.NAME, OnlyNode)
    return registry


async def test_app_schedules_with_a_programmatically_registered_plugin(
    sandbox: Sandbox, kubeconfig: Path
) -> None:
    async with user_client(kubeconfig) as cluster:
        nodes = sorted(n["metadata"]["name"] for n in await cluster.list_nodes())
        target = nodes[-1]
        app = App(_options(kubeconfig, target), registry=_registry())
        app.prepare()
        run = asyncio.create_task(app.run(), name="test-app")
        try:
            for i in range(4):
                await cluster.create_pod(for_api(
                    PodBuilder(f"p{i}").scheduler_name("py-scheduler").req(cpu="100m").obj()))

            async def all_on_target() -> bool:
                placed = [await cluster.node_name(f"p{i}") for i in range(4)]
                return placed == [target] * 4

            await wait_until(all_on_target, timeout=15, message=f"4 pods bound to {target}")
        finally:
            app.request_stop()
            exit_code = await asyncio.wait_for(run, timeout=15)
        assert exit_code == 0


def test_the_default_registry_knows_no_test_plugin(tmp_path: Path) -> None:
    """Without the caller's registry the same config is a startup error naming the plugin."""
    app = App(_options(tmp_path / "unused", "n1"))
    with pytest.raises(StartupError, match="OnlyNode.*not registered"):
        app.prepare()


def test_plugin_args_errors_name_the_plugin(tmp_path: Path) -> None:
    app = App(_options(tmp_path / "unused", ""), registry=_registry())
    with pytest.raises(StartupError, match="OnlyNode.*nodeName"):
        app.prepare()
