"""The Helm chart, rendered and linted by the real Helm engine (helm-python-sdk) under several
value sets.

Every rendered object must be schema-valid, the scheduler config must parse strictly, and the
chart's defaults must install the same scheduler as manifests/ (secure serving included).
"""

from __future__ import annotations

import copy
import hashlib
import re
import tomllib
from typing import Any

import pytest
import yaml
from helm_python import HelmRenderError, lint

from scheduler.config.load import parse_config_text
from tests.deploy import support
from tests.deploy.support import CHART, NAMESPACE, RELEASE, REPO, Obj, find

# Upstream rule: every profile has the same queueSort plugin with the same args.
_QUEUE_SORT = {"enabled": [{"name": "Coscheduling"}], "disabled": [{"name": "*"}]}
_COSCHEDULING = {"name": "Coscheduling", "args": {"permitWaitingTimeSeconds": 30}}
TWO_PROFILES = [
    {"schedulerName": "py-gang",
     "plugins": {"multiPoint": {"enabled": [{"name": "Coscheduling"}]},
                 "queueSort": _QUEUE_SORT},
     "pluginConfig": [_COSCHEDULING]},
    {"schedulerName": "py-binpack",
     "plugins": {"queueSort": _QUEUE_SORT},
     "pluginConfig": [_COSCHEDULING, {"name": "NodeResourcesFit", "args": {
         "scoringStrategy": {"type": "MostAllocated",
                             "resources": [{"name": "cpu", "weight": 1}]}}}]},
]

PROMETHEUS = {"kind": "ServiceAccount", "name": "prometheus-k8s", "namespace": "monitoring"}

READERS = {"kube-py-scheduler-metrics-reader", "kube-py-scheduler-debug-reader"}

VALUE_SETS: dict[str, dict[str, Any]] = {
    "defaults": {},
    "service-monitor": {"serviceMonitor": {"enabled": True, "labels": {"release": "prom"}}},
    "no-crds": {"crds": {"install": False}},
    "custom-profiles": {"profiles": TWO_PROFILES, "percentageOfNodesToScore": 50},
    "one-replica": {"replicaCount": 1},
    "extra-args": {"extraArgs": ["--stop-grace-seconds=20", "--leader-elect=true"]},
    "cert-from-secret": {"metrics": {"tls": {"secretName": "sched-tls"}},
                         "serviceMonitor": {"enabled": True, "tlsConfig": {
                             "insecureSkipVerify": False,
                             "ca": {"secret": {"name": "sched-ca", "key": "ca.crt"}},
                             "serverName": "kube-py-scheduler-metrics.scheduling.svc"}}},
    "readers": {"metrics": {"readers": [PROMETHEUS]},
                "debug": {"readers": [{"kind": "Group", "name": "sre",
                                       "apiGroup": "rbac.authorization.k8s.io"}]}},
    "authn-only": {"metrics": {"authorization": False}},
    "plain-http": {"metrics": {"secure": False, "authentication": False,
                               "authorization": False},
                   "serviceMonitor": {"enabled": True}},
    "lease-elsewhere": {"leaderElection": {"resourceName": "my-lease",
                                           "resourceNamespace": "kube-system"}},
    "placement": {"nodeSelector": {"node-role.kubernetes.io/control-plane": ""},
                  "tolerations": [{"key": "node-role.kubernetes.io/control-plane",
                                   "operator": "Exists", "effect": "NoSchedule"}],
                  "affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                      {"weight": 100, "podAffinityTerm": {
                          "topologyKey": "kubernetes.io/hostname",
                          "labelSelector": {"matchLabels": {
                              "app.kubernetes.io/name": "kube-py-scheduler"}}}}]}},
                  "podAnnotations": {"example.com/team": "sched"},
                  "env": [{"name": "EXTRA", "value": "1"}],
                  "imagePullSecrets": [{"name": "regcred"}]},
    "no-leader-election": {"replicaCount": 1, "leaderElection": {"leaderElect": False}},
    "existing-service-account": {"serviceAccount": {"create": False, "name": "sched"}},
}

