"""HTTP layer: URL routing, content negotiation, auth, flow control, faults, watch streaming.

One catch-all aiohttp route parses Kubernetes paths by hand (faster and simpler than hundreds
of registered routes, and CRDs appear at runtime). Handlers turn ``ApiError`` into ``Status``
responses. Watches are chunked JSON streams written from each watcher's buffer, so one commit
fans out to N watchers as N list appends and the writes are batched per wake-up.
"""

from __future__ import annotations

import asyncio
import logging
import random
import re
import time
from dataclasses import dataclass
from typing import Any

import orjson
import yaml
from aiohttp import web
from aiohttp.helpers import rfc822_formatted_time
from aiohttp.http import SERVER_SOFTWARE, HttpVersion11
from aiohttp.web_protocol import RequestHandler
from aiohttp.web_server import Server

from . import discovery, errors, events, openapi, podsubresources, protobuf, scale, tables
from .auth import AuthTable
from .errors import ApiError, success_status
from .faults import Faults, parse_fail_body
from .registry import Registry
from .resources import ResourceType
from .selectors import Matcher, both, field_matcher, label_matcher
from .store import ADDED, BOOKMARK, DELETED, ERROR, MODIFIED, Entry, Event, Watcher

log = logging.getLogger("scheduler.sandbox")

JSON = "application/json"
_PREFIX = {t: f'{{"type":"{t}","object":'.encode() for t in (ADDED, MODIFIED, DELETED, BOOKMARK, ERROR)}
# Request key: seconds to hold the answer once the request took effect (faults).
_REPLY_DELAY = web.RequestKey("sandbox.reply_delay", float)
_MUTATING = {"POST", "PUT", "PATCH", "DELETE"}
_HEALTH = {"/healthz", "/livez", "/readyz"}
# what kube-apiserver decodes for built-in kinds (CBOR is off by default there too; client-go
# falls back to JSON after a 415 for CBOR); no Content-Type is taken as JSON
_BODY_TYPES = frozenset({"", JSON, "application/yaml", "application/x-yaml", "text/yaml", "*/*"})
_REVIEWS = frozenset({"tokenreviews", "subjectaccessreviews"})


@dataclass
class Route:
    rt: ResourceType
    ns: str | None  # None: all namespaces (or cluster-scoped)
    name: str
    sub: str


