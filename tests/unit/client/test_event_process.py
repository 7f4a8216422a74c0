"""The event process (scheduler.client.event_process): its channel, its mode, and a real child
writing Events to the fake API server on loopback (faults injected on the wire)."""

from __future__ import annotations

import asyncio
import os
import re
import signal
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from scheduler.client.connection import ConnectionConfig, StaticCredentials, TokenFileCredentials
from scheduler.client.event_process import (
    EventProcess,
    FrameReader,
    RemoteEventRecorder,
    ShippedMetrics,
    apply_stats,
    cgroup_cpu_limit,
    encode_frame,
    use_event_process,
    usable_cpus,
    wall_from_ns,
)
from scheduler.client.events import EventRecorder
from scheduler.metrics import SchedulerMetrics
from tests.unit.client.conftest import FakeClock, until
from tests.unit.client.fake_apiserver import FakeApiServer

EVENTS = "/apis/events.k8s.io/v1/namespaces/ns/events"
WALL_NS = 1_714_979_289_123_456_789  # 2024-05-06T07:08:09.123456Z


def pod(name: str = "p", uid: str = "u1") -> dict[str, Any]:
    return {"kind": "Pod", "apiVersion": "v1",
            "metadata": {"name": name, "namespace": "ns", "uid": uid, "resourceVersion": "7"}}


def dropped(metrics: SchedulerMetrics, reason: str) -> float:
    return metrics.registry.get_sample_value(
        "scheduler_py_events_dropped_total", {"reason": reason}) or 0.0


# -- the channel


RECORDS = [
    (0, "Normal", "Scheduled", "Binding", "Successfully assigned ns/p to n1",
     {"kind": "Pod", "apiVersion": "v1", "namespace": "ns", "name": "p", "uid": "u1"},
     None, 1000.5, WALL_NS),
    (1, "Warning", "FailedScheduling", "Scheduling", "0/3 nodes are available: ünïcode",
     {"kind": "Pod", "name": "q"}, {"kind": "Node", "name": "n1"}, 1001.0, WALL_NS + 1),
]


@pytest.mark.parametrize("piece", [1, 2, 5, 7, 64, 1 << 20])
def test_frames_come_out_whole_whatever_the_pieces(piece: int) -> None:
    stream = (encode_frame(("records", RECORDS)) + encode_frame({"qps": 5.0}, kind=b"P")
              + encode_frame(("flush", 3, 2.0)))
    reader = FrameReader()
    got: list[Any] = []
    for i in range(0, len(stream), piece):
        got += reader.feed(stream[i:i + piece])
    assert got == [("records", RECORDS), {"qps": 5.0}, ("flush", 3, 2.0)]
    assert reader.feed(b"") == []


def test_wall_clock_crosses_as_nanoseconds_to_the_microsecond() -> None:
    assert wall_from_ns(WALL_NS).isoformat() == "2024-05-06T07:08:09.123456+00:00"


def test_connections_cross_to_the_child(tmp_path: Path) -> None:
    import pickle

    token = tmp_path / "token"
    token.write_text("abc\n")
    creds = TokenFileCredentials(str(token))
    assert creds.authorization() == "Bearer abc"
    conn = ConnectionConfig(host="https://h:6443", credentials=creds, ca_data="PEM")
    copy = pickle.loads(pickle.dumps(conn))
    token.write_text("rotated\n")
    assert copy.host == "https://h:6443" and copy.ca_data == "PEM"
    assert copy.credentials.authorization() == "Bearer abc"  # re-read after its minute
    static = pickle.loads(pickle.dumps(ConnectionConfig(host="h", credentials=StaticCredentials("x"))))
    assert static.authorization() == "x"


def test_stats_shipped_back_land_in_the_parents_metrics() -> None:
    shipped = ShippedMetrics()
    shipped.events_dropped.labels(reason="rate_limited").inc()
    shipped.events_dropped.labels(reason="rate_limited").inc()
    shipped.ops.rest_client_requests.labels("201", "POST", "h:1").inc()
    shipped.ops.rest_client_request_duration.labels("POST", "h:1").observe(0.002)
    taken = shipped.take()
    assert shipped.take() == {}  # taken once
    metrics = SchedulerMetrics()
    apply_stats(metrics, FrameReader().feed(encode_frame(taken))[0])
    r = metrics.registry
    assert dropped(metrics, "rate_limited") == 2
    assert r.get_sample_value("rest_client_requests_total",
                              {"code": "201", "method": "POST", "host": "h:1"}) == 1
    assert r.get_sample_value("rest_client_request_duration_seconds_count",
                              {"verb": "POST", "host": "h:1"}) == 1


