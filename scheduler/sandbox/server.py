"""The ``Sandbox``: wires store, registry, kubelet simulation and HTTP app, and runs them.

It runs on the caller's event loop (``async with Sandbox(...)``) or on a private loop in a
thread (``Sandbox.start_in_thread``), which is how the scheduler's ``run --sandbox`` mode and
synchronous tests use it.
"""

from __future__ import annotations

import asyncio
import logging
import os
import ssl
import threading
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import yaml
from aiohttp import web

from .app import SandboxApp, SandboxRunner
from .auth import AuthTable
from .claimcontroller import ClaimControllerSim
from .errors import ApiError
from .faults import Faults
from .kubeconfig import default_kubeconfig_path, write_kubeconfig
from .controllers import ControllerSim
from .dradriver import DraDriverSim, parse_device_kinds
from .kubelet import KubeletSim, make_node
from .nscontroller import NamespaceControllerSim
from .pvcontroller import PVControllerSim
from .registry import Registry
from .store import Store
from .tls import ServingCerts, generate

log = logging.getLogger("scheduler.sandbox")

INITIAL_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
# With ``scheduler_prereqs`` (the CLI's and ``run --sandbox``'s default) the sandbox starts as a
# cluster prepared for this scheduler: its namespace (the shipped config's leader-election
# lease lives there) and the PodGroup and ElasticQuota CRDs, identical to manifests/crds/ (a test checks), so the
# gang examples work. A bare Sandbox() is a fresh kube-apiserver, which has neither.
SCHEDULER_NAMESPACE = "kube-py-scheduler"
PODGROUP_CRD = Path(__file__).parent / "crds" / "scheduling.x-k8s.io_podgroups.yaml"
ELASTICQUOTA_CRD = Path(__file__).parent / "crds" / "scheduling.x-k8s.io_elasticquotas.yaml"


@dataclass
class SandboxConfig:
    host: str = "127.0.0.1"
    port: int = 0
    token: str | None = None
    tls: bool | None = None  # None: HTTPS iff a token is set
    scheduler_prereqs: bool = False  # create namespace kube-py-scheduler and the PodGroup CRD
    nodes: int = 0
    node_cpu: str = "32"
    node_memory: str = "128Gi"
    node_pods: str = "110"
    node_labels: dict[str, str] | None = None
    node_topology: bool = True  # zone and region labels on the nodes (make_node)
    simulate_kubelet: bool = True
    watch_history: int = 10000
    max_requests_inflight: int = 400
    max_mutating_requests_inflight: int = 200
    bookmark_interval: float = 10.0
    max_grace_seconds: float = 1.0
    kubelet_tick: float = 0.01
    simulate_pv_controller: bool = True
    simulate_controllers: bool = True  # Deployment/ReplicaSet/Job controllers and garbage collection
    # simulated DRA driver: "gpu=8,nic=2:model=cx7" (see dradriver.py); empty: none
    dra_devices: str = ""
    namespace_controller_delay: float = 1.0  # s between a namespace's DELETE and emptying it
    auth_users: dict[str, tuple[str, list[str]]] | None = None
    auth_allow: list[tuple[str, str, str]] | None = None


