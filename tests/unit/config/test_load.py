import textwrap
from pathlib import Path
from typing import Any

import pytest

from scheduler.config.defaults import effective_plugins
from scheduler.config.load import ConfigError, load_config_file, parse_config, parse_duration

HEAD = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"}


def cfg(**kw: Any) -> dict[str, Any]:
    return {**HEAD, **kw}


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "config.yaml"
    p.write_text(textwrap.dedent(text))
    return p


def test_load_full_file(tmp_path: Path) -> None:
    path = write(tmp_path, """\
        apiVersion: kubescheduler.config.k8s.io/v1
        kind: KubeSchedulerConfiguration
        parallelism: 8
        percentageOfNodesToScore: 50
        podInitialBackoffSeconds: 2
        podMaxBackoffSeconds: 20
        leaderElection:
          leaderElect: true
          leaseDuration: 1m30s
          renewDeadline: 30s
          retryPeriod: 500ms
          resourceName: my-sched
        clientConnection:
          qps: 20
          burst: 40
          kubeconfig: /etc/kube.conf
        profiles:
        - schedulerName: gang
          percentageOfNodesToScore: 10
          plugins:
            multiPoint:
              enabled:
              - name: Coscheduling
            score:
              disabled:
              - name: ImageLocality
              enabled:
              - name: NodeResourcesFit
                weight: 5
          pluginConfig:
          - name: NodeResourcesFit
            args:
              apiVersion: kubescheduler.config.k8s.io/v1
              kind: NodeResourcesFitArgs
              scoringStrategy:
                type: MostAllocated
          - name: Coscheduling
            args:
              permitWaitingTimeSeconds: 10
        """)
    c = load_config_file(path)
    assert (c.parallelism, c.percentage_of_nodes_to_score) == (8, 50)
    assert (c.pod_initial_backoff_seconds, c.pod_max_backoff_seconds) == (2, 20)
    le = c.leader_election
    assert (le.lease_duration_seconds, le.renew_deadline_seconds, le.retry_period_seconds) == (
        90.0, 30.0, 0.5)
    assert (le.resource_name, le.resource_namespace) == ("my-sched", "")
    assert (c.client_connection.qps, c.client_connection.burst) == (20.0, 40)
    [p] = c.profiles
    assert p.scheduler_name == "gang" and p.percentage_of_nodes_to_score == 10
    eff = effective_plugins(p)
    assert eff.multi_point.enabled[-1].name == "Coscheduling"
    assert [(x.name, x.weight) for x in eff.score.enabled] == [("NodeResourcesFit", 5)]
    assert p.plugin_config["NodeResourcesFit"]["scoringStrategy"] == {
        "type": "MostAllocated",
        "resources": [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}]}
    assert p.plugin_config["Coscheduling"] == {"permitWaitingTimeSeconds": 10}
    assert p.plugin_config["VolumeBinding"] == {"bindTimeoutSeconds": 600, "shape": [
        {"utilization": 0, "score": 10}, {"utilization": 100, "score": 0}]}


