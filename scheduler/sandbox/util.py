"""Small helpers shared by the sandbox modules: timestamps, names, ages."""

from __future__ import annotations

import calendar
import os
import random
import time
from typing import Any

_ALPHANUMS = "bcdfghjklmnpqrstvwxz2456789"  # upstream's utilrand alphabet
_last_sec = -1
_last_iso = ""


def now_iso() -> str:
    """RFC 3339 at second precision, as metav1.Time serializes."""
    global _last_sec, _last_iso
    sec = int(time.time())
    if sec != _last_sec:
        _last_sec = sec
        _last_iso = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(sec))
    return _last_iso


def iso_at(ts: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))


def parse_iso(s: Any) -> float | None:
    if not isinstance(s, str) or len(s) < 19:
        return None
    try:
        return float(calendar.timegm(time.strptime(s[:19], "%Y-%m-%dT%H:%M:%S")))
    except ValueError:
        return None


_uid_pool = b""
_uid_at = 0


def _forget_uid_pool() -> None:
    global _uid_pool, _uid_at
    _uid_pool, _uid_at = b"", 0


os.register_at_fork(after_in_child=_forget_uid_pool)  # a forked child never repeats its parent's UIDs


def new_uid() -> str:
    """A random (version 4) UUID in its canonical text form, what ``str(uuid.uuid4())`` gives,
    without building a UUID object."""
    global _uid_pool, _uid_at
    if _uid_at >= len(_uid_pool):
        _uid_pool, _uid_at = os.urandom(4096), 0  # one getrandom call for 256 UIDs
    b = bytearray(_uid_pool[_uid_at:_uid_at + 16])
    _uid_at += 16
    b[6] = (b[6] & 0x0F) | 0x40
    b[8] = (b[8] & 0x3F) | 0x80
    h = b.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def name_suffix() -> str:
    return "".join(random.choice(_ALPHANUMS) for _ in range(5))


def human_duration(seconds: float) -> str:
    """k8s.io/apimachinery/pkg/util/duration.HumanDuration."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        sec = s % 60
        return f"{minutes}m" if sec == 0 else f"{minutes}m{sec}s"
    if minutes < 180:
        return f"{minutes}m"
    hours = s // 3600
    if hours < 8:
        m = minutes % 60
        return f"{hours}h" if m == 0 else f"{hours}h{m}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        h = hours % 24
        return f"{hours // 24}d" if h == 0 else f"{hours // 24}d{h}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        dy = (hours // 24) % 365
        return f"{hours // 24 // 365}y" if dy == 0 else f"{hours // 24 // 365}y{dy}d"
    return f"{hours // 24 // 365}y"


def age(ts: Any) -> str:
    t = parse_iso(ts)
    if t is None:
        return "<unknown>"
    return human_duration(time.time() - t)


def set_condition(conditions: list[dict[str, Any]], cond: dict[str, Any]) -> list[dict[str, Any]]:
    """A new list with ``cond`` replacing the one of its type; keeps lastTransitionTime when
    the status did not change, like podutil.UpdatePodCondition."""
    out = []
    found = False
    for c in conditions:
        if c.get("type") == cond["type"]:
            found = True
            if c.get("status") == cond.get("status") and c.get("lastTransitionTime"):
                cond = {**cond, "lastTransitionTime": c["lastTransitionTime"]}
            out.append(cond)
        else:
            out.append(c)
    if not found:
        out.append(cond)
    return out


SIMULATED = "sandbox.kube-py-scheduler.io/simulated"
"""Node annotation: "false" takes a node away from the simulated kubelet (default: simulated)."""


def is_simulated_node(node: dict[str, Any] | None) -> bool:
    if node is None:
        return False
    return ((node["metadata"].get("annotations") or {}).get(SIMULATED)) != "false"
