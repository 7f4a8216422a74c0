"""DynamicResources against the sandbox over HTTP: a pod with a ResourceClaim lands where the
device is, the claim shows the allocation and reservation as kube-scheduler writes them, and a
pod whose claim cannot get a device waits with kube-scheduler's words."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.builders import PodBuilder
from tests.integration.dra import CLAIMS, dra_cluster, pod, strip
from tests.integration.harness import for_api, wait_until
from tests.unit.dra.builders import (
    DRIVER,
    claim,
    device,
    exactly,
    resource_slice,
    template,
    template_pod,
)


async def test_claim_allocated_on_the_device_node_and_second_pod_waits(
    sandbox_factory: Any, tmp_path: Path
) -> None:
    async with dra_cluster(sandbox_factory, tmp_path, nodes=3) as env:
        cluster, api = env.cluster, env.api
        gpu_node = env.nodes[1]
        await env.publish(resource_slice("gpus", node=gpu_node, devices=[device("gpu-0")]))
        await env.create("resourceclaims", *(claim(name, exactly("gpu", "gpu"))
                                             for name in ("first", "second")))
        await cluster.create_pod(pod("p1", "first"))
        await wait_until(lambda: cluster.node_name("p1"), timeout=20, message="p1 bound")
        assert await cluster.node_name("p1") == gpu_node

        got = await api.get(f"{CLAIMS}/first")
        assert got["metadata"]["finalizers"] == ["resource.kubernetes.io/delete-protection"]
        assert got["status"]["allocation"]["devices"]["results"] == [
            {"request": "gpu", "driver": DRIVER, "pool": gpu_node, "device": "gpu-0"}]
        assert got["status"]["allocation"]["nodeSelector"] == {"nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In",
                              "values": [gpu_node]}]}]}
        p1 = await cluster.get_pod("p1")
        assert p1 is not None
        assert got["status"]["reservedFor"] == [
            {"resource": "pods", "name": "p1", "uid": p1["metadata"]["uid"]}]

        # the only device is taken: the second pod waits with upstream's words
        await cluster.create_pod(pod("p2", "second"))
        await wait_until(lambda: env.failed("p2"), timeout=20, message="p2 FailedScheduling")
        [note, *_] = await env.failed("p2")
        assert "cannot allocate all claims" in note, note
        assert note.startswith("0/3 nodes are available:"), note
        p2 = await cluster.get_pod("p2")
        assert p2 is not None and not p2["spec"].get("nodeName")

        # the sandbox's resourceclaim controller releases the first claim when its pod goes
        # (a release written here as well would race it into a 409): the second pod gets
        # the device
        await cluster.delete_pod("p1")
        await wait_until(lambda: cluster.node_name("p2"), timeout=30,
                         message="p2 bound once the device is free")
        assert await cluster.node_name("p2") == gpu_node


async def test_template_pods_get_distinct_devices_and_deleting_one_frees_its_device(
    sandbox_factory: Any, tmp_path: Path
) -> None:
    # 4 nodes, 2 GPUs on the first node only (the simulated driver), the resourceclaim
    # controller making one claim per pod from the template
    names = ["t1", "t2", "t3"]
    async with dra_cluster(sandbox_factory, tmp_path, nodes=4,
                           dra_devices="gpu=2:nodes=1") as env:
        cluster = env.cluster
        gpu_node = env.nodes[0]
        await env.create("resourceclaimtemplates",
                         template("one-gpu", exactly("gpu", "gpu.example.com")))
        for name in names:
            await cluster.create_pod(for_api(template_pod(name, "one-gpu")))

        async def two_bound() -> bool:
            return len(await env.bound(names)) >= 2

        await wait_until(two_bound, timeout=30, message="two pods bound")
        placed = await env.bound(names)
        assert set(placed.values()) == {gpu_node}

        allocated = [c for c in await env.claims() if (c.get("status") or {}).get("allocation")]
        devices = [r["device"] for c in allocated
                   for r in c["status"]["allocation"]["devices"]["results"]]
        assert sorted(devices) == ["gpu-0", "gpu-1"]
        for c in allocated:
            [user] = c["status"]["reservedFor"]
            assert user["name"] in placed
        [waiting] = set(names) - set(placed)
        await wait_until(lambda: env.failed(waiting), timeout=20,
                         message="the third pod's FailedScheduling")
        assert "cannot allocate all claims" in (await env.failed(waiting))[0]

        # deleting a pod frees its device (the controller deallocates its claim): the
        # waiting pod gets it
        await cluster.delete_pod(sorted(placed)[0])
        await wait_until(lambda: cluster.node_name(waiting), timeout=30,
                         message="the waiting pod bound once a device is free")
        assert await cluster.node_name(waiting) == gpu_node


async def test_explain_says_per_node_which_request_cannot_be_satisfied(
    sandbox_factory: Any, tmp_path: Path
) -> None:
    import io
    import json

    from scheduler.explain.cli import amain

    async with dra_cluster(sandbox_factory, tmp_path, nodes=2, schedule=False,
                           simulate_kubelet=False) as env:
        await env.publish(resource_slice("gpus", node=env.nodes[0], devices=[device("gpu-0")]))
        await env.create("resourceclaims", claim("two", exactly("gpu", "gpu", count=2)))
        await env.cluster.create_pod(pod("needs-two", "two"))
    out, err = io.StringIO(), io.StringIO()
    code = await amain(["needs-two", "--kubeconfig", str(env.kubeconfig), "-o", "json"],
                       stdout=out, stderr=err)
    assert code == 0, err.getvalue()
    text = json.dumps(json.loads(out.getvalue()))
    assert "cannot allocate all claims" in text
    assert "claim default/two, request gpu: needs 2, only 1 match on this node" in text
    assert "claim default/two, request gpu: no device of class gpu matches the selectors" in text


def _gpu_counters_slices(node_name: str) -> list[dict[str, Any]]:
    """A partitionable GPU on ``node_name``: its memory counter, the whole GPU and two halves."""
    from tests.unit.dra.builders import counter_slice

    whole = device("whole", attrs={"size": "whole"}, consumes={"gpu-0": {"memory": "40Gi"}})
    halves = [device(f"half-{i}", attrs={"size": "half"},
                     consumes={"gpu-0": {"memory": "20Gi"}}) for i in range(2)]
    return [counter_slice("counters", node=node_name, **{"gpu-0": {"memory": "40Gi"}}),
            resource_slice("parts", node=node_name, pool=node_name, slice_count=2,
                           devices=[whole, *halves])]


EXPLAIN_CASES = [
    # (name, slices on the first node, claim of the pod, holder claim allocated first
    #  (device), what explain must say for the first node)
    ("all taken", lambda n: [resource_slice("gpus", node=n, devices=[device("gpu-0")])],
     exactly("gpu", "gpu"), "gpu-0",
     "claim default/want, request gpu: needs 1, 1 match, 0 free (the others are allocated)"),
    ("selector false",
     lambda n: [resource_slice("gpus", node=n, devices=[device("gpu-0",
                                                               attrs={"model": "a100"})])],
     exactly("gpu", "gpu", selectors=(f'device.attributes["{DRIVER}"].model == "h100"',)),
     None, "claim default/want, request gpu: no device of class gpu matches the selectors "
           "on this node"),
    ("CEL error", lambda n: [resource_slice("gpus", node=n, devices=[device("gpu-0")])],
     exactly("gpu", "gpu", selectors=('device.attributes["nope.io"].x == 1',)), None,
     "ResourceClaim default/want: spec.devices.requests[0].exactly.selectors[0]: "
     f"device {DRIVER}/"),
    ("shared counters used up", _gpu_counters_slices, exactly("gpu", "gpu"), "whole",
     "claim default/want, request gpu: needs 1, 3 match, 0 free (the others are allocated "
     "or their shared counters used up)"),
]



@pytest.mark.parametrize(("name", "slices", "request_", "held", "want"), EXPLAIN_CASES,
                         ids=[c[0] for c in EXPLAIN_CASES])
async def test_explain_names_why_per_node(sandbox_factory: Any, tmp_path: Path, name: str,
                                          slices: Any, request_: dict[str, Any],
                                          held: str | None, want: str) -> None:
    import io
    import json

    from scheduler.explain.cli import amain

    async with dra_cluster(sandbox_factory, tmp_path, nodes=2, schedule=False,
                           simulate_kubelet=False) as env:
        api, first = env.api, env.nodes[0]
        await env.publish(*slices(first))
        if held is not None:
            holder = await api.create(CLAIMS, strip(claim("holder", exactly("gpu", "gpu"))))
            holder["status"] = {"allocation": {"devices": {"results": [
                {"request": "gpu", "driver": DRIVER, "pool": first, "device": held}]}}}
            await api.update(f"{CLAIMS}/holder/status", holder)
        await env.create("resourceclaims", claim("want", request_))
        await env.cluster.create_pod(pod("p", "want"))
    out, err = io.StringIO(), io.StringIO()
    code = await amain(["p", "--kubeconfig", str(env.kubeconfig), "-o", "json"],
                       stdout=out, stderr=err)
    assert code == 0, err.getvalue()
    text = json.dumps(json.loads(out.getvalue()))
    assert want in text, (name, text)



async def test_partitions_of_one_gpu_share_its_counters_end_to_end(
    sandbox_factory: Any, tmp_path: Path
) -> None:
    # one 40Gi GPU published as the whole GPU and two halves (DRAPartitionableDevices): a
    # pod holding a half keeps the whole GPU from another pod until it goes
    async with dra_cluster(sandbox_factory, tmp_path, nodes=2) as env:
        cluster, api = env.cluster, env.api
        await env.publish(*_gpu_counters_slices(env.nodes[0]))
        await env.create("resourceclaims", *(claim(name, exactly("gpu", "gpu", selectors=(
            f'device.attributes["{DRIVER}"].size == "{size}"',)))
            for name, size in (("a-half", "half"), ("the-whole", "whole"))))
        await cluster.create_pod(pod("half-user", "a-half"))
        await wait_until(lambda: cluster.node_name("half-user"), timeout=20,
                         message="half-user bound")
        got = await api.get(f"{CLAIMS}/a-half")
        assert got["status"]["allocation"]["devices"]["results"] == [
            {"request": "gpu", "driver": DRIVER, "pool": env.nodes[0], "device": "half-0"}]

        # the whole GPU's 40Gi are not all there: the second pod waits
        await cluster.create_pod(pod("whole-user", "the-whole"))
        await wait_until(lambda: env.failed("whole-user"), timeout=20,
                         message="whole-user FailedScheduling")
        assert "cannot allocate all claims" in (await env.failed("whole-user"))[0]

        # the half goes: its counters come back, the whole GPU is allocated
        await cluster.delete_pod("half-user")
        await wait_until(lambda: cluster.node_name("whole-user"), timeout=30,
                         message="whole-user bound once the half is free")
        got = await api.get(f"{CLAIMS}/the-whole")
        assert got["status"]["allocation"]["devices"]["results"][0]["device"] == "whole"


async def test_simulated_driver_partitions_are_scheduled_until_their_gpu_is_full(
    sandbox_factory: Any, tmp_path: Path
) -> None:
    # `--dra-devices gpu=1:memory=40Gi:partitions=2:nodes=1`: one GPU as a whole and two halves
    names = ["h1", "h2", "h3"]
    async with dra_cluster(sandbox_factory, tmp_path, nodes=2,
                           dra_devices="gpu=1:memory=40Gi:partitions=2:nodes=1") as env:
        gpu_node = env.nodes[0]
        await env.create("resourceclaimtemplates", template("half-gpu", exactly(
            "gpu", "gpu.example.com",
            selectors=('has(device.attributes["gpu.example.com"].partition)',))))
        for name in names:
            await env.cluster.create_pod(for_api(template_pod(name, "half-gpu")))

        async def third_refused() -> bool:
            pending = [n for n in names if n not in await env.bound(names)]
            return len(pending) == 1 and bool(await env.failed(pending[0]))

        await wait_until(third_refused, timeout=30, message="two halves bound, the third refused")
        assert set((await env.bound(names)).values()) == {gpu_node}
        assert sorted(r["device"] for r in await env.results()) == ["gpu-0-part-0",
                                                                     "gpu-0-part-1"]


async def test_nodes_left_out_by_the_free_device_shortcut_keep_their_own_status(
    sandbox_factory: Any, tmp_path: Path
) -> None:
    # One device a node. The first node's device is taken (by p0 and p0b sharing a claim;
    # p0 only fits there);
    # the others have a free device but no memory left: PreFilter narrows to them, none
    # fits, and the first node is then filtered too: it says "cannot allocate all claims",
    # not "didn't satisfy plugin(s)", as without the shortcut.
    async with dra_cluster(sandbox_factory, tmp_path, nodes=3) as env:
        cluster, nodes = env.cluster, env.nodes
        await env.publish(*(resource_slice(f"gpus-{n}", node=n, devices=[device("gpu-0")])
                            for n in nodes))
        for i, n in enumerate(nodes[1:]):
            await cluster.create_pod(for_api(PodBuilder(f"filler{i}", "default").node(n)
                                             .req(cpu="100m", memory="15Gi").obj()))
        await env.create("resourceclaims", *(claim(name, exactly("gpu", "gpu"))
                                             for name in ("c0", "c1")))
        p0 = pod("p0", "c0")
        p0["spec"]["containers"][0]["resources"]["requests"]["memory"] = "8Gi"
        await cluster.create_pod(p0)
        await wait_until(lambda: cluster.node_name("p0"), timeout=20, message="p0 bound")
        assert await cluster.node_name("p0") == nodes[0]
        # a second user of c0: a claim reserved for two pods is not freed by evicting one,
        # so the first node is no candidate (a preemption could not free its device)
        await cluster.create_pod(pod("p0b", "c0"))
        await wait_until(lambda: cluster.node_name("p0b"), timeout=20, message="p0b bound")

        big = pod("big", "c1")
        big["spec"]["containers"][0]["resources"]["requests"]["memory"] = "4Gi"
        await cluster.create_pod(big)
        await wait_until(lambda: env.failed("big"), timeout=20, message="big FailedScheduling")
        note = (await env.failed("big"))[0]
        assert note.startswith("0/3 nodes are available:"), note
        assert "1 cannot allocate all claims" in note, note
        assert "2 Insufficient memory" in note, note
        assert "didn't satisfy" not in note, note
