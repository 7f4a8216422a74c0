"""HTTP extenders against real HTTP servers: the scheduler calls them as kube-scheduler does,
and their faults never stop the daemon."""

from __future__ import annotations

import asyncio
import contextlib
import json
import shlex
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from scheduler.client.api import ApiClient
from scheduler.client.connection import load_connection
from scheduler.config.load import parse_config_text
from scheduler.config.types import Extender, ExtenderManagedResource, KubeSchedulerConfiguration
from tests.integration.extender_server import (
    HTTP_500,
    MALFORMED,
    OK,
    SLOW,
    UNKNOWN_NODE,
    FakeExtender,
    down_url,
)
from tests.docs.readme import REPO, section_blocks
from tests.integration.harness import (
    Cluster,
    running_scheduler,
    scheduler_config,
    user_client,
    wait_until,
)
from tests.integration.scenarios import (
    Env,
    api,
    failed_message,
    node,
    pod,
    scenario,
    wait_bound,
    wait_failed,
)

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "extenders" / "gpu_model_extender.py"
WIDGET = "example.com/widget"
NODES = ["node-a", "node-b", "node-c"]


def widget_nodes() -> list[dict[str, Any]]:
    return [node(n) for n in NODES]


def widget_pod(name: str) -> dict[str, Any]:
    return api(pod(name).req(cpu="100m", memory="128Mi", **{WIDGET: "1"}).limits(**{WIDGET: "1"}))


def config_with(*extenders: Extender) -> KubeSchedulerConfiguration:
    cfg = scheduler_config()
    cfg.extenders = list(extenders)
    return cfg


def filter_extender(url: str, **kw: Any) -> Extender:
    return Extender(
        url_prefix=url, filter_verb="filter", node_cache_capable=True,
        managed_resources=[ExtenderManagedResource(WIDGET, ignored_by_scheduler=True)], **kw,
    )


def extender_calls(env: Env, verb: str, result: str) -> float:
    value = env.parts.scheduler.metrics.registry.get_sample_value(
        "scheduler_py_extender_requests_total", {"verb": verb, "result": result})
    return float(value or 0.0)


@pytest.fixture
async def fake() -> AsyncIterator[FakeExtender]:
    ext = FakeExtender()
    await ext.start()
    yield ext
    await ext.stop()


async def test_filter_narrows_and_rejections_count_in_the_message(
    sandbox_factory: Any, tmp_path: Path, fake: FakeExtender
) -> None:
    fake.reject = {"node-a": "widget slots full", "node-b": "widget slots full"}
    async with scenario(sandbox_factory, tmp_path, widget_nodes(),
                        config=config_with(filter_extender(fake.url))) as env:
        await env.cluster.create_pod(widget_pod("w1"))
        assert await wait_bound(env.cluster, ["w1"]) == {"w1": "node-c"}
        (args,) = fake.calls("filter")
        # nodeCacheCapable: names only, PascalCase keys as upstream's untagged structs
        assert sorted(args["NodeNames"]) == NODES and args["Nodes"] is None
        assert args["Pod"]["metadata"]["name"] == "w1"

        fake.reject = {n: "widget slots full" for n in NODES[:2]}
        fake.unresolvable = {"node-c": "no widget hardware"}
        await env.cluster.create_pod(widget_pod("w2"))
        await wait_failed(env.cluster, "w2", failed_message(
            3, [(2, "widget slots full"), (1, "no widget hardware")],
            preemption="0/3 nodes are available: 1 Preemption is not helpful for scheduling, "
                       "2 No preemption victims found for incoming pod."))

        # "Extender" rejected it: any cluster event requeues it (no 5-minute wait).
        fake.reject, fake.unresolvable = {}, {}
        await env.cluster.create_node(node("node-d"))
        await wait_bound(env.cluster, ["w2"], timeout=10)


async def test_pods_no_extender_manages_never_call_it(
    sandbox_factory: Any, tmp_path: Path, fake: FakeExtender
) -> None:
    async with scenario(sandbox_factory, tmp_path, widget_nodes(),
                        config=config_with(filter_extender(fake.url))) as env:
        await env.cluster.create_pod(api(pod("plain")))
        await wait_bound(env.cluster, ["plain"])
        assert fake.requests == []


