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


def _profiles(*profiles: dict[str, Any]) -> Any:
    return parse_config({
        "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
        "profiles": list(profiles),
    })


@pytest.mark.parametrize(("profiles", "lines"), [
    pytest.param(
        [{"schedulerName": "a",
          "plugins": {"score": {"enabled": [{"name": "NodeResourcesFitt", "weight": 2}]}},
          "pluginConfig": [
              {"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": "Bogus"}}},
              {"name": "PodTopologySpread", "args": {"defaultingType": "Nope"}}]},
         {"schedulerName": "b",
          "pluginConfig": [{"name": "Coschedulling", "args": {}}]}],
        ["cfg.yaml: profiles[0]: profile 'a': plugin 'NodeResourcesFitt': plugin is not "
         "registered (did you mean 'NodeResourcesFit'?)",
         "cfg.yaml: profiles[0]: profile 'a': plugin 'NodeResourcesFit': "
         "NodeResourcesFit.args.scoringStrategy.type: unsupported value 'Bogus'",
         "cfg.yaml: profiles[0]: profile 'a': plugin 'PodTopologySpread': "
         "PodTopologySpread.args.defaultingType: Unsupported value: 'Nope'",
         "cfg.yaml: profiles[1]: pluginConfig: plugin 'Coschedulling' is not registered (not "
         "an in-tree plugin nor an installed out-of-tree one; did you mean 'Coscheduling'?)"],
        id="every-plugin-of-every-profile"),
    pytest.param(
        [{"schedulerName": "a", "plugins": {"filter": {"enabled": [{"name": "nodeports"}]}}}],
        ["cfg.yaml: profiles[0]: profile 'a': plugin 'nodeports': plugin is not registered "
         "(did you mean 'NodePorts'?)"],
        id="case-typo"),
    pytest.param(
        [{"schedulerName": "a", "plugins": {"filter": {"enabled": [{"name": "Zzyzx"}]}}}],
        ["cfg.yaml: profiles[0]: profile 'a': plugin 'Zzyzx': plugin is not registered"],
        id="no-close-name-no-suggestion"),
])
def test_every_profile_problem_is_reported(profiles: list[dict[str, Any]],
                                           lines: list[str]) -> None:
    with pytest.raises(StartupError) as info:
        validate_profiles(_profiles(*profiles), in_tree_registry(), source="cfg.yaml")
    got = str(info.value).splitlines()
    assert len(got) == len(lines), got
    for line, expected in zip(got, lines, strict=True):
        assert line.startswith(expected), (line, expected)
    assert all(line == expected for line, expected in zip(got, lines, strict=True)
               if expected.endswith(("?)", "registered")))
