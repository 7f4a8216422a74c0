"""Every API call an ``explain`` run makes is allowed by manifests/explain/clusterrole.yaml
(recorded through a proxy, checked with RBAC's matching rules), and none of them writes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from scheduler.sandbox import Sandbox
from tests.deploy.support import MANIFESTS
from tests.integration.harness import user_client
from tests.integration.procs import (
    RecordingProxy,
    create_pod_group,
    gang_pod,
    install_crd,
    pod_group,
    rule_allows,
)
from tests.integration.procs import write_kubeconfig as kubeconfig_for
from tests.integration.test_explain import explain, pod


async def test_explain_needs_only_its_read_only_cluster_role(
    sandbox_factory: Any, tmp_path: Path
) -> None:
    sb: Sandbox = await sandbox_factory(nodes=2, simulate_kubelet=False)
    kc = sb.write_kubeconfig(tmp_path / "kc")
    async with user_client(kc) as cluster:
        await install_crd(cluster.client)
        await create_pod_group(cluster.client, pod_group("g", 2))
        await cluster.create_pod(gang_pod("g-0", "g", cpu="100"))
        await cluster.create_pod(pod("low", cpu="1", priority=0))
    proxy = await RecordingProxy(sb.url).start()
    try:
        via_proxy = kubeconfig_for(tmp_path / "kc-proxy", proxy.url)
        code, out, err = await explain("g-0", "--kubeconfig", str(via_proxy))
        assert code == 0, err
        assert "PodGroup default/g" in out
    finally:
        await proxy.stop()

    role = yaml.safe_load((MANIFESTS / "explain" / "clusterrole.yaml").read_text())
    calls = proxy.attributes()
    assert calls, "no API call recorded"
    refused = sorted({a.key() + (a.namespace, a.name) for a in calls
                      if not any(rule_allows(r, a) for r in role["rules"] if "resources" in r)})
    assert not refused, f"calls the explain role does not allow: {refused}"
    assert {a.verb for a in calls} <= {"get", "list", "watch"}
    assert {method for method, *_ in proxy.requests} == {"GET"}