async def test_prioritize_adds_weighted_scores_full_nodes_and_lowercase_answers(
    sandbox_factory: Any, tmp_path: Path, fake: FakeExtender
) -> None:
    fake.scores = {"node-b": 10}
    fake.lowercase = True
    ext = Extender(url_prefix=fake.url + "/scheduler/", filter_verb="filter",
                   prioritize_verb="prioritize", weight=2)
    async with scenario(sandbox_factory, tmp_path, widget_nodes(), config=config_with(ext)) as env:
        await env.cluster.create_pods([api(pod(f"p{i}")) for i in range(3)])
        placement = await wait_bound(env.cluster, [f"p{i}" for i in range(3)])
        # +200 on node-b outweighs every spreading score of three small pods
        assert set(placement.values()) == {"node-b"}
        filters, prios = fake.calls("filter"), fake.calls("prioritize")
        assert len(filters) == 3 and len(prios) == 3
        # not nodeCacheCapable: the full Node objects, no names
        assert filters[0]["NodeNames"] is None
        assert {n["metadata"]["name"] for n in filters[0]["Nodes"]["items"]} == set(NODES)
        assert all(path.startswith("/scheduler/") for path, _ in fake.requests)


async def test_prioritize_failure_is_ignored(
    sandbox_factory: Any, tmp_path: Path, fake: FakeExtender
) -> None:
    fake.behaviour = HTTP_500
    ext = Extender(url_prefix=fake.url, prioritize_verb="prioritize", weight=1)
    async with scenario(sandbox_factory, tmp_path, widget_nodes(), config=config_with(ext)) as env:
        await env.cluster.create_pod(api(pod("p")))
        await wait_bound(env.cluster, ["p"])
        assert extender_calls(env, "prioritize", "error") == 1


FAULTS = [HTTP_500, MALFORMED, SLOW, UNKNOWN_NODE, "down"]


@pytest.mark.parametrize("ignorable", [True, False], ids=["ignorable", "not-ignorable"])
@pytest.mark.parametrize("fault", FAULTS)
async def test_filter_faults(
    sandbox_factory: Any, tmp_path: Path, fake: FakeExtender, fault: str, ignorable: bool
) -> None:
    url = down_url() if fault == "down" else fake.url
    fake.behaviour = fault
    fake.slow_seconds = 3.0
    fake.reject = {"node-a": "never"}  # ignored anyway: a faulty answer is no answer
    ext = filter_extender(url, ignorable=ignorable, http_timeout_seconds=0.3)
    async with scenario(sandbox_factory, tmp_path, widget_nodes(), config=config_with(ext)) as env:
        await env.cluster.create_pod(widget_pod("w"))
        if ignorable:
            # scheduled as if the extender did not exist (node-a included)
            await wait_bound(env.cluster, ["w"])
            assert extender_calls(env, "filter", "error") == 1
            return

        async def failed_twice() -> bool:
            return extender_calls(env, "filter", "error") >= 2

        # retried with backoff (1s, then 2s), never bound, the condition names the extender
        await wait_until(failed_twice, timeout=10, message="a retried extender call")
        current = await env.cluster.get_pod("w")
        assert current is not None and not current["spec"].get("nodeName")
        cond = {c["type"]: c for c in current["status"]["conditions"]}["PodScheduled"]
        assert cond["reason"] == "SchedulerError"
        assert f"extender {url!r} filter failed" in cond["message"]
        if fault == HTTP_500:
            assert cond["message"] == (
                f"extender {url!r} filter failed: POST {url}/filter returned HTTP 500")
        events = await env.cluster.events_for("w")
        assert any(e["reason"] == "FailedScheduling" and url in e["note"] for e in events)
        # the daemon goes on: a pod the extender does not manage is scheduled meanwhile
        await env.cluster.create_pod(api(pod("plain")))
        await wait_bound(env.cluster, ["plain"])


HAMI_CONFIG = """\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection:
  leaderElect: false
podInitialBackoffSeconds: 1
podMaxBackoffSeconds: 2
profiles:
- schedulerName: py-scheduler
extenders:
- urlPrefix: "{url}"
  filterVerb: filter
  bindVerb: bind
  enableHTTPS: false
  weight: 1
  nodeCacheCapable: true
  httpTimeout: 30s
  managedResources:
  - name: nvidia.com/gpu
    ignoredByScheduler: true
  - name: nvidia.com/gpumem
    ignoredByScheduler: true
"""