# -- the mode


@pytest.mark.parametrize(("mode", "cpus", "expected"), [
    ("on", 1.0, True), ("off", 8.0, False), ("auto", 1.0, False), ("auto", 1.5, False),
    ("auto", 2.0, True), ("auto", 16.0, True),
])
def test_mode(mode: str, cpus: float, expected: bool) -> None:
    assert use_event_process(mode, cpus=lambda: cpus) is expected


def test_unknown_mode_is_named() -> None:
    with pytest.raises(ValueError, match="--event-process: must be one of auto, on, off, got 'yes'"):
        use_event_process("yes")


@pytest.mark.parametrize(("limits", "expected"), [
    ({}, None),
    ({"": "max 100000"}, None),
    ({"kubepods/pod1": "150000 100000"}, 1.5),
    ({"kubepods": "100000 100000", "kubepods/pod1": "400000 100000"}, 1.0),
    ({"kubepods/pod1": "garbage"}, None),
])
def test_cgroup_cpu_limit(tmp_path: Path, limits: dict[str, str], expected: float | None) -> None:
    root = tmp_path / "cgroup"
    (root / "kubepods" / "pod1").mkdir(parents=True)
    for where, text in limits.items():
        (root / where / "cpu.max").write_text(text + "\n")
    proc = tmp_path / "proc-cgroup"
    proc.write_text("0::/kubepods/pod1\n")
    assert cgroup_cpu_limit(proc_cgroup=proc, cgroup_root=root) == expected


@pytest.mark.parametrize(("affinity", "limit", "expected"), [
    (2, None, 2.0), (4, 1.5, 1.5), (1, 4.0, 1.0),
])
def test_usable_cpus(affinity: int, limit: float | None, expected: float) -> None:
    assert usable_cpus(affinity=lambda: affinity, cgroup_limit=lambda: limit) == expected


# -- a real child


class Gate:
    """The supervisor's restart sleep, held until the test opens it."""

    def __init__(self) -> None:
        self.calls: list[float] = []
        self.open = asyncio.Event()

    async def __call__(self, delay: float) -> None:
        self.calls.append(delay)
        await self.open.wait()


@pytest.fixture
async def spawn(server: FakeApiServer) -> AsyncIterator[Callable[..., tuple[EventProcess, list[RemoteEventRecorder], SchedulerMetrics]]]:
    made: list[EventProcess] = []

    def make(names: tuple[str, ...] = ("py-sched",), **kw: Any) -> tuple[EventProcess, list[RemoteEventRecorder], SchedulerMetrics]:
        metrics = SchedulerMetrics()
        kw.setdefault("child_settings", {"stats_interval": 0.05})
        process = EventProcess(
            ConnectionConfig(host=server.url, credentials=StaticCredentials("Bearer t0k")),
            qps=-1, burst=0, metrics=metrics, **kw)
        recorders = [process.recorder(name, hostname="host1") for name in names]
        for recorder in recorders:
            recorder._clock = FakeClock()
            recorder._wall_ns = lambda: WALL_NS
        made.append(process)
        return process, recorders, metrics

    yield make
    for process in made:
        await process.stop(2)


async def test_records_land_as_the_in_process_recorders_bodies(server: FakeApiServer, spawn: Any) -> None:
    process, (rec, other), _ = spawn(("py-sched", "other-sched"))
    rec.start()
    await process.wait_ready()
    cases: list[dict[str, Any]] = [
        {"type": "Warning", "reason": "FailedScheduling", "action": "Scheduling",
         "message": "0/3 nodes are available", "related": {"kind": "Node", "name": "n1"}},
        {"type": "Normal", "reason": "Scheduled", "action": "Binding", "message": "m" * 5000},
    ]
    for kw in cases:
        rec.event(pod(), **kw)
    other.event(pod("q", "u2"), type="Normal", reason="Scheduled", action="Binding", message="x")
    assert await process.flush(5)
    remote = [r.body for r in server.requests_for("POST", EVENTS)]
    assert rec.sent == 2 and other.sent == 1
    # The same Events from the in-process recorder.
    from scheduler.client.api import ApiClient

    client = ApiClient(ConnectionConfig(host=server.url), qps=-1)
    local = EventRecorder(client, scheduler_name="py-sched", hostname="host1",
                          clock=FakeClock(), wall_clock=lambda: wall_from_ns(WALL_NS))
    local.start()
    for kw in cases:
        local.event(pod(), **kw)
    await local.stop(5)
    await client.close()
    written = [r.body for r in server.requests_for("POST", EVENTS)][3:]

    def unnamed(body: dict[str, Any]) -> dict[str, Any]:
        assert re.fullmatch(r"[pq]\.[0-9a-f]+", body["metadata"]["name"])
        # (the fake server stores the body it recorded, with a resourceVersion)
        return body | {"metadata": {"namespace": body["metadata"]["namespace"]}}

    assert [unnamed(b) for b in remote[:2]] == [unnamed(b) for b in written]
    assert unnamed(remote[2])["reportingController"] == "other-sched"
    assert remote[2]["reportingInstance"] == "other-sched-host1"


