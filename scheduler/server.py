"""The scheduler's HTTP(S) endpoint, as kube-scheduler's port 10259.

Served by aiohttp on the scheduler's event loop: ``/metrics``, the probes ``/healthz``,
``/livez``, ``/readyz`` and the ``/debug/*`` routes other components register with
``add_debug_route``.  /readyz turns ready only after the informers have synced (and, with leader
election, reports leadership); /healthz and /livez fail when a registered health check fails
(for example a lease that cannot be renewed).

Why one module owns the security of the port: every request except the always-allowed paths
(the probes, which kubelets send without credentials) goes through one ``RequestGuard``
(delegated authentication and authorization, ``scheduler.client.delegated_auth``), so a route
added later cannot forget it.  ``/debug/*`` routes expose pod names and per-node diagnoses:
they are served only when authorization is on or the port is bound to loopback, and are not
routed at all (404) otherwise.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import errno
import ipaddress
import socket
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import structlog
from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client import disable_created_metrics

if TYPE_CHECKING:
    from scheduler.server_tls import ServingCertificate

log = structlog.get_logger(__name__)

# kube-scheduler exposes no `*_created` series (component-base metrics are not OpenMetrics
# created-timestamps); prometheus_client adds one per counter/histogram unless switched off.
# The switch is process-wide and read at collection time.
disable_created_metrics()  # type: ignore[no-untyped-call]

HealthCheck = Callable[[], str | None]  # returns an error message, or None when healthy
# (HTTP status, message) of a refused request.
Refusal = tuple[int, str]
# Decides one request: (bearer token or None, verb, path) -> None to serve it, or a Refusal.
# The verb is the lowercased HTTP method, as the API server's non-resource request info has it.
RequestGuard = Callable[[str | None, str, str], Awaitable[Refusal | None]]
DebugHandler = Callable[[web.Request], Awaitable[web.StreamResponse]]

# As kube-scheduler's --authorization-always-allow-paths default.
ALWAYS_ALLOW_PATHS = ("/healthz", "/readyz", "/livez")
DEBUG_PREFIX = "/debug/"


@dataclass
class HealthState:
    synced: bool = False
    liveness_checks: dict[str, HealthCheck] = field(default_factory=dict)
    readiness_checks: dict[str, HealthCheck] = field(default_factory=dict)
    # Informational lines shown by /readyz (e.g. leadership); never fail the probe.
    info: dict[str, Callable[[], str]] = field(default_factory=dict)


def parse_bind_address(value: str) -> tuple[str, int]:
    """``host:port`` (``[::1]:port`` for IPv6) → (host, port); ValueError names the flag."""
    host, sep, port_text = value.rpartition(":")
    if not sep or not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise ValueError(f"--metrics-bind-address: expected host:port, got {value!r}")
    return host.strip("[]") or "0.0.0.0", int(port_text)


def is_loopback(host: str) -> bool:
    """True for addresses only this machine can reach (127.0.0.0/8, ::1, localhost)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def format_address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


class ServingError(Exception):
    """Serving flags that do not fit together, unusable certificates, or an address in use."""


def bind_listener(host: str, port: int) -> socket.socket:
    """Bind and listen on host:port now, so a port in use fails before anything else starts.

    The socket is handed to ``HealthServer(sock=...)``.  SO_REUSEADDR only lets a restart bind
    over connections in TIME_WAIT; a live listener still makes the bind fail.
    """
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise ServingError(f"--metrics-bind-address {format_address(host, port)}: "
                        f"{exc.strerror}") from exc
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(128)
    except OSError as exc:
        sock.close()
        reason = "address already in use" if exc.errno == errno.EADDRINUSE else \
            (exc.strerror or str(exc))
        raise ServingError(f"--metrics-bind-address {format_address(host, port)}: {reason}") \
            from exc
    sock.setblocking(False)
    return sock


# --- options ----------------------------------------------------------------------------------

DEFAULT_PORT = 10259


