"""Helpers for tests and benchmarks: a sandbox subprocess and the fault-API client.

``SandboxAdmin`` speaks to ``/sandbox/v1/...`` over HTTP, so it works against a sandbox in a
subprocess, a thread or the same process. Its plain methods block (urllib); the ``a``-prefixed
twins are coroutines (use those when the sandbox runs on the caller's own event loop).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import Any

import orjson


class SandboxAdmin:
    def __init__(self, url: str, token: str | None = None, *, timeout: float = 10.0,
                 ca_pem: bytes | None = None) -> None:
        self.url = url.rstrip("/")
        self.token = token
        self.timeout = timeout
        # a sandbox with a token serves HTTPS with its own CA (see tls.py)
        self.ssl_context = ssl.create_default_context(cadata=ca_pem.decode()) if ca_pem else None

    def _headers(self) -> dict[str, str]:
        h = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.token:
            h["Authorization"] = f"Bearer {self.token}"
        return h

    def call(self, method: str, op: str, body: Any = None) -> Any:
        data = orjson.dumps(body) if body is not None else None
        req = urllib.request.Request(f"{self.url}/sandbox/v1/{op}", data=data, method=method,
                                     headers=self._headers())
        try:
            with urllib.request.urlopen(req, timeout=self.timeout, context=self.ssl_context) as resp:
                return orjson.loads(resp.read() or b"{}")
        except urllib.error.HTTPError as e:
            raise RuntimeError(f"sandbox admin {method} {op}: {e.code} {e.read().decode(errors='replace')}") from None

    async def acall(self, method: str, op: str, body: Any = None) -> Any:
        import aiohttp

        async with aiohttp.ClientSession() as s:
            async with s.request(method, f"{self.url}/sandbox/v1/{op}", headers=self._headers(),
                                 data=orjson.dumps(body) if body is not None else None,
                                 ssl=self.ssl_context if self.ssl_context is not None else True,
                                 timeout=aiohttp.ClientTimeout(total=self.timeout)) as resp:
                raw = await resp.read()
                if resp.status >= 400:
                    raise RuntimeError(f"sandbox admin {method} {op}: {resp.status} {raw.decode(errors='replace')}")
                return orjson.loads(raw or b"{}")

    @staticmethod
    def _fail_body(verb: str, resource: str, code: int, times: int | None, probability: float,
                   subresource: str, namespace: str, message: str, retry_after: int) -> dict[str, Any]:
        return {"verb": verb, "resource": resource, "code": code, "times": times,
                "probability": probability, "subresource": subresource, "namespace": namespace,
                "message": message, "retry_after": retry_after}

    # ---------------------------------------------------------------- blocking

    def drop_watches(self) -> int:
        return int(self.call("POST", "watches/drop")["dropped"])

    def compact(self) -> str:
        return str(self.call("POST", "compact")["resourceVersion"])

    def fail(self, verb: str = "*", resource: str = "*", *, code: int, times: int | None = 1,
             probability: float = 1.0, subresource: str = "*", namespace: str = "*",
             message: str = "", retry_after: int = 1) -> int:
        body = self._fail_body(verb, resource, code, times, probability, subresource, namespace, message, retry_after)
        return int(self.call("POST", "faults/failures", body)["id"])

    def add_latency(self, seconds: float, verb: str = "*", resource: str = "*") -> None:
        self.call("POST", "faults/latency", {"seconds": seconds, "verb": verb, "resource": resource})

    def raw_put(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Store ``obj`` bypassing validation (fault: version-skewed writer); returns it as stored."""
        return dict(self.call("POST", "raw", obj))

    def pause(self) -> None:
        self.call("POST", "pause")

    def resume(self) -> None:
        self.call("POST", "resume")

    def clear(self) -> None:
        self.call("DELETE", "faults")

    def counters(self) -> dict[str, Any]:
        return dict(self.call("GET", "counters"))

    def reset_counters(self) -> None:
        self.call("DELETE", "counters")

    # ---------------------------------------------------------------- async twins

    async def adrop_watches(self) -> int:
        return int((await self.acall("POST", "watches/drop"))["dropped"])

    async def acompact(self) -> str:
        return str((await self.acall("POST", "compact"))["resourceVersion"])

    async def afail(self, verb: str = "*", resource: str = "*", *, code: int, times: int | None = 1,
                    probability: float = 1.0, subresource: str = "*", namespace: str = "*",
                    message: str = "", retry_after: int = 1) -> int:
        body = self._fail_body(verb, resource, code, times, probability, subresource, namespace, message, retry_after)
        return int((await self.acall("POST", "faults/failures", body))["id"])

    async def aadd_latency(self, seconds: float, verb: str = "*", resource: str = "*") -> None:
        await self.acall("POST", "faults/latency", {"seconds": seconds, "verb": verb, "resource": resource})

    async def araw_put(self, obj: dict[str, Any]) -> dict[str, Any]:
        return dict(await self.acall("POST", "raw", obj))

    async def apause(self) -> None:
        await self.acall("POST", "pause")

    async def aresume(self) -> None:
        await self.acall("POST", "resume")

    async def aclear(self) -> None:
        await self.acall("DELETE", "faults")

    async def acounters(self) -> dict[str, Any]:
        return dict(await self.acall("GET", "counters"))

    async def areset_counters(self) -> None:
        await self.acall("DELETE", "counters")