class Sandbox:
    """An in-memory kube-apiserver stand-in serving real HTTP.

    ``async with Sandbox(nodes=3) as sb:`` then use ``sb.url`` / ``sb.write_kubeconfig(path)``;
    ``sb.faults`` injects faults (call it from the sandbox's loop).
    """

    def __init__(self, **kwargs: Any) -> None:
        self.config = SandboxConfig(**kwargs)
        c = self.config
        if c.watch_history < 1:
            raise ValueError("watch_history must be >= 1")
        self.store = Store(watch_history=c.watch_history)
        self.registry = Registry(self.store)
        self.faults = Faults()
        self.faults.raw_writer = self.registry.raw_put
        self.app = SandboxApp(
            self.registry,
            self.faults,
            token=c.token,
            max_inflight=c.max_requests_inflight,
            max_mutating_inflight=c.max_mutating_requests_inflight,
            bookmark_interval=c.bookmark_interval,
            auth=AuthTable(c.auth_users, c.auth_allow),
        )
        self.kubelet: KubeletSim | None = None
        if c.simulate_kubelet:
            self.kubelet = KubeletSim(self.registry, tick=c.kubelet_tick, max_grace=c.max_grace_seconds)
            self.registry.graceful_pod_deletion = True
        # kube-controller-manager's namespace controller (always on: namespaces must go)
        self.namespace_controller = NamespaceControllerSim(self.registry, delay=c.namespace_controller_delay)
        self._ns_task: asyncio.Task[None] | None = None
        self.controllers: ControllerSim | None = None
        if c.simulate_controllers:
            self.controllers = ControllerSim(self.registry)
            self.registry.garbage_collection = True
        # kube-controller-manager's resourceclaim controller (it relies on the GC above)
        self.claim_controller: ClaimControllerSim | None = (
            ClaimControllerSim(self.registry) if c.simulate_controllers else None)
        self._claim_task: asyncio.Task[None] | None = None
        self.pv_controller: PVControllerSim | None = None
        if c.simulate_pv_controller:
            self.pv_controller = PVControllerSim(self.registry)
        self._runner: web.AppRunner | None = None
        self._kubelet_task: asyncio.Task[None] | None = None
        self._pv_task: asyncio.Task[None] | None = None
        self._controllers_task: asyncio.Task[None] | None = None
        self.url = ""
        self.port = 0
        self._default_kubeconfigs: set[Path] = set()
        # client-go sends bearer tokens only over TLS: a sandbox with a token serves HTTPS
        use_tls = c.tls if c.tls is not None else bool(c.token)
        self.certs: ServingCerts | None = generate() if use_tls else None
        self._bootstrap()
        self.dra_driver: DraDriverSim | None = None
        self._dra_task: asyncio.Task[None] | None = None
        if c.dra_devices:
            self.dra_driver = DraDriverSim(self.registry, parse_device_kinds(c.dra_devices))
            self.dra_driver.publish_all()

    @property
    def token(self) -> str | None:
        return self.config.token

    def _bootstrap(self) -> None:
        reg = self.registry
        ns_rt = reg.catalog.builtin("", "namespaces")
        for ns in INITIAL_NAMESPACES:
            reg.create(ns_rt, "", {"metadata": {"name": ns}})
        if self.config.scheduler_prereqs:
            reg.create(ns_rt, "", {"metadata": {"name": SCHEDULER_NAMESPACE}})
            crd_rt = reg.catalog.builtin("apiextensions.k8s.io", "customresourcedefinitions")
            reg.create(crd_rt, "", yaml.safe_load(PODGROUP_CRD.read_text()))
            reg.create(crd_rt, "", yaml.safe_load(ELASTICQUOTA_CRD.read_text()))
        self.add_nodes(self.config.nodes)

    def add_nodes(self, n: int, *, start: int | None = None) -> None:
        """Create ``n`` more simulated Ready nodes (node-0000, node-0001, ...)."""
        c = self.config
        node_rt = self.registry.catalog.builtin("", "nodes")
        first = self.registry.ts(node_rt).count if start is None else start
        width = max(4, len(str(first + n - 1)))
        for i in range(first, first + n):
            node = make_node(i, cpu=c.node_cpu, memory=c.node_memory, pods=c.node_pods,
                             labels=c.node_labels, width=width, topology=c.node_topology)
            try:
                self.registry.create(node_rt, "", node)
            except ApiError as e:
                raise ValueError(f"cannot create node {node['metadata']['name']}: {e.message}") from None

    # ------------------------------------------------------------ lifecycle

    async def start(self) -> Sandbox:
        c = self.config
        app = self.app.make_app()
        runner = SandboxRunner(self.app, app, access_log=None, handle_signals=False, shutdown_timeout=1.0)
        await runner.setup()
        site = web.TCPSite(runner, c.host, c.port, backlog=1024, reuse_address=True,
                           ssl_context=self.certs.server_context() if self.certs else None)
        await site.start()
        self._runner = runner
        addr = runner.addresses[0]
        self.port = int(addr[1])
        host = c.host if c.host not in ("0.0.0.0", "::", "") else "127.0.0.1"
        if ":" in host:
            host = f"[{host}]"
        self.url = f"{'https' if self.certs else 'http'}://{host}:{self.port}"
        self.app.server_address = f"{host}:{self.port}"
        if self.kubelet is not None:
            self._kubelet_task = asyncio.create_task(self.kubelet.run(), name="sandbox-kubelet")
            self._kubelet_task.add_done_callback(_log_crash)
        if self.pv_controller is not None:
            self._pv_task = asyncio.create_task(self.pv_controller.run(), name="sandbox-pv-controller")
            self._pv_task.add_done_callback(_log_crash)
        if self.controllers is not None:
            self._controllers_task = asyncio.create_task(self.controllers.run(), name="sandbox-controllers")
            self._controllers_task.add_done_callback(_log_crash)
        if self.dra_driver is not None:
            # nodes added since construction get their slices on the driver's first pass
            # (its informer's initial list publishes for every node listed)
            self._dra_task = asyncio.create_task(self.dra_driver.run(), name="sandbox-dra-driver")
            self._dra_task.add_done_callback(_log_crash)
        self._ns_task = asyncio.create_task(self.namespace_controller.run(), name="sandbox-namespace-controller")
        self._ns_task.add_done_callback(_log_crash)
        if self.claim_controller is not None:
            self._claim_task = asyncio.create_task(self.claim_controller.run(),
                                                   name="sandbox-resourceclaim-controller")
            self._claim_task.add_done_callback(_log_crash)
        log.info("sandbox listening on %s", self.url)
        return self

    async def stop(self) -> None:
        self.app.shutdown()
        for task in (self._kubelet_task, self._pv_task, self._controllers_task, self._claim_task,
                     self._dra_task, self._ns_task):
            if task is not None:
                task.cancel()
                try:
                    await task
                except asyncio.CancelledError:
                    pass
        self._kubelet_task = self._pv_task = self._controllers_task = self._claim_task = self._dra_task = None
        self._ns_task = None
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        for kc in self._default_kubeconfigs:
            kc.unlink(missing_ok=True)
        self._default_kubeconfigs.clear()

    async def __aenter__(self) -> Sandbox:
        return await self.start()

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()

    def write_kubeconfig(self, path: str | os.PathLike[str] | None = None) -> Path:
        """Write a kubeconfig for this sandbox to ``path``, or to this sandbox's own default
        path (``default_kubeconfig_path``); returns the path written."""
        if not self.url:
            raise RuntimeError("sandbox not started")
        target = default_kubeconfig_path(self.port) if path is None else path
        written = write_kubeconfig(target, self.url, self.token, ca_pem=self.certs.ca_pem if self.certs else None)
        if path is None:
            self._default_kubeconfigs.add(written)  # ours to remove on stop; a named path is the caller's
        return written

    def client_ssl_context(self) -> ssl.SSLContext | None:
        """An SSL context trusting this sandbox's CA (None when it serves plain HTTP)."""
        return self.certs.client_context() if self.certs else None

    def counters(self) -> dict[str, Any]:
        return self.app.counters()

    def drop_watches(self) -> int:
        return self.store.drop_watches()

    def raw_put(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Store ``obj`` bypassing validation (a fault; see ``Faults.raw_put``)."""
        return self.registry.raw_put(obj)

    def compact(self) -> None:
        self.store.compact()

    @classmethod
    def start_in_thread(cls, **kwargs: Any) -> SandboxThread:
        """Run a sandbox on its own event loop in a daemon thread; returns once it serves."""
        return SandboxThread(cls(**kwargs))


def _log_crash(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("sandbox task %s crashed", task.get_name(), exc_info=task.exception())


class SandboxThread:
    """Handle of a sandbox running in a thread: ``.url``, ``.token``, ``.admin``, ``.stop()``."""

    def __init__(self, sandbox: Sandbox) -> None:
        self.sandbox = sandbox
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._stopped: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._run, name="sandbox", daemon=True)
        self._thread.start()
        self._ready.wait()
        if self._error is not None:
            raise self._error

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_until_complete(self._main())
        finally:
            self._loop.close()

    async def _main(self) -> None:
        self._stopped = asyncio.Event()
        try:
            await self.sandbox.start()
        except BaseException as e:
            self._error = e
            self._ready.set()
            return
        self._ready.set()
        await self._stopped.wait()
        await self.sandbox.stop()

    @property
    def url(self) -> str:
        return self.sandbox.url

    @property
    def token(self) -> str | None:
        return self.sandbox.token

    @property
    def admin(self) -> Any:
        from .testing import SandboxAdmin

        certs = self.sandbox.certs
        return SandboxAdmin(self.url, self.token, ca_pem=certs.ca_pem if certs else None)

    def write_kubeconfig(self, path: str | os.PathLike[str] | None = None) -> Path:
        return self.sandbox.write_kubeconfig(path)

    def stop(self, timeout: float = 10.0) -> None:
        if not self._thread.is_alive():
            return
        stopped = self._stopped
        if stopped is not None:
            self._loop.call_soon_threadsafe(stopped.set)
        self._thread.join(timeout)

    def __enter__(self) -> SandboxThread:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
