"""Shared helpers for the deployment-artifact tests: loading YAML, schema validation, the chart
(rendered by the real Helm engine).

Built-in kinds are validated offline with ``kubernetes_validate`` (it ships the JSON schemas
of each Kubernetes release inside the package); custom resources of our own CRDs are
validated against the CRD's ``openAPIV3Schema`` with ``jsonschema``, made strict the way
``kubectl apply --validate=strict`` is (unknown fields are errors).
"""

from __future__ import annotations

import copy
import functools
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import kubernetes_validate.utils as kvutils
import yaml
from referencing import Registry, Resource


REPO = Path(__file__).resolve().parents[2]
MANIFESTS = REPO / "manifests"
CHART = REPO / "deploy" / "helm" / "kube-py-scheduler"
# The Kubernetes minor the artifacts must be valid for (the newest kubernetes_validate ships).
K8S_VERSION = kubernetes_validate.latest_version()

Obj = dict[str, Any]
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when built with it: 10x faster


def load_docs(text: str) -> list[Obj]:
    """All non-empty YAML documents of a stream (comments-only documents are dropped)."""
    return [d for d in yaml.load_all(text, Loader=_Loader) if d is not None]


def manifest_files() -> list[Path]:
    """Every YAML file under manifests/, recursively (the kustomization is named `Kustomization`,
    without an extension, so that `kubectl apply -f manifests/` does not try to apply it)."""
    return sorted(p for p in MANIFESTS.rglob("*") if p.suffix in (".yaml", ".yml")
                  and p.name != "kustomization.yaml")


# Folders of manifests/ that `kubectl apply -k manifests/` does not install: examples, the
# Prometheus Operator objects (they need its CRDs), and explain's read-only role (for users).
OPTIONAL = ("examples/", "prometheus/", "explain/")


def manifest_objects(*, examples: bool = True) -> list[tuple[str, Obj]]:
    """(relative path, object) for every document in manifests/ (``examples=False``: only what
    the kustomization installs)."""
    out = []
    for path in manifest_files():
        rel = path.relative_to(MANIFESTS).as_posix()
        if not examples and rel.startswith(OPTIONAL):
            continue
        out += [(rel, doc) for doc in load_docs(path.read_text(encoding="utf-8"))]
    return out


def key(obj: Mapping[str, Any]) -> tuple[str, str, str, str]:
    meta = obj.get("metadata") or {}
    return (obj["apiVersion"], obj["kind"], meta.get("namespace", ""), meta["name"])


def find(objs: list[Obj], kind: str, name: str | None = None) -> Obj:
    hits = [o for o in objs if o["kind"] == kind
            and (name is None or o["metadata"]["name"] == name)]
    assert len(hits) == 1, f"expected exactly one {kind} {name or ''}, found {len(hits)}"
    return hits[0]


# --- schema validation ---------------------------------------------------------------------


def _crds() -> dict[tuple[str, str], Obj]:
    """(apiVersion, kind) -> strict JSON schema, for every CRD in manifests/crds."""
    out = {}
    for path in sorted((MANIFESTS / "crds").glob("*.yaml")):
        for crd in load_docs(path.read_text(encoding="utf-8")):
            spec = crd["spec"]
            for ver in spec["versions"]:
                schema = _strict(copy.deepcopy(ver["schema"]["openAPIV3Schema"]))
                out[(f"{spec['group']}/{ver['name']}", spec["names"]["kind"])] = schema
    return out


@functools.cache
def crd_schemas() -> dict[tuple[str, str], Obj]:
    return _crds()


def _strict(schema: Any) -> Any:
    """Close every object schema that lists properties, as server-side strict validation does."""
    if isinstance(schema, dict):
        if schema.get("type") == "object" and "properties" in schema \
                and "additionalProperties" not in schema \
                and not schema.get("x-kubernetes-preserve-unknown-fields"):
            schema["additionalProperties"] = False
        for v in schema.values():
            _strict(v)
    elif isinstance(schema, list):
        for v in schema:
            _strict(v)
    return schema


_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def validate(obj: Obj) -> None:
    """Validate one object strictly; raises (jsonschema or kubernetes_validate) on error."""
    crd_schema = crd_schemas().get((obj.get("apiVersion", ""), obj.get("kind", "")))
    if crd_schema is not None:
        jsonschema.Draft202012Validator(crd_schema).validate(obj)
        meta = obj["metadata"]
        name = meta["name"]
        assert len(name) <= 253 and _DNS1123_SUBDOMAIN.match(name), f"bad name {name!r}"
        return
    _k8s_validator(obj["apiVersion"], obj["kind"]).validate(obj)


# kubernetes_validate.validate() re-reads ~2 MB of JSON schema per call; these tests validate a
# few hundred objects, so build each kind's validator once from the same shipped schemas, the
# same way (test_manifests checks that both agree).
_SCHEMA_DIR = f"kubernetes-json-schema/v{K8S_VERSION}-local-strict"


@functools.cache
def _definitions() -> Any:
    return kvutils.schema_contents(f"{_SCHEMA_DIR}/_definitions.json", K8S_VERSION)


