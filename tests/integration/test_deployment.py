"""Running it as a real cluster would (issue 6): whole scheduler processes against a sandbox
process, with leader election, secure metrics serving, and the shipped RBAC rules."""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path
from typing import Any

from scheduler.client.api import ApiClient, NotFound
from tests.integration.harness import user_client, wait_until
from tests.integration.procs import (
    SchedulerProcess,
    gang_pod,
    scheduler_processes,
    write_config,
)
from tests.tls import self_signed

LEASE = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/py-scheduler"
LEASE_DURATION, RENEW_DEADLINE, RETRY_PERIOD = 3.0, 2.0, 0.5
# A candidate polls every retryPeriod × up to 1.2 (jitter); a request or two of latency and
# the scheduling of two Python processes on two cores on top.
SLACK = 2.5  # test machinery on a busy 2-core CI machine

LE_CONFIG = f"""\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection:
  leaderElect: true
  leaseDuration: {LEASE_DURATION:g}s
  renewDeadline: {RENEW_DEADLINE:g}s
  retryPeriod: {RETRY_PERIOD * 1000:g}ms
  resourceName: py-scheduler
  resourceNamespace: kube-system
profiles:
  - schedulerName: py-scheduler
"""


async def _holder(client: ApiClient) -> str | None:
    try:
        lease = await client.get(LEASE)
    except NotFound:
        return None
    return str((lease.get("spec") or {}).get("holderIdentity") or "")


def _start(procs: list[SchedulerProcess], kc: Path, config: Path, identity: str,
           extra: list[str] | None = None) -> SchedulerProcess:
    proc = SchedulerProcess(kubeconfig=kc, config=config, identity=identity, extra=extra).start()
    procs.append(proc)
    proc.wait_port()
    return proc


async def _wait_text(proc: SchedulerProcess, text: str, *, timeout: float = 20) -> None:
    async def has() -> bool:
        return text in await asyncio.to_thread(proc.readyz)
    await wait_until(has, timeout=timeout, interval=0.05,
                     message=f"{proc.identity} /readyz saying {text!r}; log:\n{proc.log_tail()}")


def _binding_requests(counters: dict[str, Any]) -> int:
    return sum(v for k, v in counters["requests"].items()
               if k.startswith("create ") and "binding" in k)


