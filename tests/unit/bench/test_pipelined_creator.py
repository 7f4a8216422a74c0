"""The creator's pipelined POSTs against a real sandbox process (HTTP/1.1 pipelining over
keep-alive connections, only status lines and lengths parsed), and its response parser fed
byte by byte."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import orjson
import pytest

from scheduler.bench.creator import (
    CreatorProcess,
    PipelinedCreator,
    Target,
    _Batch,
    _Pipeline,
    encode_bodies,
)
from scheduler.bench.machine import process_cpu_seconds
from scheduler.client.api import ApiClient
from scheduler.client.connection import load_connection
from scheduler.sandbox.testing import SandboxProcess
from tests.builders import make_pod

TOKEN = "bench-creator-token"


@pytest.fixture(scope="module")
def plain() -> Iterator[SandboxProcess]:
    with SandboxProcess(simulate_kubelet=False) as sandbox:
        yield sandbox


@pytest.fixture(scope="module")
def with_token() -> Iterator[SandboxProcess]:
    with SandboxProcess(simulate_kubelet=False, token=TOKEN) as sandbox:
        yield sandbox


def _bodies(pods: list[dict[str, Any]]) -> list[tuple[str, bytes]]:
    return encode_bodies(orjson.dumps(p) for p in pods)


async def _names(sandbox: SandboxProcess, namespace: str) -> list[str]:
    user = ApiClient(load_connection(kubeconfig=str(sandbox.kubeconfig_path)), qps=0)
    try:
        listed = await user.get(f"/api/v1/namespaces/{namespace}/pods")
    finally:
        await user.close()
    return [p["metadata"]["name"] for p in listed["items"]]


async def _namespace(sandbox: SandboxProcess, name: str) -> None:
    user = ApiClient(load_connection(kubeconfig=str(sandbox.kubeconfig_path)), qps=0)
    try:
        await user.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                  "metadata": {"name": name}})
    finally:
        await user.close()


@pytest.mark.parametrize(
    ("connections", "depth", "pods"),
    [
        pytest.param(1, 1, 7, id="one-connection-no-pipelining"),
        pytest.param(1, 16, 50, id="one-connection-pipelined"),
        pytest.param(4, 8, 101, id="several-connections-pipelined"),
        pytest.param(8, 32, 5, id="fewer-pods-than-the-window"),
    ],
)
async def test_pipelined_creation_creates_every_pod_once(
        plain: SandboxProcess, connections: int, depth: int, pods: int) -> None:
    namespace = f"pipe-{connections}-{depth}"
    await _namespace(plain, namespace)
    creator = PipelinedCreator(Target.from_kubeconfig(str(plain.kubeconfig_path)),
                               connections=connections, depth=depth)
    await creator.open()
    try:
        report = await creator.create(_bodies([make_pod(f"p{i}", namespace)
                                               for i in range(pods)]))
    finally:
        creator.close()
    assert (report.created, report.failed, report.error) == (pods, 0, "")
    assert sorted(await _names(plain, namespace)) == sorted(f"p{i}" for i in range(pods))
    assert report.started <= report.finished
    assert report.cpu is not None and report.cpu >= 0


@pytest.mark.parametrize(
    ("bad", "error"),
    [
        pytest.param(make_pod("lost", "no-such-namespace"),
                     "POST /api/v1/namespaces/no-such-namespace/pods: HTTP 404 ",
                     id="namespace-missing"),
        pytest.param({"apiVersion": "v1", "kind": "Pod",
                      "metadata": {"name": "Not_A_Name", "namespace": "failing"},
                      "spec": {"containers": [{"name": "c", "image": "i"}]}},
                     "POST /api/v1/namespaces/failing/pods: HTTP 422 ", id="invalid-422"),
    ],
)
async def test_a_failing_post_is_counted_with_the_first_error(
        plain: SandboxProcess, bad: dict[str, Any], error: str) -> None:
    """One bad pod in the middle of a pipelined window: it alone fails, its error is kept
    (status and body), and the pods after it on the same connection are still created."""
    namespace = "failing"
    if namespace not in await _namespaces(plain):
        await _namespace(plain, namespace)
    before = len(await _names(plain, namespace))
    prefix = f"ok{before}"
    pods = ([make_pod(f"{prefix}-a{i}", namespace) for i in range(5)] + [bad]
            + [make_pod(f"{prefix}-b{i}", namespace) for i in range(5)])
    creator = PipelinedCreator(Target.from_kubeconfig(str(plain.kubeconfig_path)),
                               connections=1, depth=16)
    await creator.open()
    try:
        report = await creator.create(_bodies(pods))
    finally:
        creator.close()
    assert (report.created, report.failed) == (10, 1)
    assert report.error.startswith(error)
    assert '"kind":"Status"' in report.error  # the failed response's body
    assert len(await _names(plain, namespace)) == before + 10


async def _namespaces(sandbox: SandboxProcess) -> set[str]:
    user = ApiClient(load_connection(kubeconfig=str(sandbox.kubeconfig_path)), qps=0)
    try:
        listed = await user.get("/api/v1/namespaces")
    finally:
        await user.close()
    return {n["metadata"]["name"] for n in listed["items"]}


async def test_the_sandbox_answers_pipelined_requests_in_order(plain: SandboxProcess) -> None:
    """Many POSTs written at once on one connection: one response each, in the order sent."""
    await _namespace(plain, "order")
    target = Target.from_kubeconfig(str(plain.kubeconfig_path))
    names = [f"o{i}" for i in range(40)]
    reader, writer = await asyncio.open_connection(target.host, target.port)
    try:
        writer.write(b"".join(target.post(path, body)
                              for path, body in _bodies([make_pod(n, "order") for n in names])))
        await writer.drain()
        answered = []
        for _ in names:
            head = await reader.readuntil(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 201"), head
            length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
            answered.append(orjson.loads(await reader.readexactly(length))["metadata"]["name"])
    finally:
        writer.close()
    assert answered == names


async def test_a_token_kubeconfig_is_sent_over_tls(with_token: SandboxProcess) -> None:
    target = Target.from_kubeconfig(str(with_token.kubeconfig_path))
    assert target.ssl is not None and target.authorization == f"Bearer {TOKEN}"
    assert f"Authorization: Bearer {TOKEN}\r\n".encode() in target.post("/x", b"{}")
    await _namespace(with_token, "tls")
    creator = PipelinedCreator(target, connections=2, depth=4)
    await creator.open()
    try:
        report = await creator.create(_bodies([make_pod(f"t{i}", "tls") for i in range(9)]))
    finally:
        creator.close()
    assert (report.created, report.failed) == (9, 0)
    assert len(await _names(with_token, "tls")) == 9


async def test_a_wrong_token_fails_before_ready(with_token: SandboxProcess) -> None:
    right = Target.from_kubeconfig(str(with_token.kubeconfig_path))
    wrong = Target(host=right.host, port=right.port, host_header=right.host_header,
                   prefix=right.prefix, authorization="Bearer wrong", ssl=right.ssl,
                   server_hostname=right.server_hostname)
    creator = PipelinedCreator(wrong, connections=1)
    try:
        with pytest.raises(ConnectionError, match="GET /version: HTTP 401"):
            await creator.open()
    finally:
        creator.close()


async def test_the_ready_go_report_protocol(plain: SandboxProcess) -> None:
    """Ready with the bodies encoded and nothing created; the pods after ``go``; the report
    line with the creator's CPU over the creation; exit code 0."""
    await _namespace(plain, "protocol")
    pods = [make_pod(f"r{i}", "protocol") for i in range(30)]
    creator = await CreatorProcess.start(str(plain.kubeconfig_path), pods, concurrency=3,
                                         depth=4)
    try:
        assert await _names(plain, "protocol") == []
        released = time.monotonic()
        await creator.go()
        report = await creator.result(timeout=60)
        done = time.monotonic()
        assert creator._proc.returncode == 0
    finally:
        await creator.aclose()
    assert (report.created, report.failed, report.error) == (30, 0, "")
    assert released <= report.started <= report.finished <= done
    assert report.cpu is not None and 0 <= report.cpu <= done - released + 1
    assert sorted(await _names(plain, "protocol")) == sorted(f"r{i}" for i in range(30))