async def test_hami_shaped_config_filters_by_name_and_binds(
    sandbox_factory: Any, tmp_path: Path, fake: FakeExtender
) -> None:
    sb = await sandbox_factory(nodes=0)
    kc = sb.write_kubeconfig(tmp_path / "kc")
    config = parse_config_text(HAMI_CONFIG.format(url=fake.url))
    fake.reject = {"node-a": "no vGPU left", "node-c": "no vGPU left"}
    fake.binder = ApiClient(load_connection(kubeconfig=str(kc)), qps=0)
    try:
        async with user_client(kc) as cluster:
            for n in NODES:
                # no nvidia.com/gpu on the nodes: HAMi accounts for it, NodeResourcesFit
                # must not (ignoredByScheduler)
                await cluster.create_node(node(n))
            async with running_scheduler(kc, config=config):
                hami = {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "1000"}
                gpu = api(pod("gpu").req(cpu="100m", memory="128Mi", **hami).limits(**hami))
                await cluster.create_pod(gpu)
                await cluster.create_pod(api(pod("cpu-only")))
                placement = await wait_bound(cluster, ["gpu", "cpu-only"])
                assert placement["gpu"] == "node-b"
                (filter_args,) = fake.calls("filter")
                assert filter_args["Nodes"] is None and sorted(filter_args["NodeNames"]) == NODES
                (bind_args,) = fake.calls("bind")
                bound = await cluster.get_pod("gpu")
                assert bound is not None
                assert bind_args == {"PodName": "gpu", "PodNamespace": "default",
                                     "PodUID": bound["metadata"]["uid"], "Node": "node-b"}

                async def scheduled_event() -> bool:  # recorded after the bind, in the background
                    return any(e["reason"] == "Scheduled" for e in await cluster.events_for("gpu"))

                await wait_until(scheduled_event, message="the Scheduled event of gpu")
    finally:
        await fake.binder.close()


@pytest.mark.parametrize("ignorable", [True, False], ids=["ignorable", "not-ignorable"])
async def test_bind_failure(
    sandbox_factory: Any, tmp_path: Path, fake: FakeExtender, ignorable: bool
) -> None:
    fake.behaviour = HTTP_500
    ext = filter_extender(down_url(), bind_verb="bind", ignorable=ignorable)
    ext.filter_verb = ""
    ext.url_prefix = fake.url
    async with scenario(sandbox_factory, tmp_path, widget_nodes(), config=config_with(ext)) as env:
        await env.cluster.create_pod(widget_pod("w"))
        if ignorable:
            # the Bind plugins bind instead
            await wait_bound(env.cluster, ["w"])
            return

        async def failed_twice() -> bool:
            return extender_calls(env, "bind", "error") >= 2

        await wait_until(failed_twice, timeout=10, message="a retried bind")
        current = await env.cluster.get_pod("w")
        assert current is not None and not current["spec"].get("nodeName")
        cond = {c["type"]: c for c in current["status"]["conditions"]}["PodScheduled"]
        assert cond["reason"] == "SchedulerError" and fake.url in cond["message"]
        # the assumed pod was forgotten: nothing is held on any node
        assert env.parts.scheduler.cache.assumed_pod_count() == 0


