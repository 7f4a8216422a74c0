"""The PodGroup status controller: keeps ``status`` of every PodGroup in step with its pods.

Users (and tools such as ``kubectl get pg``) read a gang's progress from the PodGroup:
phase, how many members run, succeeded or failed, when scheduling started and which
workload occupies the group, as scheduler-plugins' controller reports it.  The scheduler
itself does not need this status, so it lives apart from the plugin.

Written with kopf: an index of pods by group and an index of PodGroups keep everything in
memory; an event on a labelled pod or on a PodGroup recomputes that group's status and
patches ``status`` through the status subresource when it changed (nothing else is ever
written: no annotations, no finalizers, no Kubernetes events).

It runs inside the scheduler (only while leader) through :func:`run_controller`, or alone
as ``kube-py-scheduler podgroup-controller`` (``scheduler/cli/``).  A controller is not a
plugin (scheduler-plugins keeps it in ``pkg/controllers/``), so it lives here.  kopf's operator is not a good guest on a
shared event loop (it installs SIGINT/SIGTERM handlers in the main thread and, on exit,
cancels every task created after it started), so it runs on its own loop in a dedicated
thread; :func:`run_controller` bridges the caller's ``stop`` / ``ready`` events to it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

import kopf
import structlog

from scheduler.client.api import (
    ApiClient,
    ApiConnectionError,
    ApiError,
    NotFound,
    resource_path,
)
from scheduler.client.connection import ConfigurationError, ConnectionConfig, load_connection
from scheduler.client.informer import MISSING_RESOURCE_POLL_SECONDS
from scheduler.objects.validation import validate_object
from scheduler.plugins.coscheduling.core import POD_GROUP_LABEL

log = structlog.get_logger(__name__)

GROUP = "scheduling.x-k8s.io"
VERSION = "v1alpha1"
PLURAL = "podgroups"
GROUP_VERSION = f"{GROUP}/{VERSION}"

PHASE_PENDING = "Pending"
PHASE_SCHEDULING = "Scheduling"
PHASE_RUNNING = "Running"
PHASE_FINISHED = "Finished"
PHASE_FAILED = "Failed"
TERMINAL_PHASES = frozenset({PHASE_FINISHED, PHASE_FAILED})

MERGE_PATCH = "application/merge-patch+json"
PATCH_ATTEMPTS = 3
THREAD_NAME = "podgroup-controller"


# --- the status computation (pure) -------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MemberFacts:
    """What the status needs from one member pod."""

    uid: str
    phase: str
    node_name: str
    # ``namespace/ownerName`` of each owner reference.
    owners: tuple[str, ...]


def member_facts(pod: Mapping[str, Any]) -> MemberFacts:
    meta = pod.get("metadata") or {}
    namespace = meta.get("namespace") or ""
    owners = tuple(
        f"{namespace}/{ref.get('name')}"
        for ref in meta.get("ownerReferences") or ()
        if isinstance(ref, Mapping) and ref.get("name")
    )
    return MemberFacts(
        uid=str(meta.get("uid") or meta.get("name") or ""),
        phase=str((pod.get("status") or {}).get("phase") or "Pending"),
        node_name=str((pod.get("spec") or {}).get("nodeName") or ""),
        owners=owners,
    )


def _now_rfc3339() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _min_member(pg: Mapping[str, Any]) -> int:
    value = (pg.get("spec") or {}).get("minMember")
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    return 1  # unset or invalid: a group of one (the API server enforces minimum 1)


def compute_status(
    pg: Mapping[str, Any],
    members: Iterable[MemberFacts],
    *,
    now: Callable[[], str] = _now_rfc3339,
) -> dict[str, Any]:
    """The status a PodGroup should have, given its members.

    Pending: not enough members, or none scheduled yet; Scheduling: members are being
    placed; Running: running + succeeded >= minMember; Finished: succeeded >= minMember;
    Failed: some failed and, with the gang started, too few are left running.  Finished and
    Failed are final (as upstream, the group is not revisited).
    """
    current: Mapping[str, Any] = pg.get("status") or {}
    if current.get("phase") in TERMINAL_PHASES:
        return dict(current)
    members = list(members)
    min_member = _min_member(pg)
    running = sum(1 for m in members if m.phase == "Running")
    succeeded = sum(1 for m in members if m.phase == "Succeeded")
    failed = sum(1 for m in members if m.phase == "Failed")
    scheduled = sum(1 for m in members if m.node_name)

    if succeeded >= min_member:
        phase = PHASE_FINISHED
    elif failed and running + succeeded < min_member <= running + succeeded + failed:
        phase = PHASE_FAILED
    elif running + succeeded >= min_member:
        phase = PHASE_RUNNING
    elif scheduled and len(members) >= min_member:
        phase = PHASE_SCHEDULING
    else:
        phase = PHASE_PENDING

    status: dict[str, Any] = dict(current)
    status.update(phase=phase, running=running, succeeded=succeeded, failed=failed)
    if scheduled and not current.get("scheduleStartTime"):
        status["scheduleStartTime"] = now()
    if not current.get("occupiedBy"):
        owners = sorted({o for m in members for o in m.owners})
        if owners:
            status["occupiedBy"] = ",".join(owners)
    return status


def status_patch(current: Mapping[str, Any], desired: Mapping[str, Any]) -> dict[str, Any]:
    """The fields of ``desired`` that differ from ``current`` ({} when nothing changed)."""
    return {k: v for k, v in desired.items() if current.get(k) != v}


# --- reconciling -------------------------------------------------------------------------


class StatusReconciler:
    """Recomputes one group's status and patches what changed (one group at a time)."""

    def __init__(self, client: Any, *, now: Callable[[], str] = _now_rfc3339,
                 retry_delay: float = 0.5) -> None:
        self._client = client
        self._now = now
        self._retry_delay = retry_delay
        self._locks: dict[tuple[str, str], asyncio.Lock] = {}
        # What we last wrote per group, and on top of which PodGroup resourceVersion: until
        # our own update comes back through the watch, the same answer is not re-sent.
        self._last: dict[tuple[str, str], tuple[str, dict[str, Any]]] = {}
        # (namespace, name) -> the problem last logged for a malformed PodGroup (logged once)
        self._malformed: dict[tuple[str, str], str] = {}
        self.patches = 0

    def forget(self, namespace: str, name: str) -> None:
        self._locks.pop((namespace, name), None)
        self._last.pop((namespace, name), None)
        self._malformed.pop((namespace, name), None)

    async def reconcile(
        self,
        namespace: str,
        name: str,
        get_pod_group: Callable[[], Mapping[str, Any] | None],
        get_members: Callable[[], Iterable[MemberFacts]],
    ) -> bool:
        """Patch the group's status if it changed; True when a patch was sent."""
        key = (namespace, name)
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:
            # Read inside the lock so the last writer always computed from the newest state.
            pg = get_pod_group()
            if pg is None:
                return False
            problem = validate_object("PodGroup", pg)
            if problem is not None:
                # No status can be computed (nor written: the CRD schema refuses it).
                if self._malformed.get(key) != str(problem):
                    self._malformed[key] = str(problem)
                    log.warning("PodGroup is malformed; its status is not maintained",
                                error=str(problem))
                return False
            self._malformed.pop(key, None)
            current: Mapping[str, Any] = pg.get("status") or {}
            desired = compute_status(pg, get_members(), now=self._now)
            patch = status_patch(current, desired)
            if not patch:
                return False
            rv = str((pg.get("metadata") or {}).get("resourceVersion") or "")
            last = self._last.get(key)
            if last is not None and last[0] == rv and not status_patch(last[1], desired):
                return False
            if await self._patch(namespace, name, patch):
                self._last[key] = (rv, desired)
                return True
            return False

    async def _patch(self, namespace: str, name: str, patch: Mapping[str, Any]) -> bool:
        path = resource_path(GROUP_VERSION, PLURAL, namespace, name, "status")
        for attempt in range(1, PATCH_ATTEMPTS + 1):
            try:
                resp = await self._client.request(
                    "PATCH", path, body={"status": dict(patch)}, content_type=MERGE_PATCH)
            except Exception as exc:  # connection trouble: retry, then give up until next event
                log.warning("podgroup status patch failed", podgroup=f"{namespace}/{name}",
                            attempt=attempt, error=str(exc))
            else:
                if 200 <= resp.status < 300:
                    self.patches += 1
                    return True
                if resp.status == 404:  # deleted meanwhile
                    return False
                log.warning("podgroup status patch rejected", podgroup=f"{namespace}/{name}",
                            status=resp.status, body=str(resp.body)[:300], attempt=attempt)
                if resp.status < 500 and resp.status not in (409, 429):
                    return False
            if attempt < PATCH_ATTEMPTS:
                await asyncio.sleep(self._retry_delay * attempt)
        return False


