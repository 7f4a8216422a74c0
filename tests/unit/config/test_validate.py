from typing import Any

import pytest

from scheduler.config.defaults import default_config
from scheduler.config.load import ConfigError, parse_config
from scheduler.config.types import Extender, PluginRef, PluginSet
from scheduler.config.validate import validate_config

HEAD = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"}


def cfg(**kw: Any) -> dict[str, Any]:
    return {**HEAD, **kw}


@pytest.mark.parametrize(
    ("data", "path", "message"),
    [
        (cfg(profiles=[{"schedulerName": "a"}, {"schedulerName": "a"}]),
         "profiles[1].schedulerName", "duplicate value 'a'"),
        (cfg(profiles=[{"schedulerName": "a"}, {}]), "profiles[1].schedulerName", "required"),
        (cfg(profiles=[{"schedulerName": ""}]), "profiles[0].schedulerName", "required"),
        (cfg(percentageOfNodesToScore=101), "percentageOfNodesToScore", "[0-100]"),
        (cfg(profiles=[{"schedulerName": "a", "percentageOfNodesToScore": -1}]),
         "profiles[0].percentageOfNodesToScore", "[0-100]"),
        (cfg(parallelism=0), "parallelism", "greater than zero"),
        (cfg(podInitialBackoffSeconds=0), "podInitialBackoffSeconds", "greater than 0"),
        (cfg(podInitialBackoffSeconds=5, podMaxBackoffSeconds=4), "podMaxBackoffSeconds",
         "greater than or equal"),
        (cfg(leaderElection={"leaseDuration": "10s", "renewDeadline": "10s"}),
         "leaderElection.leaseDuration", "greater than renewDeadline"),
        (cfg(leaderElection={"renewDeadline": "2s", "retryPeriod": "2s"}),
         "leaderElection.renewDeadline", "greater than retryPeriod"),
        (cfg(leaderElection={"retryPeriod": "-1s"}), "leaderElection.retryPeriod",
         "greater than zero"),
        (cfg(leaderElection={"resourceLock": "endpoints"}), "leaderElection.resourceLock",
         "leases"),
        (cfg(clientConnection={"qps": -1}), "clientConnection.qps", "non-negative"),
        (cfg(clientConnection={"burst": -1}), "clientConnection.burst", "non-negative"),
        (cfg(profiles=[{"schedulerName": "a"},
                       {"schedulerName": "b", "plugins": {"queueSort": {
                           "enabled": [{"name": "Coscheduling"}],
                           "disabled": [{"name": "*"}]}}}]),
         "profiles[1].plugins.queueSort", "same for all profiles"),
        (cfg(profiles=[{"schedulerName": "a", "plugins": {"queueSort": {
            "enabled": [{"name": "A"}, {"name": "B"}]}}}]),
         "profiles[0].plugins.queueSort.enabled", "only one queue sort plugin"),
        (cfg(profiles=[
            {"schedulerName": "a", "plugins": {"queueSort": {"enabled": [{"name": "Q"}]}},
             "pluginConfig": [{"name": "Q", "args": {"x": 1}}]},
            {"schedulerName": "b", "plugins": {"queueSort": {"enabled": [{"name": "Q"}]}},
             "pluginConfig": [{"name": "Q", "args": {"x": 2}}]}]),
         "profiles[1].pluginConfig", "queueSort args"),
        (cfg(profiles=[{"schedulerName": "a", "plugins": {"multiPoint": {
            "disabled": [{"name": "DefaultBinder"}]}}}]),
         "profiles[0].plugins.bind", "at least one bind plugin"),
        (cfg(profiles=[{"schedulerName": "a", "plugins": {"bind": {
            "disabled": [{"name": "*"}]}}}]),
         "profiles[0].plugins.bind", "at least one bind plugin"),
    ],
    ids=["dup-names", "second-profile-unnamed", "empty-name", "pct-top", "pct-profile",
         "parallelism", "initial-backoff", "max-backoff", "lease-vs-renew", "renew-vs-retry",
         "retry-negative", "resource-lock", "qps", "burst", "queue-sort-differs",
         "two-queue-sorts", "queue-sort-args-differ", "no-binder-multipoint",
         "no-binder-bind-star"],
)
def test_validation_errors(data: dict[str, Any], path: str, message: str) -> None:
    with pytest.raises(ConfigError) as ei:
        parse_config(data, source="c.yaml")
    assert any(p == path and message in m for p, m in ei.value.errors), ei.value.errors
    assert f"c.yaml: {path}: " in str(ei.value)


@pytest.mark.parametrize(
    "data",
    [
        cfg(),
        cfg(profiles=[{"schedulerName": "a"}, {"schedulerName": "b"}]),
        cfg(leaderElection={"leaderElect": False, "leaseDuration": "1s", "renewDeadline": "5s"}),
        cfg(profiles=[{"schedulerName": "a", "plugins": {
            "bind": {"enabled": [{"name": "MyBinder"}], "disabled": [{"name": "*"}]}}}]),
        cfg(profiles=[{"schedulerName": "a", "plugins": {"multiPoint": {
            "enabled": [{"name": "MyBinder"}], "disabled": [{"name": "DefaultBinder"}]}}}]),
        cfg(percentageOfNodesToScore=0, profiles=[{"schedulerName": "a",
                                                   "percentageOfNodesToScore": 100}]),
        cfg(profiles=[{"schedulerName": "a", "plugins": {"score": {
            "enabled": [{"name": "X", "weight": 0}]}}}]),
    ],
    ids=["minimal", "two-profiles", "no-leader-election", "custom-binder",
         "custom-multipoint-binder", "pct-bounds", "zero-weight-means-default"],
)
def test_valid_configs(data: dict[str, Any]) -> None:
    parse_config(data)


def test_validate_programmatic_config() -> None:
    c = default_config()
    assert validate_config(c) == []
    c.profiles[0].plugins.score = PluginSet(enabled=[PluginRef("X", -1)])
    c.extenders = [Extender(url_prefix="x")]
    c.profiles.append(c.profiles[0])
    paths = [p for p, _ in validate_config(c)]
    assert "profiles[0].plugins.score.enabled[0].weight" in paths
    assert "profiles[1].schedulerName" in paths
    assert "extenders[0].urlPrefix" in paths
    c.profiles = []
    assert ("profiles", "at least one profile is required") in validate_config(c)