def _json(obj: Any, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(body=orjson.dumps(obj), status=status, content_type=JSON, headers=headers)


def _raw(body: bytes, status: int = 200) -> web.Response:
    return web.Response(body=body, status=status, content_type=JSON)


def _error(e: ApiError) -> web.Response:
    headers = {"Retry-After": str(e.retry_after)} if e.retry_after else None
    return web.Response(body=e.body(), status=e.code, content_type=JSON, headers=headers)


def _want(request: web.Request) -> tuple[str, str]:
    """('Table', api version) / ('PartialObjectMetadata', ...) / ('', '') from Accept."""
    accept = request.headers.get("Accept", "")
    if "as=" not in accept:
        return "", ""
    for part in accept.split(","):
        params = {}
        for p in part.split(";")[1:]:
            k, _, v = p.strip().partition("=")
            params[k] = v
        as_ = params.get("as")
        if as_ in ("Table", "PartialObjectMetadata", "PartialObjectMetadataList") and params.get("g") == "meta.k8s.io":
            return as_, f"meta.k8s.io/{params.get('v', 'v1')}"
        if not as_ and part.split(";")[0].strip() in (JSON, "*/*", "application/*"):
            return "", ""
    return "", ""


def _decode_body(raw: bytes, ct: str, rt_kind: str) -> Any:
    if not raw:
        raise errors.bad_request("the body of the request was empty")
    media = ct.split(";")[0].strip().lower()
    if media == protobuf.PROTOBUF:
        return protobuf.decode_body(raw, kind_hint=rt_kind)
    if media not in _BODY_TYPES:
        raise errors.unsupported_body_type(ct)
    try:
        if "yaml" in media:
            return yaml.safe_load(raw)
        return orjson.loads(raw)
    except (orjson.JSONDecodeError, yaml.YAMLError) as e:
        raise errors.bad_request(f"the body of the request could not be decoded: {e}") from None


_CREATED = orjson.dumps(success_status(201))


def _bool(v: str | None) -> bool:
    return v is not None and v.lower() in ("true", "1")


class SandboxApp:
    def __init__(
        self,
        registry: Registry,
        faults: Faults,
        *,
        token: str | None = None,
        max_inflight: int = 400,
        max_mutating_inflight: int = 200,
        bookmark_interval: float = 10.0,
        auth: AuthTable | None = None,
    ) -> None:
        self.registry = registry
        self.auth = auth or AuthTable()
        self.store = registry.store
        self.faults = faults
        self.token = token
        self.auth_header = f"Bearer {token}" if token else None
        self.max_inflight = max_inflight
        self.max_mutating = max_mutating_inflight
        self.inflight = 0
        self.mutating = 0
        self.bookmark_interval = bookmark_interval
        self.server_address = "127.0.0.1:0"
        self.open_watches = 0
        self._closing = False
        self._watch_tasks: set[asyncio.Task[Any]] = set()
        # answer the hot POSTs on the connection itself (see _InlineRequestHandler); False
        # sends every request through aiohttp (the tests compare both)
        self.inline_posts = True
        # fast_route's answers for the collections' creates (a target per namespace and type)
        self._create_routes: dict[str, tuple[Route, tuple[str, str, str]]] = {}

    def make_app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self.handle)
        return app

    def shutdown(self) -> None:
        self._closing = True
        self.store.drop_watches()

    # ------------------------------------------------------------ entry point

    async def handle(self, request: web.Request) -> web.StreamResponse:
        path = request.path
        if path in _HEALTH or path.startswith(("/healthz/", "/livez/", "/readyz/")):
            return web.Response(text="ok", content_type="text/plain")
        if self.auth_header is not None and request.headers.get("Authorization") != self.auth_header:
            return _error(errors.unauthorized())
        if path.startswith("/sandbox/v1/"):
            try:
                return await self.handle_admin(request, path[len("/sandbox/v1/"):])
            except ApiError as e:
                return _error(e)
            except ValueError as e:
                return _error(errors.bad_request(str(e)))
        if not self.faults.running.is_set():
            await self.faults.running.wait()
        is_watch = _bool(request.query.get("watch")) or "/watch/" in path
        mutating = request.method in _MUTATING
        if not is_watch:
            if self.inflight >= self.max_inflight or (mutating and self.mutating >= self.max_mutating):
                return _error(errors.too_many_requests())
            self.inflight += 1
            if mutating:
                self.mutating += 1
        try:
            response = await self.dispatch(request, path)
            delay = request.get(_REPLY_DELAY)
            if delay:
                await asyncio.sleep(delay)  # done, but the client hears of it late
            return response
        except ApiError as e:
            return _error(e)
        except (ConnectionResetError, asyncio.CancelledError):
            raise
        except Exception as e:  # a bug: answer 500 like kube-apiserver's panic recovery
            log.exception("internal error serving %s %s", request.method, path)
            return _error(ApiError(500, "InternalError", f"Internal error occurred: {e!r}"))
        finally:
            if not is_watch:
                self.inflight -= 1
                if mutating:
                    self.mutating -= 1

    async def dispatch(self, request: web.Request, path: str) -> web.StreamResponse:
        parts = [p for p in path.split("/") if p]
        if not parts:
            return _json({"paths": ["/api", "/api/v1", "/apis", "/healthz", "/livez", "/readyz", "/version"]})
        cat = self.registry.catalog
        if parts[0] == "version" and len(parts) == 1:
            return _json(discovery.VERSION_INFO)
        if parts[0] == "openapi":
            if parts[1:] == ["v2"]:
                # An empty document (no definitions): kubectl's client-side validation then
                # skips kinds it cannot find, as it does for CRDs without schemas.
                if "protobuf" in request.headers.get("Accept", ""):
                    return web.Response(body=b"", content_type="application/com.github.proto-openapi.spec.v2.v1.0+protobuf")
                return _json(openapi.v2_document())
            if parts[1:] == ["v3"]:
                return _json(openapi.root(cat))
            if len(parts) >= 4 and parts[1] == "v3":
                grp, ver = ("", parts[3]) if parts[2] == "api" and len(parts) == 4 else (
                    (parts[3], parts[4]) if parts[2] == "apis" and len(parts) == 5 else ("", ""))
                if ver and cat.has_group_version(grp, ver):
                    return _json(openapi.group_version(cat, grp, ver))
            raise errors.not_found_path()
        if parts[0] == "api":
            if len(parts) == 1:
                return _json(discovery.api_versions(self.server_address))
            group, version, rest = "", parts[1], parts[2:]
            if version != "v1":
                raise errors.not_found_path()
        elif parts[0] == "apis":
            if len(parts) == 1:
                return _json(discovery.api_group_list(cat))
            group = parts[1]
            if group not in cat.group_versions():
                raise errors.not_found_path()
            if len(parts) == 2:
                return _json(discovery.api_group(cat, group))
            version, rest = parts[2], parts[3:]
            if not cat.has_group_version(group, version):
                raise errors.not_found_path()
        else:
            raise errors.not_found_path()
        if not rest:
            if request.method != "GET":
                raise errors.method_not_allowed()
            return _json(discovery.api_resource_list(cat, group, version))
        watch_path = False
        if rest[0] == "watch":
            watch_path = True
            rest = rest[1:]
        route = self._route(group, version, rest)
        return await self.serve(request, route, watch_path)

    def _route(self, group: str, version: str, rest: list[str]) -> Route:
        cat = self.registry.catalog
        ns: str | None = None
        if rest[0] == "namespaces" and len(rest) >= 3:
            cand = cat.get(group, version, rest[2])
            if cand is not None and cand.namespaced:
                ns, rest = rest[1], rest[2:]
            elif group == "" and rest[2] == "bindings" and len(rest) == 3:
                return Route(cat.builtin("", "pods"), rest[1], "", "bindings")
            elif not (group == "" and len(rest) == 3):
                raise errors.not_found_path()
            # else: /api/v1/namespaces/{name}/{subresource}
        rt = cat.get(group, version, rest[0])
        if rt is None or len(rest) > 3:
            raise errors.not_found_path()
        name = rest[1] if len(rest) > 1 else ""
        sub = rest[2] if len(rest) > 2 else ""
        if sub and sub not in rt.subresources:
            raise errors.not_found_path()
        if not rt.namespaced:
            ns = ""
        return Route(rt, ns, name, sub)

    # ------------------------------------------------------------ resources

    def _resource_label(self, rt: ResourceType) -> str:
        return rt.key

    async def serve(self, request: web.Request, r: Route, watch_path: bool) -> web.StreamResponse:
        method = request.method
        q = request.query
        rt = r.rt
        if r.sub == "bindings":
            verb, sub = "create", "binding"
        elif method == "GET":
            verb = "watch" if (watch_path or _bool(q.get("watch"))) else ("get" if r.name else "list")
            sub = r.sub
        else:
            verb = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}.get(method, "")
            if method == "DELETE" and not r.name:
                verb = "deletecollection"
            sub = r.sub
        res = self._resource_label(rt)
        faults = self.faults
        faults.count(verb, res, sub)
        if faults.active:
            delay = faults.latency_for(verb, res)
            if delay:
                await asyncio.sleep(delay)
            request[_REPLY_DELAY] = faults.reply_latency_for(verb, res)
            err = faults.failure_for(verb, res, sub, r.ns or "")
            if err is not None:
                raise err
        if not verb or (r.sub == "finalize" and verb != "update"):  # finalize serves PUT only
            raise errors.method_not_allowed()
        if rt.plural in _REVIEWS and rt.group in ("authentication.k8s.io", "authorization.k8s.io"):
            if verb != "create" or r.name or r.sub:
                raise errors.method_not_allowed()
            body = await self._body(request)
            review = self.auth.token_review(body) if rt.plural == "tokenreviews" \
                else self.auth.subject_access_review(body)
            return _json(review, 201)
        dry_run = False
        if "dryRun" in q:
            dr = q.getall("dryRun")
            if any(d != "All" for d in dr):
                raise errors.bad_request(f'Invalid dry run value: {dr}')
            dry_run = True
        reg = self.registry
        if verb == "watch":
            return await self.watch(request, r)
        if verb == "list":
            if r.sub:
                raise errors.method_not_allowed()
            return self.list_objects(request, r)
        if r.sub == "scale" and verb in ("get", "update", "patch"):
            if verb == "get":
                return _json(scale.get_scale(reg, rt, r.ns or "", r.name))
            if verb == "update":
                body = await self._body(request, "Scale")
                return _json(scale.update_scale(reg, rt, r.ns or "", r.name, body, dry_run=dry_run))
            return _json(scale.patch_scale(reg, rt, r.ns or "", r.name, request.headers.get("Content-Type", ""),
                                           await request.read(), dry_run=dry_run))
        if verb == "get":
            if r.sub in ("binding", "eviction"):
                raise errors.method_not_allowed()
            e = reg.get(rt, r.ns or "", r.name)
            return self._respond_one(request, rt, e)
        if verb == "create":
            body = await self._body(request, rt.kind)
            if r.sub == "binding" or r.sub == "bindings":
                name = r.name or str((body.get("metadata") or {}).get("name", "") if isinstance(body, dict) else "")
                if r.ns is None or not name:
                    raise errors.method_not_allowed()
                if dry_run:
                    return _json(success_status(201), 201)
                podsubresources.bind(reg, r.ns, name, body)
                return _json(success_status(201), 201)
            if r.sub == "eviction":
                if dry_run:
                    return _json(success_status(201), 201)
                podsubresources.evict(reg, r.ns or "", r.name, body)
                return _json(success_status(201), 201)
            if r.name or r.sub:
                raise errors.method_not_allowed()
            if rt.namespaced and r.ns is None:
                raise errors.method_not_allowed()
            e = reg.create(rt, r.ns or "", body, dry_run=dry_run)
            return self._respond_one(request, rt, e, 201)
        if verb == "update":
            if not r.name or r.sub in ("binding", "eviction"):
                raise errors.method_not_allowed()
            body = await self._body(request, rt.kind)
            e = reg.update(rt, r.ns or "", r.name, body, sub=r.sub, dry_run=dry_run)
            return self._respond_one(request, rt, e)
        if verb == "patch":
            if not r.name or r.sub in ("binding", "eviction"):
                raise errors.method_not_allowed()
            raw = await request.read()
            e, created = reg.patch(rt, r.ns or "", r.name, request.headers.get("Content-Type", ""), raw,
                                   sub=r.sub, dry_run=dry_run, field_manager=q.get("fieldManager", ""))
            return self._respond_one(request, rt, e, 201 if created else 200)
        if verb == "delete":
            if r.sub:
                raise errors.method_not_allowed()
            opts = await self._delete_options(request)
            e, removed = reg.delete(rt, r.ns or "", r.name, opts, dry_run=dry_run)
            if removed and not rt.returns_deleted_object:
                md = e.obj["metadata"]
                details: dict[str, Any] = {"name": md["name"]}
                if rt.group:
                    details["group"] = rt.group
                details["kind"] = rt.plural
                details["uid"] = md.get("uid", "")
                return _json(success_status(200, details))
            return self._respond_one(request, rt, e)
        if verb == "deletecollection":
            if r.sub or (rt.namespaced and r.ns is None):
                raise errors.method_not_allowed()
            opts = await self._delete_options(request)
            match = self._matcher(request, rt)
            deleted = reg.delete_collection(rt, r.ns, match, opts, dry_run=dry_run)
            return self._respond_list(request, r, deleted, str(self.store.rv), "", None)
        raise errors.method_not_allowed()

    async def _body(self, request: web.Request, rt_kind: str = "") -> Any:
        return _decode_body(await request.read(), request.headers.get("Content-Type", ""), rt_kind)

    # ------------------------------------------------------------ the hot POSTs, inline

    def fast_route(self, method: str, target: str, headers: Any) -> Route | None:
        """The route of a request ``fast_post`` can answer exactly as ``handle`` would, or None.

        Only the writes a scheduler makes per pod qualify (a pod's create, its binding, an
        Event's create, in either events group), with no query string, with nothing that makes
        ``handle`` take another branch (faults armed or paused, a failed token check, a Table
        or metadata Accept, the in-flight limits reached, shutdown). Nothing is changed here."""
        if method != "POST" or self._closing or self.faults.active or not self.faults.running.is_set():
            return None
        if self.inflight >= self.max_inflight or self.mutating >= self.max_mutating:
            return None
        if self.auth_header is not None and headers.get("Authorization") != self.auth_header:
            return None
        if "as=" in headers.get("Accept", "") or "?" in target or "%" in target:
            return None
        known = self._create_routes.get(target)
        if known is not None and self.registry.catalog.by_gvr.get(known[1]) is known[0].rt:
            return known[0]  # a collection's create, routed before to the type still served
        parts = target.split("/")
        # "", "api", "v1", "namespaces", ns, plural[, name, sub]
        if len(parts) < 6 or parts[0] != "" or parts[3 if parts[1] == "api" else 4] != "namespaces":
            return None
        if parts[1] == "api" and parts[2] == "v1":
            group, rest = "", parts[3:]
        elif parts[1] == "apis" and parts[2] == "events.k8s.io" and len(parts) == 7:
            group, rest = "events.k8s.io", parts[4:]  # a version it lacks: _route raises
        else:
            return None
        if any(p in ("", ".", "..", "watch") for p in rest):
            return None
        if len(rest) == 3 and rest[2] in ("pods", "events"):
            pass
        elif not (len(rest) == 5 and group == "" and rest[2] == "pods" and rest[4] == "binding"):
            return None
        try:
            r = self._route(group, parts[2] if group == "" else parts[3], rest)
        except ApiError:
            return None
        if not r.rt.namespaced or r.ns is None:
            return None
        if len(rest) == 3:
            if len(self._create_routes) >= _CREATE_ROUTES_MAX:
                self._create_routes.clear()
            self._create_routes[target] = (r, (r.rt.group, r.rt.version, r.rt.plural))
        return r

    def fast_post(self, r: Route, headers: Any, raw: bytes) -> tuple[int, bytes, dict[str, str] | None]:
        """Serve a request ``fast_route`` accepted: (status, body, extra headers), the answer
        ``handle`` -> ``serve`` gives for it, request counters included."""
        rt = r.rt
        sub = "binding" if r.sub == "binding" else ""
        self.faults.count("create", self._resource_label(rt), sub)
        try:
            body = _decode_body(raw, headers.get("Content-Type", ""), rt.kind)
            if sub:
                podsubresources.bind(self.registry, r.ns or "", r.name, body)
                return 201, _CREATED, None
            e = self.registry.create(rt, r.ns or "", body, dry_run=False)
            return 201, self._view(rt, e).raw, None
        except ApiError as e:
            return e.code, e.body(), {"Retry-After": str(e.retry_after)} if e.retry_after else None
        except Exception as e:  # a bug: answer 500 like kube-apiserver's panic recovery
            log.exception("internal error serving POST %s", r)
            err = ApiError(500, "InternalError", f"Internal error occurred: {e!r}")
            return err.code, err.body(), None

    async def _delete_options(self, request: web.Request) -> dict[str, Any]:
        raw = await request.read() if request.can_read_body else b""
        opts: dict[str, Any] = {}
        if raw.startswith(protobuf.MAGIC):
            opts = protobuf.decode_body(raw, kind_hint="DeleteOptions")
        elif raw.strip():
            try:
                parsed = orjson.loads(raw)
            except orjson.JSONDecodeError as e:
                raise errors.bad_request(f"invalid DeleteOptions: {e}") from None
            if isinstance(parsed, dict):
                opts = parsed
        q = request.query
        if "gracePeriodSeconds" in q:
            try:
                opts["gracePeriodSeconds"] = int(q["gracePeriodSeconds"])
            except ValueError:
                raise errors.bad_request("gracePeriodSeconds must be an integer") from None
        if "propagationPolicy" in q:
            opts["propagationPolicy"] = q["propagationPolicy"]
        return opts

    def _matcher(self, request: web.Request, rt: ResourceType) -> Matcher | None:
        q = request.query
        lm = label_matcher(q.get("labelSelector"))
        fm = field_matcher(q.get("fieldSelector"), rt.supports_field, rt.field_aliases)
        return both(lm, fm)

    def _view(self, rt: ResourceType, e: Entry) -> Entry:
        """Custom resources served in another version than stored get their apiVersion rewritten;
        views of another type's storage (events.k8s.io/v1 events) are converted."""
        if rt.is_view:
            obj = events.from_core(e.obj)
            return Entry(obj, orjson.dumps(obj))
        if rt.is_custom and e.obj.get("apiVersion") != rt.api_version:
            obj = {**e.obj, "apiVersion": rt.api_version}
            return Entry(obj, orjson.dumps(obj))
        return e

    def _respond_one(self, request: web.Request, rt: ResourceType, e: Entry, status: int = 200) -> web.Response:
        want, api_version = _want(request)
        if want == "Table":
            include = request.query.get("includeObject", "Metadata")
            obj = self._view(rt, e).obj
            t = tables.table(rt, [obj], include_object=include,
                             metadata={"resourceVersion": obj["metadata"].get("resourceVersion", "")},
                             api_version=api_version)
            return _json(t, status)
        if want.startswith("PartialObjectMetadata"):
            return _json({"kind": "PartialObjectMetadata", "apiVersion": api_version,
                          "metadata": e.obj.get("metadata", {})}, status)
        return _raw(self._view(rt, e).raw, status)

    # ------------------------------------------------------------ list

    def list_objects(self, request: web.Request, r: Route) -> web.Response:
        q = request.query
        rt = r.rt
        match = self._matcher(request, rt)
        limit = 0
        if "limit" in q:
            try:
                limit = max(0, int(q["limit"]))
            except ValueError:
                raise errors.bad_request("limit must be an integer") from None
        rv = q.get("resourceVersion", "")
        if rv and rv != "0":
            try:
                int(rv)
            except ValueError:
                raise errors.bad_request(f"invalid resource version: {rv}") from None
        token = q.get("continue", "")
        if token and rv:
            raise errors.bad_request("specifying resource version is not allowed when using continue")
        if rv == "0" and not token:
            limit = 0  # served from the watch cache, which ignores limit
        ts = self.registry.ts(rt)
        entries, list_rv, cont, remaining = self.store.list_objects(ts, r.ns if rt.namespaced else None, match,
                                                            limit=limit, continue_token=token)
        return self._respond_list(request, r, entries, str(list_rv), cont, remaining)

    def _respond_list(
        self, request: web.Request, r: Route, entries: list[Entry], rv: str, cont: str, remaining: int | None
    ) -> web.Response:
        rt = r.rt
        want, api_version = _want(request)
        meta: dict[str, Any] = {"resourceVersion": rv}
        if cont:
            meta["continue"] = cont
        if remaining is not None:
            meta["remainingItemCount"] = remaining
        if want == "Table":
            include = request.query.get("includeObject", "Metadata")
            t = tables.table(rt, [self._view(rt, e).obj for e in entries], include_object=include,
                             metadata=meta, api_version=api_version)
            return _json(t)
        if want.startswith("PartialObjectMetadata"):
            return _json({"kind": "PartialObjectMetadataList", "apiVersion": api_version, "metadata": meta,
                          "items": [{"kind": "PartialObjectMetadata", "apiVersion": api_version,
                                     "metadata": e.obj.get("metadata", {})} for e in entries]})
        if rt.is_custom or rt.is_view:
            entries = [self._view(rt, e) for e in entries]
        head = (
            b'{"kind":"' + rt.list_kind.encode() + b'","apiVersion":"' + rt.api_version.encode()
            + b'","metadata":' + orjson.dumps(meta) + b',"items":['
        )
        return _raw(head + b",".join([e.raw for e in entries]) + b"]}")

    # ------------------------------------------------------------ watch

    async def watch(self, request: web.Request, r: Route) -> web.StreamResponse:
        q = request.query
        rt = r.rt
        if r.name:
            fs = f"metadata.name={r.name}"
            extra = field_matcher(fs, rt.supports_field)
            match = both(self._matcher(request, rt), extra)
        else:
            match = self._matcher(request, rt)
        ns = r.ns if rt.namespaced else None
        rv_s = q.get("resourceVersion", "")
        allow_bookmarks = _bool(q.get("allowWatchBookmarks"))
        initial = _bool(q.get("sendInitialEvents"))
        try:
            timeout = float(q["timeoutSeconds"]) if "timeoutSeconds" in q else random.uniform(1800, 3600)
        except ValueError:
            raise errors.bad_request("timeoutSeconds must be a number") from None
        from_rv = 0
        if rv_s not in ("", "0"):
            try:
                from_rv = int(rv_s)
            except ValueError:
                raise errors.bad_request(f"invalid resource version: {rv_s}") from None
        want, api_version = _want(request)
        table_mode = want == "Table"
        include = q.get("includeObject", "Metadata")
        ts = self.registry.ts(rt)
        w = Watcher(rt, ns, match)
        too_old = None
        if initial or rv_s in ("", "0"):
            for _, e in ts.iter_sorted(ns):
                if match is None or match(e.obj):
                    w.buf.append((ADDED, Event(ADDED, 0, e.obj, e.raw, None, "")))
            if initial and allow_bookmarks:
                w.buf.append((BOOKMARK, (self.store.rv, True)))
        else:
            too_old = self.store.check_watch_rv(ts, from_rv)
            if too_old is None:
                for ev in ts.events_after(from_rv):
                    w.offer(ev)
        resp = web.StreamResponse(status=200, headers={"Content-Type": JSON, "Cache-Control": "no-cache, private"})
        resp.enable_chunked_encoding()
        if too_old is not None:
            await resp.prepare(request)
            await resp.write(_PREFIX[ERROR] + orjson.dumps(too_old.status()) + b"}\n")
            await resp.write_eof()
            return resp
        ts.watchers.add(w)
        self.open_watches += 1
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        next_bookmark = loop.time() + self.bookmark_interval
        first_table = True
        try:
            await resp.prepare(request)
            while True:
                if w.buf:
                    items, w.buf = w.buf, []
                    chunks = []
                    for typ, payload in items:
                        chunks.append(self._render(rt, typ, payload, table_mode, first_table, include, api_version))
                        if table_mode and typ != BOOKMARK:
                            first_table = False
                    await resp.write(b"".join(chunks))
                if w.closed or self._closing:
                    break
                now = loop.time()
                if now >= deadline:
                    if allow_bookmarks:
                        await resp.write(self._render(rt, BOOKMARK, (self.store.rv, False), table_mode, False, include, api_version))
                    break
                if allow_bookmarks and now >= next_bookmark:
                    w.push((BOOKMARK, (self.store.rv, False)))
                    next_bookmark = now + self.bookmark_interval
                    continue
                wait = deadline - now
                if allow_bookmarks:
                    wait = min(wait, next_bookmark - now)
                wait = min(wait, 5.0)
                w.wake.clear()
                if not w.buf and not w.closed:
                    try:
                        await asyncio.wait_for(w.wake.wait(), wait)
                    except TimeoutError:
                        transport = request.transport
                        if transport is None or transport.is_closing():
                            break
            await resp.write_eof()
        except (ConnectionResetError, ConnectionError):
            pass
        finally:
            ts.watchers.discard(w)
            self.open_watches -= 1
        return resp

    def _render(
        self, rt: ResourceType, typ: str, payload: Any, table_mode: bool, headers: bool, include: str, api_version: str
    ) -> bytes:
        if typ == BOOKMARK:
            rv, initial_end = payload
            md: dict[str, Any] = {"resourceVersion": str(rv)}
            if initial_end:
                md["annotations"] = {"k8s.io/initial-events-end": "true"}
            bm: dict[str, Any] = {"kind": rt.kind, "apiVersion": rt.api_version, "metadata": md}
            return _PREFIX[BOOKMARK] + orjson.dumps(bm) + b"}\n"
        ev: Event = payload
        if table_mode:
            obj = events.from_core(ev.obj) if rt.is_view else ev.obj
            if rt.is_custom and obj.get("apiVersion") != rt.api_version:
                obj = {**obj, "apiVersion": rt.api_version}
            t = tables.table(rt, [obj], include_object=include, headers=headers, api_version=api_version,
                             metadata={"resourceVersion": obj["metadata"].get("resourceVersion", "")})
            return _PREFIX[typ] + orjson.dumps(t) + b"}\n"
        raw = ev.raw
        if rt.is_view:
            raw = orjson.dumps(events.from_core(ev.obj))
        elif rt.is_custom and ev.obj.get("apiVersion") != rt.api_version:
            raw = orjson.dumps({**ev.obj, "apiVersion": rt.api_version})
        return _PREFIX[typ] + raw + b"}\n"

    # ------------------------------------------------------------ admin (faults)

    async def handle_admin(self, request: web.Request, op: str) -> web.Response:
        f = self.faults
        m = request.method
        body: Any = {}
        if m in ("POST", "PUT"):
            raw = await request.read()
            body = orjson.loads(raw) if raw.strip() else {}
        if op == "watches/drop" and m == "POST":
            return _json({"dropped": self.store.drop_watches()})
        if op == "compact" and m == "POST":
            self.store.compact()
            return _json({"resourceVersion": str(self.store.rv)})
        if op == "faults/failures" and m == "POST":
            b = parse_fail_body(body)
            rid = f.fail(
                b.get("verb", "*"), b.get("resource", "*"), code=int(b["code"]),
                times=None if b.get("times") is None else int(b["times"]),
                probability=float(b.get("probability", 1.0)), subresource=b.get("subresource", "*"),
                namespace=b.get("namespace", "*"), message=b.get("message", ""),
                retry_after=int(b.get("retry_after", 1)),
            )
            return _json({"id": rid})
        if op == "faults/latency" and m == "POST":
            f.add_latency(float(body.get("seconds", 0)), body.get("verb", "*"), body.get("resource", "*"))
            return _json({})
        if op == "faults" and m == "DELETE":
            f.clear()
            return _json({})
        if op == "raw" and m == "POST":
            return _json(self.registry.raw_put(body), 201)
        if op == "pause" and m == "POST":
            f.pause()
            return _json({})
        if op == "resume" and m == "POST":
            f.resume()
            return _json({})
        if op == "counters" and m == "GET":
            return _json(self.counters())
        if op == "counters" and m == "DELETE":
            f.reset_counters()
            self.registry.counters.clear()
            return _json({})
        raise errors.not_found_path()

    def counters(self) -> dict[str, Any]:
        return {
            "requests": dict(self.faults.requests),
            "bindings": self.registry.counters.get("bindings", 0),
            "evictions": self.registry.counters.get("evictions", 0),
            "open_watches": self.open_watches,
            "resource_version": self.store.rv,
            "time": time.time(),
        }