async def test_spam_filter_series_and_counts_come_back(server: FakeApiServer, spawn: Any) -> None:
    process, (rec,), metrics = spawn()
    rec.start()
    await process.wait_ready()
    for i in range(30):  # one object: a burst of 25, then rate-limited
        rec.event(pod(), type="Warning", reason="FailedScheduling", action="Scheduling",
                  message=f"try {i % 20}")
    assert await process.flush(5)
    # One batch: the repeats of "try 0".."try 4" join their Events still queued (a series
    # of 2 in the create); "try 5".."try 9" come after the burst.
    posts = server.requests_for("POST", EVENTS)
    series = {p.body["note"]: p.body.get("series", {}).get("count", 1) for p in posts}
    assert series == {f"try {i}": 2 if i < 5 else 1 for i in range(20)}
    assert dropped(metrics, "rate_limited") == 5
    host = server.url.split("//")[1]
    assert metrics.registry.get_sample_value(
        "rest_client_requests_total", {"code": "201", "method": "POST", "host": host}) == 20


async def test_a_rejected_event_is_counted_in_the_parent(server: FakeApiServer, spawn: Any) -> None:
    server.fail("POST", "/events", status=422, times=1)
    process, (rec,), metrics = spawn()
    rec.start()
    with capture_logs() as logs:
        rec.event(pod(), type="Normal", reason="Scheduled", action="Binding", message="x")
        rec.event(pod("q", "u2"), type="Normal", reason="Scheduled", action="Binding", message="y")
        await process.wait_ready()
        assert await process.flush(5)
    assert dropped(metrics, "rejected") == 1
    assert rec.sent == 1
    assert any(e["event"] == "event process started" for e in logs)


async def test_a_killed_child_is_restarted_and_the_buffer_kept(server: FakeApiServer, spawn: Any) -> None:
    gate = Gate()
    process, (rec,), metrics = spawn(buffer_size=3, sleep=gate)
    rec.start()
    await process.wait_ready()
    rec.event(pod("before"), type="Normal", reason="Scheduled", action="Binding", message="0")
    assert await process.flush(5)
    pid = process.pid
    assert pid is not None
    with capture_logs() as logs:
        os.kill(pid, signal.SIGKILL)
        await until(lambda: bool(gate.calls), timeout=10)
    (error,) = [e for e in logs if e["event"] == "event process exited; starting it again"]
    assert error["log_level"] == "error" and error["returncode"] == -signal.SIGKILL
    assert process.pid is None and not await process.flush(1)
    for i in range(5):  # while down: the buffer keeps the newest 3
        rec.event(pod(f"down{i}"), type="Normal", reason="Scheduled", action="Binding",
                  message=str(i))
    assert process.buffered == 3 and process.dropped == 2
    assert dropped(metrics, "queue_full") == 2
    gate.open.set()
    await until(lambda: process.pid not in (None, pid), timeout=10)
    await process.wait_ready()
    assert await process.flush(5)
    names = [r.body["regarding"]["name"] for r in server.requests_for("POST", EVENTS)]
    assert names == ["before", "down2", "down3", "down4"]
    assert process.restarts == 1


