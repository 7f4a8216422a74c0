"""The ElasticQuota status controller: the pure count (table-driven), and a property test
that status.used equals a recount of the running pods after any stream of pod and quota
events (creations, binds, phase changes, deletions, quota edits, malformed quotas)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.client.informer import InformerFactory
from scheduler.controllers.elasticquota import (
    ElasticQuotaController,
    compute_used,
    format_amount,
    same_usage,
)
from tests.builders import PodBuilder


def _pod(name: str, ns: str, cpu: str, *, phase: str = "Running", memory: str | None = None
         ) -> dict[str, Any]:
    b = PodBuilder(name, ns).uid(f"uid-{ns}-{name}").req(cpu=cpu, memory=memory).phase(phase)
    return b.obj()


def _quota(ns: str, *, min: Mapping[str, str] | None = None, max: Mapping[str, str] | None = None,
           used: Mapping[str, str] | None = None, rv: int = 1,
           annotations: Mapping[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "quota", "namespace": ns, "resourceVersion": str(rv)}
    if annotations:
        meta["annotations"] = dict(annotations)
    obj: dict[str, Any] = {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "ElasticQuota",
                           "metadata": meta, "spec": {}}
    if min is not None:
        obj["spec"]["min"] = dict(min)
    if max is not None:
        obj["spec"]["max"] = dict(max)
    if used is not None:
        obj["status"] = {"used": dict(used)}
    return obj


@pytest.mark.parametrize(("name", "amount", "want"), [
    ("cpu", 2000, "2"), ("cpu", 1500, "1500m"), ("cpu", 0, "0"),
    ("memory", 2 * 2**30, "2Gi"), ("memory", 1000, "1000"), ("memory", 0, "0"),
    ("example.com/gpu", 3, "3"), ("hugepages-2Mi", 4 * 2**20, "4Mi"),
])
def test_format_amount(name: str, amount: int, want: str) -> None:
    assert format_amount(name, amount) == want


@pytest.mark.parametrize(("quota", "pods", "want"), [
    pytest.param(_quota("a", min={"cpu": "1"}, max={"cpu": "4", "memory": "8Gi"}),
                 [_pod("p", "a", "500m", memory="1Gi"), _pod("q", "a", "1")],
                 {"cpu": "1500m", "memory": "1Gi"}, id="sum over min and max names"),
    pytest.param(_quota("a", max={"cpu": "4"}), [], {"cpu": "0"}, id="zero when nothing runs"),
    pytest.param(_quota("a", max={"cpu": "4"}),
                 [_pod("p", "a", "1", phase="Pending"), _pod("q", "a", "1", phase="Succeeded")],
                 {"cpu": "0"}, id="only running pods (upstream)"),
    pytest.param(_quota("a", max={"cpu": "4"}), [_pod("p", "b", "1")], {"cpu": "0"},
                 id="other namespaces do not count"),
])
def test_compute_used(quota: dict[str, Any], pods: list[dict[str, Any]], want: dict[str, str]) -> None:
    assert compute_used(quota, pods) == want


@pytest.mark.parametrize(("current", "wanted", "same"), [
    ({"cpu": "1000m"}, {"cpu": "1"}, True),
    ({"cpu": "1"}, {"cpu": "2"}, False),
    ({"cpu": "1", "memory": "0"}, {"cpu": "1"}, False),
    (None, {"cpu": "0"}, False),
    ({"cpu": "lots"}, {"cpu": "1"}, False),
])
def test_same_usage(current: Any, wanted: dict[str, str], same: bool) -> None:
    assert same_usage(current, wanted) is same


class _Api:
    """Applies status merge patches to the quota informer's store, as the API and the watch
    would (each patch comes back as a MODIFIED event)."""

    def __init__(self) -> None:
        self.factory: InformerFactory | None = None
        self.patches = 0

    async def patch(self, path: str, body: Any, *, patch_type: str = "strategic",
                    params: Any = None) -> Any:
        assert patch_type == "merge" and path.endswith("/status")
        assert self.factory is not None
        parts = path.split("/")
        ns, name = parts[-4], parts[-2]
        inf = self.factory.informer("elasticquotas")
        cur = inf.store.get_by_key(f"{ns}/{name}")
        assert cur is not None
        used = dict((cur.get("status") or {}).get("used") or {})
        for k, v in body["status"]["used"].items():
            if v is None:
                used.pop(k, None)
            else:
                used[k] = v
        new = {**cur, "status": {"used": used}}
        new["metadata"] = {**cur["metadata"],
                           "resourceVersion": str(int(cur["metadata"]["resourceVersion"]) + 1)}
        self.patches += 1
        inf._handle_event({"type": "MODIFIED", "object": new})
        return new


NAMESPACES = ("a", "b")
PHASES = ("Pending", "Running", "Succeeded")
op = st.one_of(
    st.tuples(st.just("pod"), st.sampled_from(NAMESPACES), st.integers(0, 5),
              st.sampled_from(PHASES), st.integers(1, 4)),
    st.tuples(st.just("delete"), st.sampled_from(NAMESPACES), st.integers(0, 5)),
    st.tuples(st.just("quota"), st.sampled_from(NAMESPACES), st.sampled_from(
        [{"cpu": "4"}, {"cpu": "4", "memory": "1Gi"}, {"cpu": "bad"}, None])),
    st.tuples(st.just("corrupt"), st.sampled_from(NAMESPACES)),
)


@settings(max_examples=60, deadline=None)
@given(st.lists(op, max_size=30))
async def test_status_used_equals_a_recount_after_any_event_stream(ops: list[tuple[Any, ...]]) -> None:
    api = _Api()
    factory = InformerFactory(api, resources=("pods", "elasticquotas", "namespaces"))  # type: ignore[arg-type]
    api.factory = factory
    pods_inf, quotas_inf = factory.informer("pods"), factory.informer("elasticquotas")
    controller = ElasticQuotaController(factory, api)  # type: ignore[arg-type]
    rv = 1
    for o in ops:
        rv += 1
        if o[0] == "pod":
            _, ns, i, phase, cpu = o
            pods_inf._handle_event({"type": "MODIFIED", "object": _pod(f"p{i}", ns, str(cpu), phase=phase)})
        elif o[0] == "delete":
            _, ns, i = o
            gone = pods_inf.store.get_by_key(f"{ns}/p{i}")
            if gone is not None:
                pods_inf._handle_event({"type": "DELETED", "object": gone})
        elif o[0] == "quota":
            _, ns, max_ = o
            cur = quotas_inf.store.get_by_key(f"{ns}/quota")
            if max_ is None:
                if cur is not None:
                    quotas_inf._handle_event({"type": "DELETED", "object": cur})
            else:
                used = (cur or {}).get("status", {}).get("used")
                quotas_inf._handle_event({"type": "MODIFIED", "object": _quota(
                    ns, max=max_, used=used, rv=rv * 100)})
        else:
            cur = quotas_inf.store.get_by_key(f"{o[1]}/quota")
            if cur is not None:  # someone writes a wrong status: it must be put right
                quotas_inf._handle_event({"type": "MODIFIED", "object": {
                    **cur, "status": {"used": {"cpu": "99"}},
                    "metadata": {**cur["metadata"], "resourceVersion": str(rv * 100)}}})
        await controller.run(iterations=1) if controller._dirty else None
    await controller.run(iterations=1) if controller._dirty else None
    for q in quotas_inf.store.list():
        if "bad" in str(q["spec"]):
            continue  # malformed: left alone
        recount = compute_used(q, pods_inf.store.list())
        assert same_usage(q["status"]["used"], recount), (q, recount)


def test_compute_used_counts_dra_devices_by_device_class() -> None:
    gpus = "gpu.example.com.deviceclass.resource.k8s.io/devices"
    claim = {"metadata": {"name": "c", "namespace": "a"},
             "spec": {"devices": {"requests": [{"name": "r", "exactly": {
                 "deviceClassName": "gpu.example.com", "count": 2}}]}}}
    running = _pod("p", "a", "1")
    running["spec"]["resourceClaims"] = [{"name": "r", "resourceClaimName": "c"}]
    quota = _quota("a", max={"cpu": "4", gpus: "4"})
    claims = {("a", "c"): claim}
    assert compute_used(quota, [running], claim=lambda ns, n: claims.get((ns, n))) == {
        "cpu": "1", gpus: "2"}
    assert compute_used(quota, [running]) == {"cpu": "1", gpus: "0"}  # without claims at hand