# ------------------------------------------------------------ the hot POSTs' connection path
#
# aiohttp serves every request through a Request object, a task, the router and a Response
# whose headers it builds field by field: most of what a pod's create, binding and Event POSTs
# cost the sandbox. When such a request arrives on an idle keep-alive connection,
# ``_InlineRequestHandler`` answers it on the spot (``SandboxApp.fast_route`` /
# ``fast_post``) and writes the bytes aiohttp would have written (status line, the same headers
# in the same order, the body); one whose body comes in several reads is held until it is
# whole. Anything else, and anything behind a request still being served (so answers keep
# their order), goes through aiohttp unchanged.


def _reason(status: int) -> str:
    return web.Response(status=status).reason


_REASONS: dict[int, str] = {}


def render_response(status: int, body: bytes, extra: dict[str, str] | None = None) -> bytes:
    """The bytes aiohttp writes for ``web.Response(body=body, status=status,
    content_type="application/json", headers=extra)`` answering an HTTP/1.1 keep-alive request."""
    reason = _REASONS.get(status)
    if reason is None:
        reason = _REASONS[status] = _reason(status)
    head = f"HTTP/1.1 {status} {reason}\r\n"
    if extra:
        head += "".join(f"{k}: {v}\r\n" for k, v in extra.items())
    head += (f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
             f"Date: {rfc822_formatted_time()}\r\nServer: {SERVER_SOFTWARE}\r\n\r\n")
    return head.encode("latin-1") + body


