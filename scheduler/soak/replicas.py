"""Scheduler replicas as the soak runs them: ``kube-py-scheduler run`` subprocesses with
leader election, JSON logs in a file per replica, their /metrics and debug routes read over
HTTP, their RSS and CPU read from ``/proc``; killed, paused (SIGSTOP/SIGCONT) and restarted
to cause leader changes.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PAGE_SIZE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def proc_usage(pid: int) -> tuple[int, float] | None:
    """(RSS bytes, CPU seconds user+system) of a live process, from /proc; None if gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        statm = Path(f"/proc/{pid}/statm").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2:].split()
    cpu = (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # utime, stime
    return int(statm.split()[1]) * PAGE_SIZE, cpu


@dataclass
class Replica:
    """One scheduler replica (its identity stays across restarts; each start is an
    incarnation with its own process)."""

    identity: str
    kubeconfig: Path
    config: Path
    logdir: Path
    namespace: str = "kube-system"
    proc: subprocess.Popen[bytes] | None = None
    started_at: float = 0.0
    incarnation: int = 0
    metrics_port: int = 0
    paused: bool = False
    log_offset: int = 0
    start_offset: int = 0
    lines_read: int = 0
    exits: list[int] = field(default_factory=list)
    # Frames per allocation /debug/memory traces with (``soak --tracemalloc``; 0: none):
    # tracing starts at the first memory report of each incarnation.
    tracemalloc: int = 0
    _log: Any = None

    @property
    def log_path(self) -> Path:
        return self.logdir / f"{self.identity}.log"

    def argv(self) -> list[str]:
        return [sys.executable, "-m", "scheduler", "run", "--kubeconfig", str(self.kubeconfig),
                "--config", str(self.config), "--metrics-bind-address", "127.0.0.1:0",
                "--secure-serving=false", "--log-format", "json", "--log-level", "info",
                "--stop-grace-seconds", "2"]

    def start(self, *, now: float) -> None:
        self.incarnation += 1
        self.metrics_port = 0
        self.paused = False
        self._log = open(self.log_path, "ab")  # noqa: SIM115  # kept open for the process
        self.start_offset = self._log.tell()
        env = {**os.environ, "POD_NAME": self.identity, "POD_NAMESPACE": self.namespace,
               "PYTHONUNBUFFERED": "1"}
        self.proc = subprocess.Popen(self.argv(), stdout=self._log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, env=env)
        self.started_at = now

    @property
    def pid(self) -> int:
        return self.proc.pid if self.proc is not None else 0

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def new_lines(self) -> list[str]:
        """Log lines written since the last call (whole lines only)."""
        try:
            with open(self.log_path, "rb") as f:
                f.seek(self.log_offset)
                chunk = f.read()
        except OSError:
            return []
        end = chunk.rfind(b"\n")
        if end < 0:
            return []
        self.log_offset += end + 1
        lines = chunk[:end].decode(errors="replace").splitlines()
        self.lines_read += len(lines)
        return lines

    def is_candidate(self) -> bool:
        """This incarnation has synced and stands for the lease (it logged waiting for or
        holding it): a standby ready to take over."""
        if not self.alive() or self.paused:
            return False
        try:
            with open(self.log_path, "rb") as f:
                f.seek(self.start_offset)
                text = f.read()
        except OSError:
            return False
        return b"waiting for the leader lease" in text or b"acquired the leader lease" in text

    def find_port(self) -> int:
        """The metrics port this incarnation logged (0 until it has), without consuming
        the lines :meth:`new_lines` hands to the checker."""
        if self.metrics_port:
            return self.metrics_port
        try:
            with open(self.log_path, "rb") as f:
                f.seek(self.start_offset)
                text = f.read().decode(errors="replace")
        except OSError:
            return 0
        for line in text.splitlines():
            if "serving health and metrics" in line:
                try:
                    self.metrics_port = int(json.loads(line)["port"])
                except (ValueError, KeyError, TypeError):
                    continue
                break
        return self.metrics_port

    def get(self, path: str, *, timeout: float = 5.0) -> tuple[int, str]:
        """(status, body) of GET ``path`` on its metrics port; (0, error) if unreachable."""
        if not self.metrics_port or self.paused or not self.alive():
            return 0, "not serving"
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}{path}",
                                        timeout=timeout) as resp:
                return int(resp.status), resp.read().decode(errors="replace")
        except urllib.error.HTTPError as e:
            return int(e.code), e.read().decode(errors="replace")
        except (urllib.error.URLError, OSError) as e:
            return 0, str(e)

    def memory_report(self, *, top: int = 40, reset: bool = False) -> dict[str, Any] | None:
        """This incarnation's ``/debug/memory`` (None if it does not answer)."""
        query = f"?top={top}" + ("&reset=true" if reset else "")
        if self.tracemalloc:
            query += f"&tracemalloc={self.tracemalloc}"  # starts it once, then a no-op
        status, body = self.get(f"/debug/memory{query}", timeout=60.0)
        if status != 200:
            return None
        try:
            report: dict[str, Any] = json.loads(body)
        except ValueError:
            return None
        return report

    def usage(self) -> tuple[int, float] | None:
        return proc_usage(self.pid) if self.alive() else None

    def signal(self, sig: int) -> None:
        if self.alive():
            assert self.proc is not None
            self.proc.send_signal(sig)
            if sig == signal.SIGSTOP:
                self.paused = True
            elif sig == signal.SIGCONT:
                self.paused = False

    def kill(self) -> None:
        """SIGKILL: a crash, no lease hand-over."""
        self.signal(signal.SIGCONT)
        self.signal(signal.SIGKILL)
        self.reap()

    def stop(self, *, timeout: float = 15.0) -> int | None:
        """SIGTERM and wait (SIGKILL past ``timeout``)."""
        if self.proc is None:
            return None
        if self.alive():
            self.signal(signal.SIGCONT)
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.reap()

    def reap(self) -> int | None:
        if self.proc is None:
            return None
        try:
            code = self.proc.wait(10)
        except subprocess.TimeoutExpired:
            return None
        self.exits.append(code)
        if self._log is not None:
            self._log.close()
            self._log = None
        self.proc = None
        return code


def wait_port(replica: Replica, *, timeout: float = 60.0) -> int:
    deadline = time.monotonic() + timeout
    while not replica.find_port():
        if not replica.alive() or time.monotonic() > deadline:
            raise RuntimeError(f"replica {replica.identity} logged no metrics port; see "
                               f"{replica.log_path}")
        time.sleep(0.1)
    return replica.metrics_port
