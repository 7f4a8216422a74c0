"""Helm (the real engine, ``helm_python``) against the sandbox with its default release storage.

Helm keeps releases in Secrets written through client-go's typed client, so every release
write is a protobuf body: install, upgrade, list and uninstall exercise create, update, list
by label and delete (with protobuf DeleteOptions) as on a cluster.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from scheduler.sandbox import Sandbox, SandboxThread
from scheduler.sandbox.server import ELASTICQUOTA_CRD, PODGROUP_CRD

helm = pytest.importorskip("helm_python", reason="pip install helm-python-sdk")
REPO = Path(__file__).parents[2]
CHART = REPO / "deploy" / "helm" / "kube-py-scheduler"
NS = "kube-py-scheduler"


@pytest.fixture(scope="module")
def helm_sandbox(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SandboxThread, Path]]:
    h = Sandbox.start_in_thread(nodes=1, scheduler_prereqs=True)
    kc = h.write_kubeconfig(tmp_path_factory.mktemp("helm") / "kc")
    yield h, kc
    h.stop()


def _release_secrets(h: SandboxThread) -> dict[str, dict[str, str]]:
    reg = h.sandbox.registry
    ts = reg.ts_of("", "secrets")
    return {e.obj["metadata"]["name"]: e.obj["metadata"].get("labels", {}) for e in ts.entries()
            if e.obj.get("type") == "helm.sh/release.v1"}


@pytest.mark.skipif(not CHART.exists(), reason="chart not in this tree")
def test_helm_install_upgrade_uninstall_with_secret_storage(helm_sandbox: tuple[SandboxThread, Path]) -> None:
    h, kc = helm_sandbox
    cfg = helm.Config(kubeconfig_path=str(kc), namespace=NS)
    # the sandbox installs the PodGroup CRD at start, as scheduler-plugins would have: the
    # chart's own copy is turned off exactly as on such a cluster
    values = {"crds": {"install": False}}
    rel = cfg.install(str(CHART), "sched", values, timeout=60)
    assert rel["status"] == "deployed"
    secrets = _release_secrets(h)
    assert list(secrets) == ["sh.helm.release.v1.sched.v1"]
    labels = secrets["sh.helm.release.v1.sched.v1"]
    assert (labels["owner"], labels["name"], labels["status"], labels["version"]) == ("helm", "sched", "deployed", "1")
    rel = cfg.upgrade(str(CHART), "sched", values, timeout=60)
    secrets = _release_secrets(h)
    assert secrets["sh.helm.release.v1.sched.v1"]["status"] == "superseded"
    assert secrets["sh.helm.release.v1.sched.v2"]["status"] == "deployed"
    assert [r["name"] for r in cfg.list()] == ["sched"]
    cfg.uninstall("sched")
    assert _release_secrets(h) == {}
    assert [r["name"] for r in cfg.list()] == []


def test_packaged_crd_is_the_shipped_manifest() -> None:
    shipped = REPO / "manifests" / "crds" / "scheduling.x-k8s.io_podgroups.yaml"
    if not shipped.exists():
        pytest.skip("manifests not in this tree")
    assert PODGROUP_CRD.read_bytes() == shipped.read_bytes()


@pytest.mark.skipif(not CHART.exists(), reason="chart not in this tree")
def test_chart_crd_has_the_same_spec_and_printer_columns() -> None:
    rendered = helm.Chart.load(str(CHART)).render({}, name="r", namespace=NS)
    doc = yaml.safe_load(rendered["kube-py-scheduler/templates/crd-podgroups.yaml"])
    shipped = yaml.safe_load(PODGROUP_CRD.read_text())
    assert doc["spec"] == shipped["spec"]
    cols = [(c["name"], c["type"], c.get("priority", 0)) for c in shipped["spec"]["versions"][0]["additionalPrinterColumns"]]
    # scheduler-plugins' CRD: all six columns at priority 0
    assert cols == [("Phase", "string", 0), ("MinMember", "integer", 0), ("Running", "string", 0),
                    ("Succeeded", "string", 0), ("Failed", "string", 0), ("Age", "date", 0)]


def test_packaged_elasticquota_crd_is_the_shipped_manifest_and_the_charts() -> None:
    shipped = REPO / "manifests" / "crds" / "scheduling.x-k8s.io_elasticquotas.yaml"
    if not shipped.exists() or not CHART.exists():
        pytest.skip("manifests not in this tree")
    assert ELASTICQUOTA_CRD.read_bytes() == shipped.read_bytes()
    rendered = helm.Chart.load(str(CHART)).render({}, name="r", namespace=NS)
    doc = yaml.safe_load(rendered["kube-py-scheduler/templates/crd-elasticquotas.yaml"])
    crd = yaml.safe_load(ELASTICQUOTA_CRD.read_text())
    assert doc["spec"] == crd["spec"]
    # scheduler-plugins' CRD: short names, printer columns
    assert crd["spec"]["names"]["shortNames"] == ["eq", "eqs"]
    cols = [(c["name"], c["type"], c["jsonPath"])
            for c in crd["spec"]["versions"][0]["additionalPrinterColumns"]]
    assert cols == [("Used", "string", ".status.used"), ("Max", "string", ".spec.max"),
                    ("Age", "date", ".metadata.creationTimestamp")]
