"""Prometheus metrics with kube-scheduler's names, labels and buckets.

Dashboards and alerts written for kube-scheduler work unchanged.  Metrics live on a registry
owned by one ``SchedulerMetrics`` instance rather than on prometheus-client's global registry,
so tests (and several schedulers in one process) do not collide.
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Generic, Protocol, TypeVar

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    ProcessCollector,
    disable_created_metrics,
)
from prometheus_client.core import (
    CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric,
)
from prometheus_client.utils import floatToGoString

# The le label as prometheus_client's Histogram writes it (Go's float formatting, +Inf).
_le: Callable[[float], str] = floatToGoString  # type: ignore[no-untyped-call,unused-ignore]


class BulkHistogram:
    """A labelled histogram that can record many equal observations in one step, exported
    through a custom collector on prometheus_client's public API.

    Batch Filter times one call per plugin over many nodes and records the per-node mean once
    per node, as node-by-node filtering would; prometheus_client has no bulk observe.  The
    exposition is prometheus_client's ``Histogram``'s: ``<name>_bucket{le=...}``,
    ``<name>_count``, ``<name>_sum``, same labels and buckets (no ``_created``).
    Observations and scrapes both run on the event loop's thread.
    """

    def __init__(
        self,
        name: str,
        documentation: str,
        labelnames: Sequence[str],
        *,
        buckets: Sequence[float],
        registry: CollectorRegistry,
    ) -> None:
        self._name = name
        self._documentation = documentation
        self._labelnames = tuple(labelnames)
        self._upper = [*sorted(buckets), math.inf]
        self._children: dict[tuple[str, ...], BulkHistogramChild] = {}
        if not self._labelnames:  # exported at 0 from the start, as Histogram's is
            self.labels()
        registry.register(self)

    def observe(self, value: float) -> None:
        """An unlabelled histogram's observation (prometheus_client's ``Histogram.observe``)."""
        self.labels().observe(value)

    def labels(self, *values: str) -> BulkHistogramChild:
        if len(values) != len(self._labelnames):
            raise ValueError(f"{self._name}: expected labels {self._labelnames}, got {values}")
        key = tuple(str(v) for v in values)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = BulkHistogramChild(self._upper)
        return child

    def describe(self) -> Iterator[Metric]:
        yield HistogramMetricFamily(self._name, self._documentation, labels=self._labelnames)

    def collect(self) -> Iterator[Metric]:
        family = HistogramMetricFamily(self._name, self._documentation, labels=self._labelnames)
        les = [_le(bound) for bound in self._upper]
        for key, child in self._children.items():
            cumulative = list(itertools.accumulate(child.counts))
            family.add_metric(
                list(key), buckets=list(zip(les, cumulative)), sum_value=child.sum
            )
        yield family


class BulkHistogramChild:
    __slots__ = ("_upper", "counts", "sum")

    def __init__(self, upper: list[float]) -> None:
        self._upper = upper
        self.counts = [0] * len(upper)  # per bucket, not cumulative
        self.sum = 0.0

    def observe(self, value: float) -> None:
        # observe_many(value, 1) inlined: one call per observation on the per-pod paths.
        self.counts[bisect.bisect_left(self._upper, value)] += 1
        self.sum += value

    def observe_many(self, value: float, count: int) -> None:
        """``count`` observations of ``value``, as that many ``observe`` calls would."""
        if count <= 0:
            return
        # A value equal to a bound falls in that bound's bucket (le is inclusive).
        self.counts[bisect.bisect_left(self._upper, value)] += count
        self.sum += value * count


class BulkCounter:
    """A labelled counter whose children add with a plain ``+=`` (prometheus_client's
    ``Counter.inc`` checks the value and takes a lock, ~1.5 us; the runtime counts every
    PreFilter, PreScore and Score plugin evaluation, about twenty per pod).  The exposition
    is prometheus_client's ``Counter``'s: ``<name>_total`` per label values (no
    ``_created``).  Increments and scrapes both run on the event loop's thread."""

    def __init__(self, name: str, documentation: str, labelnames: Sequence[str], *,
                 registry: CollectorRegistry) -> None:
        self._name = name
        self._documentation = documentation
        self._labelnames = tuple(labelnames)
        self._children: dict[tuple[str, ...], BulkCounterChild] = {}
        if not self._labelnames:  # exported at 0 from the start, as Counter's is
            self.labels()
        registry.register(self)

    def labels(self, *values: str) -> BulkCounterChild:
        if len(values) != len(self._labelnames):
            raise ValueError(f"{self._name}: expected labels {self._labelnames}, got {values}")
        key = tuple(str(v) for v in values)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = BulkCounterChild()
        return child

    def describe(self) -> Iterator[Metric]:
        yield CounterMetricFamily(self._name, self._documentation, labels=self._labelnames)

    def collect(self) -> Iterator[Metric]:
        family = CounterMetricFamily(self._name, self._documentation, labels=self._labelnames)
        for key, child in self._children.items():
            family.add_metric(list(key), child.value)
        yield family


