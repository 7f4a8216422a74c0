"""The creator's pieces that need no process or server: reading bodies, the POST workers."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest

from scheduler.bench.creator import CreatorReport, create_bodies, encode_bodies
from scheduler.client.api import ApiConnectionError, ApiResponse
from tests.builders import make_pod


def _line(pod: dict[str, Any]) -> bytes:
    return orjson.dumps(pod) + b"\n"


def test_bodies_are_posted_into_each_pods_namespace() -> None:
    a, b = make_pod("a", "ns-1"), make_pod("b", "ns-2")
    got = encode_bodies([_line(a), b"\n", b"   \n", _line(b)])
    assert [path for path, _ in got] == ["/api/v1/namespaces/ns-1/pods",
                                         "/api/v1/namespaces/ns-2/pods"]
    assert [orjson.loads(body) for _, body in got] == [a, b]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        pytest.param(b"{not json", "line 2: not JSON", id="not-json"),
        pytest.param(b"[1, 2]", "line 2: a pod object expected, got list", id="not-an-object"),
        pytest.param(orjson.dumps({"metadata": {"name": "lost"}}),
                     "line 2: pod 'lost': metadata.namespace is required", id="no-namespace"),
    ],
)
def test_a_bad_body_is_named_by_its_line(line: bytes, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        encode_bodies([_line(make_pod("ok", "ns")), line])


class _Server:
    """Answers POSTs with a status per path; counts requests in flight."""

    def __init__(self, statuses: dict[str, int | Exception]) -> None:
        self.statuses = statuses
        self.posted: list[bytes] = []
        self.in_flight = 0
        self.most_in_flight = 0

    async def request(self, method: str, path: str, *, body: bytes) -> ApiResponse:
        assert method == "POST"
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        await asyncio.sleep(0)  # let the other workers start theirs
        self.in_flight -= 1
        self.posted.append(body)
        status = self.statuses.get(path, 201)
        if isinstance(status, Exception):
            raise status
        return ApiResponse(status, {"reason": "NotFound"} if status == 404 else {})


@pytest.mark.parametrize(
    ("statuses", "created", "failed", "error"),
    [
        pytest.param({}, 6, 0, "", id="all-created"),
        pytest.param({"/api/v1/namespaces/gone/pods": 404}, 4, 2,
                     "POST /api/v1/namespaces/gone/pods: HTTP 404", id="http-error-counted"),
        pytest.param({"/api/v1/namespaces/gone/pods": ApiConnectionError("refused")}, 4, 2,
                     "refused", id="connection-error-counted"),
    ],
)
async def test_every_body_is_posted_once_from_at_most_concurrency_workers(
        statuses: dict[str, int | Exception], created: int, failed: int, error: str) -> None:
    pods = [make_pod(f"p{i}", "gone" if i in (1, 4) else "ns") for i in range(6)]
    bodies = encode_bodies(_line(p) for p in pods)
    server = _Server(statuses)
    report = await create_bodies(server, bodies, concurrency=3)
    assert sorted(server.posted) == sorted(body for _, body in bodies)
    assert server.most_in_flight == 3
    assert (report.created, report.failed) == (created, failed)
    assert report.error.startswith(error)
    assert report.started <= report.finished


def test_report_rate_is_created_pods_over_the_creation_window() -> None:
    report = CreatorReport(created=300, failed=0, error="", started=10.0, finished=12.0)
    assert report.rate == 150.0