@dataclass(frozen=True)
class ServingOptions:
    host: str
    port: int
    secure: bool
    cert_file: str | None = None
    key_file: str | None = None
    authentication: bool = False
    authorization: bool = False
    always_allow_paths: tuple[str, ...] = ALWAYS_ALLOW_PATHS


def add_serving_flags(parser: argparse.ArgumentParser) -> None:
    """The `run` flags of the endpoint server (kube-scheduler's secure serving and delegated
    authentication/authorization)."""
    parser.add_argument(
        "--metrics-bind-address", default=None, metavar="HOST:PORT",
        help=f"serves /metrics, /healthz, /livez, /readyz and /debug/* (default "
        f"0.0.0.0:{DEFAULT_PORT}; with --sandbox 127.0.0.1:{DEFAULT_PORT})")
    parser.add_argument(
        "--secure-serving", choices=("true", "false"), default=None,
        help="serve HTTPS (default true; with --sandbox false unless a certificate or "
        "--authentication-token-webhook is given). Without --tls-cert-file a self-signed "
        "certificate is generated in memory at start")
    parser.add_argument("--tls-cert-file", help="serving certificate (PEM; reloaded when it "
                        "changes on disk)")
    parser.add_argument("--tls-private-key-file", help="private key for --tls-cert-file")
    parser.add_argument(
        "--authentication-token-webhook", nargs="?", const="true", default=None,
        choices=("true", "false"),
        help="require a bearer token on every path but the probes, checked with a "
        "TokenReview (default true with HTTPS outside --sandbox)")
    parser.add_argument(
        "--authorization-mode", choices=("Webhook", "AlwaysAllow"), default=None,
        help="Webhook: allow a request only if a SubjectAccessReview allows its verb on the "
        "non-resource path (get /metrics, get /debug/...); AlwaysAllow: any authenticated "
        "user (default Webhook when authentication is on)")
    parser.add_argument(
        "--authorization-always-allow-paths", default=",".join(ALWAYS_ALLOW_PATHS),
        metavar="PATHS", help="comma-separated paths served without authentication or "
        "authorization (default %(default)s)")


def serving_options_from_args(args: argparse.Namespace, *, sandbox: bool) -> ServingOptions:
    """Resolve the defaults: secure in a cluster, plain HTTP on loopback for --sandbox."""
    default_host = "127.0.0.1" if sandbox else "0.0.0.0"
    try:
        host, port = parse_bind_address(
            args.metrics_bind_address or f"{default_host}:{DEFAULT_PORT}")
    except ValueError as exc:
        raise ServingError(str(exc)) from exc
    cert, key = args.tls_cert_file, args.tls_private_key_file
    if bool(cert) != bool(key):
        raise ServingError("--tls-cert-file and --tls-private-key-file go together")
    authn = None if args.authentication_token_webhook is None \
        else args.authentication_token_webhook == "true"
    authz = None if args.authorization_mode is None else args.authorization_mode == "Webhook"
    if args.secure_serving is not None:
        secure = args.secure_serving == "true"
    else:
        secure = not sandbox or bool(cert) or bool(authn) or bool(authz)
    if not secure and cert:
        raise ServingError("--tls-cert-file is given but --secure-serving=false")
    if authn is None:
        authn = secure and (not sandbox or bool(authz))
    if authz is None:
        authz = authn
    if authn and not secure:
        raise ServingError("--authentication-token-webhook needs HTTPS: bearer tokens are "
                           "not accepted over plain HTTP (drop --secure-serving=false)")
    if authz and not authn:
        raise ServingError("--authorization-mode=Webhook needs "
                           "--authentication-token-webhook (a user to authorize)")
    paths = tuple(p.strip() for p in args.authorization_always_allow_paths.split(",")
                  if p.strip())
    for path in paths:
        if not path.startswith("/"):
            raise ServingError(f"--authorization-always-allow-paths: {path!r} is not a path")
    return ServingOptions(host=host, port=port, secure=secure, cert_file=cert, key_file=key,
                          authentication=authn, authorization=authz, always_allow_paths=paths)


