"""Reading KubeSchedulerConfiguration files (YAML or JSON) strictly, like kube-scheduler.

Unknown or duplicate fields, wrong types, a wrong apiVersion/kind and YAML syntax errors are
all reported as :class:`ConfigError` naming the file and the field path (or line/column).
After decoding, upstream v1 defaulting is applied and the result validated. Every problem is
reported, not the first (upstream's validation returns an aggregate of field errors): the
decoder records a field's error and goes on with that field's default, and the validation
errors of fields that did not decode are left out (they would only repeat them).
"""

from __future__ import annotations

import base64
import binascii
import os
import re
from collections.abc import Mapping
from typing import Any

import yaml

from scheduler.config.defaults import (
    DEFAULT_SCHEDULER_NAME,
    PLUGIN_ARGS_FIELDS,
    default_config,
    default_plugin_config,
    effective_plugins,
)
from scheduler.config.errors import ConfigError
from scheduler.config.types import (
    API_VERSION,
    EXTENSION_POINT_KEYS,
    KIND,
    ClientConnectionConfig,
    DEFAULT_EXTENDER_TIMEOUT_SECONDS,
    Extender,
    ExtenderManagedResource,
    ExtenderTLSConfig,
    KubeSchedulerConfiguration,
    LeaderElectionConfig,
    PluginRef,
    Plugins,
    PluginSet,
    Profile,
)
from scheduler.config.validate import validate_config

__all__ = [
    "ConfigError",
    "load_config_file",
    "parse_config",
    "parse_config_text",
    "parse_duration",
    "default_config",
]

_DURATION_UNITS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "μs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}
_DURATION_PART = re.compile(r"([0-9]*(?:\.[0-9]*)?)(ns|us|µs|μs|ms|s|m|h)")


def parse_duration(text: str) -> float:
    """Parse a Go duration string (``"15s"``, ``"1m30s"``, ``"1.5h"``, ``"0"``) into seconds.

    Raises ValueError on anything ``time.ParseDuration`` rejects.
    """
    if not isinstance(text, str):
        raise ValueError(f"must be a duration string like \"15s\", got {text!r}")
    s = text
    sign = 1.0
    if s[:1] in ("+", "-"):
        sign = -1.0 if s[0] == "-" else 1.0
        s = s[1:]
    if s == "0":
        return 0.0
    if not s:
        raise ValueError(f"invalid duration {text!r}")
    total = 0.0
    pos = 0
    while pos < len(s):
        m = _DURATION_PART.match(s, pos)
        if m is None or m.group(1) in ("", "."):
            raise ValueError(f"invalid duration {text!r} (expected e.g. \"15s\", \"1m30s\")")
        total += float(m.group(1)) * _DURATION_UNITS[m.group(2)]
        pos = m.end()
    return sign * total


# --- YAML with duplicate-key detection and positions --------------------------------------


class _StrictLoader(yaml.SafeLoader):
    pass


def _construct_mapping(loader: yaml.SafeLoader, node: yaml.MappingNode,
                       deep: bool = False) -> dict[Any, Any]:
    loader.flatten_mapping(node)
    out: dict[Any, Any] = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in out:
            mark = key_node.start_mark
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate field {key!r}", mark)
        out[key] = loader.construct_object(value_node, deep=deep)
    return out


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def parse_config_text(text: str, *, source: str = "<config>") -> KubeSchedulerConfiguration:
    """Parse YAML/JSON text; YAML errors name ``source:line:column``."""
    try:
        data = yaml.load(text, Loader=_StrictLoader)  # noqa: S506 - SafeLoader subclass
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = exc.problem or exc.context or "invalid YAML"
        raise ConfigError(source, [(where, f"YAML syntax error: {problem}")]) from None
    except yaml.YAMLError as exc:
        raise ConfigError(source, [("", f"YAML syntax error: {exc}")]) from None
    if data is None:
        raise ConfigError(source, [("", f"empty configuration: expected apiVersion "
                                        f"{API_VERSION}, kind {KIND}")])
    if not isinstance(data, Mapping):
        raise ConfigError(source, [("", "expected a KubeSchedulerConfiguration object, got "
                                        f"{type(data).__name__}")])
    return parse_config(data, source=source)