RENDERED = {name: support.render(vals) for name, vals in VALUE_SETS.items()}
CASES = [(name, o) for name, objs in RENDERED.items() for o in objs]


def _id(case: tuple[str, Obj]) -> str:
    name, obj = case
    return f"{name}:{obj['kind']}/{obj['metadata']['name']}"


# --- every document is valid ------------------------------------------------------------------


@pytest.mark.parametrize("case", [c for c in CASES if c[1]["kind"] != "ServiceMonitor"],
                         ids=[_id(c) for c in CASES if c[1]["kind"] != "ServiceMonitor"])
def test_rendered_object_is_schema_valid(case: tuple[str, Obj]) -> None:
    assert support.errors(case[1]) == []


@pytest.mark.parametrize("values", list(VALUE_SETS), ids=list(VALUE_SETS))
def test_scheduler_config_parses_and_matches_rbac(values: str) -> None:
    objs = RENDERED[values]
    deploy = find(objs, "Deployment")
    cm = find(objs, "ConfigMap", support.mounted_configmap_name(deploy))
    assert cm["metadata"]["namespace"] == deploy["metadata"]["namespace"] == NAMESPACE
    text = support.config_text(cm)
    cfg = parse_config_text(text, source=f"chart ({values})")
    le = cfg.leader_election
    assert le.resource_name != "kube-scheduler"
    roles = [o for o in objs if o["kind"] == "Role"]
    if not le.leader_elect:
        assert roles == []
        return
    (role,) = roles
    assert role["metadata"]["namespace"] == le.resource_namespace
    assert support.lease_rules(role) == ({"create"}, {le.resource_name})
    binding = find(objs, "RoleBinding")
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["metadata"]["namespace"] == role["metadata"]["namespace"]
    # the pods roll when, and only when, the config changes
    annotations = deploy["spec"]["template"]["metadata"]["annotations"]
    assert annotations["checksum/config"] == \
        hashlib.sha256(text.removesuffix("\n").encode()).hexdigest()


@pytest.mark.parametrize("values", list(VALUE_SETS), ids=list(VALUE_SETS))
def test_deployment_is_hardened(values: str) -> None:
    deploy = find(RENDERED[values], "Deployment")
    support.check_deployment(deploy, replicas=VALUE_SETS[values].get("replicaCount", 2))


@pytest.mark.parametrize("values", list(VALUE_SETS), ids=list(VALUE_SETS))
def test_objects_refer_to_each_other(values: str) -> None:
    objs = RENDERED[values]
    deploy = find(objs, "Deployment")
    pod_labels = deploy["spec"]["template"]["metadata"]["labels"]
    svc = find(objs, "Service")
    assert svc["spec"]["selector"].items() <= pod_labels.items()
    (ctr,) = list(support.containers(deploy))
    assert {p["targetPort"] for p in svc["spec"]["ports"]} <= {p["name"] for p in ctr["ports"]}
    sa_name = deploy["spec"]["template"]["spec"]["serviceAccountName"]
    sas = [o for o in objs if o["kind"] == "ServiceAccount"]
    if VALUE_SETS[values].get("serviceAccount", {}).get("create", True):
        assert [s["metadata"]["name"] for s in sas] == [sa_name]
    else:
        assert sas == []
    subject = {"kind": "ServiceAccount", "name": sa_name, "namespace": NAMESPACE}
    fullname = deploy["metadata"]["name"]
    for binding in (o for o in objs if o["kind"] in ("ClusterRoleBinding", "RoleBinding")):
        kind = binding["roleRef"]["kind"]
        find(objs, kind, binding["roleRef"]["name"])
        if binding["roleRef"]["name"] in READERS:
            continue  # bound to scrapers and operators (metrics.readers, debug.readers)
        assert binding["subjects"] == [subject]
    find(objs, "ClusterRoleBinding", fullname)
    keys = [support.key(o) for o in objs]
    assert len(keys) == len(set(keys))
    for obj in objs:
        for k, v in obj["metadata"].get("labels", {}).items():
            assert len(v) <= 63, (k, v)


# --- the defaults install what manifests/ installs ----------------------------------------------


