"""Secure serving defaults and flags: kube-scheduler's in a cluster, plain HTTP on loopback for
--sandbox, every protection switched off only explicitly (and warned about off loopback)."""

from __future__ import annotations

import pytest

from scheduler.cli import build_parser
from scheduler.server import (
    ServingError,
    ServingOptions,
    serving_options_from_args,
    warn_if_open,
)


def options(*flags: str) -> ServingOptions:
    args = build_parser().parse_args(["run", *flags])
    return serving_options_from_args(args, sandbox=args.sandbox)


def summary(opts: ServingOptions) -> tuple[str, int, bool, bool, bool]:
    return opts.host, opts.port, opts.secure, opts.authentication, opts.authorization


@pytest.mark.parametrize(("flags", "expected"), [
    pytest.param([], ("0.0.0.0", 10259, True, True, True), id="cluster-defaults"),
    pytest.param(["--sandbox"], ("127.0.0.1", 10259, False, False, False), id="sandbox"),
    pytest.param(["--sandbox", "--authentication-token-webhook"],
                 ("127.0.0.1", 10259, True, True, True), id="sandbox-asks-for-auth"),
    pytest.param(["--sandbox", "--secure-serving=true"],
                 ("127.0.0.1", 10259, True, False, False), id="sandbox-https-only"),
    pytest.param(["--sandbox", "--tls-cert-file=c", "--tls-private-key-file=k"],
                 ("127.0.0.1", 10259, True, False, False), id="sandbox-with-cert"),
    pytest.param(["--secure-serving=false"], ("0.0.0.0", 10259, False, False, False),
                 id="plain-http"),
    pytest.param(["--authentication-token-webhook=false"],
                 ("0.0.0.0", 10259, True, False, False), id="no-authn"),
    pytest.param(["--authorization-mode=AlwaysAllow"], ("0.0.0.0", 10259, True, True, False),
                 id="authn-only"),
    pytest.param(["--metrics-bind-address", "[::1]:9443"], ("::1", 9443, True, True, True),
                 id="ipv6"),
])
def test_defaults_and_switches(flags: list[str], expected: tuple[object, ...]) -> None:
    assert summary(options(*flags)) == expected


def test_always_allow_paths() -> None:
    assert options().always_allow_paths == ("/healthz", "/readyz", "/livez")
    assert options("--authorization-always-allow-paths=/healthz, /version").always_allow_paths \
        == ("/healthz", "/version")


@pytest.mark.parametrize(("flags", "message"), [
    (["--tls-cert-file=c"], "--tls-cert-file and --tls-private-key-file go together"),
    (["--secure-serving=false", "--tls-cert-file=c", "--tls-private-key-file=k"],
     "--secure-serving=false"),
    (["--secure-serving=false", "--authentication-token-webhook"], "needs HTTPS"),
    (["--authentication-token-webhook=false", "--authorization-mode=Webhook"],
     "--authorization-mode=Webhook needs --authentication-token-webhook"),
    (["--metrics-bind-address", "10259"], "--metrics-bind-address: expected host:port"),
    (["--authorization-always-allow-paths=healthz"], "'healthz' is not a path"),
])
def test_contradictions_are_startup_errors(flags: list[str], message: str) -> None:
    with pytest.raises(ServingError, match=message):
        options(*flags)


@pytest.mark.parametrize(("flags", "warning"), [
    ([], None),
    (["--secure-serving=false"], "serving plain HTTP without authentication"),
    (["--authentication-token-webhook=false"], "authentication is off"),
    (["--authorization-mode=AlwaysAllow"], "authorization is off"),
    (["--secure-serving=false", "--metrics-bind-address=127.0.0.1:1"], None),
    (["--sandbox"], None),
    (["--sandbox", "--metrics-bind-address=0.0.0.0:1"], "serving plain HTTP"),
])
def test_protection_off_off_loopback_is_a_warning(
    flags: list[str], warning: str | None, capsys: pytest.CaptureFixture[str]
) -> None:
    opts = options(*flags)
    capsys.readouterr()
    said = warn_if_open(opts)
    # (from the captured output: once logging is configured, structlog caches loggers and
    # capture_logs() would miss them in a full run)
    logged = [line for line in "".join(capsys.readouterr()).splitlines() if line.strip()]
    if warning is None:
        assert said is None and logged == []
    else:
        assert said is not None and said.startswith(warning)
        assert len(logged) == 1 and said in logged[0] and "warning" in logged[0], logged
