from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from structlog.testing import capture_logs

from scheduler.client.api import ApiClient
from scheduler.client.events import EventRecorder, micro_time, object_reference, truncate_note
from scheduler.metrics import SchedulerMetrics
from tests.unit.client.conftest import FakeClock, FakeSleep, until
from tests.unit.client.fake_apiserver import FakeApiServer

MakeClient = Callable[..., ApiClient]
EVENTS = "/apis/events.k8s.io/v1/namespaces/ns/events"
WALL = datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=timezone.utc)


def pod(name: str = "p", uid: str = "u1") -> dict[str, Any]:
    return {"kind": "Pod", "apiVersion": "v1", "metadata": {"name": name, "namespace": "ns", "uid": uid, "resourceVersion": "7"}}


def dropped(metrics: SchedulerMetrics, reason: str) -> float:
    return metrics.registry.get_sample_value("scheduler_py_events_dropped_total", {"reason": reason}) or 0.0


@pytest.fixture
def recorder_factory(make_client: MakeClient, fake_sleep: FakeSleep) -> Callable[..., tuple[EventRecorder, FakeClock, SchedulerMetrics]]:
    def make(**kw: Any) -> tuple[EventRecorder, FakeClock, SchedulerMetrics]:
        clock = FakeClock()
        metrics = SchedulerMetrics()
        rec = EventRecorder(
            make_client(),
            scheduler_name="py-sched",
            hostname="host1",
            metrics=metrics,
            clock=clock,
            wall_clock=lambda: WALL,
            sleep=fake_sleep,
            **kw,
        )
        return rec, clock, metrics

    return make


@pytest.mark.parametrize(("dt", "expected"), [
    (datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=timezone.utc), "2024-05-06T07:08:09.123456Z"),
    (datetime(2024, 5, 6, 7, 8, 9, tzinfo=timezone.utc), "2024-05-06T07:08:09.000000Z"),
    (datetime(2024, 5, 6, 9, 8, 9, 5, tzinfo=timezone(timedelta(hours=2))),
     "2024-05-06T07:08:09.000005Z"),
    (datetime(2024, 12, 31, 23, 30, tzinfo=timezone(timedelta(hours=-1))),
     "2025-01-01T00:30:00.000000Z"),
])
def test_micro_time_is_utc_with_six_digits(dt: datetime, expected: str) -> None:
    assert micro_time(dt) == expected


def test_micro_time_keeps_the_seconds_text_only_for_the_same_second() -> None:
    """micro_time keeps the text of the last second it wrote: times in a row that share the
    second, or differ in only one other field (the same second of another minute, hour, day,
    month, year, or in another zone), each read as isoformat reads them."""
    base = datetime(2024, 5, 6, 7, 8, 9, 1, tzinfo=timezone.utc)
    times = [base, base.replace(microsecond=999999), base.replace(second=10),
             base.replace(minute=9), base.replace(hour=8), base.replace(day=7),
             base.replace(month=6), base.replace(year=2025), base,
             base.astimezone(timezone(timedelta(hours=5))), base.replace(microsecond=0)]
    for dt in times:
        expected = dt.astimezone(timezone.utc).isoformat(timespec="microseconds")
        assert micro_time(dt) == expected.replace("+00:00", "Z"), dt


def test_micro_time_and_truncation() -> None:
    assert micro_time(WALL) == "2024-05-06T07:08:09.123456Z"
    assert truncate_note("short") == "short"
    long = "x" * 2000
    t = truncate_note(long)
    assert len(t.encode()) == 1024 and t.endswith(" ...")
    # Never splits a multi-byte character.
    t2 = truncate_note("é" * 1000)
    assert len(t2.encode()) <= 1024 and t2.endswith(" ...")
    t2.encode("utf-8")


def test_object_reference() -> None:
    assert object_reference(pod()) == {"kind": "Pod", "apiVersion": "v1", "namespace": "ns", "name": "p", "uid": "u1", "resourceVersion": "7"}
    bare = {"metadata": {"name": "p", "namespace": "ns"}}
    assert object_reference(bare)["kind"] == "Pod"
    ref = {"kind": "Node", "name": "n1"}
    assert object_reference(ref) == ref


async def test_event_body(server: FakeApiServer, recorder_factory: Any) -> None:
    rec, _, _ = recorder_factory()
    rec.start()
    rec.event(pod(), type="Warning", reason="FailedScheduling", action="Scheduling", message="0/3 nodes are available", related={"kind": "Node", "name": "n1"})
    await rec.stop(2)
    (req,) = server.requests_for("POST", EVENTS)
    body = req.body
    assert re.fullmatch(r"p\.[0-9a-f]+", body["metadata"]["name"])
    assert body["metadata"]["namespace"] == "ns"
    assert body | {"metadata": None} == {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": None,
        "eventTime": "2024-05-06T07:08:09.123456Z",
        "reportingController": "py-sched",
        "reportingInstance": "py-sched-host1",
        "action": "Scheduling",
        "reason": "FailedScheduling",
        "regarding": {"kind": "Pod", "apiVersion": "v1", "namespace": "ns", "name": "p", "uid": "u1", "resourceVersion": "7"},
        "related": {"kind": "Node", "name": "n1"},
        "note": "0/3 nodes are available",
        "type": "Warning",
    }