_INLINE_MAX_BODY = 1024 * 1024
_CREATE_ROUTES_MAX = 1024


class _Headers(dict[str, str]):
    """A request's headers as ``_read_heads`` read them: lower-case names, read case-blind
    (the few ``fast_route``/``fast_post`` ask for), as aiohttp's CIMultiDict reads them."""

    def get(self, name: str, default: Any = None) -> Any:
        return dict.get(self, name.lower(), default)

    def __contains__(self, name: object) -> bool:
        return dict.__contains__(self, name.lower() if isinstance(name, str) else name)


# A head the connection's own reading takes: ``POST <origin-form path> HTTP/1.1``, then header
# lines of a token name, optional blanks, visible ASCII (blanks and tabs inside) and optional
# blanks. Whatever else (another verb or version, obs-fold, control or non-ASCII bytes, a
# query) is left to aiohttp's parser, whose answer (a 400 included) it then gets.
_REQUEST_LINE = re.compile(rb"POST (/[-A-Za-z0-9._~!$&'()*+,;=:@/]*) HTTP/1\.1\r\n")
_HEADER_LINES = re.compile(
    rb"(?:[-!#$%&'*+.^_`|~0-9A-Za-z]+:[ \t]*(?:[\x21-\x7e](?:[\x20-\x7e\t]*[\x21-\x7e])?)?[ \t]*\r\n)+")
