"""Semantic checks of a decoded configuration (upstream ``ValidateKubeSchedulerConfiguration``).

Returns every problem found as (field path, message) pairs; ``load.parse_config`` turns them
into one :class:`ConfigError`. Can also be run on configs built in code.
"""

from __future__ import annotations

import os
import re
from urllib.parse import urlsplit

from scheduler.config.defaults import (
    DEFAULT_BINDER,
    DEFAULT_PLUGINS,
    MAX_NODE_SCORE,
    effective_plugins,
)
from scheduler.config.errors import ConfigError
from scheduler.config.types import (
    EXTENSION_POINTS,
    Extender,
    KubeSchedulerConfiguration,
    Plugins,
    Profile,
)

__all__ = ["validate_config", "validate_or_raise"]

_INT64_MAX = 2**63 - 1
_DEFAULT_NAMES = frozenset(n for n, _ in DEFAULT_PLUGINS)


def validate_or_raise(cfg: KubeSchedulerConfiguration, *, source: str = "<config>") -> None:
    errors = validate_config(cfg)
    if errors:
        raise ConfigError(source, errors)


def _percentage(path: str, value: int | None) -> list[tuple[str, str]]:
    if value is not None and not 0 <= value <= 100:
        return [(path, f"not in valid range [0-100], got {value}")]
    return []


def validate_config(cfg: KubeSchedulerConfiguration) -> list[tuple[str, str]]:
    errs: list[tuple[str, str]] = []
    if not cfg.profiles:
        errs.append(("profiles", "at least one profile is required"))
    seen: dict[str, int] = {}
    for i, prof in enumerate(cfg.profiles):
        path = f"profiles[{i}]"
        errs += _profile(path, prof)
        if prof.scheduler_name:
            if prof.scheduler_name in seen:
                errs.append((f"{path}.schedulerName",
                             f"duplicate value {prof.scheduler_name!r} (also at "
                             f"profiles[{seen[prof.scheduler_name]}].schedulerName)"))
            else:
                seen[prof.scheduler_name] = i
    if cfg.profiles:
        errs += _common_queue_sort(cfg.profiles)
    errs += _percentage("percentageOfNodesToScore", cfg.percentage_of_nodes_to_score)
    if cfg.parallelism <= 0:
        errs.append(("parallelism", f"should be an integer value greater than zero, "
                                    f"got {cfg.parallelism}"))
    if cfg.pod_initial_backoff_seconds <= 0:
        errs.append(("podInitialBackoffSeconds",
                     f"must be greater than 0, got {cfg.pod_initial_backoff_seconds}"))
    if cfg.pod_max_backoff_seconds < cfg.pod_initial_backoff_seconds:
        errs.append(("podMaxBackoffSeconds",
                     f"must be greater than or equal to podInitialBackoffSeconds "
                     f"({cfg.pod_initial_backoff_seconds}), got {cfg.pod_max_backoff_seconds}"))
    le = cfg.leader_election
    if le.leader_elect:
        for name, v in (("leaseDuration", le.lease_duration_seconds),
                        ("renewDeadline", le.renew_deadline_seconds),
                        ("retryPeriod", le.retry_period_seconds)):
            if v <= 0:
                errs.append((f"leaderElection.{name}", f"must be greater than zero, got {v}s"))
        if le.lease_duration_seconds <= le.renew_deadline_seconds:
            errs.append(("leaderElection.leaseDuration",
                         "must be greater than renewDeadline "
                         f"({le.lease_duration_seconds}s <= {le.renew_deadline_seconds}s)"))
        if le.renew_deadline_seconds <= le.retry_period_seconds:
            errs.append(("leaderElection.renewDeadline",
                         "must be greater than retryPeriod "
                         f"({le.renew_deadline_seconds}s <= {le.retry_period_seconds}s)"))
        if le.resource_lock != "leases":
            errs.append(("leaderElection.resourceLock",
                         f"only \"leases\" is supported, got {le.resource_lock!r}"))
        if not le.resource_name:
            errs.append(("leaderElection.resourceName", "required"))
        # An empty resourceNamespace means the scheduler's own namespace (resolved at start).
    cc = cfg.client_connection
    if cc.qps < 0:
        errs.append(("clientConnection.qps", f"must be non-negative, got {cc.qps}"))
    if cc.burst < 0:
        errs.append(("clientConnection.burst", f"must be non-negative, got {cc.burst}"))
    errs += _extenders(cfg.extenders)
    return errs


# apimachinery's qualified name: an optional DNS-1123 subdomain prefix, a name of <= 63
# characters.  (config is a leaf layer: it cannot use scheduler.objects.)
_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_QUALIFIED_NAME_PART = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")


def _is_extended_resource_name(name: str) -> bool:
    """Upstream's IsExtendedResourceName: domain-prefixed, outside kubernetes.io, and
    ``requests.<name>`` a qualified name (quota needs it)."""
    if "/" not in name or "kubernetes.io/" in name or name.startswith("requests."):
        return False
    prefix, _, part = ("requests." + name).rpartition("/")
    return (len(prefix) <= 253 and _DNS1123_SUBDOMAIN.fullmatch(prefix) is not None
            and len(part) <= 63 and _QUALIFIED_NAME_PART.fullmatch(part) is not None)


