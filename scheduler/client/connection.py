"""Where the API server is and how to authenticate to it.

The ``kubernetes`` package already knows every kubeconfig dialect (token, tokenFile, client
certificates as files or data, exec plugins, auth providers), so we let it resolve credentials
into a ``kubernetes.client.Configuration`` and then copy host, token and TLS files out of it.
Everything after that (HTTP, watches, rate limiting) is our own aiohttp client, because the
official models are far too slow for a scheduler's hot path.

In-cluster tokens are projected, bound service-account tokens that the kubelet rotates; they are
re-read from disk at most once a minute, as client-go does.
"""

from __future__ import annotations

import os
import ssl
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import structlog

log = structlog.get_logger(__name__)

SERVICE_TOKEN_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/token"
SERVICE_CA_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"
SERVICE_NAMESPACE_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"
TOKEN_REREAD_SECONDS = 60.0
DEFAULT_KUBECONFIG = os.path.join("~", ".kube", "config")


class ConfigurationError(Exception):
    """No usable connection configuration; the message names every source that was tried."""


class CredentialSource:
    """Produces the ``Authorization`` header value; refreshed lazily, cheap to call per request."""

    def authorization(self) -> str | None:
        raise NotImplementedError


class StaticCredentials(CredentialSource):
    def __init__(self, header: str | None) -> None:
        self._header = header

    def authorization(self) -> str | None:
        return self._header