# --- kopf wiring -------------------------------------------------------------------------


def connection_info(conn: ConnectionConfig) -> kopf.ConnectionInfo:
    """kopf's view of the connection resolved from the kubeconfig (or in-cluster config)."""
    scheme: str | None = None
    token: str | None = None
    username: str | None = None
    password: str | None = None
    header = conn.authorization()
    if header:
        kind, _, value = header.partition(" ")
        if kind.lower() == "basic":
            import base64

            decoded = base64.b64decode(value).decode()
            username, _, password = decoded.partition(":")
        else:
            scheme, token = kind, value
    return kopf.ConnectionInfo(
        server=conn.host,
        scheme=scheme,
        token=token,
        username=username,
        password=password,
        ca_path=conn.ca_file,
        ca_data=conn.ca_data,
        insecure=not conn.verify_ssl,
        certificate_path=conn.cert_file,
        private_key_path=conn.key_file,
        default_namespace=conn.namespace,
        proxy_url=conn.proxy,
    )


def configure_settings(settings: kopf.OperatorSettings) -> None:
    """Quiet, self-contained kopf: no peering, no K8s events, no CRD scanning, no SIGKILL."""
    settings.peering.standalone = True
    settings.posting.enabled = False
    settings.scanning.disabled = True
    # kopf would SIGKILL the thread (thus the process) if it ever stopped other than by our
    # stop flag and took too long; the scheduler must never be killed by its controller.
    settings.process.ultimate_exiting_timeout = None
    settings.watching.server_timeout = 300
    settings.watching.client_timeout = 330
    settings.watching.connect_timeout = 10
    settings.networking.connect_timeout = 10
    settings.networking.request_timeout = 60