def test_defaults_match_the_plain_manifests() -> None:
    chart = RENDERED["defaults"]
    plain = [o for _, o in support.manifest_objects(examples=False)]
    # same kinds, apart from the Namespace (helm install --create-namespace)
    assert sorted(o["kind"] for o in chart) == \
        sorted(o["kind"] for o in plain if o["kind"] != "Namespace")
    # the scheduler's own role, and the readers of its port
    assert {o["metadata"]["name"]: o["rules"] for o in chart if o["kind"] == "ClusterRole"} \
        == {o["metadata"]["name"]: o["rules"] for o in plain if o["kind"] == "ClusterRole"}
    assert find(chart, "Service")["spec"]["ports"] == find(plain, "Service")["spec"]["ports"]
    for crd in ("podgroups.scheduling.x-k8s.io", "elasticquotas.scheduling.x-k8s.io"):
        assert find(chart, "CustomResourceDefinition", crd)["spec"] == \
            find(plain, "CustomResourceDefinition", crd)["spec"]
    cfg_chart = parse_config_text(support.config_text(find(chart, "ConfigMap")))
    cfg_plain = parse_config_text(support.config_text(find(plain, "ConfigMap")))
    assert cfg_chart.profiles == cfg_plain.profiles
    le_chart, le_plain = cfg_chart.leader_election, cfg_plain.leader_election
    assert le_chart.resource_namespace == NAMESPACE
    le_chart.resource_namespace = le_plain.resource_namespace
    assert le_chart == le_plain
    pod_chart = find(chart, "Deployment")["spec"]["template"]["spec"]
    pod_plain = find(plain, "Deployment")["spec"]["template"]["spec"]
    assert pod_chart["securityContext"] == pod_plain["securityContext"]
    assert pod_chart.get("priorityClassName") == pod_plain.get("priorityClassName")
    (c_chart,), (c_plain,) = pod_chart["containers"], pod_plain["containers"]
    for field in ("securityContext", "resources", "ports", "env", "volumeMounts",
                  "livenessProbe", "readinessProbe"):
        assert c_chart[field] == c_plain[field], field
    assert c_chart["image"] == c_plain["image"]
    assert set(c_plain["args"]) <= set(c_chart["args"])


def test_chart_metadata_matches_the_package() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text(encoding="utf-8"))
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert chart["apiVersion"] == "v2"
    assert chart["name"] == "kube-py-scheduler"
    assert chart["appVersion"] == project["version"]
    assert re.fullmatch(r"\d+\.\d+\.\d+", chart["version"])


# --- value sets -------------------------------------------------------------------------------


def test_service_monitor_is_off_by_default_and_scrapes_the_service_when_on() -> None:
    assert not [o for o in RENDERED["defaults"] if o["kind"] == "ServiceMonitor"]
    objs = RENDERED["service-monitor"]
    sm = find(objs, "ServiceMonitor")
    svc = find(objs, "Service")
    assert sm["apiVersion"] == "monitoring.coreos.com/v1"
    assert sm["metadata"]["labels"]["release"] == "prom"
    assert sm["spec"]["selector"]["matchLabels"].items() <= svc["metadata"]["labels"].items()
    assert sm["spec"]["namespaceSelector"]["matchNames"] == [svc["metadata"]["namespace"]]
    (ep,) = sm["spec"]["endpoints"]
    assert ep["port"] in {p["name"] for p in svc["spec"]["ports"]}
    assert ep["path"] == "/metrics"
    assert re.fullmatch(r"[0-9]+(ms|s|m|h)", ep["interval"])
    # Secure by default: HTTPS, with the Prometheus service account's own token.
    assert ep["scheme"] == "https"
    assert ep["tlsConfig"] == {"insecureSkipVerify": True}
    assert ep["bearerTokenFile"] == "/var/run/secrets/kubernetes.io/serviceaccount/token"
    assert set(ep) <= {"port", "path", "interval", "scrapeTimeout", "scheme", "tlsConfig",
                       "bearerTokenFile"}


