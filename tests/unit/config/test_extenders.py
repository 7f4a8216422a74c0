"""The ``extenders`` section: decoding, defaulting and validation as upstream's v1."""

import base64
from pathlib import Path
from typing import Any

import pytest

from scheduler.config.load import ConfigError, parse_config, parse_config_text
from scheduler.config.types import DEFAULT_EXTENDER_TIMEOUT_SECONDS

HEAD = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"}


def cfg(*extenders: dict[str, Any], **kw: Any) -> dict[str, Any]:
    return {**HEAD, "extenders": list(extenders), **kw}


# HAMi's scheduler config (filter + bind, nodeCacheCapable, managed GPU resources), as its
# Helm chart renders it for kube-scheduler.
HAMI = """\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection:
  leaderElect: false
profiles:
- schedulerName: hami-scheduler
extenders:
- urlPrefix: "https://127.0.0.1:443"
  filterVerb: filter
  bindVerb: bind
  enableHTTPS: true
  weight: 1
  nodeCacheCapable: true
  httpTimeout: 30s
  managedResources:
  - name: nvidia.com/gpu
    ignoredByScheduler: true
  - name: nvidia.com/gpumem
    ignoredByScheduler: true
  - name: nvidia.com/gpucores
    ignoredByScheduler: true
"""

# Intel Telemetry Aware Scheduling's extender entry (filter + prioritize over full Node
# objects, ignorable, client certificate).
TAS = """\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: /etc/kubernetes/scheduler.conf
extenders:
  - urlPrefix: "https://tas-service.default.svc.cluster.local:9001"
    prioritizeVerb: "scheduler/prioritize"
    filterVerb: "scheduler/filter"
    weight: 1
    enableHTTPS: true
    managedResources:
      - name: "telemetry/scheduling"
        ignoredByScheduler: true
    ignorable: true
    tlsConfig:
      insecure: false
      certFile: "{cert}"
      keyFile: "{key}"
"""


def test_hami_config_loads_unchanged() -> None:
    c = parse_config_text(HAMI)
    (e,) = c.extenders
    assert (e.url_prefix, e.filter_verb, e.bind_verb, e.prioritize_verb) == (
        "https://127.0.0.1:443", "filter", "bind", "")
    assert e.enable_https and e.node_cache_capable and not e.ignorable
    assert e.http_timeout_seconds == 30.0
    assert [(r.name, r.ignored_by_scheduler) for r in e.managed_resources] == [
        ("nvidia.com/gpu", True), ("nvidia.com/gpumem", True), ("nvidia.com/gpucores", True)]
    # ignoredByScheduler resources are not checked by NodeResourcesFit in any profile
    args = c.profiles[0].plugin_config["NodeResourcesFit"]
    assert args["ignoredResources"] == ["nvidia.com/gpu", "nvidia.com/gpumem",
                                        "nvidia.com/gpucores"]


def test_tas_config_loads_unchanged(tmp_path: Path) -> None:
    cert, key = tmp_path / "client.crt", tmp_path / "client.key"
    cert.write_text("x")
    key.write_text("x")
    c = parse_config_text(TAS.format(cert=cert, key=key))
    (e,) = c.extenders
    assert (e.filter_verb, e.prioritize_verb, e.weight) == (
        "scheduler/filter", "scheduler/prioritize", 1)
    assert e.ignorable and not e.node_cache_capable
    assert e.tls_config is not None and e.tls_config.cert_file == str(cert)
    assert e.http_timeout_seconds == DEFAULT_EXTENDER_TIMEOUT_SECONDS


@pytest.mark.parametrize(
    ("timeout", "seconds"),
    [(None, 5.0), ("0s", 5.0), ("0", 5.0), ("250ms", 0.25), ("1m30s", 90.0)],
)
def test_http_timeout_defaults_and_parses(timeout: str | None, seconds: float) -> None:
    ext: dict[str, Any] = {"urlPrefix": "http://127.0.0.1:1", "filterVerb": "f"}
    if timeout is not None:
        ext["httpTimeout"] = timeout
    assert parse_config(cfg(ext)).extenders[0].http_timeout_seconds == seconds


