"""Port 10259 as kube-scheduler serves it, against the sandbox's TokenReview and
SubjectAccessReview: HTTPS (self-signed or from files, reloaded on rotation), 401 without a
token, 403 without the permission, 200 with it; probes open; /debug/* authorized on its own
path; a port in use stops `run` with one line before anything starts."""

from __future__ import annotations

import asyncio
import datetime
import hashlib
import socket
import ssl
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from prometheus_client import CollectorRegistry, Counter

from scheduler.client.api import ApiClient
from scheduler.client.connection import load_connection
from scheduler.client.delegated_auth import DelegatedAuth
from scheduler.sandbox import Sandbox
from scheduler.server import (
    HealthServer,
    HealthState,
    ServingOptions,
    prepare_serving,
)
from scheduler.server_tls import ServingCertificate, generate_self_signed

PROMETHEUS = "system:serviceaccount:monitoring:prometheus-k8s"
USERS = {
    "scraper-token": (PROMETHEUS, ["system:serviceaccounts"]),
    "sre-token": ("alice", ["sre"]),
    "other-token": ("intruder", []),
}
# What the shipped metrics-reader and debug-reader ClusterRoles grant, as sandbox rules.
ALLOW = [(PROMETHEUS, "get", "/metrics"), ("alice", "get", "/metrics"),
         ("alice", "get", "/debug/*")]


async def debug_queue(request: web.Request) -> web.Response:
    return web.json_response({"pending": ["default/web-1"]})


def insecure_client_context() -> ssl.SSLContext:
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE  # self-signed: identified by its fingerprint below
    return ctx


async def served_fingerprint(port: int) -> str:
    """SHA-256 of the certificate a new TLS connection is served."""
    _, writer = await asyncio.open_connection("127.0.0.1", port,
                                              ssl=insecure_client_context())
    der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
    writer.close()
    await writer.wait_closed()
    digest = hashlib.sha256(der).hexdigest().upper()
    return ":".join(digest[i:i + 2] for i in range(0, len(digest), 2))


async def get(url: str, token: str | None = None) -> tuple[int, str]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with aiohttp.ClientSession() as session, \
            session.get(url, headers=headers, ssl=insecure_client_context()) as resp:
        return resp.status, await resp.text()


Serve = Callable[..., Awaitable[tuple[HealthServer, str]]]


@pytest.fixture
async def serve(tmp_path: Path) -> AsyncIterator[Serve]:
    """The daemon's serving path: prepare_serving (bind + certificate) and the guard."""
    started: list[tuple[HealthServer, ApiClient | None]] = []

    async def make(options: ServingOptions, *, sandbox: Sandbox | None = None) -> tuple[
            HealthServer, str]:
        prepared = prepare_serving(options)
        client = guard = None
        if sandbox is not None:
            kubeconfig = sandbox.write_kubeconfig(tmp_path / f"kc-{len(started)}")
            client = ApiClient(load_connection(kubeconfig=str(kubeconfig)), qps=0)
            guard = DelegatedAuth(client, authentication=options.authentication,
                                  authorization=options.authorization)
        registry = CollectorRegistry()
        Counter("scheduler_schedule_attempts", "attempts", registry=registry).inc()
        server = HealthServer.serving(prepared, registry=registry,
                                      health=HealthState(synced=True), guard=guard)
        server.add_debug_route("/debug/queue", debug_queue)
        await server.start()
        started.append((server, client))
        scheme = "https" if options.secure else "http"
        return server, f"{scheme}://127.0.0.1:{server.bound_port}"

    yield make
    for server, client in started:
        await server.stop()
        if client is not None:
            await client.close()


def secure(**overrides: Any) -> ServingOptions:
    fields: dict[str, Any] = {"host": "127.0.0.1", "port": 0, "secure": True,
                              "authentication": True, "authorization": True}
    fields.update(overrides)
    return ServingOptions(**fields)


async def test_token_review_and_subject_access_review_decide_every_request(
    sandbox_factory: Callable[..., Awaitable[Sandbox]], serve: Serve
) -> None:
    sandbox = await sandbox_factory(nodes=1, auth_users=USERS, auth_allow=ALLOW)
    _, url = await serve(secure(), sandbox=sandbox)
    cases = [
        ("/metrics", None, 401), ("/metrics", "unknown-token", 401),
        ("/metrics", "other-token", 403), ("/metrics", "scraper-token", 200),
        ("/debug/queue", None, 401), ("/debug/queue", "scraper-token", 403),
        ("/debug/queue", "sre-token", 200),
        ("/healthz", None, 200), ("/livez", None, 200), ("/readyz", None, 200),
    ]
    got = [(path, token, (await get(url + path, token))[0]) for path, token, _ in cases]
    assert got == cases
    status, body = await get(url + "/metrics", "other-token")
    assert 'User "intruder" cannot get path "/metrics"' in body
    status, body = await get(url + "/metrics", "scraper-token")
    assert "scheduler_schedule_attempts_total 1.0" in body and "_created" not in body