class TokenFileCredentials(CredentialSource):
    """A bearer token re-read from a file every ``reread_seconds`` (bound SA tokens rotate)."""

    def __init__(
        self,
        path: str,
        *,
        reread_seconds: float = TOKEN_REREAD_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._path = path
        self._reread = reread_seconds
        self._clock = clock
        self._header: str | None = None
        self._read_at = float("-inf")
        self._lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        # Pickled for the event process (scheduler.client.event_process): the same file,
        # re-read by the child; a lock does not cross processes.
        state = dict(self.__dict__)
        del state["_lock"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def authorization(self) -> str | None:
        now = self._clock()
        if now - self._read_at < self._reread and self._header is not None:
            return self._header
        with self._lock:
            try:
                with open(self._path, encoding="utf-8") as f:
                    token = f.read().strip()
            except OSError as exc:
                # Keep using the old token: the file is replaced atomically by the kubelet,
                # a transient failure must not drop authentication.
                log.warning("token file unreadable", path=self._path, error=str(exc))
                if self._header is None:
                    raise ConfigurationError(f"token file {self._path!r} unreadable: {exc}") from exc
                return self._header
            if not token:
                if self._header is None:
                    raise ConfigurationError(f"token file {self._path!r} is empty")
                return self._header
            self._header = f"Bearer {token}"
            self._read_at = now
            return self._header


class RefreshingConfigurationCredentials(CredentialSource):
    """Credentials held by a ``kubernetes.client.Configuration`` with a refresh hook (exec plugins,
    OIDC / gcp auth providers).  The hook itself checks expiry; we call it at most every
    ``check_seconds`` so a per-request call stays cheap."""

    def __init__(
        self,
        configuration: Any,
        *,
        check_seconds: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._cfg = configuration
        self._check = check_seconds
        self._clock = clock
        self._checked_at = clock()
        self._lock = threading.Lock()

    def authorization(self) -> str | None:
        now = self._clock()
        hook = getattr(self._cfg, "refresh_api_key_hook", None)
        if hook is not None and now - self._checked_at >= self._check:
            with self._lock:
                self._checked_at = now
                try:
                    hook(self._cfg)
                except Exception as exc:  # the old token may still be valid
                    log.warning("credential refresh failed", error=str(exc))
        return _authorization_from_configuration(self._cfg)


@dataclass
class ConnectionConfig:
    """Everything the HTTP client needs to reach one API server."""

    host: str
    credentials: CredentialSource = field(default_factory=lambda: StaticCredentials(None))
    ca_file: str | None = None
    ca_data: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    verify_ssl: bool = True
    tls_server_name: str | None = None
    proxy: str | None = None
    source: str = "explicit"
    namespace: str | None = None

    def authorization(self) -> str | None:
        return self.credentials.authorization()

    def ssl_context(self) -> ssl.SSLContext | bool:
        """The TLS context for aiohttp; ``True`` for plain http hosts (ignored there)."""
        if not self.host.startswith("https"):
            return True
        ctx = ssl.create_default_context(cafile=self.ca_file, cadata=self.ca_data)
        if self.cert_file:
            ctx.load_cert_chain(self.cert_file, self.key_file)
        if not self.verify_ssl:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        return ctx


def _authorization_from_configuration(cfg: Any) -> str | None:
    api_key: Mapping[str, str] = getattr(cfg, "api_key", None) or {}
    value = api_key.get("BearerToken") or api_key.get("authorization")
    if not value:
        return None
    prefix_map: Mapping[str, str] = getattr(cfg, "api_key_prefix", None) or {}
    prefix = prefix_map.get("BearerToken") or prefix_map.get("authorization")
    header = f"{prefix} {value}" if prefix else value
    # The kubernetes package stores "bearer <t>", "Bearer <t>" or "Basic <b64>".
    if header.lower().startswith("bearer "):
        return "Bearer " + header[7:].strip()
    return header


def connection_from_configuration(cfg: Any, *, source: str) -> ConnectionConfig:
    """Copy what our client needs out of a resolved ``kubernetes.client.Configuration``."""
    host = str(getattr(cfg, "host", "") or "").rstrip("/")
    if not host:
        raise ConfigurationError(f"{source}: no server host in configuration")
    credentials: CredentialSource
    if getattr(cfg, "refresh_api_key_hook", None) is not None:
        credentials = RefreshingConfigurationCredentials(cfg)
    else:
        credentials = StaticCredentials(_authorization_from_configuration(cfg))
    return ConnectionConfig(
        host=host,
        credentials=credentials,
        ca_file=getattr(cfg, "ssl_ca_cert", None) or None,
        cert_file=getattr(cfg, "cert_file", None) or None,
        key_file=getattr(cfg, "key_file", None) or None,
        verify_ssl=bool(getattr(cfg, "verify_ssl", True)),
        tls_server_name=getattr(cfg, "tls_server_name", None) or None,
        proxy=getattr(cfg, "proxy", None) or None,
        source=source,
    )


def load_kubeconfig(path: str, *, context: str | None = None) -> ConnectionConfig:
    """Load one kubeconfig file (or a ``:``-separated list, as kubectl merges them)."""
    from kubernetes import client as k8s_client
    from kubernetes import config as k8s_config

    cfg = k8s_client.Configuration()
    load: Any = k8s_config.load_kube_config
    load(
        config_file=path, context=context, client_configuration=cfg, persist_config=False
    )
    return connection_from_configuration(cfg, source=f"kubeconfig {path}")


def load_incluster(
    *,
    environ: Mapping[str, str] | None = None,
    token_file: str = SERVICE_TOKEN_FILE,
    ca_file: str = SERVICE_CA_FILE,
    namespace_file: str = SERVICE_NAMESPACE_FILE,
    clock: Callable[[], float] = time.monotonic,
) -> ConnectionConfig:
    """The pod's service account: KUBERNETES_SERVICE_HOST/PORT, token and CA files."""
    env = os.environ if environ is None else environ
    host = env.get("KUBERNETES_SERVICE_HOST", "")
    port = env.get("KUBERNETES_SERVICE_PORT", "")
    if not host or not port:
        raise ConfigurationError("KUBERNETES_SERVICE_HOST/KUBERNETES_SERVICE_PORT not set")
    if not os.path.isfile(token_file):
        raise ConfigurationError(f"service account token {token_file} does not exist")
    if not os.path.isfile(ca_file):
        raise ConfigurationError(f"service account CA {ca_file} does not exist")
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    creds = TokenFileCredentials(token_file, clock=clock)
    creds.authorization()  # fail now, not on the first request
    namespace = None
    try:
        with open(namespace_file, encoding="utf-8") as f:
            namespace = f.read().strip() or None
    except OSError:
        pass
    return ConnectionConfig(
        host=f"https://{host}:{port}",
        credentials=creds,
        ca_file=ca_file,
        source="in-cluster",
        namespace=namespace,
    )


def load_connection(
    *,
    kubeconfig: str | None,
    context: str | None = None,
    environ: Mapping[str, str] | None = None,
    incluster_token_file: str = SERVICE_TOKEN_FILE,
    incluster_ca_file: str = SERVICE_CA_FILE,
) -> ConnectionConfig:
    """Resolve the connection like kube-scheduler: the given kubeconfig, in-cluster config,
    ``$KUBECONFIG``, then ``~/.kube/config``.

    An explicitly given kubeconfig that fails is an error (no silent fallback).
    """
    env = os.environ if environ is None else environ
    if kubeconfig:
        try:
            return load_kubeconfig(os.path.expanduser(kubeconfig), context=context)
        except ConfigurationError:
            raise
        except Exception as exc:
            raise ConfigurationError(f"kubeconfig {kubeconfig!r}: {exc}") from exc

    tried: list[str] = []
    try:
        return load_incluster(environ=env, token_file=incluster_token_file, ca_file=incluster_ca_file)
    except ConfigurationError as exc:
        tried.append(f"in-cluster ({exc})")

    candidates: list[tuple[str, str]] = []
    env_kc = env.get("KUBECONFIG", "")
    if env_kc:
        candidates.append(("$KUBECONFIG", env_kc))
    home = env.get("HOME") or os.path.expanduser("~")
    candidates.append(("~/.kube/config", os.path.join(home, ".kube", "config")))
    for label, path in candidates:
        paths = [p for p in path.split(os.pathsep) if p]
        if not any(os.path.isfile(os.path.expanduser(p)) for p in paths):
            tried.append(f"{label} {path} (not found)")
            continue
        try:
            return load_kubeconfig(os.pathsep.join(os.path.expanduser(p) for p in paths), context=context)
        except Exception as exc:
            tried.append(f"{label} {path} ({exc})")
    raise ConfigurationError("no Kubernetes connection configuration found; tried: " + "; ".join(tried))
