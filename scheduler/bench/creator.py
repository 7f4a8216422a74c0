"""The measured pods' creator: a process of its own, as upstream scheduler_perf's is.

Upstream creates the measured pods while the scheduler runs, from a client that is not the
scheduler; so the scheduler pays those pods' watch events, but not the cost of creating
them.  Creating them from the bench's own process would bill the JSON encoding and the
POSTs to the scheduler's CPU figures, so the bench runs this module in a child process::

    python -m scheduler.bench.creator --kubeconfig FILE --bodies PODS.jsonl [--concurrency N]

The protocol, one JSON object a line on stdout:

1. read the bodies (one pod a line, created in its ``metadata.namespace``), encode them,
   open ``N`` connections to the API server (a ``/version`` GET each), then print
   ``{"ready": <pods>}``;
2. wait for one line on stdin (the bench writes it once the scheduler has synced);
3. create every pod from ``N`` concurrent connections, then print ``{"created", "failed",
   "error", "started", "finished"}``: how many POSTs succeeded or failed, the first failure,
   and ``time.monotonic()`` just before the first POST and just after the last one.  Linux's
   monotonic clock is one clock for every process of the machine, so the bench compares
   these with its own bind times.  The exit code is 0 when every pod was created.

:class:`CreatorProcess` is the bench's side of it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

READY_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class CreatorReport:
    """What the creator printed when it was done."""

    created: int
    failed: int
    error: str
    started: float  # time.monotonic() just before the first POST
    finished: float  # just after the last response

    @property
    def rate(self) -> float:
        return self.created / max(self.finished - self.started, 1e-9)


def pod_path(pod: dict[str, Any]) -> str:
    namespace = (pod.get("metadata") or {}).get("namespace")
    if not namespace:
        raise ValueError(f"pod {pod.get('metadata', {}).get('name')!r}: metadata.namespace "
                         "is required (the creator POSTs each pod into its namespace)")
    return f"/api/v1/namespaces/{namespace}/pods"


def encode_bodies(lines: Iterable[bytes]) -> list[tuple[str, bytes]]:
    """(collection path, request body) per non-empty line; the bodies are re-encoded once
    here, before the clock starts."""
    out: list[tuple[str, bytes]] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            pod = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            raise ValueError(f"bodies line {number}: not JSON: {exc}") from None
        if not isinstance(pod, dict):
            raise ValueError(f"bodies line {number}: a pod object expected, "
                             f"got {type(pod).__name__}")
        try:
            out.append((pod_path(pod), orjson.dumps(pod)))
        except ValueError as exc:
            raise ValueError(f"bodies line {number}: {exc}") from None
    return out


async def create_bodies(client: Any, bodies: Sequence[tuple[str, bytes]],
                        concurrency: int) -> CreatorReport:
    """POST every body from ``concurrency`` workers; failures are counted, not raised."""
    from scheduler.client.api import ApiConnectionError

    created = failed = 0
    error = ""
    queue = iter(bodies)

    async def worker() -> None:
        nonlocal created, failed, error
        for path, body in queue:  # one shared iterator: each body is taken once
            try:
                resp = await client.request("POST", path, body=body)
                ok, why = resp.ok, f"POST {path}: HTTP {resp.status} {resp.body}"
            except ApiConnectionError as exc:
                ok, why = False, str(exc)
            if ok:
                created += 1
            else:
                failed += 1
                error = error or why[:500]

    started = time.monotonic()
    await asyncio.gather(*(worker() for _ in range(max(1, min(concurrency, len(bodies))))))
    return CreatorReport(created=created, failed=failed, error=error, started=started,
                         finished=time.monotonic())


async def _main(args: argparse.Namespace) -> int:
    from scheduler.client.api import ApiClient
    from scheduler.client.connection import load_connection

    with open(args.bodies, "rb") as f:
        bodies = encode_bodies(f)
    connection = load_connection(kubeconfig=args.kubeconfig)
    client = ApiClient(connection, qps=0, pool_size=args.concurrency,
                       user_agent="kube-py-scheduler-bench-creator")
    try:
        # Open the connections now, so the measured window holds no TCP or TLS handshakes.
        await asyncio.gather(*(client.get("/version") for _ in range(args.concurrency)))
        print(json.dumps({"ready": len(bodies)}), flush=True)
        loop = asyncio.get_running_loop()
        if not await loop.run_in_executor(None, sys.stdin.readline):
            return 1  # the bench went away before starting us
        report = await create_bodies(client, bodies, args.concurrency)
    finally:
        await client.close()
    print(json.dumps(report.__dict__), flush=True)
    return 0 if report.failed == 0 else 1


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m scheduler.bench.creator",
                                description=(__doc__ or "").split("\n")[0])
    p.add_argument("--kubeconfig", required=True, help="the API server to create pods in")
    p.add_argument("--bodies", required=True, help="pods to create, one JSON object a line")
    p.add_argument("--concurrency", type=int, default=32,
                   help="concurrent connections (default %(default)s)")
    args = p.parse_args(list(argv) if argv is not None else None)
    if args.concurrency < 1:
        p.error("--concurrency must be positive")
    from scheduler.logging import configure_logging

    configure_logging(fmt="console", level="warning")  # stderr: stdout is the protocol
    try:
        return asyncio.run(_main(args))
    except ValueError as exc:
        print(f"bench creator: {exc}", file=sys.stderr)
        return 2


class CreatorProcess:
    """The bench's side: write the bodies, start the child and wait until it is ready
    (:meth:`start`), release it (:meth:`go`), collect its report (:meth:`result`)."""

    def __init__(self, proc: asyncio.subprocess.Process, workdir: tempfile.TemporaryDirectory[str],
                 count: int) -> None:
        self._proc = proc
        self._workdir = workdir
        self.count = count

    @classmethod
    async def start(cls, kubeconfig: str, pods: Sequence[dict[str, Any]], *,
                    concurrency: int, timeout: float = READY_TIMEOUT_S,
                    module: str = "scheduler.bench.creator", extra: Sequence[str] = (),
                    ) -> CreatorProcess:
        workdir = tempfile.TemporaryDirectory(prefix="bench-creator-")
        path = os.path.join(workdir.name, "pods.jsonl")
        with open(path, "wb") as f:
            for pod in pods:
                f.write(orjson.dumps(pod) + b"\n")
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", module, "--kubeconfig", kubeconfig,
            "--bodies", path, "--concurrency", str(concurrency), *extra,
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE)
        creator = cls(proc, workdir, len(pods))
        try:
            ready = await creator._line(timeout)
            if ready.get("ready") != len(pods):
                raise RuntimeError(f"bench creator: expected ready for {len(pods)} pods, "
                                   f"got {ready}")
        except BaseException:
            await creator.aclose()
            raise
        return creator

    async def _line(self, timeout: float) -> dict[str, Any]:
        assert self._proc.stdout is not None
        line = await asyncio.wait_for(self._proc.stdout.readline(), timeout=timeout)
        if not line:
            code = await self._proc.wait()
            raise RuntimeError(f"bench creator exited ({code}) without a report; "
                               "its error is on stderr")
        value = json.loads(line)
        if not isinstance(value, dict):
            raise RuntimeError(f"bench creator: unexpected output {line!r}")
        return value

    async def go(self) -> None:
        assert self._proc.stdin is not None
        self._proc.stdin.write(b"go\n")
        await self._proc.stdin.drain()

    async def result(self, timeout: float) -> CreatorReport:
        done = await self._line(timeout)
        await asyncio.wait_for(self._proc.wait(), timeout=timeout)
        return CreatorReport(created=int(done["created"]), failed=int(done["failed"]),
                             error=str(done["error"]), started=float(done["started"]),
                             finished=float(done["finished"]))

    async def aclose(self) -> None:
        """Stop the child if it still runs and remove the bodies file; safe to repeat."""
        if self._proc.returncode is None:
            self._proc.kill()
            await self._proc.wait()
        self._workdir.cleanup()


if __name__ == "__main__":
    sys.exit(main())
