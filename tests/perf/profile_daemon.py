"""The daemon's own profile in a bench run: the floor and the measured profile side by side.

Run by hand (``python tests/perf/profile_daemon.py --workload Backlog --nodes 5000``; any
``kube-py-scheduler bench`` flag passes through).  The bench runs the scheduler in its own
process; this runs the bench with cProfile enabled in each scheduler's window, from its
informers' sync to its close, and prints, for the floor and the measured run, Python calls
per bound pod and the functions whose calls per pod differ most (the default profile's cost
beyond the floor's, which the offline cycle benches do not see: informer events, queue hints,
the binding cycle, the snapshot's update).  Also the collector's passes and time (cProfile
does not see them).  Calls are deterministic enough to compare builds; times under cProfile
are not, and the bench's own figures are slowed by it.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import pstats
import sys
import time
from typing import Any

from scheduler import app as app_module
from scheduler.cli.main import main as cli_main

_runs: list[dict[str, Any]] = []


class _Window:
    """One scheduler's profile, from its sync to its close, and the collector meanwhile."""

    def __init__(self) -> None:
        # process CPU, not wall time: on a loaded machine a send that wakes the API server
        # loses the core to it, and wall time would charge that wait to the send
        self.profile = cProfile.Profile(time.process_time)
        self.gc_passes = [0, 0, 0]
        self.gc_seconds = 0.0
        self._gc_t = 0.0
        self.bound = 0

    def gc_callback(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._gc_t = time.perf_counter()
        else:
            self.gc_passes[info["generation"]] += 1
            self.gc_seconds += time.perf_counter() - self._gc_t


def _install() -> None:
    start, aclose = app_module.Components.start, app_module.Components.aclose

    async def profiled_start(self: Any, **kwargs: Any) -> None:
        await start(self, **kwargs)
        window = _Window()
        self._profile_window = window
        _runs.append(window)
        gc.callbacks.append(window.gc_callback)
        window.profile.enable()

    async def profiled_aclose(self: Any, **kwargs: Any) -> None:
        window = getattr(self, "_profile_window", None)
        if window is not None:
            window.profile.disable()
            gc.callbacks.remove(window.gc_callback)
        await aclose(self, **kwargs)

    app_module.Components.start = profiled_start  # type: ignore[method-assign]
    app_module.Components.aclose = profiled_aclose  # type: ignore[method-assign]


def _per_function(window: _Window) -> dict[str, tuple[int, float]]:
    stats = pstats.Stats(window.profile)
    out: dict[str, tuple[int, float]] = {}
    for (path, line, name), (_cc, calls, tottime, _ct, _callers) in (
            stats.stats.items()):  # type: ignore[attr-defined]
        short = path.rsplit("/scheduler/", 1)[-1] if "/scheduler/" in path else path.rsplit("/", 1)[-1]
        out[f"{short}:{line}({name})"] = (calls, tottime)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--dump", default="", help="write each window's pstats to PREFIX-N")
    parser.add_argument("--pods", type=int, required=True,
                        help="the measured pods (the floor binds as many)")
    ours, rest = parser.parse_known_args()
    _install()
    code = cli_main(["bench", "--no-progress", "--pods", str(ours.pods), *rest])
    for window in _runs:
        window.bound = ours.pods
    for index, window in enumerate(_runs):
        if ours.dump:
            window.profile.dump_stats(f"{ours.dump}-{index}")
    if len(_runs) < 1:
        sys.exit(code)
    labels = ["floor", "measured"] if len(_runs) == 2 else [f"run{i}" for i in range(len(_runs))]
    tables = [_per_function(w) for w in _runs]
    for label, window, table in zip(labels, _runs, tables, strict=True):
        pods = max(window.bound, 1)
        calls = sum(c for c, _ in table.values())
        tt = sum(t for _, t in table.values())
        print(f"{label}: {int(window.bound)} pods, {calls / pods:.1f} calls/pod, "
              f"{tt / pods * 1e3:.3f} ms/pod under cProfile; gc passes {window.gc_passes}, "
              f"{window.gc_seconds / pods * 1e3:.3f} ms/pod")
    if len(tables) != 2:
        return
    floor, measured = tables
    fp, mp = max(_runs[0].bound, 1), max(_runs[1].bound, 1)
    rows = []
    for key in set(floor) | set(measured):
        fc, ft = floor.get(key, (0, 0.0))
        mc, mt = measured.get(key, (0, 0.0))
        rows.append((mc / mp - fc / fp, mt / mp - ft / fp, fc / fp, mc / mp, key))
    print(f"\ntop {ours.top} by calls/pod beyond the floor: delta calls/pod, delta tottime "
          "us/pod, floor calls/pod, measured calls/pod, function")
    for dc, dt, fc, mc, key in sorted(rows, reverse=True)[:ours.top]:
        print(f"{dc:9.2f} {dt * 1e6:8.1f} {fc:8.2f} {mc:8.2f}  {key}")
    print(f"\ntop {ours.top} by tottime/pod beyond the floor")
    for dc, dt, fc, mc, key in sorted(rows, key=lambda r: -r[1])[:ours.top]:
        print(f"{dc:9.2f} {dt * 1e6:8.1f} {fc:8.2f} {mc:8.2f}  {key}")


if __name__ == "__main__":
    main()