async def test_the_sandbox_cpu_is_read_by_its_pid(plain: SandboxProcess) -> None:
    assert plain.pid is not None
    first = process_cpu_seconds(plain.pid)
    assert first is not None and first > 0  # it has started, listened, answered
    assert process_cpu_seconds(2**22 + 12345) is None  # no such process


@pytest.mark.parametrize(
    ("stat", "seconds"),
    [
        pytest.param("42 (python) S 1 2 3 4 5 6 7 8 9 10 250 50 0 0", 3.0, id="plain"),
        pytest.param("42 (a) b (c)) S 1 2 3 4 5 6 7 8 9 10 100 0 0 0", 1.0,
                     id="parentheses-in-the-name"),
    ],
)
def test_process_cpu_seconds_reads_utime_and_stime(stat: str, seconds: float) -> None:
    import os

    ticks = os.sysconf("SC_CLK_TCK")
    assert process_cpu_seconds(1, stat=stat) == pytest.approx(seconds * 100 / ticks)


class _Transport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.written: list[bytes] = []
        self.aborted = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.written.append(bytes(data))

    def abort(self) -> None:
        self.aborted = True


RESPONSES = [
    b"HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}",
    b"HTTP/1.1 404 Not Found\r\ncontent-length: 9\r\n\r\nnot found",
    b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
]