async def test_two_replicas_one_leads_failover_on_kill_and_fast_handover_on_term(
    sandbox_process: Any, tmp_path: Path
) -> None:
    sp = sandbox_process(nodes=4, node_cpu="64", node_memory="256Gi")
    kc = sp.kubeconfig_path
    config = write_config(tmp_path / "le.yaml", LE_CONFIG)
    n_pods = 60
    async with user_client(kc) as cluster:
        with scheduler_processes() as procs:
            a = _start(procs, kc, config, "replica-a")
            await _wait_text(a, "[+]leader-election: leading")
            b = _start(procs, kc, config, "replica-b")
            await _wait_text(b, "[+]leader-election: standby (leader: replica-a)")
            assert await _holder(cluster.client) == "replica-a"
            assert "leading" in a.readyz() and "standby" in b.readyz()
            assert a.get("/healthz")[0] == 200 and b.get("/healthz")[0] == 200

            # Pods arrive steadily; the leader is killed in the middle of it.
            created: list[str] = []

            async def create_steadily() -> None:
                for i in range(n_pods):
                    name = f"p-{i:03d}"
                    await cluster.create_pod(gang_pod(name, None))
                    created.append(name)
                    await asyncio.sleep(0.04)

            creator = asyncio.create_task(create_steadily(), name="test-pod-creator")

            async def bound_names() -> set[str]:
                return {p["metadata"]["name"] for p in await cluster.list_pods("default")
                        if p["spec"].get("nodeName")}

            await wait_until(lambda: len(created) >= 20, timeout=20, message="20 pods created")
            assert await bound_names(), "the leader binds before it is killed"
            assert b.logged("acquired the leader lease") is False
            a.signal(signal.SIGKILL)
            killed_at = time.monotonic()
            assert a.wait(10) == -signal.SIGKILL

            async def b_holds() -> bool:
                return await _holder(cluster.client) == "replica-b"
            await wait_until(b_holds, timeout=LEASE_DURATION + RETRY_PERIOD * 1.2 + SLACK + 5,
                             interval=0.02, message="replica-b holding the lease")
            took = time.monotonic() - killed_at
            # Not before the lease expired (renewed every 0.5 s until the kill), and no
            # later than expiry plus one (jittered) retry period.
            assert LEASE_DURATION - RETRY_PERIOD * 1.2 - 0.5 <= took, took
            assert took <= LEASE_DURATION + RETRY_PERIOD * 1.2 + SLACK, took
            await _wait_text(b, "[+]leader-election: leading", timeout=5)

            await asyncio.wait_for(creator, timeout=30)

            async def all_bound() -> bool:
                return len(await bound_names()) == n_pods
            await wait_until(all_bound, timeout=20, interval=0.1,
                             message=f"all {n_pods} pods bound (none lost in the failover)")
            counters = sp.admin.counters()
            # The sandbox refuses a second binding of a bound pod with 409, so "bound twice"
            # shows as binding requests beyond the successful ones.  A leader binds only
            # while it holds the lease and its successor starts only after expiry, with an
            # informer that has long seen every binding the dead leader made: no replica
            # ever sends a binding for a bound pod, so the two counts are equal.
            assert counters["bindings"] == n_pods, counters
            assert _binding_requests(counters) == n_pods, counters["requests"]

            # SIGTERM: the leader releases the lease and a standby takes it within about
            # one retry period rather than a whole lease duration.
            c = _start(procs, kc, config, "replica-c")
            await _wait_text(c, "[+]leader-election: standby (leader: replica-b)")
            b.signal(signal.SIGTERM)
            termed_at = time.monotonic()
            holders: list[str | None] = []

            async def c_holds() -> bool:
                holders.append(await _holder(cluster.client))
                return holders[-1] == "replica-c"
            await wait_until(c_holds, timeout=LEASE_DURATION + 5, interval=0.01,
                             message="replica-c holding the lease")
            handover = time.monotonic() - termed_at
            assert handover < LEASE_DURATION, handover
            assert b.wait(15) == 0, b.log_tail()
            assert b.logged("released the leader lease"), b.log_tail()
            # The release empties the holder before the standby's next retry takes it.
            assert "" in holders, holders
            await _wait_text(c, "[+]leader-election: leading", timeout=5)

            # C keeps scheduling.
            await cluster.create_pod(gang_pod("after-handover", None))
            await wait_until(lambda: cluster.node_name("after-handover"), timeout=10,
                             message="pod bound by the new leader")


async def test_leader_that_cannot_renew_stops_and_exits_non_zero(
    sandbox_process: Any, tmp_path: Path
) -> None:
    sp = sandbox_process(nodes=2)
    kc = sp.kubeconfig_path
    config = write_config(tmp_path / "le.yaml", LE_CONFIG)
    with scheduler_processes() as procs:
        a = _start(procs, kc, config, "replica-a")
        await _wait_text(a, "[+]leader-election: leading")
        # The API server refuses every lease update from now on: renewals fail.
        await sp.admin.afail("update", "leases.coordination.k8s.io", code=500, times=None)
        failed_at = time.monotonic()
        code = await asyncio.to_thread(a.wait, RENEW_DEADLINE + 10)
        gone = time.monotonic() - failed_at
        assert code == 3, a.log_tail()  # EXIT_LOST_LEASE: non-zero, Kubernetes restarts it
        assert gone <= RENEW_DEADLINE + RETRY_PERIOD + SLACK + 1, gone
        assert a.logged("lost the leader lease"), a.log_tail()
        await sp.admin.aclear()