async def test_review_answers_are_cached_for_ten_seconds(
    sandbox_factory: Callable[..., Awaitable[Sandbox]], tmp_path: Path
) -> None:
    sandbox = await sandbox_factory(nodes=1, auth_users=USERS, auth_allow=ALLOW)
    now = [100.0]
    kubeconfig = sandbox.write_kubeconfig(tmp_path / "kc")
    async with ApiClient(load_connection(kubeconfig=str(kubeconfig)), qps=0) as client:
        guard = DelegatedAuth(client, clock=lambda: now[0])

        def reviews() -> int:
            return sum(n for k, n in sandbox.counters()["requests"].items() if "review" in k)

        assert await guard("scraper-token", "get", "/metrics") is None
        assert (await guard("other-token", "get", "/metrics") or (0,))[0] == 403
        assert await guard("unknown-token", "get", "/metrics") == (401, "Unauthorized")
        first = reviews()
        assert first == 5  # 3 TokenReviews, 2 SubjectAccessReviews
        now[0] += 9.9
        assert await guard("scraper-token", "get", "/metrics") is None
        assert (await guard("other-token", "get", "/metrics") or (0,))[0] == 403
        assert await guard("unknown-token", "get", "/metrics") == (401, "Unauthorized")
        assert reviews() == first
        # another path is another decision (the user is cached)
        assert (await guard("scraper-token", "get", "/debug/queue") or (0,))[0] == 403
        assert reviews() == first + 1
        now[0] += 0.2
        assert await guard("scraper-token", "get", "/metrics") is None
        assert reviews() == first + 3


async def test_authentication_without_authorization_lets_any_known_token_in(
    sandbox_factory: Callable[..., Awaitable[Sandbox]], serve: Serve
) -> None:
    sandbox = await sandbox_factory(nodes=1, auth_users=USERS, auth_allow=ALLOW)
    server, url = await serve(secure(authorization=False), sandbox=sandbox)
    assert (await get(url + "/metrics"))[0] == 401
    assert (await get(url + "/metrics", "other-token"))[0] == 200
    # Authorization off on loopback: /debug/* is still served, to authenticated users only.
    assert server.debug_enabled
    assert (await get(url + "/debug/queue"))[0] == 401
    assert (await get(url + "/debug/queue", "other-token"))[0] == 200