def build_registry(conn: ConnectionConfig, reconciler: StatusReconciler) -> kopf.OperatorRegistry:
    """A private registry (never kopf's global one): the controller can run several times
    in one process (tests, leadership regained) without handlers piling up."""
    registry = kopf.OperatorRegistry()

    @kopf.on.login(registry=registry)
    def login(**_: Any) -> kopf.ConnectionInfo:
        return connection_info(conn)

    @kopf.index("pods", labels={POD_GROUP_LABEL: kopf.PRESENT}, id="podgroup_members",
                registry=registry)
    def podgroup_members(*, namespace: str | None, labels: Mapping[str, str], body: kopf.Body,
                         **_: Any) -> dict[tuple[str, str], MemberFacts]:
        return {(namespace or "", labels[POD_GROUP_LABEL]): member_facts(body)}

    @kopf.index(GROUP, VERSION, PLURAL, id="podgroups", registry=registry)
    def podgroups(*, namespace: str | None, name: str, body: kopf.Body,
                  **_: Any) -> dict[tuple[str, str], dict[str, Any]]:
        return {(namespace or "", name): dict(body)}

    def getters(namespace: str, name: str, kwargs: Mapping[str, Any]) -> tuple[
            Callable[[], Mapping[str, Any] | None], Callable[[], list[MemberFacts]]]:
        # kopf passes each index to handlers as a keyword argument named after its function.
        groups: kopf.Index[tuple[str, str], dict[str, Any]] = kwargs["podgroups"]
        members: kopf.Index[tuple[str, str], MemberFacts] = kwargs["podgroup_members"]

        def get_pod_group() -> Mapping[str, Any] | None:
            for obj in groups.get((namespace, name), ()):
                return obj
            return None

        def get_members() -> list[MemberFacts]:
            return list(members.get((namespace, name), ()))

        return get_pod_group, get_members

    @kopf.on.event("pods", labels={POD_GROUP_LABEL: kopf.PRESENT}, registry=registry)
    async def pod_event(*, namespace: str | None, labels: Mapping[str, str],
                        **kwargs: Any) -> None:
        group = labels.get(POD_GROUP_LABEL) or ""
        if group:
            ns = namespace or ""
            await reconciler.reconcile(ns, group, *getters(ns, group, kwargs))

    @kopf.on.event(GROUP, VERSION, PLURAL, registry=registry)
    async def podgroup_event(*, namespace: str | None, name: str, type: str,
                             **kwargs: Any) -> None:
        ns = namespace or ""
        if type == "DELETED":
            reconciler.forget(ns, name)
            return
        await reconciler.reconcile(ns, name, *getters(ns, name, kwargs))

    return registry


