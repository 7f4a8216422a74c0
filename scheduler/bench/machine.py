"""Which machine gave a figure: CPU model, cores, the CPUs this process may run on, load.

Absolute pods/s move with the machine and with what else runs on it, so every bench run
names its machine (printed at the start, kept in the result) and the load average at its
start and end: figures from different machines, or from one machine under different
loads, are then never compared as if they were one.
"""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CPUINFO = Path("/proc/cpuinfo")


def cpu_model(cpuinfo: str | None = None) -> str:
    """The CPU's model name (the first ``model name`` of ``/proc/cpuinfo``; other systems:
    ``platform.processor()``), or ``"unknown"``."""
    if cpuinfo is None:
        try:
            cpuinfo = CPUINFO.read_text(encoding="utf-8", errors="replace")
        except OSError:
            cpuinfo = ""
    for line in cpuinfo.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() in ("model name", "Model", "cpu model") and value.strip():
            return value.strip()
    return platform.processor() or platform.machine() or "unknown"


def _affinity() -> int | None:
    getter = getattr(os, "sched_getaffinity", None)
    return len(getter(0)) if getter is not None else None


def load_average() -> tuple[float, float, float] | None:
    try:
        one, five, fifteen = os.getloadavg()
    except OSError:
        return None
    return round(one, 2), round(five, 2), round(fifteen, 2)


@dataclass(frozen=True)
class Machine:
    """The machine a run measured on."""

    cpu_model: str
    cores: int  # logical CPUs of the machine
    affinity: int | None  # CPUs this process (and so the scheduler) may run on
    load: tuple[float, float, float] | None  # 1, 5, 15 min load average at the time

    @classmethod
    def current(cls) -> Machine:
        return cls(cpu_model=cpu_model(), cores=os.cpu_count() or 0, affinity=_affinity(),
                   load=load_average())

    def line(self) -> str:
        """One line for the terminal and the docs' tables."""
        cpus = f"{self.cores} cores"
        if self.affinity is not None and self.affinity != self.cores:
            cpus += f" (the scheduler may use {self.affinity})"
        load = ("load average " + " / ".join(f"{v:.2f}" for v in self.load)
                if self.load is not None else "load average unknown")
        return f"{self.cpu_model}, {cpus}; {load}"

    def as_dict(self) -> dict[str, Any]:
        return {"cpu_model": self.cpu_model, "cores": self.cores,
                "scheduler_affinity": self.affinity,
                "load_average": list(self.load) if self.load is not None else None}


def process_cpu_seconds(pid: int, *, stat: str | None = None) -> float | None:
    """User + system CPU seconds another process has used so far (``/proc/<pid>/stat``'s
    utime and stime, in clock ticks), or None where there is no such file: how the bench
    reads the sandbox's share of the cores."""
    if stat is None:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
        except OSError:
            return None
    # the command name (field 2) may hold spaces and parentheses: count from its last ')'
    fields = stat[stat.rindex(")") + 2:].split()
    utime, stime = int(fields[11]), int(fields[12])
    return (utime + stime) / os.sysconf("SC_CLK_TCK")