@contextlib.asynccontextmanager
async def example_extender(*args: str) -> AsyncIterator[str]:
    """examples/extenders/gpu_model_extender.py in its own process; yields its URL."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(EXAMPLE), *args, stdout=asyncio.subprocess.PIPE, cwd=REPO,
    )
    try:
        assert proc.stdout is not None
        line = await asyncio.wait_for(proc.stdout.readline(), timeout=20)
        yield str(json.loads(line)["ready"])
    finally:
        proc.terminate()
        await proc.wait()


async def create_gpu_nodes(cluster: Cluster) -> None:
    gpus = {"a100-small": ("a100", "2"), "a100-big": ("a100", "8"), "h100": ("h100", "8")}
    for name, (model, count) in gpus.items():
        n = node(name, labels={"example.com/gpu-model": model})
        n["status"]["allocatable"]["nvidia.com/gpu"] = count
        n["status"]["capacity"]["nvidia.com/gpu"] = count
        await cluster.create_node(n)


async def check_gpu_model_placement(cluster: Cluster) -> None:
    await cluster.create_pod(api(pod("train").annotations({"example.com/gpu-model": "a100"})))
    await cluster.create_pod(api(pod("tpu").annotations({"example.com/gpu-model": "tpu-v5"})))
    placement = await wait_bound(cluster, ["train"])
    # a100 only, and the node with more GPUs (+100 from the extender)
    assert placement == {"train": "a100-big"}
    await wait_failed(cluster, "tpu", failed_message(
        3, [(3, "node(s) didn't have the requested GPU model")],
        preemption="0/3 nodes are available: 3 No preemption victims found for incoming pod."))


async def test_example_extender_in_its_own_process_node_cache_capable(
    sandbox_factory: Any, tmp_path: Path
) -> None:
    """nodeCacheCapable: the extender gets names only and resolves them from the API
    server itself."""
    sb = await sandbox_factory(nodes=0)
    kc = sb.write_kubeconfig(tmp_path / "kc")
    async with example_extender("--port", "0", "--api-server", sb.url,
                                "--token", sb.token or "") as url:
        ext = Extender(url_prefix=url, filter_verb="filter", prioritize_verb="prioritize",
                       weight=1, node_cache_capable=True)
        async with user_client(kc) as cluster:
            await create_gpu_nodes(cluster)
            async with running_scheduler(kc, config=config_with(ext)):
                await check_gpu_model_placement(cluster)


async def test_readme_extenders_section(sandbox_factory: Any, tmp_path: Path) -> None:
    """The extenders page's command and configuration, as written (a free port instead of 8888)."""
    (command,) = section_blocks("Extenders", lang="bash", page="docs/extenders.md")[0].commands()
    assert command == "python examples/extenders/gpu_model_extender.py --port 8888"
    (block,) = section_blocks("Extenders", lang="yaml", page="docs/extenders.md")
    sb = await sandbox_factory(nodes=0)
    kc = sb.write_kubeconfig(tmp_path / "kc")
    args = shlex.split(command)[2:]
    async with example_extender(*[("0" if a == "8888" else a) for a in args]) as url:
        config = parse_config_text(block.text.replace("http://127.0.0.1:8888", url),
                                   source="docs/extenders.md")
        config.leader_election.leader_elect = False
        async with user_client(kc) as cluster:
            await create_gpu_nodes(cluster)
            async with running_scheduler(kc, config=config):
                await check_gpu_model_placement(cluster)


def _low(name: str, node_name: str, priority: int) -> dict[str, Any]:
    """A running pod filling half of a 2-CPU node, bound directly by the test."""
    return api(pod(name, cpu="1", memory="1Gi").priority(priority).node(node_name))


async def _preemption_setup(env: Env) -> dict[str, str]:
    """Two full 2-CPU nodes; n0's pods matter less, so preemption alone would pick n0.
    Returns pod name -> UID."""
    lows = [_low("n0-a", "n0", 10), _low("n0-b", "n0", 10),
            _low("n1-a", "n1", 100), _low("n1-b", "n1", 100)]
    await env.cluster.create_pods(lows)

    # the scheduler's cache holds them before the preemptor arrives
    await wait_until(lambda: env.parts.scheduler.cache.pod_count() == 4,
                     message="the low-priority pods in the cache")
    return {p["metadata"]["name"]: p["metadata"]["uid"] for p in await env.cluster.list_pods()}


@pytest.mark.parametrize("node_cache_capable", [True, False], ids=["meta-victims", "victims"])
async def test_preempt_verb_narrows_the_candidates(
    sandbox_factory: Any, tmp_path: Path, fake: FakeExtender, node_cache_capable: bool
) -> None:
    seen: list[dict[str, Any]] = []

    def only_n1(body: dict[str, Any]) -> dict[str, Any]:
        seen.append(body)
        if node_cache_capable:
            victims = body["NodeNameToMetaVictims"]["n1"]
        else:
            victims = {"Pods": [{"UID": p["metadata"]["uid"]}
                                for p in body["NodeNameToVictims"]["n1"]["Pods"]],
                       "NumPDBViolations": body["NodeNameToVictims"]["n1"]["NumPDBViolations"]}
        return {"NodeNameToMetaVictims": {"n1": victims}}

    fake.preempt = only_n1
    ext = Extender(url_prefix=fake.url, preempt_verb="preempt",
                   node_cache_capable=node_cache_capable)
    nodes = [node("n0", cpu="2", memory="8Gi"), node("n1", cpu="2", memory="8Gi")]
    async with scenario(sandbox_factory, tmp_path, nodes, config=config_with(ext)) as env:
        uids = await _preemption_setup(env)
        await env.cluster.create_pod(api(pod("vip", cpu="1", memory="1Gi").priority(1000)))
        await wait_bound(env.cluster, ["vip"], timeout=15)
        assert await env.cluster.node_name("vip") == "n1"
        (body,) = seen[:1]
        assert body["Pod"]["metadata"]["name"] == "vip"
        if node_cache_capable:
            # victims as UIDs only
            sent = body["NodeNameToMetaVictims"]
            assert set(sent) == {"n0", "n1"}
            assert {v["UID"] for v in sent["n1"]["Pods"]} <= {uids["n1-a"], uids["n1-b"]}
            assert "NodeNameToVictims" not in body
        else:
            assert set(body["NodeNameToVictims"]) == {"n0", "n1"}
            assert "NodeNameToMetaVictims" not in body
        remaining = {p["metadata"]["name"] for p in await env.cluster.list_pods()
                     if not p["metadata"].get("deletionTimestamp")}
        assert {"n0-a", "n0-b"} <= remaining and len(remaining & {"n1-a", "n1-b"}) == 1