def test_minimal_config_gets_defaults() -> None:
    c = parse_config(cfg())
    assert [p.scheduler_name for p in c.profiles] == ["py-scheduler"]
    assert c.leader_election.resource_name == "py-scheduler"
    assert c.percentage_of_nodes_to_score == 0


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"kind": "KubeSchedulerConfiguration"}, "<config>: apiVersion: must be"),
        ({**HEAD, "apiVersion": "kubescheduler.config.k8s.io/v1beta3"},
         "<config>: apiVersion: must be"),
        ({**HEAD, "kind": "Other"}, "<config>: kind: must be"),
        (cfg(bogus=1), "<config>: bogus: unknown field"),
        (cfg(profiles=[{"schedulerName": "a", "pluginz": {}}]),
         "<config>: profiles[0].pluginz: unknown field"),
        (cfg(profiles=[{"schedulerName": "a", "plugins": {"scoring": {}}}]),
         "profiles[0].plugins.scoring: unknown field"),
        (cfg(profiles=[{"schedulerName": "a"}, {"schedulerName": "b", "plugins": {
            "score": {"enabled": [{"name": "X", "weight": -3}]}}}]),
         "<config>: profiles[1].plugins.score.enabled[0].weight: must be a positive integer, "
         "got -3"),
        (cfg(profiles=[{"plugins": {"score": {"enabled": [{"weight": 1}]}}}]),
         "profiles[0].plugins.score.enabled[0].name: must be a string"),
        (cfg(parallelism="8"), "parallelism: must be an integer"),
        (cfg(parallelism=True), "parallelism: must be an integer"),
        (cfg(leaderElection={"leaseDuration": 15}), "leaderElection.leaseDuration:"),
        (cfg(leaderElection={"leaseDuration": "15 s"}), "invalid duration"),
        (cfg(leaderElection={"leaderElect": "yes"}), "leaderElection.leaderElect: must be"),
        (cfg(clientConnection={"qps": "x"}), "clientConnection.qps: must be a number"),
        (cfg(profiles=[{"schedulerName": "a", "pluginConfig": [
            {"name": "NodeResourcesFit", "args": {"scoringStrategyy": {}}}]}]),
         "profiles[0].pluginConfig[0].args.scoringStrategyy: unknown field"),
        (cfg(profiles=[{"schedulerName": "a", "pluginConfig": [
            {"name": "NodeResourcesFit", "args": {"kind": "InterPodAffinityArgs"}}]}]),
         "profiles[0].pluginConfig[0].args.kind: must be"),
        (cfg(profiles=[{"schedulerName": "a", "pluginConfig": [
            {"name": "X", "args": {}}, {"name": "X", "args": {}}]}]),
         "profiles[0].pluginConfig[1].name: duplicate value 'X'"),
        (cfg(profiles="a"), "profiles: must be a list"),
        (cfg(extenders=[{"urlPrefix": "http://x", "filterVerbb": "f"}]),
         "extenders[0].filterVerbb: unknown field"),
    ],
    ids=["no-apiversion", "old-apiversion", "wrong-kind", "unknown-top", "unknown-profile",
         "unknown-point", "negative-weight", "plugin-no-name", "int-as-string", "bool-as-int",
         "duration-not-string", "duration-garbage", "bool-field", "qps-type",
         "unknown-args-field", "args-kind-mismatch", "duplicate-plugin-config",
         "profiles-type", "extender-unknown-field"],
)
def test_parse_errors(data: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as ei:
        parse_config(data)
    assert message in str(ei.value)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("apiVersion: [\n", "config.yaml: line 2, column 1: YAML syntax error"),
        ("a: b\n  c: d\n", "config.yaml: line 2, column 4: YAML syntax error"),
        ("kind: A\nkind: B\n", "config.yaml: line 2, column 1: YAML syntax error: "
                               "duplicate field 'kind'"),
        ("", "config.yaml: empty configuration"),
        ("- a\n", "config.yaml: expected a KubeSchedulerConfiguration object"),
    ],
    ids=["unclosed", "bad-indent", "duplicate-key", "empty", "list"],
)
def test_yaml_errors(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as ei:
        load_config_file(path)
    assert str(ei.value).replace(str(tmp_path) + "/", "").startswith(message), str(ei.value)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read config file"):
        load_config_file(tmp_path / "nope.yaml")


def test_error_names_file_and_field(tmp_path: Path) -> None:
    path = write(tmp_path, """\
        apiVersion: kubescheduler.config.k8s.io/v1
        kind: KubeSchedulerConfiguration
        profiles:
        - schedulerName: a
        - schedulerName: b
          plugins:
            score:
              enabled:
              - name: X
                weight: -3
        """)
    with pytest.raises(ConfigError) as ei:
        load_config_file(path)
    assert str(ei.value) == (f"{path}: profiles[1].plugins.score.enabled[0].weight: "
                             "must be a positive integer, got -3")


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("15s", 15.0), ("1m30s", 90.0), ("1.5h", 5400.0), ("300ms", 0.3), ("0", 0.0),
     ("2us", 2e-6), ("10ns", 1e-8), ("-1s", -1.0), ("1h1m1s", 3661.0)],
    ids=lambda v: str(v),
)
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "15", "s", "1d", "1.s.", "abc", "1 s"])
def test_parse_duration_errors(text: str) -> None:
    with pytest.raises(ValueError):
        parse_duration(text)


@pytest.mark.parametrize(
    ("fields", "errors"),
    [
        pytest.param(
            {"parallelism": "x", "percentageOfNodesToScore": 150,
             "profiles": [{"schedulerName": "a", "bogus": 1,
                           "plugins": {"score": {"enabled": [{"name": "X", "weight": "y"}]}}},
                          {"schedulerName": "b", "percentageOfNodesToScore": -1}]},
            [("parallelism", "must be an integer, got 'x'"),
             ("profiles[0].bogus", "unknown field"),
             ("profiles[0].plugins.score.enabled[0].weight", "must be a positive integer, got 'y'"),
             ("profiles[1].percentageOfNodesToScore", "not in valid range [0-100], got -1"),
             ("percentageOfNodesToScore", "not in valid range [0-100], got 150")],
            id="decoding-and-validation-errors-together"),
        pytest.param(
            {"leaderElection": {"leaseDuration": "soon", "retryPeriod": 5},
             "profiles": [{"schedulerName": "a",
                           "pluginConfig": [{"name": "", "args": {}},
                                            {"name": "NodeResourcesFit", "args": {"nope": 1}},
                                            {"name": "NodeResourcesFit", "args": {}}]}]},
            [("leaderElection.leaseDuration",
              "invalid duration 'soon' (expected e.g. \"15s\", \"1m30s\")"),
             ("leaderElection.retryPeriod", "must be a duration string like \"15s\", got 5"),
             ("profiles[0].pluginConfig[0].name", "required"),
             ("profiles[0].pluginConfig[1].args.nope", "unknown field"),
             ("profiles[0].pluginConfig[2].name",
              "duplicate value 'NodeResourcesFit' (also at profiles[0].pluginConfig[1])")],
            id="a-field-that-does-not-decode-is-not-also-a-validation-error"),
    ],
)
def test_every_error_is_reported_with_its_path(
        fields: dict[str, Any], errors: list[tuple[str, str]]) -> None:
    """Upstream's validation returns every field error (an aggregate), not the first."""
    data = {"apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration", **fields}
    with pytest.raises(ConfigError) as ei:
        parse_config(data, source="cfg.yaml")
    got = [(path, msg.split(" (known fields")[0]) for path, msg in ei.value.errors]
    assert got == errors
    assert str(ei.value).splitlines() == [f"cfg.yaml: {p}: {m}" for p, m in ei.value.errors]