def test_service_monitor_matches_the_optional_manifest() -> None:
    (sm_plain,) = [o for rel, o in support.manifest_objects()
                   if rel.startswith("prometheus/") and o["kind"] == "ServiceMonitor"]
    ns = sm_plain["metadata"]["namespace"]
    objs = support.render({"serviceMonitor": {"enabled": True}}, release="kube-py-scheduler",
                          namespace=ns)
    sm = find(objs, "ServiceMonitor")
    assert sm["metadata"]["name"] == sm_plain["metadata"]["name"]
    assert sm["metadata"]["namespace"] == ns
    assert sm["spec"]["endpoints"] == sm_plain["spec"]["endpoints"]
    assert sm["spec"]["namespaceSelector"] == sm_plain["spec"]["namespaceSelector"]
    assert sm_plain["spec"]["selector"]["matchLabels"].items() <= \
        find(objs, "Service")["metadata"]["labels"].items()


def test_plain_http_scrapes_without_tls_or_token() -> None:
    (ctr,) = support.containers(find(RENDERED["plain-http"], "Deployment"))
    assert "--secure-serving=false" in ctr["args"]
    for probe in ("livenessProbe", "readinessProbe"):
        assert ctr[probe]["httpGet"]["scheme"] == "HTTP"
    (ep,) = find(RENDERED["plain-http"], "ServiceMonitor")["spec"]["endpoints"]
    assert not {"scheme", "tlsConfig", "bearerTokenFile"} & set(ep)
    assert find(RENDERED["plain-http"], "Service")["spec"]["ports"][0]["appProtocol"] == "http"