class _DropThreadWarning(logging.Filter):
    """kopf warns that it ignores OS signals off the main thread: that is what we want."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "OS signals are ignored" not in record.getMessage()


def quiet_kopf_logging(*, verbose: bool = False) -> None:
    logger = logging.getLogger("kopf")
    logger.setLevel(logging.INFO if verbose else logging.WARNING)
    if not any(isinstance(f, _DropThreadWarning) for f in logger.filters):
        running = logging.getLogger("kopf._core.reactor.running")
        running.addFilter(_DropThreadWarning())
        logger.addFilter(_DropThreadWarning())


async def _operate(
    conn: ConnectionConfig,
    namespace: str | None,
    stop_flag: concurrent.futures.Future[None],
    ready_flag: concurrent.futures.Future[None],
) -> None:
    """The operator, on the controller thread's own loop."""
    asyncio.get_running_loop().set_exception_handler(on_loop_error)
    async with ApiClient(conn, qps=20.0, burst=40,
                         user_agent="kube-py-scheduler/podgroup-controller") as client:
        if not await _wait_until_served(client, namespace, stop_flag):
            return
        reconciler = StatusReconciler(client)
        settings = kopf.OperatorSettings()
        configure_settings(settings)
        await kopf.operator(
            registry=build_registry(conn, reconciler),
            settings=settings,
            standalone=True,
            clusterwide=namespace is None,
            namespaces=[namespace] if namespace else (),
            stop_flag=stop_flag,
            ready_flag=ready_flag,
        )


# asyncio's words when ``shutdown_asyncgens`` fails to close a generator left suspended.
ASYNCGEN_CLOSE_ERROR = "an error occurred during closing of asynchronous generator"
KOPF_WATCH_STREAM = "infinite_watch"