async def test_long_message_is_truncated(server: FakeApiServer, recorder_factory: Any) -> None:
    rec, _, _ = recorder_factory()
    rec.start()
    rec.event(pod(), type="Warning", reason="FailedScheduling", action="Scheduling", message="m" * 5000)
    await rec.stop(2)
    note = server.requests_for("POST", EVENTS)[0].body["note"]
    assert len(note) == 1024 and note.endswith(" ...")


@pytest.mark.parametrize("message", [
    "m" * 256, "m" * 257, "m" * 1024, "m" * 1025,      # around the short cut and the limit
    "\U0001F600" * 256, "\U0001F600" * 257,            # four bytes a character
    "é" * 512, "é" * 513, "", "0/5000 nodes are available",
])
async def test_note_is_the_truncated_message_whatever_its_length(
        server: FakeApiServer, recorder_factory: Any, message: str) -> None:
    rec, _, _ = recorder_factory()
    rec.start()
    rec.event(pod(), type="Warning", reason="FailedScheduling", action="Scheduling",
              message=message)
    await rec.stop(2)
    note = server.requests_for("POST", EVENTS)[0].body["note"]
    assert note == truncate_note(message) and len(note.encode()) <= 1024


async def test_repeats_become_series_patches(server: FakeApiServer, recorder_factory: Any) -> None:
    rec, clock, _ = recorder_factory()
    rec.start()
    kw: dict[str, Any] = {"type": "Warning", "reason": "FailedScheduling", "action": "Scheduling", "message": "no fit"}
    rec.event(pod(), **kw)
    await until(lambda: rec.sent == 1)
    name = server.requests_for("POST", EVENTS)[0].body["metadata"]["name"]
    clock.advance(10)
    rec.event(pod(), **kw)
    await until(lambda: rec.sent == 2)
    (patch,) = server.requests_for("PATCH", EVENTS)
    assert patch.path == f"{EVENTS}/{name}"
    assert patch.headers["Content-Type"] == "application/strategic-merge-patch+json"
    assert patch.body == {"series": {"count": 2, "lastObservedTime": "2024-05-06T07:08:09.123456Z"}}
    # A different message is a different event.
    rec.event(pod(), **(kw | {"message": "other"}))
    # After the 6-minute window a repeat is a new Event again.
    clock.advance(361)
    rec.event(pod(), **kw)
    await rec.stop(2)
    assert len(server.requests_for("POST", EVENTS)) == 3
    assert len(server.requests_for("PATCH", EVENTS)) == 1


async def test_queued_repeats_coalesce_into_one_patch(server: FakeApiServer, recorder_factory: Any) -> None:
    rec, _, _ = recorder_factory()
    kw: dict[str, Any] = {"type": "Normal", "reason": "R", "action": "A", "message": "m"}
    rec.event(pod(), **kw)
    rec.start()
    await until(lambda: rec.sent == 1)
    for _ in range(5):
        rec.event(pod(), **kw)  # all before the sender runs
    await rec.stop(2)
    patches = server.requests_for("PATCH", EVENTS)
    assert [p.body["series"]["count"] for p in patches] == [6]


async def test_spam_filter_limits_per_object(server: FakeApiServer, recorder_factory: Any) -> None:
    rec, clock, metrics = recorder_factory(spam_burst=3, spam_refill_seconds=300)
    rec.start()
    for i in range(10):
        rec.event(pod(), type="Warning", reason="R", action="A", message=f"m{i}")
    rec.event(pod("q", uid="u2"), type="Warning", reason="R", action="A", message="m")  # other object unaffected
    clock.advance(300)  # one token back
    rec.event(pod(), type="Warning", reason="R", action="A", message="late")
    await rec.stop(2)
    notes = [r.body["note"] for r in server.requests_for("POST", EVENTS)]
    assert notes == ["m0", "m1", "m2", "m", "late"]
    assert dropped(metrics, "rate_limited") == 7


