"""Serving certificates for the endpoint server: self-signed in memory, or files reloaded on change.

Why: kube-scheduler serves only HTTPS; with no ``--tls-cert-file`` it generates a self-signed
certificate at start and keeps it in memory, and a certificate given as files (a cert-manager
Secret mounted in the pod) is picked up again when it changes on disk, without a restart.

Python's ``ssl`` loads certificates from paths only, so PEM held in memory is handed to it
through an anonymous in-memory file (``memfd``) where the platform has one, else a private
temporary file removed at once.  A reload loads the new pair into a scratch context first: a
half-written or mismatched pair is reported and the certificate being served stays.  New
connections pick the new pair up (each TLS connection copies the context's certificate when
it starts); established ones keep theirs.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import hashlib
import ipaddress
import os
import socket
import ssl
import tempfile
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass

import structlog

log = structlog.get_logger(__name__)

# How often certificate files are read for changes.  A rotated Secret reaches the pod's volume
# within the kubelet's sync period (about a minute); this keeps the extra delay small.
RELOAD_INTERVAL_SECONDS = 10.0
SELF_SIGNED_VALIDITY = datetime.timedelta(days=365)


class CertificateError(Exception):
    """A certificate or key that cannot be used (message names the file)."""


def server_context() -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    return ctx


@contextlib.contextmanager
def _pem_path(data: bytes) -> Iterator[str]:
    """A path the ``ssl`` module can read ``data`` from, gone when the block ends."""
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create("kube-py-scheduler-pem", os.MFD_CLOEXEC)
        try:
            os.write(fd, data)
            yield f"/proc/self/fd/{fd}"
        finally:
            os.close(fd)
        return
    with tempfile.TemporaryDirectory(prefix="kube-py-scheduler-") as tmp:  # mode 0700
        path = os.path.join(tmp, "pem")
        with open(path, "wb") as f:
            f.write(data)
        yield path


def load_pem(ctx: ssl.SSLContext, cert_pem: bytes, key_pem: bytes) -> None:
    """Load a certificate chain and its key from memory; ssl.SSLError when they do not fit."""
    with _pem_path(cert_pem) as cert_path, _pem_path(key_pem) as key_path:
        ctx.load_cert_chain(cert_path, key_path)


def fingerprint(cert_pem: bytes) -> str:
    """SHA-256 of the (first) certificate's DER, as ``openssl x509 -fingerprint -sha256``."""
    der = ssl.PEM_cert_to_DER_cert(cert_pem.decode("ascii", errors="replace"))
    digest = hashlib.sha256(der).hexdigest().upper()
    return ":".join(digest[i:i + 2] for i in range(0, len(digest), 2))


def self_signed_hosts(bind_host: str) -> list[str]:
    """Names the generated certificate is valid for: loopback, this host, the bind address."""
    hosts = ["localhost", "127.0.0.1", "::1", socket.gethostname()]
    if bind_host not in ("", "0.0.0.0", "::") and bind_host not in hosts:
        hosts.append(bind_host)
    return hosts


