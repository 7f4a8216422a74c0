"""The daemon's own cost in a bench run: the floor and the measured profile side by side.

Run by hand; every other flag goes to ``kube-py-scheduler bench``::

    PYTHONPATH=. python tests/perf/profile_daemon.py --pods 10000 --workload Backlog --nodes 5000
        [--dump PREFIX] [--top 40]
    PYTHONPATH=. python tests/perf/profile_daemon.py --runs --workload Backlog --nodes 5000

The bench runs the scheduler in its own process, which the offline cycle benches
(``bench_batched_cycle.py``) leave out: informer events, the queue's hints, the binding
cycle, the loop's I/O between cycles.  By default this runs the bench under cProfile, from
each scheduler's informer sync to its close, with the process's CPU time as the profiler's
clock (on a loaded machine a ``send`` that wakes the API server loses the core to it, and a
wall clock would charge that wait to the send), and prints, for the floor and the measured
run, Python calls per bound pod (deterministic enough to compare builds; the times are the
profiler's) and the functions whose calls or time per pod differ most between them.  Also the
collector's passes meanwhile, which cProfile does not see.

``--runs``: no profiler; each scheduling cycle's thread CPU time by its place in the run of
cycles the loop takes back to back before it yields to informers and binding tasks
(``Scheduler.run``): the first cycle after a yield finds its working set evicted by the
loop's I/O, so it is the one that costs more.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import pstats
import statistics
import sys
import time
from typing import Any

from scheduler import app as app_module
from scheduler.cli.main import main as cli_main

# Places in a run from which cycles are counted together ("8" = the ninth and later).
LAST_PLACE = 8


class _Window:
    """One scheduler's profile, from its sync to its close, and the collector meanwhile."""

    def __init__(self) -> None:
        self.profile = cProfile.Profile(time.process_time)
        self.gc_passes = [0, 0, 0]
        self.gc_seconds = 0.0
        self._gc_started = 0.0

    def gc_callback(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._gc_started = time.process_time()
        else:
            self.gc_passes[info["generation"]] += 1
            self.gc_seconds += time.process_time() - self._gc_started


def _profile_windows() -> list[_Window]:
    """Each scheduler the bench starts gets a profile from its sync to its close."""
    windows: list[_Window] = []
    start, aclose = app_module.Components.start, app_module.Components.aclose

    async def profiled_start(self: Any, **kwargs: Any) -> None:
        await start(self, **kwargs)
        window = _Window()
        self._profile_window = window
        windows.append(window)
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
    return windows


def _cycles_by_place() -> list[dict[int, list[float]]]:
    """Each scheduler's cycles' thread CPU seconds by place in their run (0: first after a
    yield).  A callback queued at a run's first cycle runs at the next yield: a cycle that
    finds it has run starts a new run."""
    schedulers: list[dict[int, list[float]]] = []
    build = app_module.build_components

    def measured_build(*args: Any, **kwargs: Any) -> Any:
        parts = build(*args, **kwargs)
        cycle = parts.scheduler.cycle
        schedule_one = cycle.schedule_one
        by_place: dict[int, list[float]] = {}
        schedulers.append(by_place)
        run = {"place": 0, "yielded": True}

        def yielded() -> None:
            run["yielded"] = True

        def timed(qpi: Any) -> Any:
            if run["yielded"]:
                run["place"], run["yielded"] = 0, False
                asyncio.get_running_loop().call_soon(yielded)
            else:
                run["place"] += 1
            started = time.thread_time()
            pending = schedule_one(qpi)
            by_place.setdefault(min(run["place"], LAST_PLACE), []).append(
                time.thread_time() - started)
            return pending

        cycle.schedule_one = timed  # type: ignore[method-assign]  # a timing wrapper
        return parts

    app_module.build_components = measured_build  # type: ignore[assignment]
    return schedulers


def _per_function(window: _Window, pods: int) -> dict[str, tuple[float, float]]:
    """calls and tottime (µs) per pod by function."""
    out: dict[str, tuple[float, float]] = {}
    for (path, line, name), (_cc, calls, tottime, _ct, _callers) in (
            pstats.Stats(window.profile).stats.items()):  # type: ignore[attr-defined]
        short = (path.rsplit("/scheduler/", 1)[-1] if "/scheduler/" in path
                 else path.rsplit("/", 1)[-1])
        calls_before, time_before = out.get(f"{short}:{line}({name})", (0.0, 0.0))
        out[f"{short}:{line}({name})"] = (calls_before + calls / pods,
                                          time_before + tottime / pods * 1e6)
    return out


def _labels(count: int) -> list[str]:
    return ["floor", "measured"] if count == 2 else [f"scheduler {i}" for i in range(count)]


def _print_profiles(windows: list[_Window], *, pods: int, top: int, dump: str) -> None:
    tables = [_per_function(w, pods) for w in windows]
    for index, (label, window, table) in enumerate(zip(_labels(len(windows)), windows, tables,
                                                       strict=True)):
        if dump:
            window.profile.dump_stats(f"{dump}-{index}")
        print(f"{label}: {sum(c for c, _ in table.values()):.1f} Python calls per pod, "
              f"{sum(t for _, t in table.values()):.1f} µs per pod under cProfile; collector "
              f"passes by generation {window.gc_passes}, "
              f"{window.gc_seconds / pods * 1e6:.1f} µs per pod")
    if len(tables) != 2:
        return
    floor, measured = tables
    rows = []
    for key in set(floor) | set(measured):
        floor_calls, floor_time = floor.get(key, (0.0, 0.0))
        calls, tottime = measured.get(key, (0.0, 0.0))
        rows.append((calls - floor_calls, tottime - floor_time, floor_calls, calls, key))
    header = "calls/pod beyond the floor, µs/pod beyond it, floor calls/pod, calls/pod"
    for title, order in (("calls", lambda r: -r[0]), ("time", lambda r: -r[1])):
        print(f"\nthe {top} functions with the most {title} per pod beyond the floor ({header})")
        for more, slower, floor_calls, calls, key in sorted(rows, key=order)[:top]:
            print(f"{more:9.2f} {slower:8.1f} {floor_calls:8.2f} {calls:8.2f}  {key}")


def _print_runs(schedulers: list[dict[int, list[float]]]) -> None:
    for label, by_place in zip(_labels(len(schedulers)), schedulers, strict=True):
        cycles = sum(len(v) for v in by_place.values())
        runs = len(by_place.get(0, []))
        print(f"{label}: {cycles} cycles in {runs} runs ({cycles / max(runs, 1):.1f} a run)")
        for place in sorted(by_place):
            seconds = by_place[place]
            name = f"{place + 1}th and later" if place == LAST_PLACE else f"cycle {place + 1}"
            print(f"  {name:>16}: {len(seconds):6d} cycles, thread CPU mean "
                  f"{statistics.mean(seconds) * 1e3:.3f} ms, median "
                  f"{statistics.median(seconds) * 1e3:.3f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--runs", action="store_true",
                        help="no profiler: cycles' CPU by their place in a run")
    parser.add_argument("--pods", type=int, default=0,
                        help="the measured pods (and the floor's); needed for a profile")
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--dump", default="", help="write each profile to PREFIX-<n>")
    ours, rest = parser.parse_known_args()
    bench = ["bench", "--no-progress", *rest]
    if ours.pods:
        bench += ["--pods", str(ours.pods)]
    if ours.runs:
        schedulers = _cycles_by_place()
        code = cli_main(bench)
        _print_runs(schedulers)
        sys.exit(code)
    if not ours.pods:
        parser.error("--pods is needed for the calls per pod")
    windows = _profile_windows()
    code = cli_main(bench)
    _print_profiles(windows, pods=ours.pods, top=ours.top, dump=ours.dump)
    sys.exit(code)


if __name__ == "__main__":
    main()