class BulkCounterChild:
    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0.0

    def inc(self, amount: float = 1) -> None:
        if amount < 0:
            raise ValueError("Counters can only be incremented by non-negative amounts.")
        self.value += amount


_C_co = TypeVar("_C_co", covariant=True)
_C = TypeVar("_C")


class _Labelled(Protocol[_C_co]):
    def labels(self, *values: str) -> _C_co: ...


class Children(Generic[_C]):
    """The children of one labelled metric, each looked up once per label values.

    prometheus_client's ``labels()`` validates the values, converts them and takes a lock on
    every call (~2 us); the per-pod paths (queue moves, attempts, binds) called it several
    times per pod. Children are never removed from these metrics, so a cached child stays
    the one ``labels()`` would return.
    """

    __slots__ = ("_children", "_metric")

    def __init__(self, metric: _Labelled[_C]) -> None:
        self._metric: _Labelled[_C] = metric
        self._children: dict[tuple[str, ...], _C] = {}

    def __call__(self, *values: str) -> _C:
        child = self._children.get(values)
        if child is None:
            child = self._children[values] = self._metric.labels(*values)
        return child


class ChildrenByValue(dict[str, _C], Generic[_C]):
    """The children of a metric with one label, by that label's value: ``children[value]``
    is a dict lookup (no call, for the once-per-event paths) that makes the child on the
    value's first use, as ``Children`` does."""

    __slots__ = ("_metric",)

    def __init__(self, metric: _Labelled[_C]) -> None:
        super().__init__()
        self._metric: _Labelled[_C] = metric

    def __missing__(self, value: str) -> _C:
        child = self[value] = self._metric.labels(value)
        return child


def _exponential(start: float, factor: float, count: int) -> list[float]:
    return [start * factor**i for i in range(count)]


def _counter_and_histogram(
    r: CollectorRegistry, labels: list[str], *, buckets: Sequence[float],
    counter: tuple[str, str], histogram: tuple[str, str],
) -> tuple[Counter, Histogram]:
    """A Counter and a Histogram over the same labels (``(name, help)`` each): how many
    calls or attempts ended how, and how long they took."""
    return (Counter(*counter, labels, registry=r),
            Histogram(*histogram, labels, buckets=buckets, registry=r))