_HEAD_MAX = 4096  # bytes of a head read here (aiohttp's own limit is 8190 a line)
_HEADERS_MAX = 32  # header lines of a head read here (aiohttp's: 128)
# Headers that make aiohttp take another branch than a plain keep-alive request with a body
# of Content-Length bytes: such a request goes to aiohttp's parser
_OTHER_FRAMING = frozenset({"transfer-encoding", "upgrade", "expect", "content-encoding"})


def _read_head(buf: bytes, pos: int, end: int) -> tuple[str, _Headers, int] | None:
    """(path, headers, Content-Length) of the head ``buf[pos:end]`` (without its blank line),
    or None when aiohttp's parser must read it (see ``_REQUEST_LINE``)."""
    m = _REQUEST_LINE.match(buf, pos, end + 2)
    if m is None:
        return None
    i = m.end()
    stop = end + 2
    if _HEADER_LINES.fullmatch(buf, i, stop) is None:
        return None
    lines = buf[i:end].decode("ascii").split("\r\n")
    if len(lines) > _HEADERS_MAX:
        return None
    headers = _Headers()
    for line in lines:
        name, _, value = line.partition(":")
        headers[name.lower()] = value.strip(" \t")
    if len(headers) != len(lines) or not _OTHER_FRAMING.isdisjoint(headers):
        return None  # a repeated header (aiohttp decides which counts), or another framing
    length = dict.get(headers, "content-length", "")
    if not length.isdigit() or not length.isascii() or length.startswith("0"):
        return None  # no length, or one aiohttp's parser reads its own way
    if not dict.__contains__(headers, "host"):
        return None  # aiohttp's parser answers 400 to an HTTP/1.1 request without one
    conn = dict.get(headers, "connection")
    if conn is not None and conn.lower() != "keep-alive":
        return None  # close, upgrade or a list: aiohttp's branch
    return m.group(1).decode("ascii"), headers, int(length)


