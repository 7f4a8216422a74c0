"""Helpers for the gang and deployment integration tests.

* the shipped manifests as the tests use them: the PodGroup CRD, the Coscheduling profile of
  ``manifests/configmap.yaml``, the RBAC rules of ``manifests/rbac.yaml``;
* ``SchedulerProcess``: ``python -m scheduler run`` in a subprocess, its logs parsed for the
  metrics port, its /readyz read over HTTP;
* ``RecordingProxy``: an HTTP proxy in front of an API server that records every request of
  the one client pointed at it (the sandbox's own counters cannot tell clients apart);
* ``request_attributes``: Kubernetes' RequestInfo for a recorded request, as RBAC sees it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import yaml

from scheduler.config.load import parse_config_text
from scheduler.config.types import KubeSchedulerConfiguration
from scheduler.plugins.coscheduling import POD_GROUP_LABEL

REPO = Path(__file__).resolve().parents[2]
MANIFESTS = REPO / "manifests"
CRD_PATH = MANIFESTS / "crds" / "scheduling.x-k8s.io_podgroups.yaml"
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
PODGROUPS = "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{ns}/podgroups"
PODGROUP = PODGROUPS + "/{name}"
RUN_SECONDS = "sandbox.kube-py-scheduler.io/run-seconds"


# --- the shipped manifests ---------------------------------------------------------------


def configmap_config_text() -> str:
    """The KubeSchedulerConfiguration held by manifests/configmap.yaml."""
    doc = yaml.safe_load((MANIFESTS / "configmap.yaml").read_text())
    return str(doc["data"]["config.yaml"])


def coscheduling_config(*, coscheduling_args: dict[str, Any] | None = None,
                        leader_elect: bool = False) -> KubeSchedulerConfiguration:
    """The shipped profile (Coscheduling enabled, its QueueSort only) with test timings."""
    config = parse_config_text(configmap_config_text(), source="manifests/configmap.yaml")
    config.leader_election.leader_elect = leader_elect
    config.pod_initial_backoff_seconds = 1
    config.pod_max_backoff_seconds = 2
    if coscheduling_args:
        for profile in config.profiles:
            current = profile.plugin_config.get("Coscheduling") or {}
            profile.plugin_config["Coscheduling"] = {**current, **coscheduling_args}
    return config


def crd_manifest() -> dict[str, Any]:
    return dict(yaml.safe_load(CRD_PATH.read_text()))


async def install_crd(client: Any) -> None:
    """Create the PodGroup CRD and wait until its resource is served."""
    await client.create(CRDS, crd_manifest())
    deadline = time.monotonic() + 10
    while True:
        with contextlib.suppress(Exception):
            await client.get(PODGROUPS.format(ns="default"))
            return
        if time.monotonic() > deadline:
            raise AssertionError("the PodGroup CRD was not served within 10 s")
        await asyncio.sleep(0.05)


async def install_elasticquota_crd(client: Any) -> None:
    """Create the ElasticQuota CRD and wait until its resource is served."""
    await client.create(CRDS, dict(yaml.safe_load(
        (MANIFESTS / "crds" / "scheduling.x-k8s.io_elasticquotas.yaml").read_text())))
    deadline = time.monotonic() + 10
    while True:
        with contextlib.suppress(Exception):
            await client.get("/apis/scheduling.x-k8s.io/v1alpha1/namespaces/default/elasticquotas")
            return
        if time.monotonic() > deadline:
            raise AssertionError("the ElasticQuota CRD was not served within 10 s")
        await asyncio.sleep(0.05)


def pod_group(name: str, min_member: int, *, ns: str = "default",
              timeout: int | None = None, min_resources: dict[str, str] | None = None
              ) -> dict[str, Any]:
    spec: dict[str, Any] = {"minMember": min_member}
    if timeout is not None:
        spec["scheduleTimeoutSeconds"] = timeout
    if min_resources is not None:
        spec["minResources"] = min_resources
    return {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": ns}, "spec": spec}


async def create_pod_group(client: Any, pg: dict[str, Any]) -> dict[str, Any]:
    ns = pg["metadata"].get("namespace", "default")
    result: dict[str, Any] = await client.create(PODGROUPS.format(ns=ns), pg)
    return result


async def get_pod_group(client: Any, name: str, ns: str = "default") -> dict[str, Any]:
    result: dict[str, Any] = await client.get(PODGROUP.format(ns=ns, name=name))
    return result


def gang_pod(name: str, group: str | None, *, cpu: str = "100m", memory: str = "64Mi",
             run_seconds: float | None = None, priority: int | None = None,
             node_selector: dict[str, str] | None = None,
             scheduler: str = "py-scheduler") -> dict[str, Any]:
    from tests.builders import PodBuilder
    from tests.integration.harness import for_api

    b = PodBuilder(name).scheduler_name(scheduler).req(cpu=cpu, memory=memory)
    if group:
        b.labels({POD_GROUP_LABEL: group})
    if run_seconds is not None:
        b.annotations({RUN_SECONDS: str(run_seconds)})
    if priority is not None:
        b.priority(priority)
    if node_selector:
        b.node_selector(node_selector)
    return for_api(b.obj())


def rbac_documents() -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((MANIFESTS / "rbac.yaml").read_text()) if d]


# --- RBAC attributes of a request --------------------------------------------------------


@dataclass(frozen=True, order=True)
class Attributes:
    """What an RBAC rule is matched against (resource requests only)."""

    group: str
    resource: str  # with "/subresource" when there is one
    verb: str
    namespace: str = ""
    name: str = ""

    def key(self) -> tuple[str, str, str]:
        return self.group, self.resource, self.verb


_VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}


def request_attributes(method: str, path: str, query: str) -> Attributes | None:
    """Kubernetes' RequestInfo for one request; None for non-resource paths (discovery,
    /version, /openapi), which RBAC grants through system:discovery to every user."""
    parts = [p for p in path.split("/") if p]
    if len(parts) >= 2 and parts[0] == "api":
        group, rest = "", parts[2:]
    elif len(parts) >= 3 and parts[0] == "apis":
        group, rest = parts[1], parts[3:]
    else:
        return None
    if not rest:
        return None
    q = parse_qs(query)
    watch = q.get("watch", ["false"])[0] in ("1", "true")
    if rest[0] == "watch":
        watch, rest = True, rest[1:]
    namespace = ""
    if rest[0] == "namespaces" and len(rest) >= 3:
        namespace, rest = rest[1], rest[2:]
    resource = rest[0]
    name = rest[1] if len(rest) > 1 else ""
    sub = rest[2] if len(rest) > 2 else ""
    if method == "GET":
        verb = "watch" if watch else ("get" if name else "list")
    else:
        verb = _VERBS.get(method, method.lower())
        if verb == "delete" and not name:
            verb = "deletecollection"
    return Attributes(group, f"{resource}/{sub}" if sub else resource, verb, namespace, name)


def rule_allows(rule: dict[str, Any], attrs: Attributes) -> bool:
    groups = rule.get("apiGroups") or []
    resources = rule.get("resources") or []
    verbs = rule.get("verbs") or []
    names = rule.get("resourceNames") or []
    return ((attrs.group in groups or "*" in groups)
            and (attrs.resource in resources or "*" in resources)
            and (attrs.verb in verbs or "*" in verbs)
            # resourceNames never match list/watch/create-collection requests without a name.
            and (not names or (bool(attrs.name) and attrs.name in names)))


# --- a recording proxy -------------------------------------------------------------------


class RecordingProxy:
    """Forwards every request to ``upstream`` (streaming, so watches work) and records it."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.requests: list[tuple[str, str, str, int]] = []  # method, path, query, status
        self.url = ""
        self._runner: Any = None
        self._session: Any = None

    async def start(self) -> RecordingProxy:
        import aiohttp
        from aiohttp import web

        self._session = aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=10),
            auto_decompress=False)
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = self._runner.addresses[0][1]
        self.url = f"http://127.0.0.1:{port}"
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        if self._session is not None:
            await self._session.close()

    async def _handle(self, request: Any) -> Any:
        from aiohttp import web

        body = await request.read()
        headers = {k: v for k, v in request.headers.items()
                   if k.lower() not in ("host", "content-length", "transfer-encoding")}
        record = [request.method, request.path, request.query_string, 0]
        self.requests.append(record)  # type: ignore[arg-type]
        async with self._session.request(
                request.method, self.upstream + request.path_qs, data=body or None,
                headers=headers, allow_redirects=False) as upstream:
            record[3] = upstream.status
            response = web.StreamResponse(status=upstream.status)
            for k, v in upstream.headers.items():
                if k.lower() not in ("content-length", "transfer-encoding", "connection"):
                    response.headers[k] = v
            await response.prepare(request)
            with contextlib.suppress(ConnectionResetError):
                async for chunk in upstream.content.iter_any():
                    await response.write(chunk)
                await response.write_eof()
            return response

    def attributes(self, *, exclude_status: int | None = None) -> Counter[Attributes]:
        out: Counter[Attributes] = Counter()
        for method, path, query, status in self.requests:
            if exclude_status is not None and status == exclude_status:
                continue
            attrs = request_attributes(method, path, query)
            if attrs is not None:
                out[attrs] += 1
        return out