@pytest.mark.parametrize(("buffer_size", "before_crash", "after_crash", "written", "lost"), [
    # Three Events in the pipe behind the crash: written by the next child, in order.
    (10, 3, 0, ["p0", "p1", "p2"], 0),
    # And two made while it was down come after them.
    (10, 3, 2, ["p0", "p1", "p2", "q0", "q1"], 0),
    # The buffer's bound holds: the oldest beyond it are dropped (queue_full).
    (3, 3, 2, ["p2", "q0", "q1"], 2),
])
async def test_frames_in_a_dead_childs_pipe_go_to_the_next_child(
        server: FakeApiServer, spawn: Any, buffer_size: int, before_crash: int,
        after_crash: int, written: list[str], lost: int) -> None:
    gate = Gate()
    process, (rec,), metrics = spawn(buffer_size=buffer_size, sleep=gate)
    rec.start()
    await process.wait_ready()
    rec.event(pod("acked"), type="Normal", reason="Scheduled", action="Binding", message="a")
    assert await process.flush(5)  # read and acknowledged: never written again
    up = process._up
    assert up is not None and not up.unacked
    # The child exits at the crash frame: the records frame behind it is never read.
    up.stdin.write(encode_frame(("crash", 3)))
    for i in range(before_crash):
        rec.event(pod(f"p{i}"), type="Normal", reason="Scheduled", action="Binding",
                  message=str(i))
    process._flush_now()
    assert process.frames == 2 and len(up.unacked) == 1
    await until(lambda: bool(gate.calls), timeout=10)
    assert process.pid is None and process.resent == before_crash
    for i in range(after_crash):
        rec.event(pod(f"q{i}"), type="Normal", reason="Scheduled", action="Binding",
                  message=str(i))
    assert process.buffered == len(written)
    gate.open.set()
    await until(lambda: process.pid is not None, timeout=10)
    await process.wait_ready()
    assert await process.flush(5)
    names = [r.body["regarding"]["name"] for r in server.requests_for("POST", EVENTS)]
    assert names == ["acked", *written]
    assert dropped(metrics, "queue_full") == lost and process.dropped == lost
    assert process._up is not None and not process._up.unacked  # the flush acknowledged


async def test_stop_flushes_then_stops_the_child(server: FakeApiServer, spawn: Any) -> None:
    process, (rec,), metrics = spawn()
    rec.start()
    for i in range(50):
        rec.event(pod(f"p{i}"), type="Normal", reason="Scheduled", action="Binding", message="m")
    await asyncio.sleep(0)
    await process.wait_ready()
    proc = process._up.proc if process._up is not None else None
    await rec.stop(5)
    assert len(server.requests_for("POST", EVENTS)) == 50 and rec.sent == 50
    assert proc is not None and proc.returncode == 0
    rec.event(pod(), type="Normal", reason="Scheduled", action="Binding", message="late")
    assert dropped(metrics, "stopped") == 1
    assert process.pid is None
    await rec.stop(5)  # a second stop is the same stop


@pytest.mark.parametrize("delay", [0.0, 0.5])
async def test_records_are_batched_into_one_frame(server: FakeApiServer, spawn: Any,
                                                  delay: float) -> None:
    process, (rec,), _ = spawn(flush_delay=delay)
    rec.start()
    await process.wait_ready()
    for i in range(40):
        rec.event(pod(f"p{i}"), type="Normal", reason="Scheduled", action="Binding", message="m")
        if delay:
            await asyncio.sleep(0)  # turns of the loop within the delay
    assert process.frames == 0
    await until(lambda: process.frames > 0)
    assert process.frames == 1
    assert await process.flush(5)
    assert len(server.requests_for("POST", EVENTS)) == 40


def test_recorders_are_made_before_the_start() -> None:
    process = EventProcess(ConnectionConfig(host="http://127.0.0.1:1"), qps=1, burst=1)
    process._task = object()  # type: ignore[assignment]  # as start leaves it
    with pytest.raises(RuntimeError, match="before it starts"):
        process.recorder("x")


async def test_the_child_ends_when_its_parent_goes(server: FakeApiServer, spawn: Any) -> None:
    # A parent killed without its stop path closes the child's stdin: the child writes what
    # it holds and exits on its own (0), never left running.
    gate = Gate()
    process, (rec,), _ = spawn(sleep=gate)
    rec.start()
    await process.wait_ready()
    up = process._up
    assert up is not None
    rec.event(pod(), type="Normal", reason="Scheduled", action="Binding", message="m")
    process._flush_now()
    up.stdin.close()  # what the kernel does to a dead parent's end of the pipe
    await until(lambda: bool(gate.calls), timeout=10)
    assert up.proc.returncode == 0
    assert len(server.requests_for("POST", EVENTS)) == 1