def test_tls_data_is_base64_decoded() -> None:
    pem = b"-----BEGIN CERTIFICATE-----\nabc\n-----END CERTIFICATE-----\n"
    c = parse_config(cfg({"urlPrefix": "https://x", "tlsConfig": {
        "caData": base64.b64encode(pem).decode(), "serverName": "ext.local"}}))
    tls = c.extenders[0].tls_config
    assert tls is not None and tls.ca_data == pem and tls.server_name == "ext.local"


def test_extender_ignored_resources_replace_profile_ones() -> None:
    c = parse_config(cfg(
        {"urlPrefix": "http://x", "managedResources": [
            {"name": "example.com/a", "ignoredByScheduler": True},
            {"name": "example.com/b"}]},
        profiles=[{"schedulerName": "s", "pluginConfig": [
            {"name": "NodeResourcesFit", "args": {"ignoredResources": ["example.com/z"]}}]}],
    ))
    assert c.profiles[0].plugin_config["NodeResourcesFit"]["ignoredResources"] == [
        "example.com/a"]


U = "http://127.0.0.1:1"


@pytest.mark.parametrize(
    ("extenders", "message"),
    [
        ([{"urlPrefix": U, "prioritizeVerb": "p"}],
         "extenders[0].weight: must have a positive weight applied to it, got 0"),
        ([{"urlPrefix": U, "prioritizeVerb": "p", "weight": -2}],
         "extenders[0].weight: must have a positive weight"),
        ([{"urlPrefix": U, "bindVerb": "b"}, {"urlPrefix": U, "bindVerb": "b"}],
         "extenders: only one extender can implement bind, found 2"),
        ([{"urlPrefix": U, "managedResources": [{"name": "cpu"}]}],
         "extenders[0].managedResources[0].name: 'cpu' is not a valid extended resource"),
        ([{"urlPrefix": U, "managedResources": [{"name": "a.io/x"}, {"name": "a.io/x"}]}],
         "extenders[0].managedResources[1].name: duplicate extender managed resource name"),
        ([{"filterVerb": "f"}], "extenders[0].urlPrefix: required"),
        ([{"urlPrefix": "ftp://x"}], "extenders[0].urlPrefix: must be an http:// or https://"),
        ([{"urlPrefix": U, "httpTimeout": "5 seconds"}],
         "extenders[0].httpTimeout: invalid duration"),
        ([{"urlPrefix": U, "httpTimeout": "-1s"}], "extenders[0].httpTimeout: must not be"),
        ([{"urlPrefix": U, "weight": "1"}], "extenders[0].weight: must be a 64-bit integer"),
        ([{"urlPrefix": U, "nodeCacheCapable": "true"}],
         "extenders[0].nodeCacheCapable: must be true or false"),
        ([{"urlPrefix": U, "tlsConfig": {"caData": "not base64!"}}],
         "extenders[0].tlsConfig.caData: must be base64-encoded"),
        ([{"urlPrefix": U, "tlsConfig": {"certFile": "/nonexistent/c"}}],
         "extenders[0].tlsConfig: a client certificate needs both"),
        ([{"urlPrefix": U, "tlsConfig": {"caFile": "/nonexistent/ca"}}],
         "extenders[0].tlsConfig.caFile: cannot read"),
        ([{"urlPrefix": U, "tlsConfig": {"insecure": True, "caData": "eA=="}}],
         "extenders[0].tlsConfig: specifying a root certificates file with the insecure"),
        ([{"urlPrefix": U, "tlsConfig": {"insecurE": True}}],
         "extenders[0].tlsConfig.insecurE: unknown field"),
        ([{"urlPrefix": U, "managedResources": [{"name": "a.io/x", "ignored": True}]}],
         "extenders[0].managedResources[0].ignored: unknown field"),
    ],
    ids=["no-weight", "negative-weight", "two-binders", "native-resource", "duplicate-resource",
         "no-url", "bad-scheme", "bad-duration", "negative-timeout", "weight-type", "bool-type",
         "bad-base64", "cert-without-key", "unreadable-ca", "insecure-with-ca",
         "tls-unknown-field", "resource-unknown-field"],
)
def test_extender_errors_name_the_field(extenders: list[dict[str, Any]], message: str) -> None:
    with pytest.raises(ConfigError) as ei:
        parse_config(cfg(*extenders))
    assert message in str(ei.value)
