"""The event process against the sandbox: with ``--event-process`` on, the same Events land
as with it off (bodies compared), and its counts reach the parent's metrics."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from scheduler.client.event_process import RemoteEventRecorder
from scheduler.client.events import EventRecorder
from scheduler.config.defaults import DEFAULT_SCHEDULER_NAME
from scheduler.metrics import SchedulerMetrics
from tests.builders import PodBuilder
from tests.integration.harness import Cluster, for_api, running_scheduler, user_client, wait_until

EVENTS = "/apis/events.k8s.io/v1/namespaces/default/events"
# What differs between two runs whatever writes the Events: names and times the API server
# or the clock give, the pods' uids, the node a tie picked; a retried pod's series count.
VOLATILE_META = ("name", "resourceVersion", "uid", "creationTimestamp")


def pods() -> list[dict[str, Any]]:
    fits = [PodBuilder(f"fits-{i}").scheduler_name(DEFAULT_SCHEDULER_NAME).req(cpu="100m").obj()
            for i in range(3)]
    too_big = PodBuilder("too-big").scheduler_name(DEFAULT_SCHEDULER_NAME).req(cpu="1000").obj()
    return [for_api(p) for p in [*fits, too_big]]


def normalized(event: dict[str, Any]) -> dict[str, Any]:
    out = dict(event)
    out["metadata"] = {k: v for k, v in event["metadata"].items() if k not in VOLATILE_META}
    out.pop("eventTime")
    out.pop("series", None)
    out["regarding"] = {k: v for k, v in event["regarding"].items()
                        if k not in ("uid", "resourceVersion")}
    out["note"] = re.sub(r"\bnode-\d+\b", "NODE", event["note"])
    if "related" in out:
        out["related"] = {k: re.sub(r"\bnode-\d+\b", "NODE", v) if isinstance(v, str) else v
                          for k, v in event["related"].items() if k not in ("uid", "resourceVersion")}
    return out


async def scheduled_events(kubeconfig: Path, mode: str) -> tuple[list[dict[str, Any]], SchedulerMetrics]:
    metrics = SchedulerMetrics()
    async with user_client(kubeconfig) as cluster:
        async with running_scheduler(kubeconfig, metrics=metrics, event_process=mode) as parts:
            kinds = {type(r) for r in parts.recorders}
            assert kinds == ({RemoteEventRecorder} if mode == "on" else {EventRecorder})
            assert (parts.event_process is not None) is (mode == "on")
            uids = [(await cluster.create_pod(p))["metadata"]["uid"] for p in pods()]

            async def all_recorded() -> bool:
                events = await mine(cluster, uids)
                return {e["reason"] for e in events} == {"Scheduled", "FailedScheduling"} \
                    and len(events) == 4
            await wait_until(all_recorded, timeout=30)
        events = await mine(cluster, uids)
        for p in pods():
            await cluster.delete_pod(p["metadata"]["name"])
    return events, metrics


async def mine(cluster: Cluster, uids: list[str]) -> list[dict[str, Any]]:
    items = (await cluster.client.get(EVENTS)).get("items") or []
    return [e for e in items if e["regarding"].get("uid") in uids]


async def test_the_same_events_land_with_the_event_process_on_and_off(kubeconfig: Path) -> None:
    off, off_metrics = await scheduled_events(kubeconfig, "off")
    on, on_metrics = await scheduled_events(kubeconfig, "on")
    key = lambda e: (e["reason"], e["regarding"]["name"])  # noqa: E731
    assert sorted(map(normalized, off), key=key) == sorted(map(normalized, on), key=key)
    assert len(on) == 4
    # The Event POSTs the child made are counted in the parent's rest_client metrics.
    for metrics in (off_metrics, on_metrics):
        posts = sum(s.value for m in metrics.registry.collect() if m.name == "rest_client_requests"
                    for s in m.samples if s.labels.get("method") == "POST"
                    and s.labels.get("code") == "201" and s.name.endswith("_total"))
        assert posts >= 4 + 3  # the bindings and the Events