class _InlineRequestHandler(RequestHandler):
    """aiohttp's connection protocol, answering the sandbox's hot POSTs inline (see above).

    While every byte of a connection has been read here (``_own``), the heads of the hot POSTs
    are read here too (``_read_head``), without aiohttp's message, payload stream and URL
    objects; the first request read otherwise hands the rest of the connection's bytes, from
    that request on, to aiohttp's parser for good, and the path below takes over."""

    sandbox: SandboxApp | None = None
    _inline_active = False
    _inline_resuming = False
    _own = True
    _held = b""

    def data_received(self, data: bytes) -> None:
        app = self.sandbox
        waiter = self._waiter
        if (app is None or not app.inline_posts or waiter is None or waiter.done() or self._logging_enabled
                or self._upgraded or self._payload_parser is not None):
            if self._own:
                data = self._disown(data)
            super().data_received(data)
            return
        if self._own:
            data = self._read_own(app, data)
            if not data:
                return
        # The connection is idle (start() awaits its next request; a queued request is one
        # whose body is still arriving, kept back here): parse without waking it, answer what
        # can be answered inline from the head of the queue, then wake it for the rest.
        self._waiter = None
        try:
            super().data_received(data)
        finally:
            self._waiter = waiter
        if self._inline_active:
            return  # re-entered (reading a body resumed a paused read): the loop below goes on
        self._inline_active = True
        try:
            self._answer_inline(app, waiter)
        finally:
            self._inline_active = False
        if not self._inline_resuming:
            # aiohttp parses at most 32 queued requests, then pauses reading until its queue
            # drains; this one drained it inline: let it parse (and this answer) what waits
            self._inline_resuming = True
            try:
                while self._buffer_paused and len(self._messages) <= self._msg_queue_resume_size:
                    parsed = self._request_count
                    self._resume_reading_if_drained()
                    if self._request_count == parsed:
                        break
            finally:
                self._inline_resuming = False
        messages = self._messages
        if messages and not waiter.done():
            head: Any = messages[0][0]
            body = messages[0][1]
            if body.is_eof() or body.exception() is not None or self._inline_route(app, head) is None:
                waiter.set_result(None)  # start() serves it; a body still arriving is held

    def _disown(self, data: bytes) -> bytes:
        """From now on aiohttp's parser reads this connection: what was held here goes first."""
        self._own = False
        held, self._held = self._held, b""
        return held + data if held else data

    def _read_own(self, app: SandboxApp, data: bytes) -> bytes:
        """Answer the complete hot POSTs at the start of the held bytes and ``data``, hold an
        incomplete one; return the bytes from the first request left to aiohttp (then the
        connection is no longer read here), or b""."""
        buf = self._held + data if self._held else data
        self._held = b""
        pos = 0
        n = len(buf)
        answers: list[bytes] = []
        try:
            while pos < n:
                if self.transport is None or self._force_close or self._close:
                    return b""  # closing: aiohttp would drop these bytes too
                end = buf.find(b"\r\n\r\n", pos, pos + _HEAD_MAX)
                if end < 0:
                    if n - pos < _HEAD_MAX and buf.startswith(b"POST /"[: n - pos], pos):
                        self._held = buf[pos:]  # the rest of the head is on the way
                        return b""
                    break
                head = _read_head(buf, pos, end)
                if head is None:
                    break
                path, headers, length = head
                if not 0 < length <= _INLINE_MAX_BODY or self.writing_paused:
                    break
                route = app.fast_route("POST", path, headers)
                if route is None:
                    break
                body_end = end + 4 + length
                if body_end > n:
                    self._held = buf[pos:]  # the rest of the body is on the way
                    return b""
                assert self._manager is not None
                self._manager.requests_count += 1
                self._request_count += 1
                status, body, extra = app.fast_post(route, headers, buf[end + 4:body_end])
                answers.append(render_response(status, body, extra))
                pos = body_end
            else:
                return b""
            rest = buf[pos:] if pos else buf
            self._own = False
            return rest
        finally:
            if answers:
                self._sent(answers)

    def _sent(self, answers: list[bytes]) -> None:
        """Write the answers of one read in one go; the connection is kept alive from now."""
        if self.transport is None:
            return
        self.transport.write(answers[0] if len(answers) == 1 else b"".join(answers))
        self._keepalive = True
        close_time = self._loop.time() + self._keepalive_timeout
        self._next_keepalive_close_time = close_time
        if self._keepalive_handle is None:
            self._keepalive_handle = self._loop.call_at(close_time, self._process_keepalive)

    def _answer_inline(self, app: SandboxApp, waiter: asyncio.Future[None]) -> None:
        messages = self._messages
        loop = self._loop
        answers: list[bytes] = []
        try:
            while messages and self.transport is not None and not self._force_close and not self._close:
                msg: Any = messages[0][0]  # a RawRequestMessage (C or Python) or a parse error
                payload = messages[0][1]
                route = self._inline_route(app, msg)
                if route is None or payload.exception() is not None:
                    break
                if not payload.is_eof():
                    # the rest of its body is on the way: the next read completes it
                    self._next_keepalive_close_time = loop.time() + self._keepalive_timeout
                    break
                messages.popleft()
                if self._parser is not None:
                    self._parser.message_consumed()
                assert self._manager is not None
                self._manager.requests_count += 1
                status, body, extra = app.fast_post(route, msg.headers, payload.read_nowait(-1))
                answers.append(render_response(status, body, extra))
        finally:
            if answers and self.transport is not None:
                self._sent(answers)

    def _inline_route(self, app: SandboxApp, msg: Any) -> Route | None:
        if (getattr(msg, "method", None) != "POST" or msg.version != HttpVersion11 or msg.should_close
                or msg.upgrade or msg.chunked or msg.compression is not None or "Expect" in msg.headers):
            return None
        try:
            length = int(msg.headers.get("Content-Length", "0"))
        except ValueError:
            return None
        if not 0 < length <= _INLINE_MAX_BODY or self.writing_paused:
            return None
        return app.fast_route(msg.method, msg.path, msg.headers)


