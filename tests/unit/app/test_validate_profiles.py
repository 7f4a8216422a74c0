"""Startup validation of profiles: every pluginConfig entry is checked, enabled or not."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.app import StartupError, validate_profiles
from scheduler.config.load import parse_config
from scheduler.plugins.registry import in_tree_registry

DISABLE_IPA = {"multiPoint": {"disabled": [{"name": "InterPodAffinity"}]}}


def _config(plugins: dict[str, Any], plugin_config: list[dict[str, Any]]) -> Any:
    return parse_config({
        "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
        "profiles": [{"schedulerName": "a", "plugins": plugins, "pluginConfig": plugin_config}],
    })


@pytest.mark.parametrize(("plugins", "plugin_config", "error"), [
    pytest.param({}, [{"name": "NodeResourcesFitt", "args": {}}],
                 "pluginConfig: plugin 'NodeResourcesFitt' is not registered", id="name-typo"),
    pytest.param(DISABLE_IPA, [{"name": "InterPodAffinity",
                                "args": {"hardPodAffinityWeight": 1000}}],
                 "hardPodAffinityWeight", id="disabled-bad-args"),
    pytest.param({}, [{"name": "Coscheduling", "args": {"permitWaitingTimeSeconds": -1}}],
                 "permitWaitingTimeSeconds", id="never-enabled-bad-args"),
    pytest.param(DISABLE_IPA, [{"name": "InterPodAffinity",
                                "args": {"hardPodAffinityWeight": 5}}], None,
                 id="disabled-good-args-accepted"),
    pytest.param({}, [{"name": "Coscheduling", "args": {"permitWaitingTimeSeconds": 10}}], None,
                 id="never-enabled-good-args-accepted"),
])
def test_plugin_config_of_plugins_not_enabled_is_validated(
        plugins: dict[str, Any], plugin_config: list[dict[str, Any]], error: str | None) -> None:
    config = _config(plugins, plugin_config)
    if error is None:
        validate_profiles(config, in_tree_registry(), source="cfg.yaml")
        return
    with pytest.raises(StartupError) as info:
        validate_profiles(config, in_tree_registry(), source="cfg.yaml")
    assert error in str(info.value)
    assert str(info.value).startswith("cfg.yaml: profiles[0]: pluginConfig")