# --- metrics over TLS with delegated authentication ------------------------------------------


AUTH_FLAGS = [
    "--auth-user", "scraper-token=prometheus:monitoring",
    "--auth-user", "other-token=intruder",
    "--auth-allow", "prometheus:get:/metrics",
]


def _tls_flags(tmp_path: Path) -> tuple[list[str], Any]:
    import ssl

    cert, key = self_signed(tmp_path, "kube-py-scheduler")
    context = ssl.create_default_context(cafile=str(cert))  # verifies the served certificate
    return ["--tls-cert-file", str(cert), "--tls-private-key-file", str(key),
            "--authentication-token-webhook"], context


async def test_metrics_over_tls_need_a_token_the_api_server_accepts_and_allows(
    sandbox_process: Any, tmp_path: Path
) -> None:
    sp = sandbox_process(nodes=1, extra_args=AUTH_FLAGS)
    flags, tls = _tls_flags(tmp_path)
    with scheduler_processes() as procs:
        proc = SchedulerProcess(kubeconfig=sp.kubeconfig_path, config=None, identity="tls",
                                extra=flags + ["--leader-elect", "false"], scheme="https")
        procs.append(proc.start())
        proc.wait_port()

        def get(path: str, token: str | None = None) -> tuple[int, str]:
            return proc.get(path, token=token, context=tls)

        await wait_until(lambda: get("/readyz")[0] == 200, timeout=20,
                         message=f"ready; log:\n{proc.log_tail()}")
        status, body = await asyncio.to_thread(get, "/metrics", "scraper-token")
        assert status == 200, body
        assert "scheduler_" in body
        status, body = await asyncio.to_thread(get, "/metrics", "other-token")
        assert status == 403, body
        assert 'User "intruder" cannot get path "/metrics"' in body
        for token in ("unknown-token", None):
            status, body = await asyncio.to_thread(get, "/metrics", token)
            assert status == 401, (token, body)
        # Probes stay open: kubelets send no credentials.
        for path in ("/healthz", "/livez", "/readyz"):
            assert get(path)[0] == 200, path
        # Plain HTTP is not served on the TLS port.
        proc.scheme = "http"
        assert proc.get("/healthz")[0] != 200
        proc.scheme = "https"
        # Answers are cached for 10 s: a second scrape asks the API server nothing more.
        before = sp.admin.counters()["requests"]
        assert get("/metrics", "scraper-token")[0] == 200
        assert get("/metrics", "other-token")[0] == 403
        after = sp.admin.counters()["requests"]
        reviews = [k for k in after if "review" in k]
        assert reviews and all(after[k] == before.get(k) for k in reviews), (before, after)


# --- RBAC: the shipped rules against every call the daemon makes ----------------------------