def load_config_file(path: str | os.PathLike[str]) -> KubeSchedulerConfiguration:
    """Read, decode, default and validate a config file."""
    source = os.fspath(path)
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(source, [("", f"cannot read config file: {exc}")]) from None
    return parse_config_text(text, source=source)


# --- strict decoding ---------------------------------------------------------------------


class _Decoder:
    """Decodes field by field, recording every error; a field that does not decode takes
    its zero value so decoding goes on (``errors`` decides the outcome)."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.errors: list[tuple[str, str]] = []

    def fail(self, path: str, msg: str) -> None:
        self.errors.append((path, msg))

    def failed(self, path: str) -> bool:
        """Whether ``path``, or a field inside it or around it, did not decode."""
        return any(_related(path, bad) for bad, _ in self.errors)

    def obj(self, v: Any, path: str, allowed: frozenset[str] | set[str]) -> Mapping[str, Any]:
        if v is None:
            return {}
        if not isinstance(v, Mapping):
            self.fail(path, f"must be an object, got {_type(v)}")
            return {}
        for k in v:
            if k not in allowed:
                p = f"{path}.{k}" if path else str(k)
                self.fail(p, "unknown field")
        return v

    def int_(self, v: Any, path: str) -> int:
        if isinstance(v, bool) or not isinstance(v, int):
            self.fail(path, f"must be an integer, got {v!r}")
            return 0
        if not -(2**31) <= v < 2**31:
            self.fail(path, f"must fit in a 32-bit integer, got {v}")
            return 0
        return v

    def float_(self, v: Any, path: str) -> float:
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            self.fail(path, f"must be a number, got {v!r}")
            return 0.0
        return float(v)

    def bool_(self, v: Any, path: str) -> bool:
        if not isinstance(v, bool):
            self.fail(path, f"must be true or false, got {v!r}")
            return False
        return v

    def str_(self, v: Any, path: str) -> str:
        if not isinstance(v, str):
            self.fail(path, f"must be a string, got {v!r}")
            return ""
        return v

    def duration(self, v: Any, path: str) -> float:
        try:
            return parse_duration(v)
        except ValueError as exc:
            self.fail(path, str(exc))
            return 0.0

    def list_(self, v: Any, path: str) -> list[Any]:
        if v is None:
            return []
        if not isinstance(v, list):
            self.fail(path, f"must be a list, got {_type(v)}")
            return []
        return v


def _related(path: str, other: str) -> bool:
    """``path`` is ``other``, inside it or around it (``a.b`` and ``a.b[0].c``)."""
    if not path or not other:
        return False
    short, long = sorted((path, other), key=len)
    return long == short or long.startswith((short + ".", short + "["))


def _type(v: Any) -> str:
    if isinstance(v, Mapping):
        return "an object"
    if isinstance(v, list):
        return "a list"
    if isinstance(v, str):
        return "a string"
    return type(v).__name__


_TOP_FIELDS = frozenset({
    "apiVersion", "kind", "parallelism", "leaderElection", "clientConnection",
    "enableProfiling", "enableContentionProfiling", "percentageOfNodesToScore",
    "podInitialBackoffSeconds", "podMaxBackoffSeconds", "profiles", "extenders",
    "delayCacheUntilActive",
})
_LE_FIELDS = frozenset({"leaderElect", "leaseDuration", "renewDeadline", "retryPeriod",
                        "resourceLock", "resourceName", "resourceNamespace"})
_CC_FIELDS = frozenset({"kubeconfig", "acceptContentTypes", "contentType", "qps", "burst"})
_PROFILE_FIELDS = frozenset({"schedulerName", "percentageOfNodesToScore", "plugins",
                             "pluginConfig"})
_PLUGIN_SET_FIELDS = frozenset({"enabled", "disabled"})
_PLUGIN_FIELDS = frozenset({"name", "weight"})
_PLUGIN_CONFIG_FIELDS = frozenset({"name", "args"})
_EXTENDER_FIELDS = frozenset({
    "urlPrefix", "filterVerb", "preemptVerb", "prioritizeVerb", "weight", "bindVerb",
    "enableHTTPS", "tlsConfig", "httpTimeout", "nodeCacheCapable", "managedResources",
    "ignorable",
})
_EXTENDER_TLS_FIELDS = frozenset({"insecure", "serverName", "certFile", "keyFile", "caFile",
                                  "certData", "keyData", "caData"})
_MANAGED_RESOURCE_FIELDS = frozenset({"name", "ignoredByScheduler"})
NODE_RESOURCES_FIT = "NodeResourcesFit"


def parse_config(data: Mapping[str, Any], *, source: str = "<config>"
                 ) -> KubeSchedulerConfiguration:
    """Decode a config mapping strictly, apply v1 defaults and validate.

    Raises :class:`ConfigError` naming ``source`` and the field path.
    """
    d = _Decoder(source)
    top = d.obj(data, "", _TOP_FIELDS)
    api_version = top.get("apiVersion")
    if api_version != API_VERSION:
        d.fail("apiVersion", f"must be {API_VERSION!r}, got {api_version!r}")
    if top.get("kind") != KIND:
        d.fail("kind", f"must be {KIND!r}, got {top.get('kind')!r}")
    if d.failed("apiVersion") or d.failed("kind") or not isinstance(data, Mapping):
        raise ConfigError(source, d.errors)  # another type: its fields mean nothing here

    cfg = KubeSchedulerConfiguration()
    if "parallelism" in top:
        cfg.parallelism = d.int_(top["parallelism"], "parallelism")
    if top.get("percentageOfNodesToScore") is not None:
        cfg.percentage_of_nodes_to_score = d.int_(top["percentageOfNodesToScore"],
                                                  "percentageOfNodesToScore")
    if "podInitialBackoffSeconds" in top:
        cfg.pod_initial_backoff_seconds = d.int_(top["podInitialBackoffSeconds"],
                                                 "podInitialBackoffSeconds")
    if "podMaxBackoffSeconds" in top:
        cfg.pod_max_backoff_seconds = d.int_(top["podMaxBackoffSeconds"],
                                             "podMaxBackoffSeconds")
    for key, attr in (("enableProfiling", "enable_profiling"),
                      ("enableContentionProfiling", "enable_contention_profiling"),
                      ("delayCacheUntilActive", "delay_cache_until_active")):
        if key in top:
            setattr(cfg, attr, d.bool_(top[key], key))
    cfg.leader_election = _leader_election(d, top.get("leaderElection"))
    cfg.client_connection = _client_connection(d, top.get("clientConnection"))
    cfg.extenders = [_extender(d, e, f"extenders[{i}]")
                     for i, e in enumerate(d.list_(top.get("extenders"), "extenders"))]

    raw_profiles = d.list_(top.get("profiles"), "profiles")
    profiles = [_profile(d, p, f"profiles[{i}]") for i, p in enumerate(raw_profiles)]
    if not profiles:
        profiles = [Profile(scheduler_name="")]
    # upstream names the profile only when there is exactly one (validation catches others)
    if len(profiles) == 1 and not _has_name(raw_profiles):
        profiles[0].scheduler_name = DEFAULT_SCHEDULER_NAME
    for prof in profiles:
        prof.plugin_config = default_plugin_config(effective_plugins(prof), prof.plugin_config)
    cfg.profiles = profiles
    apply_extender_ignored_resources(cfg)

    # A field that did not decode holds a zero value: its validation errors would repeat it.
    errors = [*d.errors, *((path, msg) for path, msg in validate_config(cfg)
                           if not d.failed(path))]
    if errors:
        raise ConfigError(source, errors)
    return cfg


def apply_extender_ignored_resources(cfg: KubeSchedulerConfiguration) -> None:
    """Managed resources marked ``ignoredByScheduler`` become NodeResourcesFit's
    ``ignoredResources`` in every profile that configures it, replacing what the profile
    set (upstream: the extenders' list takes precedence)."""
    ignored = [r.name for e in cfg.extenders for r in e.managed_resources
               if r.ignored_by_scheduler]
    if not ignored:
        return
    for prof in cfg.profiles:
        args = prof.plugin_config.get(NODE_RESOURCES_FIT)
        if args is not None:
            prof.plugin_config[NODE_RESOURCES_FIT] = {**args, "ignoredResources": ignored}


def _has_name(raw_profiles: list[Any]) -> bool:
    return bool(raw_profiles) and isinstance(raw_profiles[0], Mapping) and \
        raw_profiles[0].get("schedulerName") is not None


def _leader_election(d: _Decoder, raw: Any) -> LeaderElectionConfig:
    le = LeaderElectionConfig()
    obj = d.obj(raw, "leaderElection", _LE_FIELDS)
    if "leaderElect" in obj:
        le.leader_elect = d.bool_(obj["leaderElect"], "leaderElection.leaderElect")
    for key, attr in (("leaseDuration", "lease_duration_seconds"),
                      ("renewDeadline", "renew_deadline_seconds"),
                      ("retryPeriod", "retry_period_seconds")):
        if obj.get(key) is not None:
            setattr(le, attr, d.duration(obj[key], f"leaderElection.{key}"))
    for key, attr in (("resourceLock", "resource_lock"), ("resourceName", "resource_name"),
                      ("resourceNamespace", "resource_namespace")):
        if obj.get(key):
            setattr(le, attr, d.str_(obj[key], f"leaderElection.{key}"))
    return le


def _client_connection(d: _Decoder, raw: Any) -> ClientConnectionConfig:
    cc = ClientConnectionConfig()
    obj = d.obj(raw, "clientConnection", _CC_FIELDS)
    if obj.get("qps") is not None:
        cc.qps = d.float_(obj["qps"], "clientConnection.qps")
    if obj.get("burst") is not None:
        cc.burst = d.int_(obj["burst"], "clientConnection.burst")
    for key, attr in (("kubeconfig", "kubeconfig"), ("contentType", "content_type"),
                      ("acceptContentTypes", "accept_content_types")):
        if obj.get(key):
            setattr(cc, attr, d.str_(obj[key], f"clientConnection.{key}"))
    return cc


def _profile(d: _Decoder, raw: Any, path: str) -> Profile:
    obj = d.obj(raw, path, _PROFILE_FIELDS)
    name = obj.get("schedulerName")
    prof = Profile(scheduler_name="" if name is None else d.str_(name, f"{path}.schedulerName"))
    if obj.get("percentageOfNodesToScore") is not None:
        prof.percentage_of_nodes_to_score = d.int_(obj["percentageOfNodesToScore"],
                                                   f"{path}.percentageOfNodesToScore")
    prof.plugins = _plugins(d, obj.get("plugins"), f"{path}.plugins")
    seen: dict[str, int] = {}
    for j, pc in enumerate(d.list_(obj.get("pluginConfig"), f"{path}.pluginConfig")):
        pcp = f"{path}.pluginConfig[{j}]"
        pco = d.obj(pc, pcp, _PLUGIN_CONFIG_FIELDS)
        pname = d.str_(pco.get("name"), f"{pcp}.name")
        if not pname:
            if not d.failed(f"{pcp}.name"):
                d.fail(f"{pcp}.name", "required")
            continue
        if pname in seen:
            d.fail(f"{pcp}.name", f"duplicate value {pname!r} (also at "
                   f"{path}.pluginConfig[{seen[pname]}])")
            continue
        seen[pname] = j
        prof.plugin_config[pname] = _args(d, pname, pco.get("args"), f"{pcp}.args")
    return prof


def _args(d: _Decoder, name: str, raw: Any, path: str) -> dict[str, Any]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        d.fail(path, f"must be an object, got {_type(raw)}")
        return {}
    args = dict(raw)
    if "apiVersion" in args and args["apiVersion"] != API_VERSION:
        d.fail(f"{path}.apiVersion", f"must be {API_VERSION!r}, got {args['apiVersion']!r}")
    known = PLUGIN_ARGS_FIELDS.get(name)
    if known is not None:
        if "kind" in args and args["kind"] != f"{name}Args":
            d.fail(f"{path}.kind", f"must be {name + 'Args'!r}, got {args['kind']!r}")
        for k in args:
            if k not in known and k not in ("apiVersion", "kind"):
                d.fail(f"{path}.{k}", f"unknown field (known fields of {name}Args: "
                       f"{', '.join(sorted(known))})")
    args.pop("apiVersion", None)
    args.pop("kind", None)
    return args


def _plugins(d: _Decoder, raw: Any, path: str) -> Plugins:
    plugins = Plugins()
    obj = d.obj(raw, path, frozenset(EXTENSION_POINT_KEYS))
    for key, val in obj.items():
        if key not in EXTENSION_POINT_KEYS:
            continue  # reported as an unknown field
        pp = f"{path}.{key}"
        so = d.obj(val, pp, _PLUGIN_SET_FIELDS)
        ps = PluginSet(
            enabled=[_plugin_ref(d, p, f"{pp}.enabled[{i}]")
                     for i, p in enumerate(d.list_(so.get("enabled"), f"{pp}.enabled"))],
            disabled=[_plugin_ref(d, p, f"{pp}.disabled[{i}]")
                      for i, p in enumerate(d.list_(so.get("disabled"), f"{pp}.disabled"))],
        )
        setattr(plugins, EXTENSION_POINT_KEYS[key], ps)
    return plugins


def _plugin_ref(d: _Decoder, raw: Any, path: str) -> PluginRef:
    obj = d.obj(raw, path, _PLUGIN_FIELDS)
    name = d.str_(obj.get("name"), f"{path}.name")
    if not name and not d.failed(f"{path}.name"):
        d.fail(f"{path}.name", "required")
    weight = 0
    if obj.get("weight") is not None:
        w = obj["weight"]
        if isinstance(w, bool) or not isinstance(w, int) or w < 0:
            d.fail(f"{path}.weight", f"must be a positive integer, got {w!r}")
        else:
            weight = d.int_(w, f"{path}.weight")
    return PluginRef(name, weight)


def _extender(d: _Decoder, raw: Any, path: str) -> Extender:
    obj = d.obj(raw, path, _EXTENDER_FIELDS)
    ext = Extender()
    for key, attr in (("urlPrefix", "url_prefix"), ("filterVerb", "filter_verb"),
                      ("preemptVerb", "preempt_verb"), ("prioritizeVerb", "prioritize_verb"),
                      ("bindVerb", "bind_verb")):
        if obj.get(key) is not None:
            setattr(ext, attr, d.str_(obj[key], f"{path}.{key}"))
    for key, attr in (("enableHTTPS", "enable_https"), ("nodeCacheCapable", "node_cache_capable"),
                      ("ignorable", "ignorable")):
        if obj.get(key) is not None:
            setattr(ext, attr, d.bool_(obj[key], f"{path}.{key}"))
    if obj.get("weight") is not None:
        w = obj["weight"]
        # int64 in v1
        if isinstance(w, bool) or not isinstance(w, int) or not -(2**63) <= w < 2**63:
            d.fail(f"{path}.weight", f"must be a 64-bit integer, got {w!r}")
        else:
            ext.weight = w
    if obj.get("httpTimeout") is not None:
        timeout = d.duration(obj["httpTimeout"], f"{path}.httpTimeout")
        # 0 means the default, as upstream (NewHTTPExtender)
        ext.http_timeout_seconds = timeout if timeout != 0 else DEFAULT_EXTENDER_TIMEOUT_SECONDS
    if obj.get("tlsConfig") is not None:
        ext.tls_config = _extender_tls(d, obj["tlsConfig"], f"{path}.tlsConfig")
    for j, r in enumerate(d.list_(obj.get("managedResources"), f"{path}.managedResources")):
        rp = f"{path}.managedResources[{j}]"
        ro = d.obj(r, rp, _MANAGED_RESOURCE_FIELDS)
        name = d.str_(ro.get("name", ""), f"{rp}.name")
        ignored = ro.get("ignoredByScheduler")
        ext.managed_resources.append(ExtenderManagedResource(
            name, False if ignored is None else d.bool_(ignored, f"{rp}.ignoredByScheduler")))
    return ext


def _extender_tls(d: _Decoder, raw: Any, path: str) -> ExtenderTLSConfig:
    obj = d.obj(raw, path, _EXTENDER_TLS_FIELDS)
    tls = ExtenderTLSConfig()
    if obj.get("insecure") is not None:
        tls.insecure = d.bool_(obj["insecure"], f"{path}.insecure")
    for key, attr in (("serverName", "server_name"), ("certFile", "cert_file"),
                      ("keyFile", "key_file"), ("caFile", "ca_file")):
        if obj.get(key) is not None:
            setattr(tls, attr, d.str_(obj[key], f"{path}.{key}"))
    for key, attr in (("certData", "cert_data"), ("keyData", "key_data"), ("caData", "ca_data")):
        if obj.get(key) is not None:
            text = d.str_(obj[key], f"{path}.{key}")
            try:
                # Go encodes []byte as standard base64
                setattr(tls, attr, base64.b64decode(text, validate=True))
            except (binascii.Error, ValueError):
                d.fail(f"{path}.{key}", "must be base64-encoded (PEM bytes, as Go's []byte)")
    return tls