def write_kubeconfig(path: Path, server: str, token: str | None = None) -> Path:
    from scheduler.sandbox.kubeconfig import write_kubeconfig as write

    return Path(write(path, server, token))


# --- scheduler processes -----------------------------------------------------------------


def write_config(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


class SchedulerProcess:
    """``python -m scheduler run`` with JSON logs; ``metrics_port`` read from its log."""

    def __init__(self, *, kubeconfig: Path, config: Path | None, identity: str,
                 namespace: str = "kube-system", extra: list[str] | None = None,
                 scheme: str = "http") -> None:
        self.identity = identity
        self.scheme = scheme
        self.argv = [sys.executable, "-m", "scheduler", "run", "--kubeconfig", str(kubeconfig),
                     "--metrics-bind-address", "127.0.0.1:0", "--log-format", "json",
                     "--stop-grace-seconds", "2"]
        if config is not None:
            self.argv += ["--config", str(config)]
        if scheme == "http":  # secure serving is the default: switch it off explicitly
            self.argv += ["--secure-serving=false"]
        self.argv += list(extra or [])
        self.env = {**os.environ, "POD_NAME": identity, "POD_NAMESPACE": namespace,
                    "PYTHONUNBUFFERED": "1"}
        self.proc: subprocess.Popen[bytes] | None = None
        self.lines: list[str] = []
        self.metrics_port = 0
        self._port_seen = threading.Event()

    def start(self) -> SchedulerProcess:
        self.proc = subprocess.Popen(self.argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, env=self.env, cwd=REPO)
        threading.Thread(target=self._drain, daemon=True, name=f"log-{self.identity}").start()
        return self

    def _drain(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for raw in iter(self.proc.stdout.readline, b""):
            line = raw.decode(errors="replace").rstrip()
            self.lines.append(line)
            if not self.metrics_port and "serving health and metrics" in line:
                with contextlib.suppress(ValueError, KeyError, TypeError):
                    self.metrics_port = int(json.loads(line)["port"])
                    self._port_seen.set()

    def wait_port(self, timeout: float = 30.0) -> int:
        if not self._port_seen.wait(timeout):
            raise AssertionError(f"{self.identity}: no metrics port logged:\n{self.log_tail()}")
        return self.metrics_port

    def log_tail(self, n: int = 40) -> str:
        return "\n".join(self.lines[-n:])

    def logged(self, text: str) -> bool:
        return any(text in line for line in self.lines)

    def get(self, path: str, *, token: str | None = None, timeout: float = 5.0,
            context: Any = None) -> tuple[int, str]:
        """(status, body) of GET ``path`` on the metrics server; (0, error) if unreachable."""
        url = f"{self.scheme}://127.0.0.1:{self.metrics_port}{path}"
        req = urllib.request.Request(url)
        if token is not None:
            req.add_header("Authorization", f"Bearer {token}")
        try:
            with urllib.request.urlopen(req, timeout=timeout, context=context) as resp:
                return resp.status, resp.read().decode(errors="replace")
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode(errors="replace")
        except (urllib.error.URLError, OSError) as e:
            return 0, str(e)

    def readyz(self) -> str:
        return self.get("/readyz")[1]

    def poll(self) -> int | None:
        assert self.proc is not None
        return self.proc.poll()

    def signal(self, sig: int) -> None:
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)

    def wait(self, timeout: float) -> int:
        assert self.proc is not None
        return self.proc.wait(timeout)

    def stop(self) -> int | None:
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


@contextlib.contextmanager
def scheduler_processes() -> Iterator[list[SchedulerProcess]]:
    """A list to append started processes to; each is stopped (by its own pid) at exit."""
    procs: list[SchedulerProcess] = []
    try:
        yield procs
    finally:
        for p in procs:
            p.stop()