def test_reader_roles_are_bound_only_to_the_given_subjects() -> None:
    for name in ("defaults", "readers"):
        objs = RENDERED[name]
        assert find(objs, "ClusterRole", "kube-py-scheduler-metrics-reader")["rules"] == [
            {"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]
        assert find(objs, "ClusterRole", "kube-py-scheduler-debug-reader")["rules"] == [
            {"nonResourceURLs": ["/debug/*"], "verbs": ["get"]}]
    assert {o["metadata"]["name"] for o in RENDERED["defaults"]
            if o["kind"] == "ClusterRoleBinding"} == {"kube-py-scheduler"}
    objs = RENDERED["readers"]
    metrics = find(objs, "ClusterRoleBinding", "kube-py-scheduler-metrics-reader")
    assert metrics["roleRef"]["name"] == "kube-py-scheduler-metrics-reader"
    assert metrics["subjects"] == [PROMETHEUS]
    debug = find(objs, "ClusterRoleBinding", "kube-py-scheduler-debug-reader")
    assert debug["roleRef"]["name"] == "kube-py-scheduler-debug-reader"
    assert debug["subjects"] == VALUE_SETS["readers"]["debug"]["readers"]


def test_crds_install_toggle() -> None:
    assert [o for o in RENDERED["defaults"] if o["kind"] == "CustomResourceDefinition"]
    keep_off = support.render({"crds": {"keep": False}})
    for name in ("podgroups.scheduling.x-k8s.io", "elasticquotas.scheduling.x-k8s.io"):
        crd = find(RENDERED["defaults"], "CustomResourceDefinition", name)
        assert crd["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
        assert "helm.sh/resource-policy" not in \
            find(keep_off, "CustomResourceDefinition", name)["metadata"]["annotations"]
    assert not [o for o in RENDERED["no-crds"] if o["kind"] == "CustomResourceDefinition"]


def test_custom_profiles_replace_the_default_profile() -> None:
    cm = find(RENDERED["custom-profiles"], "ConfigMap")
    cfg = parse_config_text(support.config_text(cm))
    assert [p.scheduler_name for p in cfg.profiles] == ["py-gang", "py-binpack"]
    assert cfg.percentage_of_nodes_to_score == 50
    assert cfg.profiles[0].plugin_config["Coscheduling"] == {"permitWaitingTimeSeconds": 30}
    strategy = cfg.profiles[1].plugin_config["NodeResourcesFit"]["scoringStrategy"]
    assert strategy["type"] == "MostAllocated"
    # the raw YAML is exactly the values given (toYaml round trip)
    raw = yaml.safe_load(support.config_text(cm))
    assert raw["profiles"] == TWO_PROFILES


def test_plugin_config_and_scheduler_name_values() -> None:
    objs = support.render({"schedulerName": "gang", "pluginConfig": [
        {"name": "Coscheduling", "args": {"permitWaitingTimeSeconds": 5}}]})
    cfg = parse_config_text(support.config_text(find(objs, "ConfigMap")))
    assert [p.scheduler_name for p in cfg.profiles] == ["gang"]
    assert cfg.profiles[0].plugin_config["Coscheduling"] == {"permitWaitingTimeSeconds": 5}


def test_config_checksum_follows_the_config_only() -> None:
    def checksum(objs: list[Obj]) -> str:
        value = find(objs, "Deployment")["spec"]["template"]["metadata"]["annotations"][
            "checksum/config"]
        assert isinstance(value, str)
        return value
    base = checksum(RENDERED["defaults"])
    assert checksum(RENDERED["one-replica"]) == base
    assert checksum(RENDERED["custom-profiles"]) != base
    assert checksum(RENDERED["lease-elsewhere"]) != base


def test_extra_args_are_appended_to_run() -> None:
    (ctr,) = support.containers(find(RENDERED["extra-args"], "Deployment"))
    assert ctr["args"][0] == "run"
    assert ctr["args"][-2:] == ["--stop-grace-seconds=20", "--leader-elect=true"]


def test_secure_serving_is_the_default() -> None:
    (ctr,) = support.containers(find(RENDERED["defaults"], "Deployment"))
    # no flag turns anything off; the daemon's defaults are kube-scheduler's
    assert not [a for a in ctr["args"] if a.startswith(
        ("--secure-serving", "--authentication-token-webhook", "--authorization-mode",
         "--tls-"))]
    for probe in ("livenessProbe", "readinessProbe"):
        assert ctr[probe]["httpGet"]["scheme"] == "HTTPS"
    assert find(RENDERED["defaults"], "Service")["spec"]["ports"][0]["appProtocol"] == "https"
    (ctr,) = support.containers(find(RENDERED["authn-only"], "Deployment"))
    assert "--authorization-mode=AlwaysAllow" in ctr["args"]
    assert "--authentication-token-webhook=false" not in ctr["args"]


def test_certificate_from_a_secret_is_mounted_and_named_by_the_flags() -> None:
    objs = RENDERED["cert-from-secret"]
    deploy = find(objs, "Deployment")
    (ctr,) = support.containers(deploy)
    args = ctr["args"]
    flags = dict(a.split("=", 1) for a in args if "=" in a)
    mounts = {m["name"]: m["mountPath"] for m in ctr["volumeMounts"]}
    vols = {v["name"]: v for v in deploy["spec"]["template"]["spec"]["volumes"]}
    tls_dir = mounts["tls"]
    assert vols["tls"]["secret"]["secretName"] == "sched-tls"
    assert flags["--tls-cert-file"] == f"{tls_dir}/tls.crt"
    assert flags["--tls-private-key-file"] == f"{tls_dir}/tls.key"
    # not nested inside the read-only ConfigMap mount
    assert not tls_dir.startswith(mounts["config"].rstrip("/") + "/")
    for probe in ("livenessProbe", "readinessProbe"):
        assert ctr[probe]["httpGet"]["scheme"] == "HTTPS"
    (ep,) = find(objs, "ServiceMonitor")["spec"]["endpoints"]
    assert ep["scheme"] == "https"
    assert ep["tlsConfig"] == VALUE_SETS["cert-from-secret"]["serviceMonitor"]["tlsConfig"]
    assert ep["bearerTokenFile"] == "/var/run/secrets/kubernetes.io/serviceaccount/token"


def test_placement_values_reach_the_pod() -> None:
    vals = VALUE_SETS["placement"]
    deploy = find(RENDERED["placement"], "Deployment")
    pod = deploy["spec"]["template"]["spec"]
    for field in ("nodeSelector", "tolerations", "affinity", "imagePullSecrets"):
        assert pod[field] == vals[field]
    assert deploy["spec"]["template"]["metadata"]["annotations"]["example.com/team"] == "sched"
    (ctr,) = pod["containers"]
    assert ctr["env"][-1] == {"name": "EXTRA", "value": "1"}
    # none of them by default
    default_pod = find(RENDERED["defaults"], "Deployment")["spec"]["template"]["spec"]
    assert not {"nodeSelector", "tolerations", "affinity", "imagePullSecrets"} & set(default_pod)


def test_image_values() -> None:
    objs = support.render({"image": {"repository": "registry.example.com/sched", "tag": "1.2.3",
                                     "pullPolicy": "Always"}})
    (ctr,) = support.containers(find(objs, "Deployment"))
    assert ctr["image"] == "registry.example.com/sched:1.2.3"
    assert ctr["imagePullPolicy"] == "Always"


def test_names_follow_the_release_and_stay_within_dns_limits() -> None:
    objs = support.render(release="prod")
    assert find(objs, "Deployment")["metadata"]["name"] == "prod-kube-py-scheduler"
    long_release = "r" * 60
    objs = support.render(release=long_release)
    for obj in objs:
        name = obj["metadata"]["name"]
        limit = 63 if obj["kind"] in ("Service", "Deployment") else 253
        assert len(name) <= limit and not name.endswith("-"), (obj["kind"], name)
    objs = support.render({"fullnameOverride": "sched"})
    assert find(objs, "Service")["metadata"]["name"] == "sched-metrics"


@pytest.mark.parametrize(("values", "message"), [
    ({"image": {"repository": ""}}, "image.repository is required"),
    ({"leaderElection": {"resourceName": "kube-scheduler"}}, "must not be kube-scheduler"),
    ({"metrics": {"secure": False}}, "metrics.authentication requires metrics.secure"),
    ({"metrics": {"authentication": False}},
     "metrics.authorization requires metrics.authentication"),
    ({"metrics": {"secure": False, "authentication": False, "authorization": False,
                  "tls": {"secretName": "x"}}}, "metrics.tls.secretName requires"),
])
def test_bad_values_fail_the_render(values: dict[str, Any], message: str) -> None:
    with pytest.raises(HelmRenderError, match=message):
        support.render(copy.deepcopy(values))


def test_notes_tell_how_to_opt_in() -> None:
    notes = support.render_files({"profiles": TWO_PROFILES})[
        "kube-py-scheduler/templates/NOTES.txt"]
    assert "schedulerName: py-gang" in notes
    assert "get lease py-scheduler" in notes
    assert "over HTTPS, to bearer tokens whose user may `get` the path" in notes
    assert "kube-py-scheduler-metrics-reader (metrics.readers)" in notes
    plain = support.render_files({"metrics": {"secure": False, "authentication": False,
                                              "authorization": False}})[
        "kube-py-scheduler/templates/NOTES.txt"]
    assert "over plain HTTP, without authentication." in plain


@pytest.mark.parametrize("values", [
    {"securityContext": {"readOnlyRootFilesystem": False}},
    {"podSecurityContext": {"runAsNonRoot": False}},
    {"resources": {"requests": None}},
    {"replicaCount": 3},
])
def test_hardening_check_rejects_weakened_values(values: dict[str, Any]) -> None:
    deploy = find(support.render(values), "Deployment")
    with pytest.raises(AssertionError):
        support.check_deployment(deploy)


@pytest.mark.parametrize("values", list(VALUE_SETS), ids=list(VALUE_SETS))
def test_helm_lint_strict_finds_nothing(values: str) -> None:
    report = lint(CHART, copy.deepcopy(VALUE_SETS[values]), strict=True, namespace=NAMESPACE)
    assert report["errors"] == []
    # severity 1 (info) is only "icon is recommended"; no warning (2) or error (3)
    assert [m for m in report["messages"] if m["severity"] >= 2] == [], report["messages"]


def test_helm_lint_reports_a_broken_value() -> None:
    # (lint renders `fail` leniently, as `helm lint` does: the render tests above cover those)
    report = lint(CHART, {"podAnnotations": "not-a-map"}, strict=True, namespace=NAMESPACE)
    assert any(m["path"] == "templates/deployment.yaml" and "unable to parse YAML" in m["error"]
               for m in report["messages"] if m["severity"] == 3), report
