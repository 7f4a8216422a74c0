"""Extenders over HTTPS with the v1 tlsConfig (client-go's TLSConfigFor semantics)."""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web

from scheduler.config.types import Extender, ExtenderTLSConfig
from scheduler.extenders import ExtenderError, HTTPExtender
from scheduler.framework.node_info import NodeInfo
from tests.builders import NodeBuilder, PodBuilder
from tests.tls import self_signed


class Server:
    def __init__(self, url: str, server_cert: Path, client_cert: Path, client_key: Path):
        self.url = url
        self.server_cert = server_cert
        self.client_cert = client_cert
        self.client_key = client_key


@pytest.fixture
async def https(tmp_path: Path) -> AsyncIterator[Server]:
    """An HTTPS extender that requires a client certificate signed by ``client``."""
    server_cert, server_key = self_signed(tmp_path, "server")
    client_cert, client_key = self_signed(tmp_path, "client")
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(server_cert, server_key)
    ctx.verify_mode = ssl.CERT_REQUIRED
    ctx.load_verify_locations(client_cert)

    async def handler(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        return web.json_response({"NodeNames": body["NodeNames"]})

    app = web.Application()
    app.router.add_post("/filter", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=ctx)
    await site.start()
    host, port = runner.addresses[0][:2]
    yield Server(f"https://{host}:{port}", server_cert, client_cert, client_key)
    await runner.cleanup()


NODES = [NodeInfo(NodeBuilder("a").capacity(cpu="1", memory="1Gi", pods=1).obj())]
POD = PodBuilder("p").obj()


def ext(url: str, tls: ExtenderTLSConfig | None, *, enable_https: bool = False) -> HTTPExtender:
    return HTTPExtender(Extender(url_prefix=url, filter_verb="filter", node_cache_capable=True,
                                 enable_https=enable_https, tls_config=tls))


@pytest.mark.parametrize(
    "case",
    ["tas-shape: enableHTTPS, client cert files, no CA (server not verified, as upstream)",
     "CA file and client cert files", "CA data, serverName, client cert data"],
)
async def test_https_calls_succeed(https: Server, case: str) -> None:
    if case.startswith("tas-shape"):
        tls = ExtenderTLSConfig(cert_file=str(https.client_cert), key_file=str(https.client_key))
        e = ext(https.url, tls, enable_https=True)
    elif case.startswith("CA file"):
        tls = ExtenderTLSConfig(ca_file=str(https.server_cert), cert_file=str(https.client_cert),
                                key_file=str(https.client_key))
        e = ext(https.url, tls)
    else:
        tls = ExtenderTLSConfig(ca_data=https.server_cert.read_bytes(), server_name="localhost",
                                cert_data=https.client_cert.read_bytes(),
                                key_data=https.client_key.read_bytes())
        e = ext(https.url, tls)
    result = await e.filter(POD, NODES)
    assert [n.name for n in result.nodes] == ["a"]
    await e.close()


async def test_server_certificate_is_verified_against_the_ca(
    https: Server, tmp_path: Path
) -> None:
    other_ca, _ = self_signed(tmp_path, "other")
    e = ext(https.url, ExtenderTLSConfig(ca_file=str(other_ca), cert_file=str(https.client_cert),
                                         key_file=str(https.client_key)))
    with pytest.raises(ExtenderError, match="certificate verify failed"):
        await e.filter(POD, NODES)
    await e.close()


async def test_without_client_certificate_the_server_refuses(https: Server) -> None:
    e = ext(https.url, ExtenderTLSConfig(insecure=True))
    with pytest.raises(ExtenderError, match=f"extender '{https.url}' filter failed"):
        await e.filter(POD, NODES)
    await e.close()
