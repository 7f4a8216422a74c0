"""Partitionable devices (``DRAPartitionableDevices``, beta and on by default since 1.36): the
shared counters of a pool and what each device consumes from them.

A driver publishes ``spec.sharedCounters`` (named counter sets, each a map of counters with
a quantity ``value``) in some slices of a pool, and ``consumesCounters`` (per counter set, the
amount of each counter) on devices in other slices of the same pool; since 1.34 one slice holds
one or the other.  Several devices may draw on the same counters (the partitions of one GPU:
the whole GPU, two halves, four quarters ...): a device can be allocated only while every
counter it consumes has that much left once the devices already allocated have taken theirs.

Only the slices of a pool's newest generation count, as for devices (the generation is the
one ``Inventory`` chose).  A pool whose devices consume a counter set or counter that no slice
of the pool defines, or that defines a counter set twice, is invalid: its counter-consuming
devices are unusable (upstream marks the whole pool invalid) and the reason is reported in
``problems`` and in the pod's explanation.  Kept beside ``inventory.py`` rather than in it so
the slices' parse for devices stays as it is for pools without counters.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import Any

from scheduler.dra.inventory import Device, DeviceID, Inventory
from scheduler.objects.quantity import QuantityError, parse_quantity_nano

PoolID = tuple[str, str]  # (driver, pool)
Consumption = tuple[tuple[str, str, int], ...]  # (counter set, counter, amount in nano-units)


def _name(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata")
    name = meta.get("name") if isinstance(meta, Mapping) else None
    return name if isinstance(name, str) else ""


def _amounts(raw: Any, where: str) -> dict[str, int]:
    if not isinstance(raw, Mapping):
        raise ValueError(f"{where}: must be a map of counters")
    out: dict[str, int] = {}
    for k, c in raw.items():
        value = c.get("value") if isinstance(c, Mapping) else None
        if not isinstance(value, (str, int)) or isinstance(value, bool):
            raise ValueError(f"{where}[{k}].value: must be a quantity")
        try:
            out[str(k)] = parse_quantity_nano(value)
        except QuantityError as e:
            raise ValueError(f"{where}[{k}].value: {e}") from None
    return out


class Counters:
    """The pools' shared counters and the devices' consumption, from the ResourceSlices."""

    def __init__(self, slices: Iterable[Mapping[str, Any]], inventory: Inventory) -> None:
        self.problems: list[str] = []
        self.sets: dict[PoolID, dict[str, dict[str, int]]] = {}
        self.consumes: dict[DeviceID, Consumption] = {}
        self.invalid: dict[PoolID, str] = {}
        # per pool, the devices that consume counters (for what allocated ones use)
        self._consumers: dict[PoolID, list[DeviceID]] = {}
        for sl in slices:
            spec = sl.get("spec")
            if not isinstance(spec, Mapping):
                continue
            pool_raw = spec.get("pool")
            if not isinstance(pool_raw, Mapping):
                continue
            driver, pool_name = spec.get("driver"), pool_raw.get("name")
            if not isinstance(driver, str) or not isinstance(pool_name, str):
                continue  # malformed: Inventory named it
            pool = inventory.pools.get((driver, pool_name))
            if pool is None or pool_raw.get("generation", 0) != pool.generation:
                continue  # malformed (Inventory said so) or an older generation
            self._read_slice(sl, spec, (pool.driver, pool.name))
        for pid, devs in self._consumers.items():
            sets = self.sets.get(pid, {})
            for dev in devs:
                for set_name, counter, _ in self.consumes[dev]:
                    if set_name not in sets:
                        self._invalidate(pid, f"device {dev[2]} consumes counter set "
                                              f"{set_name}, which the pool does not define")
                    elif counter not in sets[set_name]:
                        self._invalidate(pid, f"device {dev[2]} consumes counter {counter} "
                                              f"of counter set {set_name}, which it lacks")

    def _invalidate(self, pid: PoolID, reason: str) -> None:
        if pid not in self.invalid:
            self.invalid[pid] = reason
            self.problems.append(f"resource pool {pid[1]} of driver {pid[0]} is invalid: "
                                 f"{reason}")

    def _read_slice(self, sl: Mapping[str, Any], spec: Mapping[str, Any], pid: PoolID) -> None:
        where = f"ResourceSlice {_name(sl)}"
        shared = spec.get("sharedCounters")
        if isinstance(shared, list):
            sets = self.sets.setdefault(pid, {})
            for i, cs in enumerate(shared):
                name = cs.get("name") if isinstance(cs, Mapping) else None
                if not isinstance(name, str) or not isinstance(cs, Mapping):
                    self._invalidate(pid, f"{where}: spec.sharedCounters[{i}].name: "
                                          f"must be a string")
                    continue
                if name in sets:
                    self._invalidate(pid, f"counter set {name} is defined more than once")
                    continue
                try:
                    sets[name] = _amounts(cs.get("counters"),
                                          f"{where}: spec.sharedCounters[{i}].counters")
                except ValueError as e:
                    self._invalidate(pid, str(e))
        devices = spec.get("devices")
        for i, d in enumerate(devices if isinstance(devices, list) else ()):
            raw = d.get("consumesCounters") if isinstance(d, Mapping) else None
            if not raw or not isinstance(d.get("name"), str):
                continue
            dev: DeviceID = (pid[0], pid[1], d["name"])
            parts: list[tuple[str, str, int]] = []
            try:
                if not isinstance(raw, list):
                    raise ValueError(f"{where}: spec.devices[{i}].consumesCounters: "
                                     f"must be a list")
                for j, c in enumerate(raw):
                    cw = f"{where}: spec.devices[{i}].consumesCounters[{j}]"
                    set_name = c.get("counterSet") if isinstance(c, Mapping) else None
                    if not isinstance(set_name, str):
                        raise ValueError(f"{cw}.counterSet: must be a string")
                    for counter, amount in _amounts(c.get("counters"),
                                                    f"{cw}.counters").items():
                        parts.append((set_name, counter, amount))
            except ValueError as e:
                self._invalidate(pid, str(e))
                continue
            self.consumes[dev] = tuple(parts)
            self._consumers.setdefault(pid, []).append(dev)

    def __bool__(self) -> bool:
        return bool(self.consumes)

    def consumption(self, d: Device) -> Consumption:
        return self.consumes.get(d.id, ())

    def left(self, devices: Sequence[Device], in_use: AbstractSet[DeviceID]
             ) -> dict[tuple[PoolID, str], dict[str, int]]:
        """For the pools of ``devices`` that have counters: what each counter set has left
        once the devices in ``in_use`` have taken their share."""
        out: dict[tuple[PoolID, str], dict[str, int]] = {}
        pools = {(d.driver, d.pool) for d in devices if d.id in self.consumes}
        for pid in pools:
            for set_name, counters in self.sets.get(pid, {}).items():
                out[(pid, set_name)] = dict(counters)
            for dev in self._consumers.get(pid, ()):
                if dev in in_use:
                    for set_name, counter, amount in self.consumes[dev]:
                        left = out.get((pid, set_name))
                        if left is not None and counter in left:
                            left[counter] -= amount
        return out


def fits(consumption: Consumption, pid: PoolID,
         left: Mapping[tuple[PoolID, str], Mapping[str, int]]) -> bool:
    for set_name, counter, amount in consumption:
        have = left.get((pid, set_name))
        if have is None or have.get(counter, 0) < amount:
            return False
    return True


def take(consumption: Consumption, pid: PoolID,
         left: dict[tuple[PoolID, str], dict[str, int]], sign: int = 1) -> None:
    for set_name, counter, amount in consumption:
        left[(pid, set_name)][counter] -= sign * amount