def on_loop_error(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """The controller thread's loop exception handler.

    When kopf stops, a watch stream whose consumer was cancelled while handling an event is
    left suspended; ``asyncio.run`` closes it at loop shutdown, and kopf's pause block
    (an async context manager awaiting its pause waiter) then fails with "generator didn't
    stop after athrow()". Nothing is lost: the stream's connection ends with the loop and
    the next start lists afresh; so that case is one warning naming its cause, not an
    error with a traceback. Everything else goes to asyncio's default handler."""
    generator = context.get("asyncgen")
    if (str(context.get("message", "")).startswith(ASYNCGEN_CLOSE_ERROR)
            and getattr(generator, "__qualname__", "") == KOPF_WATCH_STREAM):
        log.warning("kopf's watch stream did not close cleanly as the PodGroup controller "
                    "stopped; its connection ends with the controller's loop",
                    error=repr(context.get("exception")))
        return
    loop.default_exception_handler(context)


async def _wait_until_served(
    client: ApiClient,
    namespace: str | None,
    stop_flag: concurrent.futures.Future[None],
    *,
    poll_seconds: float = MISSING_RESOURCE_POLL_SECONDS,
) -> bool:
    """Wait for the PodGroup resource to be served (its CRD may be installed after us).

    kopf resolves its resources once, at start; with CRD scanning off (it would need
    cluster-wide CRD permissions) a CRD installed later would never be watched. So the
    operator starts only once the resource answers, polled as the scheduler's own informer
    polls it. False when stopped first."""
    path = resource_path(GROUP_VERSION, PLURAL, namespace=namespace)
    logged = False
    while not stop_flag.done():
        try:
            await client.list_page(path, limit=1)
            if logged:
                log.info("PodGroup resource is served now; starting the status controller")
            return True
        except NotFound:
            if not logged:
                log.info("PodGroup CRD not installed yet; the status controller waits for it",
                         path=path)
                logged = True
        except (ApiConnectionError, ApiError) as exc:
            log.warning("cannot reach the API server; retrying", error=str(exc))
        await asyncio.wait([asyncio.wrap_future(stop_flag)], timeout=poll_seconds)
    return False


async def run_controller(
    *,
    kubeconfig: str | None,
    namespace: str | None,
    stop: asyncio.Event,
    ready: asyncio.Event | None = None,
    connection: ConnectionConfig | None = None,
    verbose: bool = False,
) -> None:
    """Run the PodGroup status controller until ``stop`` is set (or it fails: re-raised).

    ``ready`` is set once kopf has started its watches.  ``connection`` (an already resolved
    ``ConnectionConfig``) takes precedence over ``kubeconfig``; with neither, the usual
    in-cluster / $KUBECONFIG / ~/.kube/config search applies.  Raises ConfigurationError
    when no connection can be resolved.
    """
    conn = connection if connection is not None else load_connection(kubeconfig=kubeconfig)
    quiet_kopf_logging(verbose=verbose)
    loop = asyncio.get_running_loop()
    stop_flag: concurrent.futures.Future[None] = concurrent.futures.Future()
    ready_flag: concurrent.futures.Future[None] = concurrent.futures.Future()
    finished: asyncio.Future[None] = loop.create_future()

    def report(exc: BaseException | None) -> None:
        if finished.done():
            return
        if exc is None:
            finished.set_result(None)
        else:
            finished.set_exception(exc)

    def thread_main() -> None:
        error: BaseException | None = None
        try:
            asyncio.run(_operate(conn, namespace, stop_flag, ready_flag))
        except BaseException as exc:  # handed to the caller's loop, re-raised there
            error = exc
        with contextlib.suppress(RuntimeError):  # the caller's loop is gone: nobody to tell
            loop.call_soon_threadsafe(report, error)

    async def bridge_ready() -> None:
        await asyncio.wrap_future(ready_flag)
        if ready is not None:
            ready.set()

    thread = threading.Thread(target=thread_main, name=THREAD_NAME, daemon=True)
    thread.start()
    ready_task = asyncio.create_task(bridge_ready(), name=f"{THREAD_NAME}:ready")
    stop_task = asyncio.create_task(stop.wait(), name=f"{THREAD_NAME}:stop")
    try:
        waiters: set[asyncio.Future[Any]] = {finished, stop_task}
        await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
    finally:
        if not stop_flag.done():
            stop_flag.set_result(None)
        stop_task.cancel()
        ready_task.cancel()
        # Wait for kopf to wind down even if we were cancelled, so no thread outlives us.
        while not finished.done():
            try:
                await asyncio.shield(finished)
            except asyncio.CancelledError:
                if finished.done():
                    break
            except BaseException:
                break
    if not stop.is_set() or finished.exception() is not None:
        finished.result()  # re-raise a failure of the operator