@pytest.mark.parametrize(("pods", "spent_by_p0", "kept"), [
    (0, 0, 1),  # only the bucket of the event after the sweep
    (50, 1, 1),  # every bucket refilled: dropped (the one after the sweep stays)
    (50, 3, 2),  # p0 spent its burst: one token back is not full, its limit holds
])
async def test_spam_buckets_refilled_are_dropped(server: FakeApiServer, recorder_factory: Any,
                                                 pods: int, spent_by_p0: int, kept: int
                                                 ) -> None:
    # A long-running scheduler records events for every pod it ever sees: the spam filter's
    # buckets must not pile up to the LRU's 4096 entries (an hour-long soak grew by them).
    rec, clock, _ = recorder_factory(spam_burst=3, spam_refill_seconds=300)
    for i in range(pods):
        rec.event(pod(f"p{i}", uid=f"u{i}"), type="Normal", reason="R", action="A", message="m")
    for i in range(1, spent_by_p0):
        rec.event(pod("p0", uid="u0"), type="Normal", reason="R", action="A", message=f"m{i}")
    clock.advance(300)  # one token back for every bucket, and a sweep is due
    rec.event(pod("last", uid="ul"), type="Normal", reason="R", action="A", message="m")
    assert len(rec._spam) == kept
    rec.start()
    await rec.stop(2)


async def test_queue_overflow_drops_without_blocking(server: FakeApiServer, recorder_factory: Any) -> None:
    rec, _, metrics = recorder_factory(queue_size=2)
    for i in range(5):  # sender not started: the queue fills
        rec.event(pod(f"p{i}", uid=f"u{i}"), type="Normal", reason="R", action="A", message="m")
    assert dropped(metrics, "queue_full") == 3
    rec.start()
    await rec.stop(2)
    assert len(server.requests_for("POST", EVENTS)) == 2


async def test_retries_then_gives_up(server: FakeApiServer, recorder_factory: Any, fake_sleep: FakeSleep) -> None:
    rec, _, metrics = recorder_factory(max_tries=3)
    server.fail("POST", EVENTS, status=503, times=2)
    rec.start()
    rec.event(pod(), type="Normal", reason="R", action="A", message="m")
    await until(lambda: rec.sent == 1)
    assert len(server.requests_for("POST", EVENTS)) == 3
    server.fail("POST", EVENTS, status=500, times=5)
    rec.event(pod(), type="Normal", reason="R2", action="A", message="m")
    server.fail("POST", EVENTS, status=422, times=1)
    rec.event(pod(), type="Normal", reason="R3", action="A", message="m")
    await rec.stop(2)
    assert dropped(metrics, "send_failed") == 1
    assert dropped(metrics, "rejected") == 1


async def test_patch_of_expired_event_recreates_it(server: FakeApiServer, recorder_factory: Any) -> None:
    rec, _, _ = recorder_factory()
    rec.start()
    kw: dict[str, Any] = {"type": "Normal", "reason": "R", "action": "A", "message": "m"}
    rec.event(pod(), **kw)
    await until(lambda: rec.sent == 1)
    server.objects.clear()  # the Event TTL'd away
    rec.event(pod(), **kw)
    await rec.stop(2)
    posts = server.requests_for("POST", EVENTS)
    assert len(posts) == 2 and posts[1].body["series"]["count"] == 2


async def test_invalid_type_and_after_stop(server: FakeApiServer, recorder_factory: Any) -> None:
    rec, _, metrics = recorder_factory()
    rec.start()
    rec.event(pod(), type="Bogus", reason="R", action="A", message="m")
    await rec.stop(2)
    rec.event(pod(), type="Normal", reason="R", action="A", message="m")
    assert server.requests_for("POST", EVENTS) == []
    assert dropped(metrics, "stopped") == 1
    assert not any(t.get_name().startswith("event-recorder") for t in asyncio.all_tasks())


async def test_stop_flushes_queue(server: FakeApiServer, recorder_factory: Any) -> None:
    rec, _, _ = recorder_factory()
    rec.start()
    for i in range(20):
        rec.event(pod(f"p{i}", uid=f"u{i}"), type="Normal", reason="Scheduled", action="Binding", message=f"Successfully assigned ns/p{i} to n")
    await rec.stop(5)
    assert len(server.requests_for("POST", EVENTS)) == 20


async def test_senders_write_concurrently_and_never_one_series_twice_at_once(
    server: FakeApiServer, recorder_factory: Any
) -> None:
    rec, _, metrics = recorder_factory(senders=3)
    rec.start()
    server.hold()  # every write waits: a single sender would have one in flight
    kw: dict[str, Any] = {"type": "Normal", "reason": "Scheduled", "action": "Binding"}
    for i in range(3):
        rec.event(pod(f"p{i}", uid=f"u{i}"), message="m", **kw)
    await until(lambda: server.held == 3)
    # A repeat of p0's event while its create is in flight: written after it, as a patch.
    rec.event(pod("p0", uid="u0"), message="m", **kw)
    rec.event(pod("p0", uid="u0"), message="m", **kw)
    server.release()
    await rec.stop(2)
    posts = server.requests_for("POST", EVENTS)
    assert sorted(p.body["regarding"]["name"] for p in posts) == ["p0", "p1", "p2"]
    (patch,) = server.requests_for("PATCH", EVENTS)
    assert patch.body["series"]["count"] == 3
    assert dropped(metrics, "queue_full") == 0
    assert rec.sent == 4