@pytest.mark.parametrize("chunk", [1, 7, 1000], ids=["byte-by-byte", "small-reads", "one-read"])
async def test_responses_are_parsed_across_reads(chunk: int) -> None:
    batch = _Batch([b"a", b"b", b"c"], ["POST /a", "POST /b", "POST /c"])
    pipe = _Pipeline(depth=8)
    transport = _Transport()
    pipe.connection_made(transport)
    batch.connections = [pipe]
    pipe.start(batch)
    assert transport.written == [b"abc"]  # the whole window in one write
    stream = b"".join(RESPONSES)
    for at in range(0, len(stream), chunk):
        pipe.data_received(stream[at:at + chunk])
    assert batch.done.done()
    assert (batch.created, batch.failed) == (2, 1)
    assert batch.error == "POST /b: HTTP 404 not found"


@pytest.mark.parametrize(
    ("stream", "why"),
    [
        pytest.param(b"SSH-2.0-OpenSSH\r\n\r\n", "not an HTTP/1.x response", id="not-http"),
        pytest.param(b"HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n",
                     "without Content-Length", id="no-length"),
    ],
)
async def test_a_broken_response_fails_the_connections_requests(stream: bytes, why: str) -> None:
    batch = _Batch([b"a", b"b"], ["POST /a", "POST /b"])
    pipe = _Pipeline(depth=8)
    transport = _Transport()
    pipe.connection_made(transport)
    batch.connections = [pipe]
    pipe.start(batch)
    pipe.data_received(stream)
    assert transport.aborted and not pipe.open
    assert (batch.created, batch.failed) == (0, 2) and batch.done.done()
    assert batch.error.startswith("POST /a: connection lost: ") and why in batch.error


async def test_a_lost_connection_leaves_its_unsent_requests_to_the_others() -> None:
    batch = _Batch([b"a", b"b", b"c", b"d"], ["POST /a", "POST /b", "POST /c", "POST /d"])
    first, second = _Pipeline(depth=1), _Pipeline(depth=1)
    t1, t2 = _Transport(), _Transport()
    first.connection_made(t1)
    second.connection_made(t2)
    batch.connections = [first, second]
    first.start(batch)
    second.start(batch)
    first.connection_lost(ConnectionResetError("reset"))  # "a" was in flight on it
    for _ in range(3):
        second.data_received(RESPONSES[2])
    assert t2.written == [b"b", b"c", b"d"]
    assert (batch.created, batch.failed) == (3, 1) and batch.done.done()
    assert batch.error == "POST /a: connection lost: reset"
