"""The read-only ClusterRole for ``kube-py-scheduler explain``: in manifests/explain/ and,
when asked for, in the chart, with the same rules; read-only; covering what explain lists."""

from __future__ import annotations

from scheduler.client.informer import DEFAULT_RESOURCES, RESOURCES
from tests.deploy import support
from tests.deploy.support import find

READ_VERBS = {"get", "list", "watch"}


def _explain_role() -> dict:  # type: ignore[type-arg]
    objs = [o for rel, o in support.manifest_objects() if rel.startswith("explain/")]
    return find(objs, "ClusterRole", "kube-py-scheduler-explain")


def test_the_role_is_read_only() -> None:
    for rule in _explain_role()["rules"]:
        assert set(rule["verbs"]) <= READ_VERBS, rule
        assert "*" not in rule.get("resources", []) and "*" not in rule.get("apiGroups", [])


def test_the_role_lets_explain_list_and_watch_every_informer_resource() -> None:
    grants = {(g, r, v) for rule in _explain_role()["rules"] for g in rule.get("apiGroups", [])
              for r in rule.get("resources", []) for v in rule["verbs"]}
    for name in DEFAULT_RESOURCES:
        spec = RESOURCES[name]
        group = spec.group_version.rpartition("/")[0]
        assert (group, name, "list") in grants and (group, name, "watch") in grants, name
    assert ("", "pods", "get") in grants


def test_the_role_is_not_part_of_the_scheduler_install() -> None:
    installed = [o for _, o in support.manifest_objects(examples=False)]
    assert all(o["metadata"]["name"] != "kube-py-scheduler-explain" for o in installed)
    kustomization = (support.MANIFESTS / "Kustomization").read_text()
    assert "explain/" not in kustomization


def test_the_chart_renders_the_same_rules_only_when_asked() -> None:
    assert all(o["metadata"]["name"] != "py-scheduler-kube-py-scheduler-explain"
               for o in support.render())
    objs = support.render({"explain": {"clusterRole": {"create": True}}})
    roles = [o for o in objs if o["kind"] == "ClusterRole"
             and o["metadata"]["name"].endswith("-explain")]
    assert len(roles) == 1
    assert roles[0]["rules"] == _explain_role()["rules"]