@pytest.mark.parametrize("ignorable", [True, False], ids=["ignorable", "not-ignorable"])
async def test_preempt_failure(
    sandbox_factory: Any, tmp_path: Path, fake: FakeExtender, ignorable: bool
) -> None:
    fake.behaviour = HTTP_500
    ext = Extender(url_prefix=fake.url, preempt_verb="preempt", ignorable=ignorable,
                   node_cache_capable=True)
    nodes = [node("n0", cpu="2", memory="8Gi"), node("n1", cpu="2", memory="8Gi")]
    async with scenario(sandbox_factory, tmp_path, nodes, config=config_with(ext)) as env:
        await _preemption_setup(env)
        await env.cluster.create_pod(api(pod("vip", cpu="1", memory="1Gi").priority(1000)))
        if ignorable:
            # preemption goes on without the extender: the cheaper victims on n0
            await wait_bound(env.cluster, ["vip"], timeout=15)
            assert await env.cluster.node_name("vip") == "n0"
            return

        # As upstream: the preemption error is logged, the pod stays unschedulable with its
        # Filter reasons (it waits for an event that frees CPU), nobody is evicted.
        await wait_failed(env.cluster, "vip", "0/2 nodes are available: 2 Insufficient cpu.")
        assert extender_calls(env, "preempt", "error") >= 1
        pods = {p["metadata"]["name"]: p for p in await env.cluster.list_pods()}
        assert not any(p["metadata"].get("deletionTimestamp") for p in pods.values())
        assert not pods["vip"]["spec"].get("nodeName")
        assert not pods["vip"]["status"].get("nominatedNodeName")