def generate_self_signed(
    hosts: Sequence[str], *, now: datetime.datetime | None = None,
    validity: datetime.timedelta = SELF_SIGNED_VALIDITY,
) -> tuple[bytes, bytes]:
    """(certificate PEM, key PEM): an ECDSA P-256 self-signed serving certificate."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    start = now or datetime.datetime.now(datetime.UTC)
    name = x509.Name([x509.NameAttribute(
        NameOID.COMMON_NAME, f"{hosts[0]}@{int(start.timestamp())}")])
    alt_names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            alt_names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            alt_names.append(x509.DNSName(host))
    cert = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name)
        .public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(start - datetime.timedelta(minutes=1))
        .not_valid_after(start + validity)
        .add_extension(x509.SubjectAlternativeName(alt_names), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]),
                       critical=False)
        .sign(key, hashes.SHA256())
    )
    return (cert.public_bytes(serialization.Encoding.PEM),
            key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                              serialization.NoEncryption()))


def _read_pair(cert_file: str, key_file: str) -> tuple[bytes, bytes]:
    pair = []
    for flag, path in (("--tls-cert-file", cert_file), ("--tls-private-key-file", key_file)):
        try:
            with open(path, "rb") as f:
                pair.append(f.read())
        except OSError as exc:
            raise CertificateError(f"{flag} {path}: {exc.strerror or exc}") from exc
    return pair[0], pair[1]


def _checked_context(cert_file: str, key_file: str, cert_pem: bytes,
                     key_pem: bytes) -> ssl.SSLContext:
    ctx = server_context()
    try:
        load_pem(ctx, cert_pem, key_pem)
    except (ssl.SSLError, ValueError) as exc:
        raise CertificateError(
            f"--tls-cert-file {cert_file} / --tls-private-key-file {key_file}: "
            f"not a usable certificate and key ({exc})") from exc
    return ctx


class CertificateReloader:
    """Polls the certificate files and loads a changed pair into the serving context."""

    def __init__(
        self,
        context: ssl.SSLContext,
        *,
        cert_file: str,
        key_file: str,
        loaded: tuple[bytes, bytes],
        interval: float = RELOAD_INTERVAL_SECONDS,
        sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
    ) -> None:
        self._context = context
        self.cert_file = cert_file
        self.key_file = key_file
        self._current = loaded
        self._rejected: tuple[bytes, bytes] | None = None  # reported once, not every poll
        self._interval = interval
        self._sleep = sleep
        self.fingerprint = fingerprint(loaded[0])

    def check(self) -> bool:
        """Reload if the files changed; True when a new pair is now served."""
        try:
            pair = _read_pair(self.cert_file, self.key_file)
        except CertificateError as exc:
            if self._rejected != (b"", b""):
                log.error("cannot read the serving certificate; still serving the previous "
                          "one", error=str(exc))
                self._rejected = (b"", b"")
            return False
        if self._rejected == (b"", b""):
            self._rejected = None  # readable again
        if pair == self._current or pair == self._rejected:
            return False
        try:
            _checked_context(self.cert_file, self.key_file, *pair)
        except CertificateError as exc:
            # cert-manager writes the two files one after the other: a mismatch may be
            # momentary, and the next poll sees the finished pair.
            log.error("serving certificate not reloaded; still serving the previous one",
                      error=str(exc))
            self._rejected = pair
            return False
        load_pem(self._context, *pair)
        self._current, self._rejected = pair, None
        self.fingerprint = fingerprint(pair[0])
        log.info("reloaded the serving certificate", cert_file=self.cert_file,
                 sha256=self.fingerprint)
        return True

    async def run(self, *, iterations: int | None = None) -> None:
        """Poll until cancelled (or ``iterations`` polls, for tests)."""
        done = 0
        while iterations is None or done < iterations:
            await self._sleep(self._interval)
            try:
                self.check()
            except Exception as exc:  # never let a bad file end serving
                log.error("serving certificate check failed", error=repr(exc))
            done += 1


@dataclass
class ServingCertificate:
    """The context the server serves with, where it came from, and its reloader (files)."""

    context: ssl.SSLContext
    fingerprint: str
    source: str
    reloader: CertificateReloader | None = None

    @classmethod
    def from_files(
        cls, cert_file: str, key_file: str, *, interval: float = RELOAD_INTERVAL_SECONDS,
        sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
    ) -> ServingCertificate:
        pair = _read_pair(cert_file, key_file)
        ctx = _checked_context(cert_file, key_file, *pair)
        reloader = CertificateReloader(ctx, cert_file=cert_file, key_file=key_file,
                                       loaded=pair, interval=interval, sleep=sleep)
        return cls(context=ctx, fingerprint=reloader.fingerprint, source=cert_file,
                   reloader=reloader)

    @classmethod
    def self_signed(cls, hosts: Sequence[str]) -> ServingCertificate:
        cert_pem, key_pem = generate_self_signed(hosts)
        ctx = server_context()
        load_pem(ctx, cert_pem, key_pem)
        digest = fingerprint(cert_pem)
        log.info("generated a self-signed serving certificate (in memory)", hosts=list(hosts),
                 sha256=digest)
        return cls(context=ctx, fingerprint=digest, source="self-signed")