async def _rbac_workload(cluster: Any, proc: SchedulerProcess, tls: Any) -> None:
    """Every kind of call: informers, bindings, status, events, a gang with its PodGroup
    status, a preemption, volume binding (dynamic and static), a device claim, the lease,
    token review."""
    from tests.builders import PodBuilder
    from tests.integration.harness import for_api
    from tests.integration.procs import create_pod_group, get_pod_group, pod_group

    client = cluster.client
    # Never fits: refused again on every requeue, so its FailedScheduling event becomes a
    # series (an events.k8s.io patch).
    await cluster.create_pod(gang_pod("too-big", None, cpu="100"))
    names = [f"plain-{i}" for i in range(3)]
    await cluster.create_pods([gang_pod(n, None) for n in names])
    await create_pod_group(client, pod_group("gang", 2))
    await cluster.create_pods([gang_pod(f"gang-{i}", "gang", run_seconds=1) for i in range(2)])
    # Volumes: a claim to provision on the chosen node, and a claim for a static volume.
    await client.create("/apis/storage.k8s.io/v1/storageclasses", {
        "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
        "metadata": {"name": "csi-wffc"}, "provisioner": "csi.example.com",
        "volumeBindingMode": "WaitForFirstConsumer"})
    await client.create("/apis/storage.k8s.io/v1/storageclasses", {
        "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
        "metadata": {"name": "local"}, "provisioner": "kubernetes.io/no-provisioner",
        "volumeBindingMode": "WaitForFirstConsumer"})
    await client.create("/api/v1/persistentvolumes", {
        "apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv-static"},
        "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                 "storageClassName": "local", "hostPath": {"path": "/data"}}})
    for claim, sc in (("claim-dyn", "csi-wffc"), ("claim-static", "local")):
        await client.create("/api/v1/namespaces/default/persistentvolumeclaims", {
            "apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": claim, "namespace": "default"},
            "spec": {"storageClassName": sc, "accessModes": ["ReadWriteOnce"],
                     "resources": {"requests": {"storage": "1Gi"}}}})
        await cluster.create_pod(for_api(
            PodBuilder(f"uses-{claim}").scheduler_name("py-scheduler").req(cpu="100m")
            .pvc(claim).obj()))
    # An ElasticQuota (its own namespace, so the preemption below stays quota-free): the
    # status controller patches its status.used once the pod there runs.
    await client.create("/api/v1/namespaces", {"metadata": {"name": "team-q"}})
    await client.create("/apis/scheduling.x-k8s.io/v1alpha1/namespaces/team-q/elasticquotas", {
        "metadata": {"name": "quota"},
        "spec": {"min": {"cpu": "2", "memory": "4Gi"}, "max": {"cpu": "2", "memory": "4Gi"}}})
    await cluster.create_pod(for_api(
        PodBuilder("quota-user", "team-q").scheduler_name("py-scheduler").req(cpu="100m").obj()))

    async def quota_used() -> bool:
        eq = await client.get("/apis/scheduling.x-k8s.io/v1alpha1/namespaces/team-q/elasticquotas/quota")
        return ((eq.get("status") or {}).get("used") or {}).get("cpu") == "100m"
    # Devices: a pod with a claim from a template (the sandbox's resourceclaim controller
    # creates the claim; PreBind reads it, adds the finalizer and writes allocation and
    # reservedFor).
    await client.create("/apis/resource.k8s.io/v1/namespaces/default/resourceclaimtemplates", {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
        "metadata": {"name": "one-gpu", "namespace": "default"},
        "spec": {"spec": {"devices": {"requests": [
            {"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]}}}})
    gpu_pod = for_api(PodBuilder("uses-gpu").scheduler_name("py-scheduler").req(cpu="100m").obj())
    gpu_pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]
    gpu_pod["spec"]["containers"][0].setdefault("resources", {})["claims"] = [{"name": "gpu"}]
    await cluster.create_pod(gpu_pod)
    # An extended resource a DeviceClass backs: PreBind creates the pod's claim.
    await cluster.create_pod(for_api(
        PodBuilder("uses-ext-gpu").scheduler_name("py-scheduler")
        .req(**{"example.com/gpu": "1"}).limits(**{"example.com/gpu": "1"}).obj()))
    everything = names + ["gang-0", "gang-1", "uses-claim-dyn", "uses-claim-static", "uses-gpu",
                          "uses-ext-gpu"]

    async def all_bound() -> bool:
        return all([await cluster.node_name(n) for n in everything])
    await wait_until(all_bound, timeout=30, interval=0.1,
                     message=f"workload bound; log:\n{proc.log_tail()}")

    async def gang_finished() -> bool:
        status = (await get_pod_group(client, "gang")).get("status") or {}
        return status.get("phase") == "Finished" and status.get("succeeded") == 2
    await wait_until(gang_finished, timeout=20, interval=0.1,
                     message="PodGroup status Finished (controller run by the leader)")
    await wait_until(quota_used, timeout=20, interval=0.1,
                     message="ElasticQuota status.used (controller run by the leader)")

    # Preemption: three 3-CPU fillers, one per 4-CPU node, then a higher-priority 3-CPU pod.
    await cluster.create_pods([gang_pod(f"filler-{i}", None, cpu="3", priority=0)
                               for i in range(3)])

    async def fillers_bound() -> bool:
        return all([await cluster.node_name(f"filler-{i}") for i in range(3)])
    await wait_until(fillers_bound, timeout=20, interval=0.1, message="fillers bound")
    await cluster.create_pod(gang_pod("vip", None, cpu="3", priority=1000))
    await wait_until(lambda: cluster.node_name("vip"), timeout=30, interval=0.1,
                     message=f"vip bound after preemption; log:\n{proc.log_tail()}")
    async def series() -> bool:
        return any(e.get("series") for e in await cluster.events_for("too-big"))
    await wait_until(series, timeout=20, interval=0.2, message="a FailedScheduling series")
    for claim in ("claim-dyn", "claim-static"):
        pvc = await client.get(f"/api/v1/namespaces/default/persistentvolumeclaims/{claim}")
        assert pvc["status"].get("phase") == "Bound", pvc

    # Scrapes through the token webhook: one allowed, one refused.
    assert (await asyncio.to_thread(proc.get, "/metrics", token="scraper-token",
                                    context=tls))[0] == 200
    assert (await asyncio.to_thread(proc.get, "/metrics", token="other-token",
                                    context=tls))[0] == 403


def _sandbox_key(a: Any) -> str:
    resource, _, sub = a.resource.partition("/")
    # The sandbox stores core and events.k8s.io events as one resource and counts both as
    # "events" (so its counters alone could not tell the two RBAC groups apart).
    group = "" if (a.group, resource) == ("events.k8s.io", "events") else a.group
    key = f"{a.verb} {resource}" + (f".{group}" if group else "")
    return f"{key}/{sub}" if sub else key


_RBAC_RUN: dict[str, Any] = {}


async def _rbac_calls(sandbox_process: Any, tmp_path: Path) -> tuple[Any, dict[str, Any]]:
    """Run the shipped configuration through the workload once per module, behind a
    recording proxy; returns (calls by RBAC attributes, the ClusterRole and Role)."""
    if _RBAC_RUN:
        return _RBAC_RUN["calls"], _RBAC_RUN["roles"]
    from tests.integration.procs import (
        RecordingProxy,
        configmap_config_text,
        install_crd,
        install_elasticquota_crd,
        rbac_documents,
    )
    from tests.integration.procs import write_kubeconfig as kubeconfig_for

    # Two simulated GPUs on one node, their DeviceClass backing example.com/gpu: a pod's
    # ResourceClaim is allocated and reserved in PreBind, and a pod asking for example.com/gpu
    # gets a claim the scheduler creates (DRAExtendedResource).
    sp = sandbox_process(nodes=3, node_cpu="4", node_memory="16Gi",
                         extra_args=[*AUTH_FLAGS, "--dra-devices",
                                     "gpu=2:nodes=1:extendedResourceName=example.com/gpu"])
    proxy = await RecordingProxy(sp.url).start()
    flags, tls = _tls_flags(tmp_path)
    # The shipped configuration as is: Coscheduling profile, leader election on the
    # py-scheduler Lease in kube-py-scheduler.
    config = write_config(tmp_path / "config.yaml", configmap_config_text())
    try:
        async with user_client(sp.kubeconfig_path) as cluster:
            await cluster.client.create("/api/v1/namespaces", {
                "apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": "kube-py-scheduler"}})
            await install_crd(cluster.client)
            await install_elasticquota_crd(cluster.client)
            with scheduler_processes() as procs:
                proc = SchedulerProcess(
                    kubeconfig=kubeconfig_for(tmp_path / "kc-proxy", proxy.url),
                    config=config, identity="rbac", namespace="kube-py-scheduler",
                    extra=flags, scheme="https")
                procs.append(proc.start())
                proc.wait_port()
                await wait_until(lambda: "leading" in proc.get("/readyz", context=tls)[1],
                                 timeout=20, message=f"leading; log:\n{proc.log_tail()}")
                await _rbac_workload(cluster, proc, tls)
                proc.signal(signal.SIGTERM)  # releases the lease: an update
                assert await asyncio.to_thread(proc.wait, 20) == 0, proc.log_tail()
                assert proc.logged("released the leader lease")
    finally:
        await proxy.stop()

    statuses = {s for *_, s in proxy.requests}
    assert 403 not in statuses and 401 not in statuses
    # The proxy's reading of each request agrees with the sandbox's own classification.
    counted = sp.admin.counters()["requests"]
    served = proxy.attributes(exclude_status=404)  # the sandbox does not count unknown paths
    for attrs, n in served.items():
        assert counted.get(_sandbox_key(attrs), 0) >= n, (attrs, counted)

    docs = rbac_documents()
    [cluster_role] = [d for d in docs if d["kind"] == "ClusterRole"
                      and d["metadata"]["name"] == "kube-py-scheduler"]
    [role] = [d for d in docs if d["kind"] == "Role"]
    _RBAC_RUN.update(calls=proxy.attributes(), roles={"ClusterRole": cluster_role, "Role": role})
    return _RBAC_RUN["calls"], _RBAC_RUN["roles"]


def _grants(role: dict[str, Any]) -> set[tuple[str, str, str]]:
    return {(g, res, v) for r in role["rules"] for g in r["apiGroups"]
            for res in r["resources"] for v in r["verbs"]}


async def test_rbac_allows_every_call_the_daemon_makes(
    sandbox_process: Any, tmp_path: Path
) -> None:
    from tests.integration.procs import rule_allows

    calls, roles = await _rbac_calls(sandbox_process, tmp_path)
    cluster_role, role = roles["ClusterRole"], roles["Role"]
    role_ns = role["metadata"]["namespace"]

    def allowed(attrs: Any) -> bool:
        if any(rule_allows(r, attrs) for r in cluster_role["rules"]):
            return True
        return attrs.namespace == role_ns and any(rule_allows(r, attrs) for r in role["rules"])

    refused = sorted({a.key() + (a.namespace, a.name) for a in calls if not allowed(a)})
    assert not refused, f"calls the shipped RBAC does not allow: {refused}"
    # The lease Role: exactly the calls made on our own Lease, in our own namespace.
    lease_calls = {a for a in calls if a.resource == "leases"}
    assert {(a.namespace, a.name or "-") for a in lease_calls} <= {
        (role_ns, "py-scheduler"), (role_ns, "-")}
    assert _grants(role) == {a.key() for a in lease_calls}


# ClusterRole grants that the run above does not call, each with the path that needs it.
NOT_EXERCISED: dict[tuple[str, str, str], str] = {
    ("resource.k8s.io", "resourceclaims", "get"):
        "PreBind writes over the informer's copy of a claim and reads it again only after a "
        "409 Conflict",
    ("resource.k8s.io", "resourceclaims", "delete"):
        "an extended-resource claim is deleted by the scheduler only when binding fails after "
        "PreBind created it, or when an earlier attempt left one behind",
}

async def test_rbac_grants_nothing_the_daemon_never_calls(
    sandbox_process: Any, tmp_path: Path
) -> None:
    calls, roles = await _rbac_calls(sandbox_process, tmp_path)
    used = {a.key() for a in calls}
    assert not set(NOT_EXERCISED) & used, "listed as not exercised but called"
    unused = sorted(_grants(roles["ClusterRole"]) - used - set(NOT_EXERCISED))
    assert not unused, f"ClusterRole grants never used: {unused}; used: {sorted(used)}"