@functools.cache
def _k8s_validator(api_version: str, kind: str) -> jsonschema.Draft202012Validator:
    group_version = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    try:
        schema = kvutils.schema_contents(
            f"{_SCHEMA_DIR}/{kind.lower()}-{group_version}.json", K8S_VERSION)
    except FileNotFoundError:
        raise kubernetes_validate.SchemaNotFoundError(
            version=K8S_VERSION, kind=kind, api_version=api_version) from None
    registry: Registry[Any] = Resource.from_contents(schema) @ Registry()
    registry = Resource.from_contents(_definitions()) @ registry
    return jsonschema.Draft202012Validator(schema, registry=registry)


def errors(obj: Obj) -> list[str]:
    """Validation failures as strings (empty when valid), for parametrised assertions."""
    try:
        validate(obj)
    except jsonschema.ValidationError as exc:
        path = ".".join(str(p) for p in exc.absolute_path)
        return [f"{path}: {exc.message}"]
    return []


# --- the chart -------------------------------------------------------------------------------

RELEASE = "kube-py-scheduler"
NAMESPACE = "scheduling"


def split_rendered(rendered: Mapping[str, str]) -> list[tuple[str, Obj]]:
    """(template path, object) for each manifest document, as helm splits its output.

    NOTES.txt is not a manifest.
    """
    out = []
    for path, text in rendered.items():
        if path.endswith("NOTES.txt"):
            continue
        for part in re.split(r"(?m)^---\s*$", text):
            for doc in load_docs(part):
                out.append((path, doc))
    return out


@functools.cache
def chart() -> Any:
    """The chart, loaded once by the real Helm engine (helm-python-sdk: Helm v4's Go SDK)."""
    from helm_python import Chart

    return Chart.load(CHART)


def render_files(values: Mapping[str, Any] | None = None, *, release: str = RELEASE,
                 namespace: str = NAMESPACE) -> dict[str, str]:
    """Template path -> rendered text, as ``helm template`` (an install) renders it."""
    rendered = chart().render(copy.deepcopy(dict(values or {})), name=release,
                              namespace=namespace, is_install=True)
    return dict(rendered)


def render(values: Mapping[str, Any] | None = None, *, release: str = RELEASE,
           namespace: str = NAMESPACE) -> list[Obj]:
    return [o for _, o in split_rendered(render_files(values, release=release,
                                                      namespace=namespace))]


def containers(deploy: Obj) -> Iterator[Obj]:
    yield from deploy["spec"]["template"]["spec"]["containers"]


# --- properties both the manifests and the chart must have ----------------------------------

CONFIG_KEY = "config.yaml"


def check_deployment(deploy: Obj, *, replicas: int = 2) -> None:
    """Two replicas, health probes, hardened security context, resource requests."""
    spec = deploy["spec"]
    assert spec.get("replicas") == replicas
    pod = spec["template"]["spec"]
    assert spec["selector"]["matchLabels"].items() <= \
        spec["template"]["metadata"]["labels"].items()
    psc = pod.get("securityContext", {})
    assert psc.get("runAsNonRoot") is True
    assert psc.get("seccompProfile", {}).get("type") == "RuntimeDefault"
    (ctr,) = list(containers(deploy))
    assert ctr["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert ctr["readinessProbe"]["httpGet"]["path"] == "/readyz"
    ports = {p["name"]: p["containerPort"] for p in ctr["ports"]}
    for probe in ("livenessProbe", "readinessProbe"):
        assert ctr[probe]["httpGet"]["port"] in ports, probe
    sc = ctr["securityContext"]
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["capabilities"]["drop"] == ["ALL"]
    assert sc.get("privileged") is not True
    requests = ctr.get("resources", {}).get("requests", {})
    assert requests.get("cpu") and requests.get("memory")
    # the config file the args point at comes from a mounted ConfigMap
    config_arg = next(a for a in ctr["args"] if a.startswith("--config="))
    config_path = config_arg.removeprefix("--config=")
    mounts = {m["name"]: m["mountPath"] for m in ctr["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    cfg_mount = next(name for name, path in mounts.items()
                     if config_path == f"{path.rstrip('/')}/{CONFIG_KEY}")
    assert "configMap" in volumes[cfg_mount]
    # a read-only root filesystem needs a writable /tmp for Python
    assert "/tmp" in mounts.values()
    assert ctr["args"][0] == "run"


def config_text(configmap: Obj) -> str:
    text = configmap["data"][CONFIG_KEY]
    assert isinstance(text, str)
    return text


def mounted_configmap_name(deploy: Obj) -> str:
    (ctr,) = list(containers(deploy))
    config_path = next(a for a in ctr["args"] if a.startswith("--config=")).split("=", 1)[1]
    mount = next(m for m in ctr["volumeMounts"]
                 if config_path == f"{m['mountPath'].rstrip('/')}/{CONFIG_KEY}")
    vol = next(v for v in deploy["spec"]["template"]["spec"]["volumes"]
               if v["name"] == mount["name"])
    name = vol["configMap"]["name"]
    assert isinstance(name, str)
    return name


def lease_rules(role: Obj) -> tuple[set[str], set[str]]:
    """(verbs allowed on any lease, names allowed get/update) of a leader-election Role."""
    any_verbs: set[str] = set()
    named: set[str] = set()
    for rule in role["rules"]:
        if "leases" not in rule.get("resources", []):
            continue
        assert rule.get("apiGroups") == ["coordination.k8s.io"]
        if rule.get("resourceNames"):
            if {"get", "update"} <= set(rule["verbs"]):
                named |= set(rule["resourceNames"])
        else:
            any_verbs |= set(rule["verbs"])
    return any_verbs, named
