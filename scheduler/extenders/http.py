"""One HTTP extender: kube-scheduler's ``HTTPExtender`` over aiohttp.

Each verb is a ``POST <urlPrefix>/<verb>`` with a JSON body in the shape of
``k8s.io/kube-scheduler/extender/v1``.  Those Go structs have no json tags, so the keys we send
are the Go field names (``Pod``, ``NodeNames``, ``FailedNodes`` ...); Go decodes keys without
regard to case, so extenders written with lowercase tags answer in lowercase and we read both.
Anything but a 200 with a decodable body of the right shape is an :class:`ExtenderError`
naming the extender, the verb and the cause; the caller decides (``ignorable``) what it means.
"""

from __future__ import annotations

import os
import ssl
import tempfile
import time
from collections.abc import Awaitable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

import aiohttp
import orjson
import structlog

from scheduler.config.types import Extender
from scheduler.framework.node_info import NodeInfo

__all__ = [
    "MAX_EXTENDER_PRIORITY",
    "ExtenderError",
    "ExtenderMetrics",
    "FilterResult",
    "HTTPExtender",
    "MetaVictims",
    "build_ssl_context",
]

log = structlog.get_logger(__name__)

_T = TypeVar("_T")

# Extenders score 0..10; the scheduler scales by MaxNodeScore / MaxExtenderPriority.
MAX_EXTENDER_PRIORITY = 10

VERB_FILTER = "filter"
VERB_PRIORITIZE = "prioritize"
VERB_PREEMPT = "preempt"
VERB_BIND = "bind"


class ExtenderError(Exception):
    """An extender call failed: unreachable, timed out, non-200, bad body, or ``Error`` set."""

    def __init__(self, extender: str, verb: str, cause: str) -> None:
        super().__init__(f"extender {extender!r} {verb} failed: {cause}")
        self.extender = extender
        self.verb = verb
        self.cause = cause


class _Counter(Protocol):
    def labels(self, *values: str) -> Any: ...


class ExtenderMetrics(Protocol):
    """The two extender metrics (``scheduler.metrics.SchedulerMetrics`` has both)."""

    @property
    def extender_requests(self) -> _Counter: ...

    @property
    def extender_request_duration(self) -> _Counter: ...


# node name -> (UIDs of the victims, PDB violations among them)
MetaVictims = dict[str, tuple[list[str], int]]


class FilterResult:
    """What a filter call returned, already checked against the nodes that were sent."""

    __slots__ = ("nodes", "failed", "failed_and_unresolvable")

    def __init__(
        self,
        nodes: list[NodeInfo],
        failed: dict[str, str],
        failed_and_unresolvable: dict[str, str],
    ) -> None:
        self.nodes = nodes
        self.failed = failed
        self.failed_and_unresolvable = failed_and_unresolvable


def _field(obj: Mapping[str, Any], name: str) -> Any:
    """``obj[name]`` matched as Go's encoding/json does: exact key first, then any case."""
    if name in obj:
        return obj[name]
    folded = name.casefold()
    for key, value in obj.items():
        if isinstance(key, str) and key.casefold() == folded:
            return value
    return None