@dataclass
class PreparedServing:
    """What ``prepare_serving`` made ready: the bound socket and the certificate."""

    options: ServingOptions
    sock: socket.socket
    certificate: ServingCertificate | None


def prepare_serving(options: ServingOptions) -> PreparedServing:
    """Load (or generate) the certificate, warn about open endpoints, then bind.

    Called before anything else starts, so that a bad certificate or a port in use is a
    one-line error and nothing (sandbox, informers, leader election) has been touched.
    """
    from scheduler.server_tls import CertificateError, ServingCertificate, self_signed_hosts

    certificate = None
    if options.secure:
        if options.cert_file and options.key_file:
            try:
                certificate = ServingCertificate.from_files(options.cert_file, options.key_file)
            except CertificateError as exc:
                raise ServingError(str(exc)) from exc
        else:
            certificate = ServingCertificate.self_signed(self_signed_hosts(options.host))
    sock = bind_listener(options.host, options.port)
    warn_if_open(options)
    return PreparedServing(options=options, sock=sock, certificate=certificate)


def warn_if_open(options: ServingOptions) -> str | None:
    """Log (and return) a warning when a protection is off on an address others can reach."""
    if is_loopback(options.host):
        return None
    if not options.secure:
        warning = ("serving plain HTTP without authentication on a non-loopback address: "
                   "anyone who can reach it can read /metrics")
    elif not options.authentication:
        warning = ("authentication is off on a non-loopback address: anyone who can reach it "
                   "can read /metrics")
    elif not options.authorization:
        warning = ("authorization is off on a non-loopback address: any authenticated user "
                   "can read /metrics")
    else:
        return None
    log.warning(warning, address=format_address(options.host, options.port))
    return warning


def bearer_token(header: str) -> str | None:
    scheme, _, token = header.partition(" ")
    token = token.strip()
    return token if scheme.lower() == "bearer" and token else None


