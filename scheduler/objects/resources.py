"""Resource names and the scheduler's integer resource vector.

:class:`Resource` mirrors the scheduler framework's ``Resource``: CPU in millicores, memory and
ephemeral storage in bytes, a pod count, and integer "scalar" resources (extended resources,
hugepages, attachable volumes). Quantities are converted once, when a pod or node is parsed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from scheduler.objects.quantity import (
    QuantityError,
    nano_to_int,
    nano_to_milli,
    parse_quantity_nano,
)

__all__ = [
    "CPU",
    "MEMORY",
    "EPHEMERAL_STORAGE",
    "PODS",
    "HUGEPAGES_PREFIX",
    "ATTACHABLE_VOLUMES_PREFIX",
    "Resource",
    "is_native_resource",
    "is_prefixed_native_resource",
    "is_extended_resource_name",
    "is_hugepage_resource_name",
    "is_attachable_volume_resource_name",
    "is_scalar_resource_name",
    "parse_resource_list_nano",
    "ResourceListError",
]

CPU = "cpu"
MEMORY = "memory"
EPHEMERAL_STORAGE = "ephemeral-storage"
PODS = "pods"
HUGEPAGES_PREFIX = "hugepages-"
ATTACHABLE_VOLUMES_PREFIX = "attachable-volumes-"
_DEFAULT_NAMESPACE_PREFIX = "kubernetes.io/"
_REQUESTS_PREFIX = "requests."

_QUALIFIED_NAME_PART = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")
_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def _is_qualified_name(value: str) -> bool:
    prefix, sep, name = value.rpartition("/")
    if sep:
        if not prefix or len(prefix) > 253 or not _DNS1123_SUBDOMAIN.fullmatch(prefix):
            return False
    return 0 < len(name) <= 63 and _QUALIFIED_NAME_PART.fullmatch(name) is not None


def is_prefixed_native_resource(name: str) -> bool:
    """Names in the ``kubernetes.io/`` namespace (e.g. ``kubernetes.io/foo``)."""
    return _DEFAULT_NAMESPACE_PREFIX in name


def is_native_resource(name: str) -> bool:
    """Unprefixed names (``cpu``, ``hugepages-2Mi``) or names under ``kubernetes.io/``."""
    return "/" not in name or is_prefixed_native_resource(name)


def is_hugepage_resource_name(name: str) -> bool:
    return name.startswith(HUGEPAGES_PREFIX)


def is_attachable_volume_resource_name(name: str) -> bool:
    return name.startswith(ATTACHABLE_VOLUMES_PREFIX)


def is_extended_resource_name(name: str) -> bool:
    """Domain-prefixed names outside ``kubernetes.io/`` such as ``nvidia.com/gpu``."""
    if is_native_resource(name) or name.startswith(_REQUESTS_PREFIX):
        return False
    # upstream requires "requests.<name>" to be a valid qualified name (for quota)
    return _is_qualified_name(_REQUESTS_PREFIX + name)


def is_scalar_resource_name(name: str) -> bool:
    """Resources tracked in :attr:`Resource.scalar_resources`."""
    return (
        is_extended_resource_name(name)
        or is_hugepage_resource_name(name)
        or is_prefixed_native_resource(name)
        or is_attachable_volume_resource_name(name)
    )


class ResourceListError(QuantityError):
    """A bad entry in a ResourceList; ``field`` is the path (``where.key``)."""

    def __init__(self, field: str, detail: str) -> None:
        self.field = field
        self.detail = detail
        super().__init__(f"{field}: {detail}" if field else detail)


def parse_resource_list_nano(
    rl: Mapping[str, Any] | None, *, where: str = ""
) -> dict[str, int]:
    """Parse a ResourceList into ``{name: nano-units}``.

    Raises :class:`ResourceListError` (a QuantityError) whose ``field`` is ``where.<key>``.
    """
    if rl is None:
        return {}
    if type(rl) is not dict and not isinstance(rl, Mapping):  # a dict from the wire
        raise ResourceListError(where, "expected a map of resource name to quantity, "
                                f"got {type(rl).__name__}")
    out: dict[str, int] = {}
    for key, raw in rl.items():
        try:
            out[key] = parse_quantity_nano(raw)
        except QuantityError as exc:
            raise ResourceListError(f"{where}.{key}" if where else str(key), str(exc)) from None
    return out


@dataclass(slots=True)
class Resource:
    """Integer resource amounts: CPU in millicores, everything else in whole units."""

    milli_cpu: int = 0
    memory: int = 0
    ephemeral_storage: int = 0
    allowed_pod_number: int = 0
    scalar_resources: dict[str, int] = field(default_factory=dict)

    @classmethod
    def from_nano_map(cls, amounts: Mapping[str, int]) -> Resource:
        """Build from ``{name: nano-units}``; unknown non-scalar names are ignored (upstream)."""
        r = cls()
        for name, nano in amounts.items():
            r.add_amount(name, nano_to_milli(nano) if name == CPU else nano_to_int(nano))
        return r

    @classmethod
    def from_resource_list(cls, rl: Mapping[str, Any] | None, *, where: str = "") -> Resource:
        """Convert a ResourceList (``{"cpu": "500m", ...}``).

        Raises :class:`QuantityError` whose message starts with ``where.<resource>``.
        """
        return cls.from_nano_map(parse_resource_list_nano(rl, where=where))

    def add_amount(self, name: str, amount: int) -> None:
        """Add ``amount`` (milli for cpu, whole units otherwise) of resource ``name``."""
        if name == CPU:
            self.milli_cpu += amount
        elif name == MEMORY:
            self.memory += amount
        elif name == EPHEMERAL_STORAGE:
            self.ephemeral_storage += amount
        elif name == PODS:
            self.allowed_pod_number += amount
        elif is_scalar_resource_name(name):
            self.scalar_resources[name] = self.scalar_resources.get(name, 0) + amount

    def set_scalar(self, name: str, amount: int) -> None:
        self.scalar_resources[name] = amount

    def add(self, other: Resource) -> None:
        self.milli_cpu += other.milli_cpu
        self.memory += other.memory
        self.ephemeral_storage += other.ephemeral_storage
        self.allowed_pod_number += other.allowed_pod_number
        if other.scalar_resources:
            sr = self.scalar_resources
            for k, v in other.scalar_resources.items():
                sr[k] = sr.get(k, 0) + v

    def sub(self, other: Resource) -> None:
        """Subtract ``other``; scalar keys stay present (possibly 0), like upstream."""
        self.milli_cpu -= other.milli_cpu
        self.memory -= other.memory
        self.ephemeral_storage -= other.ephemeral_storage
        self.allowed_pod_number -= other.allowed_pod_number
        if other.scalar_resources:
            sr = self.scalar_resources
            for k, v in other.scalar_resources.items():
                sr[k] = sr.get(k, 0) - v

    def set_max(self, other: Resource) -> None:
        """Raise each amount to at least ``other``'s."""
        if other.milli_cpu > self.milli_cpu:
            self.milli_cpu = other.milli_cpu
        if other.memory > self.memory:
            self.memory = other.memory
        if other.ephemeral_storage > self.ephemeral_storage:
            self.ephemeral_storage = other.ephemeral_storage
        if other.allowed_pod_number > self.allowed_pod_number:
            self.allowed_pod_number = other.allowed_pod_number
        sr = self.scalar_resources
        for k, v in other.scalar_resources.items():
            if k not in sr or v > sr[k]:
                sr[k] = v

    def clone(self) -> Resource:
        return Resource(
            self.milli_cpu,
            self.memory,
            self.ephemeral_storage,
            self.allowed_pod_number,
            dict(self.scalar_resources),
        )

    def get(self, name: str) -> int:
        """Amount of ``name`` (milli for cpu); 0 when absent."""
        if name == CPU:
            return self.milli_cpu
        if name == MEMORY:
            return self.memory
        if name == EPHEMERAL_STORAGE:
            return self.ephemeral_storage
        if name == PODS:
            return self.allowed_pod_number
        return self.scalar_resources.get(name, 0)

    def is_zero(self) -> bool:
        return (
            self.milli_cpu == 0
            and self.memory == 0
            and self.ephemeral_storage == 0
            and self.allowed_pod_number == 0
            and not any(self.scalar_resources.values())
        )

    def names(self) -> list[str]:
        """Resource names with a non-zero amount (for messages and iteration)."""
        out = [
            n
            for n, v in (
                (CPU, self.milli_cpu),
                (MEMORY, self.memory),
                (EPHEMERAL_STORAGE, self.ephemeral_storage),
                (PODS, self.allowed_pod_number),
            )
            if v
        ]
        out.extend(k for k, v in self.scalar_resources.items() if v)
        return out