class SandboxProcess:
    """``python -m scheduler.sandbox`` in a subprocess; ``with`` or ``async with``.

    Extra keyword arguments become flags: ``nodes=3`` -> ``--nodes 3``,
    ``simulate_kubelet=False`` -> ``--no-simulate-kubelet``.
    """

    def __init__(self, *, startup_timeout: float = 30.0, workdir: str | os.PathLike[str] | None = None,
                 extra_args: list[str] | None = None, **flags: Any) -> None:
        # like ``Sandbox()``, a bare API server unless asked (the CLI's own default is on)
        flags.setdefault("scheduler_prereqs", False)
        self.flags = flags
        self.extra_args = list(extra_args or [])
        self.startup_timeout = startup_timeout
        self._own_dir = workdir is None
        self.workdir = Path(workdir) if workdir is not None else Path(tempfile.mkdtemp(prefix="sandbox-"))
        self.kubeconfig_path = self.workdir / "kubeconfig"
        self.url = ""
        self.token: str | None = flags.get("token")
        self.proc: subprocess.Popen[bytes] | None = None
        self._stderr_lines: list[str] = []

    def argv(self) -> list[str]:
        args = [sys.executable, "-m", "scheduler.sandbox", "--port", str(self.flags.get("port", 0)),
                "--kubeconfig-out", str(self.kubeconfig_path)]
        for k, v in self.flags.items():
            if k == "port":
                continue
            flag = "--" + k.replace("_", "-")
            if isinstance(v, bool):
                args.append(flag if v else "--no-" + k.replace("_", "-"))
            elif isinstance(v, dict):
                args += [flag, ",".join(f"{a}={b}" for a, b in v.items())]
            elif isinstance(v, (list, tuple)):
                for item in v:  # repeatable flags: auth_user=["t=alice"] -> --auth-user t=alice
                    args += [flag, str(item)]
            elif v is not None:
                args += [flag, str(v)]
        return args + self.extra_args

    @property
    def ca_pem(self) -> bytes | None:
        """The sandbox's CA (PEM) from its kubeconfig, when it serves HTTPS."""
        import base64

        import yaml

        if not self.url.startswith("https"):
            return None
        cfg = yaml.safe_load(self.kubeconfig_path.read_text())
        return base64.b64decode(cfg["clusters"][0]["cluster"]["certificate-authority-data"])

    @property
    def pid(self) -> int | None:
        """The sandbox process's id once started (the bench reads its CPU time by it)."""
        return self.proc.pid if self.proc is not None else None

    @property
    def admin(self) -> SandboxAdmin:
        return SandboxAdmin(self.url, self.token, ca_pem=self.ca_pem)

    def start(self) -> SandboxProcess:
        self.proc = subprocess.Popen(self.argv(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     stdin=subprocess.DEVNULL)
        assert self.proc.stdout is not None and self.proc.stderr is not None
        threading.Thread(target=self._drain_stderr, daemon=True, name="sandbox-stderr").start()
        deadline = time.monotonic() + self.startup_timeout
        result: list[str] = []

        def read_ready() -> None:
            assert self.proc is not None and self.proc.stdout is not None
            for line in iter(self.proc.stdout.readline, b""):
                text = line.decode(errors="replace").strip()
                if "ready" in text and "http" in text:
                    result.append(text)
                    return

        t = threading.Thread(target=read_ready, daemon=True)
        t.start()
        t.join(max(0.0, deadline - time.monotonic()))
        if not result:
            self.stop()
            raise RuntimeError("sandbox did not become ready: " + "".join(self._stderr_lines[-20:]))
        self.url = result[0][result[0].index("http"):].split()[0]
        return self

    def _drain_stderr(self) -> None:
        assert self.proc is not None and self.proc.stderr is not None
        for line in iter(self.proc.stderr.readline, b""):
            self._stderr_lines.append(line.decode(errors="replace"))

    def stop(self) -> int | None:
        p = self.proc
        code = None
        if p is not None:
            if p.poll() is None:
                p.terminate()
                try:
                    code = p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    code = p.wait()
            else:
                code = p.returncode
            for f in (p.stdout, p.stderr):
                if f is not None:
                    f.close()
        if self._own_dir:
            shutil.rmtree(self.workdir, ignore_errors=True)
        return code

    def __enter__(self) -> SandboxProcess:
        return self.start()

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()

    async def __aenter__(self) -> SandboxProcess:
        return await asyncio.to_thread(self.start)

    async def __aexit__(self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        await asyncio.to_thread(self.stop)