def _extenders(extenders: list[Extender]) -> list[tuple[str, str]]:
    """Upstream's validateExtenders, plus what would otherwise only fail at the first call
    (a URL that is not http(s), TLS files that cannot be read, a key without a cert)."""
    errs: list[tuple[str, str]] = []
    binders = 0
    managed: set[str] = set()
    for i, ext in enumerate(extenders):
        path = f"extenders[{i}]"
        scheme = urlsplit(ext.url_prefix).scheme if ext.url_prefix else ""
        if not ext.url_prefix:
            errs.append((f"{path}.urlPrefix", "required"))
        elif scheme not in ("http", "https") or not urlsplit(ext.url_prefix).netloc:
            errs.append((f"{path}.urlPrefix",
                         f"must be an http:// or https:// URL, got {ext.url_prefix!r}"))
        if ext.prioritize_verb and ext.weight <= 0:
            errs.append((f"{path}.weight",
                         f"must have a positive weight applied to it, got {ext.weight}"))
        elif ext.weight * MAX_NODE_SCORE > _INT64_MAX:
            errs.append((f"{path}.weight", f"overflows int64 once scaled, got {ext.weight}"))
        if ext.bind_verb:
            binders += 1
        if ext.http_timeout_seconds < 0:
            errs.append((f"{path}.httpTimeout",
                         f"must not be negative, got {ext.http_timeout_seconds}s"))
        for j, res in enumerate(ext.managed_resources):
            rp = f"{path}.managedResources[{j}].name"
            if not _is_extended_resource_name(res.name):
                errs.append((rp, f"{res.name!r} is not a valid extended resource name "
                                 "(a domain-prefixed name outside kubernetes.io/, e.g. "
                                 "nvidia.com/gpu)"))
            if res.name in managed:
                errs.append((rp, f"duplicate extender managed resource name {res.name!r}"))
            managed.add(res.name)
        tls = ext.tls_config
        if tls is not None:
            tp = f"{path}.tlsConfig"
            if tls.insecure and (tls.ca_file or tls.ca_data):
                errs.append((tp, "specifying a root certificates file with the insecure flag "
                                 "is not allowed"))
            if bool(tls.cert_file or tls.cert_data) != bool(tls.key_file or tls.key_data):
                errs.append((tp, "a client certificate needs both a certificate "
                                 "(certFile/certData) and a key (keyFile/keyData)"))
            for key, file in (("certFile", tls.cert_file), ("keyFile", tls.key_file),
                              ("caFile", tls.ca_file)):
                if file and not os.access(file, os.R_OK):
                    errs.append((f"{tp}.{key}", f"cannot read {file!r}"))
    if binders > 1:
        errs.append(("extenders", f"only one extender can implement bind, found {binders}"))
    return errs


def _profile(path: str, prof: Profile) -> list[tuple[str, str]]:
    errs: list[tuple[str, str]] = []
    if not prof.scheduler_name:
        errs.append((f"{path}.schedulerName", "required"))
    errs += _percentage(f"{path}.percentageOfNodesToScore", prof.percentage_of_nodes_to_score)
    for attr, key in EXTENSION_POINTS:
        ps = prof.plugins.get(attr)
        for j, p in enumerate(ps.enabled):
            if not p.name:
                errs.append((f"{path}.plugins.{key}.enabled[{j}].name", "required"))
            if p.weight < 0:
                errs.append((f"{path}.plugins.{key}.enabled[{j}].weight",
                             f"must be a positive integer, got {p.weight}"))
        for j, p in enumerate(ps.disabled):
            if not p.name:
                errs.append((f"{path}.plugins.{key}.disabled[{j}].name", "required"))
    eff = effective_plugins(prof)
    # total weight * MaxNodeScore must fit in int64 (upstream framework check)
    total = sum(max(p.weight, 1) for p in eff.score.enabled + eff.multi_point.enabled)
    if total * MAX_NODE_SCORE > _INT64_MAX:
        errs.append((f"{path}.plugins.score", "total score plugin weight overflows int64"))
    if not _may_have_binder(eff):
        errs.append((f"{path}.plugins.bind", "at least one bind plugin is needed "
                     f"(DefaultBinder is disabled and no other bind plugin is enabled)"))
    return errs


def _may_have_binder(eff: Plugins) -> bool:
    if eff.bind.enabled:
        return True
    for p in eff.multi_point.enabled:
        if eff.bind.is_disabled(p.name):
            continue
        # out-of-tree plugins may implement Bind; the framework checks them when built
        if p.name == DEFAULT_BINDER or p.name not in _DEFAULT_NAMES:
            return True
    return False


def _common_queue_sort(profiles: list[Profile]) -> list[tuple[str, str]]:
    """Every profile must use the same queueSort plugin set and args (upstream)."""
    errs: list[tuple[str, str]] = []
    first = profiles[0].plugins.queue_sort
    if len(first.enabled) > 1:
        errs.append(("profiles[0].plugins.queueSort.enabled",
                     "only one queue sort plugin can be enabled"))
    qs_name = first.enabled[0].name if first.enabled else ""
    qs_args = profiles[0].plugin_config.get(qs_name) if qs_name else None
    for i, prof in enumerate(profiles[1:], start=1):
        if prof.plugins.queue_sort != first:
            errs.append((f"profiles[{i}].plugins.queueSort",
                         "queueSort must be the same for all profiles"))
        if qs_name and prof.plugin_config.get(qs_name) != qs_args:
            errs.append((f"profiles[{i}].pluginConfig",
                         f"queueSort args ({qs_name}) must be the same for all profiles"))
    return errs
