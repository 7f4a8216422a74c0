"""Metrics and health endpoints (/metrics, /healthz, /livez, /readyz).

Served by aiohttp on the scheduler's event loop.  /readyz turns ready only after the informers
have synced (and, with leader election, reports leadership); /healthz and /livez fail when a
registered health check fails (for example a lease that cannot be renewed).
"""

from __future__ import annotations

import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import structlog
from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

log = structlog.get_logger(__name__)

HealthCheck = Callable[[], str | None]  # returns an error message, or None when healthy
# Guards /metrics: returns None to allow, or (status, message) to refuse.
MetricsAuthorizer = Callable[[web.Request], Awaitable[tuple[int, str] | None]]


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


class HealthServer:
    def __init__(
        self,
        *,
        registry: CollectorRegistry,
        health: HealthState,
        host: str,
        port: int,
        ssl_context: ssl.SSLContext | None = None,
        metrics_authorizer: MetricsAuthorizer | None = None,
    ) -> None:
        self._registry = registry
        self._health = health
        self._host = host
        self._port = port
        self._ssl = ssl_context
        self._authorizer = metrics_authorizer
        self._runner: web.AppRunner | None = None
        self.bound_port: int | None = None

    def _app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/healthz", self._liveness)
        app.router.add_get("/livez", self._liveness)
        app.router.add_get("/readyz", self._readiness)
        return app

    async def start(self) -> None:
        self._runner = web.AppRunner(self._app(), access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self._host, self._port, ssl_context=self._ssl)
        await site.start()
        server = site._server
        sockets = getattr(server, "sockets", None) or []
        self.bound_port = sockets[0].getsockname()[1] if sockets else self._port
        log.info("serving health and metrics", host=self._host, port=self.bound_port,
                 tls=self._ssl is not None)

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _metrics(self, request: web.Request) -> web.Response:
        if self._authorizer is not None:
            refusal = await self._authorizer(request)
            if refusal is not None:
                status, message = refusal
                return web.Response(status=status, text=message + "\n")
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
