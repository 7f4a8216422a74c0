"""Fault injection and request counters, driven over ``/sandbox/v1/...`` or in-process.

Reliability tests need the API server to misbehave on demand: drop watches, compact history
(410 Gone), fail chosen requests, add latency, pause. Everything is off until asked for.
Counters (requests per ``"<verb> <resource>[/<subresource>]"``, bindings, evictions) let
tests assert what a client did, e.g. that a 409 binding was not retried.
"""

from __future__ import annotations

import asyncio
import itertools
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .errors import ApiError, bad_request, reason_for_code


@dataclass
class FailRule:
    id: int
    code: int
    verb: str = "*"
    resource: str = "*"
    subresource: str = "*"
    namespace: str = "*"
    times: int | None = None
    probability: float = 1.0
    message: str = ""
    retry_after: int = 1

    def matches(self, verb: str, resource: str, sub: str, ns: str) -> bool:
        return (
            self.verb in ("*", verb)
            and self.resource in ("*", resource)
            and self.subresource in ("*", sub)
            and self.namespace in ("*", ns)
        )


@dataclass
class LatencyRule:
    seconds: float
    verb: str = "*"
    resource: str = "*"


@dataclass
class Faults:
    """Fault state of one sandbox. Methods must be called on the sandbox's event loop."""

    failures: list[FailRule] = field(default_factory=list)
    latencies: list[LatencyRule] = field(default_factory=list)
    # Applied after the request took effect, before the answer (add_reply_latency).
    reply_latencies: list[LatencyRule] = field(default_factory=list)
    running: asyncio.Event = field(default_factory=asyncio.Event)
    requests: dict[str, int] = field(default_factory=dict)
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    rng: random.Random = field(default_factory=random.Random)
    # Wired by the Sandbox to Registry.raw_put.
    raw_writer: Callable[[Any], dict[str, Any]] | None = None

    def __post_init__(self) -> None:
        self.running.set()

    @property
    def active(self) -> bool:
        return bool(self.failures or self.latencies or self.reply_latencies)

    # ------------------------------------------------------------ configuration

    def fail(
        self,
        verb: str = "*",
        resource: str = "*",
        *,
        code: int = 500,
        times: int | None = 1,
        probability: float = 1.0,
        subresource: str = "*",
        namespace: str = "*",
        message: str = "",
        retry_after: int = 1,
    ) -> int:
        """Fail matching requests with ``code``; ``times=None`` means until cleared."""
        if not 100 <= code <= 599:
            raise ValueError(f"code must be an HTTP status code, got {code}")
        if not 0.0 <= probability <= 1.0:
            raise ValueError(f"probability must be within [0, 1], got {probability}")
        rule = FailRule(next(self._ids), code, verb, resource, subresource, namespace, times,
                        probability, message, retry_after)
        self.failures.append(rule)
        return rule.id

    def add_latency(self, seconds: float, verb: str = "*", resource: str = "*") -> None:
        if seconds < 0:
            raise ValueError("latency must be >= 0")
        self.latencies.append(LatencyRule(seconds, verb, resource))

    def add_reply_latency(self, seconds: float, verb: str = "*", resource: str = "*") -> None:
        """Delay the answer to matching requests after they took effect: a client that gives
        up first cannot tell whether its write happened (an ambiguous timeout)."""
        if seconds < 0:
            raise ValueError("latency must be >= 0")
        self.reply_latencies.append(LatencyRule(seconds, verb, resource))

    def reply_latency_for(self, verb: str, resource: str) -> float:
        return sum(r.seconds for r in self.reply_latencies
                   if r.verb in ("*", verb) and r.resource in ("*", resource))

    def raw_put(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Store ``obj`` bypassing validation (create or replace by kind/namespace/name), as an
        API server with looser validation would have; returns the stored object."""
        if self.raw_writer is None:
            raise RuntimeError("raw writes need a sandbox")
        return self.raw_writer(obj)

    def pause(self) -> None:
        self.running.clear()

    def resume(self) -> None:
        self.running.set()

    def clear(self) -> None:
        self.failures.clear()
        self.latencies.clear()
        self.reply_latencies.clear()
        self.running.set()

    def reset_counters(self) -> None:
        self.requests.clear()

    # ------------------------------------------------------------ request path

    def count(self, verb: str, resource: str, sub: str) -> None:
        key = f"{verb} {resource}/{sub}" if sub else f"{verb} {resource}"
        self.requests[key] = self.requests.get(key, 0) + 1

    def latency_for(self, verb: str, resource: str) -> float:
        return sum(r.seconds for r in self.latencies if r.verb in ("*", verb) and r.resource in ("*", resource))

    def failure_for(self, verb: str, resource: str, sub: str, ns: str) -> ApiError | None:
        for rule in list(self.failures):
            if not rule.matches(verb, resource, sub, ns):
                continue
            if rule.probability < 1.0 and self.rng.random() >= rule.probability:
                continue
            if rule.times is not None:
                rule.times -= 1
                if rule.times <= 0:
                    self.failures.remove(rule)
            reason = reason_for_code(rule.code)
            msg = rule.message or f"injected fault: {reason}"
            details: dict[str, Any] | None = None
            retry = None
            if rule.code == 429 or rule.code == 503:
                details = {"retryAfterSeconds": rule.retry_after}
                retry = rule.retry_after
            return ApiError(rule.code, reason, msg, details=details, retry_after=retry)
        return None


def parse_fail_body(body: Any) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise bad_request("fault body must be a JSON object")
    allowed = {"verb", "resource", "code", "times", "probability", "subresource", "namespace", "message", "retry_after"}
    unknown = set(body) - allowed
    if unknown:
        raise bad_request(f"unknown fault fields: {sorted(unknown)}")
    if "code" not in body:
        raise bad_request("fault needs a code")
    return body