def _string_map(value: Any, what: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValueError(f"{what} must be an object of node name to reason")
    return {str(k): str(v) for k, v in value.items()}


def build_ssl_context(config: Extender) -> ssl.SSLContext | None:
    """The TLS settings of client-go's TLSConfigFor for an extender (None = plain HTTP).

    ``enableHTTPS`` without a CA trusts any server certificate, as upstream does; a client
    certificate given as data is written to a private temporary file only long enough for
    the ssl module (which loads chains from files only) to read it.
    """
    tls = config.tls_config
    if not config.url_prefix.startswith("https://") and not config.enable_https:
        return None
    has_ca = tls is not None and bool(tls.ca_file or tls.ca_data)
    insecure = (tls is not None and tls.insecure) or (config.enable_https and not has_ca)
    ctx = ssl.create_default_context()
    if tls is not None and tls.ca_file:
        ctx.load_verify_locations(cafile=tls.ca_file)
    if tls is not None and tls.ca_data:
        ctx.load_verify_locations(cadata=tls.ca_data.decode("ascii", "replace"))
    if insecure:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    if tls is not None and (tls.cert_file or tls.cert_data):
        _load_client_cert(ctx, tls.cert_file, tls.cert_data, tls.key_file, tls.key_data)
    return ctx


def _load_client_cert(
    ctx: ssl.SSLContext, cert_file: str, cert_data: bytes, key_file: str, key_data: bytes
) -> None:
    temps: list[str] = []
    try:
        def materialize(path: str, data: bytes) -> str:
            if data:
                fd, name = tempfile.mkstemp(prefix="extender-tls-")
                temps.append(name)
                with os.fdopen(fd, "wb") as fh:
                    fh.write(data)
                return name
            return path

        ctx.load_cert_chain(materialize(cert_file, cert_data), materialize(key_file, key_data))
    finally:
        for name in temps:
            os.unlink(name)


class HTTPExtender:
    """Calls one configured extender; ``name`` is its URL prefix, as upstream names it."""

    def __init__(self, config: Extender, *, metrics: ExtenderMetrics | None = None) -> None:
        self.config = config
        self.name = config.url_prefix
        self.weight = config.weight
        self.ignorable = config.ignorable
        self.node_cache_capable = config.node_cache_capable
        self.managed_resources = frozenset(r.name for r in config.managed_resources)
        self._metrics = metrics
        self._ssl = build_ssl_context(config)
        self._server_hostname = (
            config.tls_config.server_name if config.tls_config is not None else ""
        ) or None
        self._timeout = aiohttp.ClientTimeout(total=config.http_timeout_seconds)
        self._session: aiohttp.ClientSession | None = None

    def __repr__(self) -> str:
        return f"HTTPExtender({self.name!r})"

    # --- what it does --------------------------------------------------------------------

    def is_filter(self) -> bool:
        return bool(self.config.filter_verb)

    def is_prioritizer(self) -> bool:
        return bool(self.config.prioritize_verb)

    def is_binder(self) -> bool:
        return bool(self.config.bind_verb)

    def supports_preemption(self) -> bool:
        return bool(self.config.preempt_verb)

    def is_interested(self, pod: Mapping[str, Any]) -> bool:
        """Every pod when no managed resources are configured; else a pod whose containers
        or init containers request or limit one of them."""
        if not self.managed_resources:
            return True
        spec = pod.get("spec") or {}
        for key in ("containers", "initContainers"):
            for container in spec.get(key) or ():
                resources = container.get("resources") if isinstance(container, Mapping) else None
                if not isinstance(resources, Mapping):
                    continue
                for part in ("requests", "limits"):
                    names = resources.get(part)
                    if isinstance(names, Mapping) and not self.managed_resources.isdisjoint(names):
                        return True
        return False

    # --- verbs ---------------------------------------------------------------------------

    async def filter(self, pod: Mapping[str, Any], nodes: Sequence[NodeInfo]) -> FilterResult:
        """The nodes this extender keeps (a subset of ``nodes``) and its rejections."""
        return await self._observed(VERB_FILTER, self._filter(pod, nodes))

    async def prioritize(
        self, pod: Mapping[str, Any], nodes: Sequence[NodeInfo]
    ) -> dict[str, int]:
        """Node name -> score (0..MAX_EXTENDER_PRIORITY), unweighted."""
        return await self._observed(VERB_PRIORITIZE, self._prioritize(pod, nodes))

    async def process_preemption(
        self,
        pod: Mapping[str, Any],
        victims: Mapping[str, tuple[Sequence[Mapping[str, Any]], int]],
    ) -> MetaVictims:
        """Send the candidate nodes with their victims; return the extender's narrowed map
        (victims as UIDs, which the caller resolves against its snapshot)."""
        return await self._observed(VERB_PREEMPT, self._process_preemption(pod, victims))

    async def bind(self, pod: Mapping[str, Any], node_name: str) -> None:
        await self._observed(VERB_BIND, self._bind(pod, node_name))

    async def _observed(self, verb: str, call: Awaitable[_T]) -> _T:
        """Await one verb; count it, time it, and log a failure once with its cause."""
        started = time.perf_counter()
        try:
            result = await call
        except ExtenderError as exc:
            self._observe(verb, "error", started)
            log.warning("extender call failed", extender=self.name, verb=verb,
                        url=self._url(self._verb_path(verb)), cause=exc.cause)
            raise
        self._observe(verb, "success", started)
        return result

    def _verb_path(self, verb: str) -> str:
        c = self.config
        return {VERB_FILTER: c.filter_verb, VERB_PRIORITIZE: c.prioritize_verb,
                VERB_PREEMPT: c.preempt_verb, VERB_BIND: c.bind_verb}[verb]

    def _nodes_args(self, pod: Mapping[str, Any], nodes: Sequence[NodeInfo]) -> dict[str, Any]:
        if self.node_cache_capable:
            return {"Pod": pod, "Nodes": None, "NodeNames": [n.name for n in nodes]}
        return {"Pod": pod, "Nodes": {"metadata": {}, "items": [n.node for n in nodes]},
                "NodeNames": None}

    async def _filter(self, pod: Mapping[str, Any], nodes: Sequence[NodeInfo]) -> FilterResult:
        verb = VERB_FILTER
        result = await self._send(verb, self.config.filter_verb, self._nodes_args(pod, nodes))
        if not isinstance(result, Mapping):
            raise self._error(verb, f"expected an ExtenderFilterResult object, got "
                                    f"{type(result).__name__}")
        error = _field(result, "Error")
        if error:
            raise self._error(verb, str(error))
        by_name = {n.name: n for n in nodes}
        names: list[str] = []
        node_names = _field(result, "NodeNames")
        node_list = _field(result, "Nodes")
        try:
            if self.node_cache_capable and node_names is not None:
                if not isinstance(node_names, list):
                    raise ValueError("NodeNames must be a list of node names")
                names = [str(n) for n in node_names]
            elif node_list is not None:
                items = _field(node_list, "items") if isinstance(node_list, Mapping) else None
                if not isinstance(items, list):
                    raise ValueError("Nodes must be a NodeList with items")
                names = [str(((i or {}).get("metadata") or {}).get("name") or "")
                         for i in items if isinstance(i, Mapping)]
            failed = _string_map(_field(result, "FailedNodes"), "FailedNodes")
            unresolvable = _string_map(_field(result, "FailedAndUnresolvableNodes"),
                                       "FailedAndUnresolvableNodes")
        except ValueError as exc:
            raise self._error(verb, f"malformed result: {exc}") from None
        kept: list[NodeInfo] = []
        for name in names:
            node_info = by_name.get(name)
            if node_info is None:
                raise self._error(verb, f"the result names node {name!r}, which was not in "
                                        "the list sent")
            kept.append(node_info)
        return FilterResult(kept, failed, unresolvable)

    async def _prioritize(
        self, pod: Mapping[str, Any], nodes: Sequence[NodeInfo]
    ) -> dict[str, int]:
        verb = VERB_PRIORITIZE
        result = await self._send(verb, self.config.prioritize_verb,
                                  self._nodes_args(pod, nodes))
        if not isinstance(result, list):
            raise self._error(verb, "expected a HostPriorityList (a list of {Host, Score})")
        scores: dict[str, int] = {}
        for entry in result:
            host = _field(entry, "Host") if isinstance(entry, Mapping) else None
            score = _field(entry, "Score") if isinstance(entry, Mapping) else None
            if not isinstance(host, str) or isinstance(score, bool) or not isinstance(score, int):
                raise self._error(verb, f"malformed HostPriority {entry!r}")
            scores[host] = score
        return scores

    async def _process_preemption(
        self,
        pod: Mapping[str, Any],
        victims: Mapping[str, tuple[Sequence[Mapping[str, Any]], int]],
    ) -> MetaVictims:
        verb = VERB_PREEMPT
        args: dict[str, Any] = {"Pod": pod}
        if self.node_cache_capable:
            args["NodeNameToMetaVictims"] = {
                node: {"Pods": [{"UID": _uid(p)} for p in pods], "NumPDBViolations": pdb}
                for node, (pods, pdb) in victims.items()
            }
        else:
            args["NodeNameToVictims"] = {
                node: {"Pods": list(pods), "NumPDBViolations": pdb}
                for node, (pods, pdb) in victims.items()
            }
        result = await self._send(verb, self.config.preempt_verb, args)
        meta = _field(result, "NodeNameToMetaVictims") if isinstance(result, Mapping) else None
        if meta is None:
            return {}
        if not isinstance(meta, Mapping):
            raise self._error(verb, "NodeNameToMetaVictims must be an object")
        out: MetaVictims = {}
        for node, mv in meta.items():
            if mv is None:
                out[str(node)] = ([], 0)
                continue
            pods = _field(mv, "Pods") if isinstance(mv, Mapping) else None
            pdb = _field(mv, "NumPDBViolations") if isinstance(mv, Mapping) else None
            if not isinstance(pods or [], list):
                raise self._error(verb, f"malformed victims for node {node!r}")
            uids = [str(_field(p, "UID") or "") for p in pods or [] if isinstance(p, Mapping)]
            out[str(node)] = (uids, pdb if isinstance(pdb, int) else 0)
        return out

    async def _bind(self, pod: Mapping[str, Any], node_name: str) -> None:
        meta = pod.get("metadata") or {}
        args = {"PodName": meta.get("name", ""), "PodNamespace": meta.get("namespace", ""),
                "PodUID": meta.get("uid", ""), "Node": node_name}
        result = await self._send(VERB_BIND, self.config.bind_verb, args)
        error = _field(result, "Error") if isinstance(result, Mapping) else None
        if error:
            raise self._error(VERB_BIND, str(error))

    # --- transport -----------------------------------------------------------------------

    def _error(self, verb: str, cause: str) -> ExtenderError:
        return ExtenderError(self.name, verb, cause)

    def _url(self, path: str) -> str:
        return self.config.url_prefix.rstrip("/") + "/" + path

    async def _send(self, verb: str, path: str, args: Any) -> Any:
        """POST ``args``; the decoded 200 body, else ExtenderError."""
        url = self._url(path)
        body = await self._post(verb, url, orjson.dumps(args))
        try:
            return orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            raise self._error(verb, f"malformed JSON from {url}: {exc}") from None

    async def _post(self, verb: str, url: str, data: bytes) -> bytes:
        session = self._session
        if session is None or session.closed:
            session = self._session = aiohttp.ClientSession(timeout=self._timeout)
        try:
            async with session.post(
                url, data=data, headers={"Content-Type": "application/json"},
                ssl=self._ssl if self._ssl is not None else True,
                server_hostname=self._server_hostname,
            ) as resp:
                body = await resp.read()
                if resp.status != 200:
                    raise self._error(verb, f"POST {url} returned HTTP {resp.status}")
                return body
        except TimeoutError:
            raise self._error(
                verb, f"POST {url} timed out after {self.config.http_timeout_seconds:g}s"
            ) from None
        except aiohttp.ClientError as exc:
            raise self._error(verb, f"POST {url}: {exc or type(exc).__name__}") from None

    def _observe(self, verb: str, result: str, started: float) -> None:
        if self._metrics is None:
            return
        self._metrics.extender_requests.labels(verb, result).inc()
        self._metrics.extender_request_duration.labels(verb, result).observe(
            time.perf_counter() - started
        )

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


def _uid(pod: Mapping[str, Any]) -> str:
    return str((pod.get("metadata") or {}).get("uid") or "")
