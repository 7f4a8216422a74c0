"""NodeDeclaredFeatures end to end (GA 1.37, in the default profile): a pod that needs a node
feature binds only to a node declaring it in status.declaredFeatures, and is refused with
upstream's wording when none does."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.integration.scenarios import (
    NOT_HELPFUL,
    api,
    failed_message,
    node,
    pod,
    preemption_fit_error,
    scenario,
    wait_bound,
    wait_failed,
)

FEATURE = "UserNamespacesHostNetworkSupport"
UNSATISFIED = "node(s) didn't match Pod's required features"


def _declaring(name: str) -> dict[str, Any]:
    n = node(name)
    n["status"]["declaredFeatures"] = [FEATURE]
    return n


def _needs_feature(name: str) -> dict[str, Any]:
    # host networking inside a user namespace: the node must declare FEATURE
    return api(pod(name).set("spec.hostNetwork", True).set("spec.hostUsers", False))


async def test_pod_needing_a_feature_goes_to_the_node_declaring_it(sandbox_factory: Any,
                                                                    tmp_path: Path) -> None:
    nodes = [node("old-1"), _declaring("new"), node("old-2")]
    async with scenario(sandbox_factory, tmp_path, nodes) as env:
        await env.cluster.create_pods([_needs_feature(f"needs-{i}") for i in range(3)])
        placement = await wait_bound(env.cluster, [f"needs-{i}" for i in range(3)])
        assert set(placement.values()) == {"new"}, placement


async def test_no_node_declaring_it_is_refused_with_upstream_wording(sandbox_factory: Any,
                                                                     tmp_path: Path) -> None:
    async with scenario(sandbox_factory, tmp_path, [node("old-1"), node("old-2")]) as env:
        await env.cluster.create_pod(_needs_feature("stranded"))
        await wait_failed(env.cluster, "stranded", failed_message(
            2, [(2, UNSATISFIED)], preemption=preemption_fit_error(2, NOT_HELPFUL)))