TAS_CONFIG = """\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection:
  leaderElect: false
profiles:
- schedulerName: py-scheduler
extenders:
  - urlPrefix: "{url}"
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


async def test_tas_shaped_config_over_mutual_tls(sandbox_factory: Any, tmp_path: Path) -> None:
    """Intel TAS's entry: filter + prioritize with full Node objects over HTTPS with a client
    certificate (no CA: enableHTTPS trusts the server, as upstream)."""
    import ssl

    from tests.tls import self_signed

    server_cert, server_key = self_signed(tmp_path, "server")
    client_cert, client_key = self_signed(tmp_path, "client")
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(server_cert, server_key)
    ctx.verify_mode = ssl.CERT_REQUIRED
    ctx.load_verify_locations(client_cert)
    tas = FakeExtender(scores={"node-c": 10}, reject={"node-b": "telemetry: too hot"})
    url = await tas.start(ssl_context=ctx)
    try:
        config = parse_config_text(TAS_CONFIG.format(url=url, cert=client_cert, key=client_key))
        sb = await sandbox_factory(nodes=0)
        kc = sb.write_kubeconfig(tmp_path / "kc")
        async with user_client(kc) as cluster:
            for n in NODES:
                await cluster.create_node(node(n))
            async with running_scheduler(kc, config=config):
                tas_resource = {"telemetry/scheduling": "1"}
                await cluster.create_pod(api(pod("t").req(
                    cpu="100m", memory="128Mi", **tas_resource).limits(**tas_resource)))
                assert await wait_bound(cluster, ["t"]) == {"t": "node-c"}
        (filter_args,) = tas.calls("scheduler/filter")
        (prio_args,) = tas.calls("scheduler/prioritize")
        assert filter_args["NodeNames"] is None
        assert {n["metadata"]["name"] for n in filter_args["Nodes"]["items"]} == set(NODES)
        # prioritize sees only what the filter kept
        assert {n["metadata"]["name"] for n in prio_args["Nodes"]["items"]} == {"node-a",
                                                                                 "node-c"}
    finally:
        await tas.stop()


@pytest.mark.parametrize(
    ("extender", "message"),
    [
        ("{urlPrefix: 'http://127.0.0.1:1', prioritizeVerb: p}",
         "extenders[0].weight: must have a positive weight applied to it, got 0"),
        ("{urlPrefix: 'https://127.0.0.1:1', filterVerb: f, tlsConfig: {certData: eA==, "
         "keyData: eA==}}",
         "extenders[0].tlsConfig: "),
    ],
    ids=["config-error", "unusable-client-certificate"],
)
def test_bad_extender_config_exits_2_before_touching_the_cluster(
    tmp_path: Path, extender: str, message: str
) -> None:
    import subprocess

    path = tmp_path / "config.yaml"
    path.write_text("apiVersion: kubescheduler.config.k8s.io/v1\n"
                    "kind: KubeSchedulerConfiguration\n"
                    f"extenders: [{extender}]\n")
    done = subprocess.run(
        [sys.executable, "-m", "scheduler", "run", "--config", str(path), "--kubeconfig",
         str(tmp_path / "never-read"), "--metrics-bind-address", "127.0.0.1:0"],
        capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert f"{path}: {message}" in done.stderr


# --- a gang's preemption plan through the preempt verb (issue 22) ---------------------------


@pytest.mark.parametrize("drop", [None, "n1"], ids=["kept", "n1-dropped"])
async def test_preempt_verb_sees_a_gangs_whole_plan(
    sandbox_factory: Any, tmp_path: Path, fake: FakeExtender, drop: str | None
) -> None:
    from tests.builders import make_node
    from tests.integration.harness import for_api
    from tests.integration.procs import (
        coscheduling_config,
        create_pod_group,
        gang_pod,
        install_crd,
        pod_group,
    )

    seen: list[dict[str, Any]] = []

    def keep(body: dict[str, Any]) -> dict[str, Any]:
        seen.append(body)
        victims = body["NodeNameToMetaVictims"]
        return {"NodeNameToMetaVictims": {n: v for n, v in victims.items() if n != drop}}

    fake.preempt = keep
    config = coscheduling_config()
    config.extenders = [Extender(url_prefix=fake.url, preempt_verb="preempt",
                                 node_cache_capable=True)]
    sb = await sandbox_factory(nodes=0)
    kc = sb.write_kubeconfig(tmp_path / "kc")
    async with user_client(kc) as cluster:
        await install_crd(cluster.client)
        for name in ("n0", "n1"):
            await cluster.create_node(for_api(make_node(name, cpu="2", memory="8Gi")))
        # Two low-priority pods filling each node, bound directly.
        await cluster.create_pods([_low(f"{n}-{x}", n, 10) for n in ("n0", "n1")
                                   for x in ("a", "b")])
        async with running_scheduler(kc, config=config) as parts:
            await wait_until(lambda: parts.scheduler.cache.pod_count() == 4,
                             message="the low-priority pods in the cache")
            uids = {p["metadata"]["name"]: p["metadata"]["uid"]
                    for p in await cluster.list_pods()}
            await create_pod_group(cluster.client, pod_group("vip", 2))
            members = ["vip-0", "vip-1"]
            await cluster.create_pods([gang_pod(n, "vip", cpu="2", memory="1Gi",
                                                priority=1000) for n in members])
            if drop is None:
                bound = await wait_bound(cluster, members, timeout=20)
                assert set(bound.values()) == {"n0", "n1"}
            else:
                async def refused() -> bool:
                    return any(
                        "dropped node(s) n1" in str(e.get("note") or "")
                        for e in await cluster.events_for("vip-0")
                        if e["reason"] == "FailedScheduling")
                await wait_until(refused, timeout=20, interval=0.1,
                                 message="the plan abandoned: the extender dropped n1")
            # The extender saw the gang's whole plan: both nodes, all four victims.
            body = seen[0]
            assert {n: {v["UID"] for v in victims["Pods"]}
                    for n, victims in body["NodeNameToMetaVictims"].items()} == {
                n: {uids[f"{n}-a"], uids[f"{n}-b"]} for n in ("n0", "n1")}
            live = {p["metadata"]["name"] for p in await cluster.list_pods()
                    if not p["metadata"].get("deletionTimestamp")}
            lows = {f"{n}-{x}" for n in ("n0", "n1") for x in ("a", "b")}
            assert not (live & lows) if drop is None else lows <= live