class HealthServer:
    """The endpoint server.  Register debug routes, then ``start``; ``stop`` ends everything
    it started (the listener and the certificate reloader)."""

    def __init__(
        self,
        *,
        registry: CollectorRegistry,
        health: HealthState,
        host: str,
        port: int,
        sock: socket.socket | None = None,
        certificate: ServingCertificate | None = None,
        guard: RequestGuard | None = None,
        authorization: bool = False,
        always_allow_paths: Iterable[str] = ALWAYS_ALLOW_PATHS,
    ) -> None:
        self._registry = registry
        self._health = health
        self._host = host
        self._port = port
        self._sock = sock
        self._certificate = certificate
        self._guard = guard
        self._authorization = authorization
        self._always_allow = frozenset(always_allow_paths)
        self._debug_routes: dict[str, DebugHandler] = {}
        self._runner: web.AppRunner | None = None
        self._reloader: asyncio.Task[None] | None = None
        self.bound_port: int | None = None

    @classmethod
    def serving(
        cls, prepared: PreparedServing, *, registry: CollectorRegistry, health: HealthState,
        guard: RequestGuard | None,
    ) -> HealthServer:
        """The server for ``prepare_serving``'s socket and certificate."""
        opts = prepared.options
        return cls(registry=registry, health=health, host=opts.host, port=opts.port,
                   sock=prepared.sock, certificate=prepared.certificate, guard=guard,
                   authorization=opts.authorization,
                   always_allow_paths=opts.always_allow_paths)

    @property
    def debug_enabled(self) -> bool:
        """/debug/* is served only to authorized users, or to this machine."""
        return self._authorization or is_loopback(self._host)

    def add_debug_route(self, path: str, handler: DebugHandler) -> None:
        """Serve GET ``path`` (under /debug/, aiohttp route syntax such as
        ``/debug/pods/{namespace}/{name}``) with ``handler``.  Requests are authorized as
        ``get`` on the request path, like /metrics; when debug routes are not allowed on this
        address they are not routed (404)."""
        if not path.startswith(DEBUG_PREFIX):
            raise ValueError(f"debug route {path!r}: must start with {DEBUG_PREFIX}")
        if self._runner is not None:
            raise RuntimeError(f"debug route {path!r}: register routes before start()")
        if path in self._debug_routes:
            raise ValueError(f"debug route {path!r}: already registered")
        self._debug_routes[path] = handler

    def _app(self) -> web.Application:
        app = web.Application(middlewares=[self._guard_middleware])
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/healthz", self._liveness)
        app.router.add_get("/livez", self._liveness)
        app.router.add_get("/readyz", self._readiness)
        if self.debug_enabled:
            for path, handler in self._debug_routes.items():
                app.router.add_get(path, handler)
        return app

    @web.middleware
    async def _guard_middleware(
        self, request: web.Request,
        handler: Callable[[web.Request], Awaitable[web.StreamResponse]],
    ) -> web.StreamResponse:
        # Before routing, as the API server's filters run: an unknown path is 401/403 to a
        # stranger, not a 404 that tells which paths exist.
        if self._guard is not None and not self._always_allowed(request.path):
            token = bearer_token(request.headers.get("Authorization", ""))
            refusal = await self._guard(token, request.method.lower(), request.path)
            if refusal is not None:
                status, message = refusal
                return web.Response(status=status, text=message + "\n")
        return await handler(request)

    def _always_allowed(self, path: str) -> bool:
        # As --authorization-always-allow-paths: exact paths, or a prefix ending in "*".
        return path in self._always_allow or any(
            p.endswith("*") and path.startswith(p[:-1]) for p in self._always_allow)

    async def start(self) -> None:
        self._runner = web.AppRunner(self._app(), access_log=None)
        await self._runner.setup()
        context = self._certificate.context if self._certificate is not None else None
        site: web.BaseSite
        if self._sock is not None:
            site = web.SockSite(self._runner, self._sock, ssl_context=context)
        else:
            site = web.TCPSite(self._runner, self._host, self._port, ssl_context=context)
        await site.start()
        server = site._server
        sockets = getattr(server, "sockets", None) or []
        self.bound_port = sockets[0].getsockname()[1] if sockets else self._port
        if self._certificate is not None and self._certificate.reloader is not None:
            self._reloader = asyncio.create_task(self._certificate.reloader.run(),
                                                 name="serving-certificate-reloader")
        if self._debug_routes and not self.debug_enabled:
            log.warning("debug endpoints are not served: authorization is off and the address "
                        "is not loopback", host=self._host,
                        paths=sorted(self._debug_routes))
        log.info("serving health and metrics", host=self._host, port=self.bound_port,
                 tls=context is not None, guarded=self._guard is not None,
                 authorization=self._authorization, debug=self.debug_enabled)

    async def stop(self) -> None:
        if self._reloader is not None:
            self._reloader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reloader
            self._reloader = None
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _metrics(self, request: web.Request) -> web.Response:
        body = generate_latest(self._registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    @staticmethod
    def _run_checks(checks: dict[str, HealthCheck]) -> list[str]:
        failures = []
        for name, check in checks.items():
            try:
                problem = check()
            except Exception as exc:  # a broken check is a failed check, not a crash
                problem = f"check raised {exc!r}"
            if problem:
                failures.append(f"[-]{name} failed: {problem}")
        return failures

    async def _liveness(self, request: web.Request) -> web.Response:
        failures = self._run_checks(self._health.liveness_checks)
        if failures:
            return web.Response(status=500, text="\n".join(failures) + "\nhealthz check failed\n")
        return web.Response(text="ok")

    async def _readiness(self, request: web.Request) -> web.Response:
        failures = self._run_checks(self._health.liveness_checks)
        if not self._health.synced:
            failures.append("[-]informer-sync failed: informers have not synced yet")
        failures.extend(self._run_checks(self._health.readiness_checks))
        lines = [f"[+]{name}: {describe()}" for name, describe in self._health.info.items()]
        if failures:
            text = "\n".join(lines + failures) + "\nreadyz check failed\n"
            return web.Response(status=500, text=text)
        return web.Response(text="\n".join(lines + ["ok"]))