class SchedulerMetrics:
    """kube-scheduler's metrics. The histograms observed several times per pod (extension
    points, attempts, the SLI) are ``BulkHistogram``s: the same exposition as
    prometheus_client's ``Histogram``, whose observe walks the buckets in Python under a
    lock (~3 us; nine observes per scheduled pod)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        # kube-scheduler exposes no ``*_created`` series; prometheus_client's switch for
        # them is process-wide, and this process exposes only scheduler metrics.
        disable_created_metrics()  # type: ignore[no-untyped-call,unused-ignore]
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        # The series updated once or more per pod are Bulk* (a plain += or one bisect, no
        # lock), with the exposition of prometheus_client's Counter and Histogram.
        self.schedule_attempts = BulkCounter(
            "scheduler_schedule_attempts",
            "Number of attempts to schedule pods, by the result. 'unschedulable' means a pod "
            "could not be scheduled, while 'error' means an internal scheduler problem.",
            ["result", "profile"],
            registry=r,
        )
        self.scheduling_attempt_duration = BulkHistogram(
            "scheduler_scheduling_attempt_duration_seconds",
            "Scheduling attempt latency in seconds (scheduling algorithm + binding)",
            ["result", "profile"],
            buckets=_exponential(0.001, 2, 15),
            registry=r,
        )
        self.pending_pods = Gauge(
            "scheduler_pending_pods",
            "Number of pending pods, by the queue type. 'active' means number of pods in "
            "activeQ; 'backoff' means number of pods in backoffQ; 'unschedulable' means number "
            "of pods in unschedulableEntities that the scheduler attempted to schedule and "
            "failed; 'gated' is the number of unschedulable pods that the scheduler never "
            "attempted to schedule because they are gated; 'incomplete' means number of pods "
            "in incompletePodGroupPods; 'pending' means number of pods in pendingPodGroupPods.",
            ["queue"],
            registry=r,
        )
        self.queue_incoming_pods = BulkCounter(
            "scheduler_queue_incoming_pods",
            "Number of pods added to scheduling queues by event and queue type.",
            ["queue", "event"],
            registry=r,
        )
        self.framework_extension_point_duration = BulkHistogram(
            "scheduler_framework_extension_point_duration_seconds",
            "Latency for running all plugins of a specific extension point.",
            ["extension_point", "status", "profile"],
            buckets=_exponential(0.0001, 2, 12),
            registry=r,
        )
        self.plugin_execution_duration = BulkHistogram(
            "scheduler_plugin_execution_duration_seconds",
            "Duration for running a plugin at a specific extension point.",
            ["plugin", "extension_point", "status"],
            buckets=_exponential(0.00001, 1.5, 20),
            registry=r,
        )
        self.plugin_evaluation_total = BulkCounter(
            "scheduler_plugin_evaluation",
            "Number of attempts to schedule pods by each plugin and the extension point "
            "(available only in PreFilter, Filter, PreScore, and Score).",
            ["plugin", "extension_point", "profile"],
            registry=r,
        )
        self.preemption_attempts = Counter(
            "scheduler_preemption_attempts",
            "Total preemption attempts in the cluster till now",
            registry=r,
        )
        self.preemption_victims = Histogram(
            "scheduler_preemption_victims",
            "Number of selected preemption victims",
            buckets=_exponential(1, 2, 7),
            registry=r,
        )
        self.pod_scheduling_sli_duration = BulkHistogram(
            "scheduler_pod_scheduling_sli_duration_seconds",
            "E2e latency for a pod being scheduled, from the time the pod enters the scheduling "
            "queue and might involve multiple scheduling attempts.",
            ["attempts"],
            buckets=_exponential(0.01, 2, 20),
            registry=r,
        )
        self.pod_scheduling_attempts = BulkHistogram(
            "scheduler_pod_scheduling_attempts",
            "Number of attempts to successfully schedule a pod.",
            [],
            buckets=_exponential(1, 2, 5),
            registry=r,
        )
        self.permit_wait_duration = BulkHistogram(
            "scheduler_permit_wait_duration_seconds",
            "Duration of waiting on permit.",
            ["result"],
            buckets=_exponential(0.001, 2, 15),
            registry=r,
        )
        self.unschedulable_pods = Gauge(
            "scheduler_unschedulable_pods",
            "The number of unschedulable pods broken down by plugin name. A pod will increment "
            "the gauge for all plugins that caused it to not schedule and so this metric have "
            "meaning only when broken down by plugin.",
            ["plugin", "profile"],
            registry=r,
        )
        self.cache_size = Gauge(
            # upstream's name since 1.35 (before: scheduler_scheduler_cache_size, gone in 1.37)
            "scheduler_cache_size",
            "Number of nodes, pods, and assumed (bound) pods in the scheduler cache.",
            ["type"],
            registry=r,
        )
        self.bind_requests = BulkCounter(
            "scheduler_py_bind_requests",
            "Binds made by kube-py-scheduler's binding cycle, by result (success, error); "
            "ApiClient.bind, a helper the daemon does not use, counts its POSTs by HTTP "
            "result class (2xx, 4xx, 5xx, error).",
            ["result"],
            registry=r,
        )
        self.extender_requests, self.extender_request_duration = _counter_and_histogram(
            r, ["verb", "result"], buckets=_exponential(0.0005, 2, 16),
            counter=("scheduler_py_extender_requests",
                     "HTTP extender calls, by verb (filter, prioritize, preempt, bind) and result "
                     "(success, error)."),
            histogram=("scheduler_py_extender_request_duration_seconds",
                       "Latency of HTTP extender calls, by verb and result."),
        )
        self.events_dropped = Counter(
            "scheduler_py_events_dropped",
            "Kubernetes Events not sent because the recorder's queue was full or rate-limited.",
            ["reason"],
            registry=r,
        )
        # Pod groups (upstream's GenericWorkload metrics, ALPHA): one attempt per gang pass.
        (self.podgroup_schedule_attempts,
         self.podgroup_scheduling_attempt_duration) = _counter_and_histogram(
            r, ["result", "profile"], buckets=_exponential(0.001, 2, 15),
            counter=("scheduler_podgroup_schedule_attempts",
                     "Number of attempts to schedule pod group, by the result. 'unschedulable' "
                     "means a pod group could not be scheduled, while 'error' means an internal "
                     "scheduler problem."),
            histogram=("scheduler_podgroup_scheduling_attempt_duration_seconds",
                       "Pod group scheduling attempt latency in seconds"),
        )
        # --- issue 26: series added upstream since 1.34 (engineer "parity") -----------------
        self.queued_entities = Gauge(
            "scheduler_queued_entities",
            "Number of queued scheduling entities ('pod' or 'podgroup'; 'pod' stands for "
            "individual pods that are not members of any podgroup) by the queue type. 'active' "
            "means number of entities in activeQ; 'backoff' means number of entities in "
            "backoffQ; 'unschedulable' means number of entities in unschedulableEntities that "
            "the scheduler attempted to schedule and failed; 'gated' is the number of "
            "unschedulable entities that the scheduler never attempted to schedule because "
            "they are gated.",
            ["queue", "type"],
            registry=r,
        )
        self.batch_attempts = Counter(
            "scheduler_batch_attempts",
            "Counts of results when we attempt to use batching.",
            ["profile", "result"],
            registry=r,
        )
        self.batch_cache_flushed = Counter(
            "scheduler_batch_cache_flushed",
            "Counts of cache flushes by reason.",
            ["profile", "reason"],
            registry=r,
        )
        # kube-scheduler's series beside the scheduling ones (see OperationsMetrics).
        self.ops = OperationsMetrics(r)


# --- kube-scheduler's operational series: algorithm, events, hints, leader election, the
# REST client and the process (issue 20). One block, so that parallel additions merge.

REST_CLIENT_BUCKETS = (0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0)
# scheduler_queueing_hint_execution_duration_seconds{hint}, as upstream spells it.
HINT_QUEUE = "Queue"
HINT_QUEUE_SKIP = "QueueSkip"
HINT_ERROR = "Error"
# scheduler_inflight_events{event} of a pod being scheduled (upstream's PodPopped entry).
POD_POPPED = "PodPopped"


class OperationsMetrics:
    """The series kube-scheduler exports beside the scheduling ones, with its names, labels
    and buckets. Those observed per cycle or per event are ``BulkHistogram``s (one bisect,
    no lock); leader election's gauge and the in-flight events are read when scraped."""

    def __init__(self, r: CollectorRegistry) -> None:
        self.scheduling_algorithm_duration = BulkHistogram(
            "scheduler_scheduling_algorithm_duration_seconds",
            "Scheduling algorithm latency in seconds",
            [],
            buckets=_exponential(0.001, 2, 15),
            registry=r,
        )
        self.event_handling_duration = BulkHistogram(
            "scheduler_event_handling_duration_seconds",
            "Event handling latency in seconds.",
            ["event"],
            buckets=_exponential(0.0001, 2, 12),
            registry=r,
        )
        self.queueing_hint_execution_duration = BulkHistogram(
            "scheduler_queueing_hint_execution_duration_seconds",
            "Duration for running a queueing hint function of a plugin.",
            ["plugin", "event", "hint"],
            buckets=_exponential(0.00001, 1.5, 20),
            registry=r,
        )
        self.pod_scheduled_after_flush = Counter(
            "scheduler_pod_scheduled_after_flush",
            "Number of pods that were successfully scheduled after being flushed from "
            "unschedulablePods due to timeout. This metric helps detect potential queueing hint "
            "misconfigurations or event handling issues.",
            registry=r,
        )
        self.inflight_events = InflightEvents(r)
        self.leader_election_master_status = Gauge(
            "leader_election_master_status",
            "Gauge of if the reporting system is master of the relevant lease, 0 indicates "
            "backup, 1 indicates master. 'name' is the string used to identify the lease. Please "
            "make sure to group by name.",
            ["name"],
            registry=r,
        )
        self.rest_client_requests = BulkCounter(
            "rest_client_requests",
            "Number of HTTP requests, partitioned by status code, method, and host.",
            ["code", "method", "host"],
            registry=r,
        )
        self.rest_client_request_duration = BulkHistogram(
            "rest_client_request_duration_seconds",
            "Request latency in seconds. Broken down by verb, and host.",
            ["verb", "host"],
            buckets=REST_CLIENT_BUCKETS,
            registry=r,
        )
        # SchedulerAsyncAPICalls: the API dispatcher (scheduler/client/api_dispatcher.py).
        # (one execution per binding: Bulk*, as the per-pod series above)
        self.async_api_call_execution = BulkCounter(
            "scheduler_async_api_call_execution",
            "Total number of API calls executed by the async dispatcher.",
            ["call_type", "result"], registry=r)
        self.async_api_call_execution_duration = BulkHistogram(
            "scheduler_async_api_call_execution_duration_seconds",
            "Duration in seconds for executing API call in the async dispatcher.",
            ["call_type", "result"], buckets=_exponential(0.001, 2, 15), registry=r)
        self.pending_async_api_calls = Gauge(
            "scheduler_pending_async_api_calls",
            "Number of API calls currently pending in the async queue.",
            ["call_type"],
            registry=r,
        )
        # DRADeviceBindingConditions: DynamicResources' PreBind waits for devices' binding
        # conditions (scheduler/plugins/dynamicresources/plugin.py)
        (self.dra_bindingconditions_allocations,
         self.dra_bindingconditions_wait_duration) = _counter_and_histogram(
            r, ["profile", "driver", "status"], buckets=_exponential(0.1, 2, 14),
            counter=("scheduler_dra_bindingconditions_allocations",
                     "Allocations with devices that have BindingConditions, per driver and "
                     "scheduling attempt, by how the wait ended (success, failure, timeout)."),
            histogram=("scheduler_dra_bindingconditions_wait_duration_seconds",
                       "Seconds PreBind waited for devices' BindingConditions, by how the wait "
                       "ended."),
        )
        # DRAExtendedResource: the claims DynamicResources' PreBind creates for pods' extended
        # resources (scheduler/plugins/dynamicresources/plugin.py)
        self.resourceclaim_creates = Counter(
            "scheduler_resourceclaim_creates",
            "Number of ResourceClaims creation requests within scheduler",
            ["status"],
            registry=r,
        )
        # process_cpu_seconds_total, process_resident_memory_bytes, process_start_time_seconds,
        # process_open_fds, process_max_fds, process_virtual_memory_bytes (from /proc).
        ProcessCollector(registry=r)


class InflightEvents:
    """scheduler_inflight_events{event}: read from the scheduling queue when scraped (the
    queue sets ``source``), so tracking an event costs the hot path nothing."""

    NAME = "scheduler_inflight_events"
    HELP = "Number of events currently tracked in the scheduling queue."

    def __init__(self, registry: CollectorRegistry) -> None:
        self.source: Callable[[], Mapping[str, int]] | None = None
        registry.register(self)

    def describe(self) -> Iterator[Metric]:
        yield GaugeMetricFamily(self.NAME, self.HELP, labels=["event"])

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily(self.NAME, self.HELP, labels=["event"])
        if self.source is not None:
            for event, count in sorted(self.source().items()):
                family.add_metric([event], float(count))
        yield family