class _InlineServer(Server):
    def __init__(self, sandbox: SandboxApp, server: Server) -> None:
        super().__init__(server.request_handler, request_factory=server.request_factory,
                         handler_cancellation=server.handler_cancellation, loop=server._loop, **server._kwargs)
        self.sandbox = sandbox

    def __call__(self) -> RequestHandler:
        handler = _InlineRequestHandler(self, loop=self._loop, **self._kwargs)
        handler.sandbox = self.sandbox
        return handler


# aiohttp's private parts the inline path reads and writes. They are checked once per server,
# so an aiohttp release that renames one leaves every request on aiohttp's own path (slower,
# still right) instead of breaking the sandbox; test_inline_posts fails then, asking for a look.
_HANDLER_INTERNALS = (
    "_waiter", "_messages", "_logging_enabled", "_upgraded", "_payload_parser", "_force_close", "_close",
    "_parser", "_manager", "_keepalive", "_keepalive_timeout", "_next_keepalive_close_time",
    "_keepalive_handle", "_process_keepalive", "_buffer_paused", "_msg_queue_resume_size",
    "_resume_reading_if_drained", "_request_count", "_loop", "writing_paused", "transport")
_SERVER_INTERNALS = ("request_handler", "request_factory", "handler_cancellation", "_loop", "_kwargs")


def inline_posts_supported(server: Server) -> bool:
    """Whether this aiohttp has every private part the inline path relies on."""
    return (all(hasattr(RequestHandler, a) for a in _HANDLER_INTERNALS)
            and all(hasattr(server, a) for a in _SERVER_INTERNALS))


class SandboxRunner(web.AppRunner):
    """``web.AppRunner`` whose connections answer the sandbox's hot POSTs inline."""

    def __init__(self, sandbox: SandboxApp, app: web.Application, **kwargs: Any) -> None:
        super().__init__(app, **kwargs)
        self._sandbox = sandbox

    async def _make_server(self) -> Server:
        server = await super()._make_server()
        if not inline_posts_supported(server):
            log.warning("sandbox: this aiohttp lacks what the inline POST path relies on; "
                        "every request goes through aiohttp's own path")
            return server
        return _InlineServer(self._sandbox, server)
