"""KubeSchedulerConfiguration (kubescheduler.config.k8s.io/v1) as plain dataclasses.

Field names are the snake_case of the v1 API; ``load.parse_config`` maps YAML/JSON onto them
and applies upstream defaulting, so every value here is already defaulted.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "API_VERSION",
    "KIND",
    "EXTENSION_POINTS",
    "EXTENSION_POINT_KEYS",
    "PluginRef",
    "PluginSet",
    "Plugins",
    "Profile",
    "LeaderElectionConfig",
    "ClientConnectionConfig",
    "DEFAULT_EXTENDER_TIMEOUT_SECONDS",
    "Extender",
    "ExtenderManagedResource",
    "ExtenderTLSConfig",
    "KubeSchedulerConfiguration",
]

API_VERSION = "kubescheduler.config.k8s.io/v1"
KIND = "KubeSchedulerConfiguration"

# attribute name -> v1 field name, in upstream order
EXTENSION_POINTS: tuple[tuple[str, str], ...] = (
    ("pre_enqueue", "preEnqueue"),
    ("queue_sort", "queueSort"),
    ("pre_filter", "preFilter"),
    ("filter", "filter"),
    ("post_filter", "postFilter"),
    ("pre_score", "preScore"),
    ("score", "score"),
    ("reserve", "reserve"),
    ("permit", "permit"),
    ("pre_bind", "preBind"),
    ("bind", "bind"),
    ("post_bind", "postBind"),
    ("multi_point", "multiPoint"),
)
EXTENSION_POINT_KEYS: dict[str, str] = {v: k for k, v in EXTENSION_POINTS}


@dataclass(slots=True)
class PluginRef:
    """A plugin named in a PluginSet; weight 0 means "unset" (score plugins then use 1)."""

    name: str
    weight: int = 0


@dataclass(slots=True)
class PluginSet:
    enabled: list[PluginRef] = field(default_factory=list)
    disabled: list[PluginRef] = field(default_factory=list)

    def enabled_names(self) -> list[str]:
        return [p.name for p in self.enabled]

    def disabled_names(self) -> set[str]:
        return {p.name for p in self.disabled}

    def is_disabled(self, name: str) -> bool:
        """Whether ``name`` is disabled here (by name or by ``*``)."""
        return any(p.name == name or p.name == "*" for p in self.disabled)


@dataclass(slots=True)
class Plugins:
    pre_enqueue: PluginSet = field(default_factory=PluginSet)
    queue_sort: PluginSet = field(default_factory=PluginSet)
    pre_filter: PluginSet = field(default_factory=PluginSet)
    filter: PluginSet = field(default_factory=PluginSet)
    post_filter: PluginSet = field(default_factory=PluginSet)
    pre_score: PluginSet = field(default_factory=PluginSet)
    score: PluginSet = field(default_factory=PluginSet)
    reserve: PluginSet = field(default_factory=PluginSet)
    permit: PluginSet = field(default_factory=PluginSet)
    pre_bind: PluginSet = field(default_factory=PluginSet)
    bind: PluginSet = field(default_factory=PluginSet)
    post_bind: PluginSet = field(default_factory=PluginSet)
    multi_point: PluginSet = field(default_factory=PluginSet)

    def get(self, point: str) -> PluginSet:
        """The PluginSet of an extension point by attribute (``pre_filter``) or v1 name
        (``preFilter``)."""
        attr = EXTENSION_POINT_KEYS.get(point, point)
        if attr not in dict(EXTENSION_POINTS):
            raise KeyError(point)
        ps: PluginSet = getattr(self, attr)
        return ps

    def items(self) -> list[tuple[str, PluginSet]]:
        """(attribute name, PluginSet) for every extension point, multi_point last."""
        return [(attr, getattr(self, attr)) for attr, _ in EXTENSION_POINTS]

    def all_enabled_names(self) -> list[str]:
        """Every plugin enabled at any point (including multiPoint), first occurrence order."""
        seen: dict[str, None] = {}
        for _, ps in [("multi_point", self.multi_point)] + self.items()[:-1]:
            for p in ps.enabled:
                seen.setdefault(p.name, None)
        return list(seen)


@dataclass(slots=True)
class Profile:
    scheduler_name: str
    plugins: Plugins = field(default_factory=Plugins)
    # plugin name -> args (defaulted; see defaults.default_plugin_args)
    plugin_config: dict[str, dict[str, Any]] = field(default_factory=dict)
    percentage_of_nodes_to_score: int | None = None


@dataclass(slots=True)
class LeaderElectionConfig:
    leader_elect: bool = True
    lease_duration_seconds: float = 15.0
    renew_deadline_seconds: float = 10.0
    retry_period_seconds: float = 2.0
    resource_lock: str = "leases"
    resource_name: str = "py-scheduler"
    # "" = the namespace the scheduler runs in (POD_NAMESPACE or the service account's).
    resource_namespace: str = ""


@dataclass(slots=True)
class ClientConnectionConfig:
    qps: float = 50.0
    burst: int = 100
    kubeconfig: str = ""
    # JSON: objects stay plain dicts (upstream defaults to protobuf, which we do not speak)
    content_type: str = "application/json"
    accept_content_types: str = ""


# httpTimeout 0 (or unset) means this, as upstream's DefaultExtenderTimeout.
DEFAULT_EXTENDER_TIMEOUT_SECONDS = 5.0


@dataclass(slots=True)
class ExtenderTLSConfig:
    """v1 ExtenderTLSConfig; the ``*_data`` fields are the decoded bytes (base64 on the wire,
    as Go encodes ``[]byte``)."""

    insecure: bool = False
    server_name: str = ""
    cert_file: str = ""
    key_file: str = ""
    ca_file: str = ""
    cert_data: bytes = b""
    key_data: bytes = b""
    ca_data: bytes = b""


@dataclass(slots=True)
class ExtenderManagedResource:
    name: str
    # NodeResourcesFit does not check this resource (the extender accounts for it).
    ignored_by_scheduler: bool = False


@dataclass(slots=True)
class Extender:
    """One HTTP extender (v1 ``Extender``); the list is global, not per profile."""

    url_prefix: str = ""
    filter_verb: str = ""
    preempt_verb: str = ""
    prioritize_verb: str = ""
    weight: int = 0
    bind_verb: str = ""
    enable_https: bool = False
    tls_config: ExtenderTLSConfig | None = None
    http_timeout_seconds: float = DEFAULT_EXTENDER_TIMEOUT_SECONDS
    node_cache_capable: bool = False
    managed_resources: list[ExtenderManagedResource] = field(default_factory=list)
    ignorable: bool = False


@dataclass(slots=True)
class KubeSchedulerConfiguration:
    profiles: list[Profile] = field(default_factory=list)
    # 0 (upstream default) means adaptive; a profile's own value wins when set
    percentage_of_nodes_to_score: int | None = 0
    parallelism: int = 16
    pod_initial_backoff_seconds: int = 1
    pod_max_backoff_seconds: int = 10
    leader_election: LeaderElectionConfig = field(default_factory=LeaderElectionConfig)
    client_connection: ClientConnectionConfig = field(default_factory=ClientConnectionConfig)
    extenders: list[Extender] = field(default_factory=list)
    enable_profiling: bool = True
    enable_contention_profiling: bool = True
    delay_cache_until_active: bool = False

    def profile(self, scheduler_name: str) -> Profile | None:
        for p in self.profiles:
            if p.scheduler_name == scheduler_name:
                return p
        return None
