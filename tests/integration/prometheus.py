"""A real Prometheus (Debian's ``prometheus`` binary, not ours) for the integration tests.

``PrometheusProcess`` runs it with a temporary configuration and TSDB on a free loopback
port (never a fixed one: a port taken between choosing and binding is retried, any other
failure is raised with Prometheus' own log) and queries its HTTP API.
``scrape_config_from_service_monitor`` turns the endpoint of the ServiceMonitor we ship into
the scrape configuration the Prometheus Operator generates from it.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import yaml

PROMETHEUS = shutil.which("prometheus")

# ServiceMonitor endpoint fields -> what the operator writes in the scrape config.
_KNOWN_ENDPOINT_FIELDS = {"port", "path", "interval", "scrapeTimeout", "scheme", "tlsConfig",
                          "bearerTokenFile"}


def scrape_config_from_service_monitor(
    endpoint: dict[str, Any], *, job: str, target: str, token_file: Path,
    interval: str = "1s",
) -> dict[str, Any]:
    """One scrape job as the Prometheus Operator renders it for ``endpoint`` (a static target
    instead of the Service's endpoints, the test's ``interval`` instead of the shipped one).
    The bearer token file is the pod's service-account token in a cluster: ``token_file``."""
    unknown = set(endpoint) - _KNOWN_ENDPOINT_FIELDS
    if unknown:
        raise AssertionError(f"the ServiceMonitor endpoint has fields this translation does not "
                             f"know, add them: {sorted(unknown)}")
    config: dict[str, Any] = {
        "job_name": job,
        "scrape_interval": interval,
        "scrape_timeout": interval,
        "metrics_path": endpoint.get("path", "/metrics"),
        "scheme": endpoint.get("scheme", "http"),
        "static_configs": [{"targets": [target]}],
    }
    tls = endpoint.get("tlsConfig")
    if tls is not None:
        unknown_tls = set(tls) - {"insecureSkipVerify"}
        if unknown_tls:
            raise AssertionError(f"tlsConfig fields not translated: {sorted(unknown_tls)}")
        config["tls_config"] = {"insecure_skip_verify": bool(tls.get("insecureSkipVerify"))}
    if "bearerTokenFile" in endpoint:
        config["authorization"] = {"type": "Bearer", "credentials_file": str(token_file)}
    return config


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PrometheusError(AssertionError):
    pass


class PrometheusProcess:
    """``prometheus`` with ``config`` (a dict written as prometheus.yml) and ``rule_files``
    (copied beside it); ``start`` returns once /-/ready answers."""

    def __init__(self, config: dict[str, Any], *, rule_files: dict[str, str] | None = None,
                 startup_timeout: float = 60.0) -> None:
        if PROMETHEUS is None:
            raise PrometheusError("no prometheus binary on PATH (Debian's prometheus package; "
                                  ".ci/run installs it)")
        self.workdir = Path(tempfile.mkdtemp(prefix="prometheus-"))
        config = dict(config)
        if rule_files:
            for name, text in rule_files.items():
                (self.workdir / name).write_text(text)
            config["rule_files"] = [str(self.workdir / name) for name in rule_files]
        self.config_path = self.workdir / "prometheus.yml"
        self.config_path.write_text(yaml.safe_dump(config))
        self.startup_timeout = startup_timeout
        self.proc: subprocess.Popen[bytes] | None = None
        self.url = ""
        self.lines: list[str] = []

    def _argv(self, port: int) -> list[str]:
        assert PROMETHEUS is not None
        return [PROMETHEUS, f"--config.file={self.config_path}",
                f"--storage.tsdb.path={self.workdir / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--web.enable-lifecycle", "--log.level=info"]

    def start(self, *, attempts: int = 5) -> PrometheusProcess:
        check = subprocess.run([str(Path(PROMETHEUS or "").with_name("promtool")), "check",
                                "config", str(self.config_path)],
                               capture_output=True, text=True, timeout=60)
        if check.returncode != 0:
            raise PrometheusError(f"promtool rejects the configuration:\n{check.stdout}"
                                  f"{check.stderr}\n{self.config_path.read_text()}")
        for _ in range(attempts):
            port = free_port()
            self.lines = []
            self.proc = subprocess.Popen(self._argv(port), stdout=subprocess.DEVNULL,
                                         stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
            threading.Thread(target=self._drain, daemon=True, name="prometheus-log").start()
            self.url = f"http://127.0.0.1:{port}"
            if self._wait_ready():
                return self
            code = self.proc.wait(10)
            if any("address already in use" in line for line in self.lines):
                continue  # the free port was taken before Prometheus bound it: another
            raise PrometheusError(f"prometheus exited with {code} before it was ready:\n"
                                  + self.log_tail())
        raise PrometheusError(f"prometheus found no free port in {attempts} attempts:\n"
                              + self.log_tail())

    def _drain(self) -> None:
        proc = self.proc
        assert proc is not None and proc.stderr is not None
        for raw in iter(proc.stderr.readline, b""):
            self.lines.append(raw.decode(errors="replace").rstrip())

    def _wait_ready(self) -> bool:
        assert self.proc is not None
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            try:
                with urllib.request.urlopen(self.url + "/-/ready", timeout=2) as resp:
                    if resp.status == 200:
                        return True
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.1)
        self.stop()
        raise PrometheusError(f"prometheus not ready after {self.startup_timeout} s:\n"
                              + self.log_tail())

    def log_tail(self, n: int = 30) -> str:
        return "\n".join(self.lines[-n:])

    def api(self, path: str, **params: Any) -> Any:
        """``data`` of a /api/v1 answer; a PrometheusError with Prometheus' error otherwise
        (a query that does not parse is a 400 with errorType bad_data)."""
        url = f"{self.url}/api/v1/{path}"
        if params:
            url += "?" + urllib.parse.urlencode(params)
        try:
            with urllib.request.urlopen(url, timeout=30) as resp:
                body = json.loads(resp.read())
        except urllib.error.HTTPError as e:
            body = json.loads(e.read() or b"{}")
            raise PrometheusError(f"{path} {params}: HTTP {e.code} {body.get('errorType')}: "
                                  f"{body.get('error')}") from e
        if body.get("status") != "success":
            raise PrometheusError(f"{path} {params}: {body}")
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        data = self.api("query", query=expr)
        assert data["resultType"] == "vector", data
        return list(data["result"])

    def value(self, expr: str) -> float | None:
        """The single value of ``expr`` (None when it has no series)."""
        result = self.query(expr)
        if not result:
            return None
        if len(result) > 1:
            raise PrometheusError(f"{expr}: {len(result)} series, expected one: {result}")
        return float(result[0]["value"][1])

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.workdir, ignore_errors=True)
