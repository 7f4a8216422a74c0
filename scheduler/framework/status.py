"""Typed results of plugin calls.

kube-scheduler never signals "this pod does not fit" with an exception: a plugin returns a
Status whose code says whether the rejection can be resolved (preemption, a cluster event) or
not.  We follow the same contract.  ``None`` stands for Success everywhere, as Go's nil
*Status does, so the hot path (Filter on every node) allocates nothing when a node fits.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from typing import Any, NoReturn


class Code(enum.IntEnum):
    """Status codes, numbered as upstream so logs and metrics read the same."""

    SUCCESS = 0
    ERROR = 1
    UNSCHEDULABLE = 2
    UNSCHEDULABLE_AND_UNRESOLVABLE = 3
    WAIT = 4
    SKIP = 5
    PENDING = 6

    @property
    def label(self) -> str:
        """The upstream spelling, used in metric labels (``Success``, ``Unschedulable`` ...)."""
        return _CODE_LABELS[self]


_CODE_LABELS = {
    Code.SUCCESS: "Success",
    Code.ERROR: "Error",
    Code.UNSCHEDULABLE: "Unschedulable",
    Code.UNSCHEDULABLE_AND_UNRESOLVABLE: "UnschedulableAndUnresolvable",
    Code.WAIT: "Wait",
    Code.SKIP: "Skip",
    Code.PENDING: "Pending",
}


class Status:
    """The outcome of one plugin call: a code, human-readable reasons and the plugin's name."""

    __slots__ = ("code", "reasons", "plugin", "error")

    def __init__(
        self,
        code: Code,
        *reasons: str,
        plugin: str = "",
        error: BaseException | None = None,
    ) -> None:
        self.code = code
        self.reasons: list[str] = list(reasons)
        self.plugin = plugin
        self.error = error

    @classmethod
    def from_error(cls, error: BaseException, *, plugin: str = "") -> Status:
        """Map an exception to ``Status(ERROR)`` at the framework boundary."""
        return cls(Code.ERROR, str(error) or type(error).__name__, plugin=plugin, error=error)

    def with_plugin(self, plugin: str) -> Status:
        """Record which plugin produced this status (kept if already set)."""
        if not self.plugin:
            self.plugin = plugin
        return self

    def message(self) -> str:
        return ", ".join(self.reasons)

    def is_success(self) -> bool:
        return self.code == Code.SUCCESS

    def is_wait(self) -> bool:
        return self.code == Code.WAIT

    def is_skip(self) -> bool:
        return self.code == Code.SKIP

    def is_rejected(self) -> bool:
        """Unschedulable, UnschedulableAndUnresolvable or Pending: the pod does not fit."""
        return self.code in _REJECTED

    def __repr__(self) -> str:
        plugin = f" plugin={self.plugin}" if self.plugin else ""
        return f"Status({self.code.label}{plugin}: {self.message()!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Status):
            return NotImplemented
        return (self.code, self.reasons, self.plugin) == (other.code, other.reasons, other.plugin)

    def __hash__(self) -> int:
        return hash((self.code, tuple(self.reasons), self.plugin))


_REJECTED = frozenset({Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE, Code.PENDING})


class _FrozenReasons(list[str]):
    """A status's reasons that refuse every change (a list still, as ``Status.reasons``)."""

    __slots__ = ()

    def _refuse(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise TypeError("the reasons of a shared Status cannot change")

    append = extend = insert = remove = pop = clear = sort = reverse = _refuse
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _refuse


class FrozenStatus(Status):
    """A Status made once and returned by every call that answers the same: its fields and
    reasons refuse every change, so no caller can alter what the next call returns.

    The runtime only sets ``plugin`` on rejections (and Wait), never on the Skip that the
    PreFilter/PreScore plugins share; ``with_plugin`` answers a changeable copy.
    """

    __slots__ = ()

    def __init__(self, code: Code, *reasons: str, plugin: str = "") -> None:
        set_field = object.__setattr__
        set_field(self, "code", code)
        set_field(self, "reasons", _FrozenReasons(reasons))
        set_field(self, "plugin", plugin)
        set_field(self, "error", None)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"a shared Status cannot change (set {name!r})")

    def with_plugin(self, plugin: str) -> Status:
        if self.plugin:
            return self
        return Status(self.code, *self.reasons, plugin=plugin)


# What a PreFilter/PreScore plugin answers when it has nothing to do for a pod: one object
# for every such call (about 14 a plain pod were made and dropped), which FrozenStatus
# keeps equal to ``Status(Code.SKIP)``.
SKIP = FrozenStatus(Code.SKIP)
# What the scheduling cycle answers when the pod is assumed and may go to binding (its caller
# reads ``is_success()`` only): one object for every scheduled pod.
SUCCESS = FrozenStatus(Code.SUCCESS)


def code_of(status: Status | None) -> Code:
    """The code of a possibly-None status (None is Success)."""
    return Code.SUCCESS if status is None else status.code


def is_success(status: Status | None) -> bool:
    return status is None or status.code == Code.SUCCESS


def unschedulable(*reasons: str, plugin: str = "") -> Status:
    return Status(Code.UNSCHEDULABLE, *reasons, plugin=plugin)


def unresolvable(*reasons: str, plugin: str = "") -> Status:
    return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, *reasons, plugin=plugin)


def error(message: str, *, plugin: str = "", cause: BaseException | None = None) -> Status:
    return Status(Code.ERROR, message, plugin=plugin, error=cause)


def merge_reasons(statuses: Iterable[Status]) -> list[str]:
    """All reasons of several statuses, in order, for aggregated messages."""
    out: list[str] = []
    for s in statuses:
        out.extend(s.reasons)
    return out