async def test_stop_with_more_senders_than_queue_slots_returns_at_once(
    server: FakeApiServer, recorder_factory: Any
) -> None:
    rec, _, _ = recorder_factory(queue_size=1, senders=4)
    rec.start()
    await asyncio.sleep(0)  # the senders wait on the empty queue
    rec.event(pod(), type="Normal", reason="R", action="A", message="m")
    with capture_logs() as logs:
        await rec.stop(30)
    assert not [e for e in logs if "timed out" in e["event"]]  # drained, not timed out
    assert len(server.requests_for("POST", EVENTS)) == 1
    assert not any(t.get_name().startswith("event-recorder") for t in asyncio.all_tasks())


@pytest.mark.parametrize(("burst", "refill", "seed"), [(3, 300.0, 1), (25, 300.0, 2), (1, 10.0, 3),
                                                       (3, 0.0, 4)])
async def test_spam_filter_answers_as_client_gos_token_bucket(
        server: FakeApiServer, recorder_factory: Any, burst: int, refill: float, seed: int) -> None:
    # The filter keeps each object's bucket inline (no TokenBucket per pod): it must answer
    # exactly as one TokenBucket per object would, over events and time steps of any kind.
    import random

    from scheduler.client.api import TokenBucket

    rec, clock, metrics = recorder_factory(spam_burst=burst, spam_refill_seconds=refill,
                                           queue_size=100000)
    rng = random.Random(seed)
    buckets: dict[str, TokenBucket] = {}
    allowed = 0
    for i in range(300):
        clock.advance(rng.choice([0.0, 0.0, 0.0, 1.0, 7.5, 61.0, 299.0, 301.0]))
        name = f"p{rng.randrange(4)}"
        bucket = buckets.setdefault(
            name, TokenBucket(1.0 / refill if refill > 0 else 0.0, burst, clock=clock))
        allowed += bucket.try_acquire()
        rec.event(pod(name, uid=name), type="Normal", reason="R", action="A", message=f"m{i}")
        assert dropped(metrics, "rate_limited") == i + 1 - allowed


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
async def test_key_line_answers_as_asyncio_queue(seed: int) -> None:
    """The recorder's line of keys against asyncio.Queue, driven alike by random steps (put,
    a getter started, a waiting getter cancelled, a loop turn, task_done, a join started):
    the same puts refused, the same keys taken in the same order by the same getters, the
    same joins finished."""
    import random

    from scheduler.client.events import _KeyLine

    rng = random.Random(seed)
    maxsize = rng.choice([0, 1, 3])
    line = _KeyLine(maxsize)
    queue: asyncio.Queue[Any] = asyncio.Queue(maxsize=maxsize)
    took: tuple[list[Any], list[Any]] = ([], [])
    getters: list[tuple[asyncio.Task[Any], asyncio.Task[Any]]] = []
    joins: list[tuple[asyncio.Task[None], asyncio.Task[None]]] = []
    done = [0, 0]

    async def get(side: int, which: Any, i: int) -> None:
        took[side].append((i, await which.get()))

    for step in range(200):
        action = rng.choice(["put", "put", "get", "cancel", "turn", "done", "join"])
        if action == "put":
            key: Any = ("k", step)
            refused = False
            try:
                queue.put_nowait(key)
            except asyncio.QueueFull:
                refused = True
            assert line.put_nowait(key) is not refused
        elif action == "get":
            i = len(getters)
            getters.append((asyncio.create_task(get(0, line, i)),
                            asyncio.create_task(get(1, queue, i))))
        elif action == "cancel":
            waiting = [g for g in getters if not g[0].done()]
            if waiting:
                for task in rng.choice(waiting):
                    task.cancel()
        elif action == "done":
            taken = len(took[0]) - done[0]
            assert taken == len(took[1]) - done[1]
            if taken:
                line.task_done()
                queue.task_done()
                done[0] += 1
                done[1] += 1
        elif action == "join":
            joins.append((asyncio.create_task(line.join()), asyncio.create_task(queue.join())))
        for _ in range(3):
            await asyncio.sleep(0)
        assert took[0] == took[1], step
        assert line.qsize() == queue.qsize()
        assert [j[0].done() for j in joins] == [j[1].done() for j in joins], step
    for pair in getters + joins:
        for task in pair:
            task.cancel()
    await asyncio.gather(*(t for pair in getters + joins for t in pair), return_exceptions=True)