def test_self_signed_certificate_is_generated_once_and_logged_with_its_fingerprint(
    tmp_path: Path
) -> None:
    """The daemon end to end: `run --sandbox --secure-serving=true` (no certificate given)."""
    import json
    import signal

    proc = subprocess.Popen(
        [sys.executable, "-m", "scheduler", "run", "--sandbox", "--secure-serving=true",
         "--metrics-bind-address", "127.0.0.1:0", "--log-format", "json", "--demo-pods", "0",
         "--sandbox-kubeconfig-out", str(tmp_path / "kc")],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    events: list[dict[str, Any]] = []
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith("{"):
                events.append(json.loads(line))
                if events[-1]["event"] == "serving health and metrics":
                    break
        port = int(events[-1]["port"])
        served = asyncio.run(served_fingerprint(port))
        status, body = asyncio.run(get(f"https://127.0.0.1:{port}/metrics"))
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    generated = [e for e in events if e["event"].startswith("generated a self-signed")]
    assert len(generated) == 1, events
    assert generated[0]["sha256"] == served
    assert "127.0.0.1" in generated[0]["hosts"]
    assert events[-1]["tls"] is True
    assert status == 200 and "scheduler_" in body  # --sandbox: no authentication by default
    # Plain HTTP is not answered on the TLS port.
    with pytest.raises(aiohttp.ClientError):
        asyncio.run(get(f"http://127.0.0.1:{port}/healthz"))


def write_pair(directory: Path, *, cn: str) -> tuple[Path, Path]:
    cert, key = generate_self_signed([cn, "127.0.0.1"])
    cert_path, key_path = directory / "tls.crt", directory / "tls.key"
    cert_path.write_bytes(cert)
    key_path.write_bytes(key)
    return cert_path, key_path


async def test_certificate_files_are_reloaded_when_rotated(
    tmp_path: Path, serve: Serve, capsys: pytest.CaptureFixture[str]
) -> None:
    # Log lines are read from the captured output: structlog caches configured loggers, so
    # capture_logs() would miss them.
    cert, key = write_pair(tmp_path, cn="first")
    server, url = await serve(secure(cert_file=str(cert), key_file=str(key),
                                     authentication=False, authorization=False))
    assert server.bound_port is not None
    port = server.bound_port
    first = await served_fingerprint(port)
    reloader = ServingCertificate.from_files(str(cert), str(key)).reloader
    assert reloader is not None and reloader.fingerprint == first

    # The server's own reloader is a supervised task polling every 10 s; drive one of the
    # same kind (same context) by hand through a fake sleep instead of waiting for it.
    live = server._certificate
    assert live is not None and live.reloader is not None
    sleeps: list[float] = []

    async def fake_sleep(seconds: float) -> None:
        sleeps.append(seconds)

    live.reloader._sleep = fake_sleep
    assert live.reloader.check() is False  # unchanged files: nothing to do

    # cert-manager rotates: the certificate file is written first, the key a moment later.
    new_cert, new_key = generate_self_signed(["second", "127.0.0.1"])
    cert.write_bytes(new_cert)
    capsys.readouterr()
    await live.reloader.run(iterations=1)
    assert sleeps == [10.0]
    assert "serving certificate not reloaded" in "".join(capsys.readouterr())
    assert await served_fingerprint(port) == first  # the half-written pair is not served

    key.write_bytes(new_key)
    await live.reloader.run(iterations=1)
    second = await served_fingerprint(port)
    assert second != first and second == live.reloader.fingerprint
    status, _ = await get(url + "/healthz")
    assert status == 200

    # A file that disappears (a Secret being replaced) keeps the current certificate.
    key.unlink()
    capsys.readouterr()
    assert live.reloader.check() is False
    assert live.reloader.check() is False
    said = "".join(capsys.readouterr())
    assert said.count("cannot read the serving certificate") == 1, said  # said once
    assert await served_fingerprint(port) == second


async def test_the_reloader_runs_as_a_named_task_until_stop(tmp_path: Path, serve: Serve) -> None:
    cert, key = write_pair(tmp_path, cn="first")
    server, _ = await serve(secure(cert_file=str(cert), key_file=str(key),
                                   authentication=False, authorization=False))
    names = {t.get_name() for t in asyncio.all_tasks()}
    assert "serving-certificate-reloader" in names
    await server.stop()
    assert "serving-certificate-reloader" not in {t.get_name() for t in asyncio.all_tasks()}


@pytest.mark.parametrize("bad", ["garbage", "mismatch"])
def test_unusable_certificate_files_are_a_startup_error(tmp_path: Path, bad: str) -> None:
    from scheduler.server import ServingError

    cert, key = write_pair(tmp_path, cn="x")
    if bad == "garbage":
        cert.write_text("not a certificate")
    else:
        key.write_bytes(generate_self_signed(["y"])[1])
    with pytest.raises(ServingError, match=f"--tls-cert-file {cert}"):
        prepare_serving(secure(cert_file=str(cert), key_file=str(key)))


def test_run_with_the_port_in_use_exits_2_with_one_line_before_starting_anything(
    tmp_path: Path
) -> None:
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = taken.getsockname()[1]
    kubeconfig = tmp_path / "sandbox.kubeconfig"
    try:
        done = subprocess.run(
            [sys.executable, "-m", "scheduler", "run", "--sandbox",
             "--metrics-bind-address", f"127.0.0.1:{port}",
             "--sandbox-kubeconfig-out", str(kubeconfig)],
            capture_output=True, text=True, timeout=60)
    finally:
        taken.close()
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [
        f"kube-py-scheduler: --metrics-bind-address 127.0.0.1:{port}: address already in use"]
    # nothing was started: no sandbox, no kubeconfig written, no demo objects
    assert "sandbox API server" not in done.stdout
    assert not kubeconfig.exists()


def test_expired_self_signed_validity_is_a_year() -> None:
    from cryptography import x509

    now = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    cert = x509.load_pem_x509_certificate(generate_self_signed(["localhost"], now=now)[0])
    assert cert.not_valid_after_utc - now == datetime.timedelta(days=365)
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.DNSName) == ["localhost"]
