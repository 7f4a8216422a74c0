"""Decoding of ``application/vnd.kubernetes.protobuf`` request bodies into the sandbox's dicts.

kubectl's typed commands (``kubectl create namespace|configmap|secret|deployment|...``) and
Helm's release storage (typed Secrets) send protobuf: client-go's typed clients ask for it,
and client-go falls back to JSON after a 415 only for CBOR, never for protobuf, so a server
that serves built-in kinds must read it. The envelope is the 4-byte magic ``k8s\\x00`` and a
``runtime.Unknown`` (typeMeta, raw, contentEncoding, contentType) whose ``raw`` is the object.

Protobuf carries field numbers, not names, so each decodable message has a table below
(numbers from the k8s.io/api and apimachinery ``generated.proto`` files). The tables cover
what those clients send: the kinds of the ``kubectl create`` subcommands the sandbox serves,
the pod template of workloads and DeleteOptions. A kind without a table, or a field number a
table does not know, is a 415 naming it: decoding only part of an object would store
something the client did not send.

Go's protobuf marshaller writes every non-pointer field, zero values included, where JSON
omits them (``omitempty``); fields decoded to their zero value are dropped unless the table
marks them as pointers (``replicas: 0`` means something, ``hostNetwork: false`` does not).
"""

from __future__ import annotations

import base64
import datetime as dt
from dataclasses import dataclass
from typing import Any

from .errors import ApiError

MAGIC = b"k8s\x00"
PROTOBUF = "application/vnd.kubernetes.protobuf"
ACCEPTED = "application/json, application/yaml, application/vnd.kubernetes.protobuf"

Obj = dict[str, Any]


@dataclass(frozen=True)
class F:
    """One field: JSON name, type (``str``, ``bytes``, ``int``, ``bool``, ``time``,
    ``quantity``, ``intstr``, or a message name), repeated, map value type, pointer."""

    name: str
    type: str
    repeated: bool = False
    map: bool = False
    pointer: bool = False


def _s(name: str) -> F:
    return F(name, "str")


def _rs(name: str) -> F:
    return F(name, "str", repeated=True)


def _i(name: str, *, pointer: bool = False) -> F:
    return F(name, "int", pointer=pointer)


def _b(name: str, *, pointer: bool = False) -> F:
    return F(name, "bool", pointer=pointer)


def _m(name: str, msg: str, *, repeated: bool = False) -> F:
    return F(name, msg, repeated=repeated)


def _map(name: str, value: str = "str") -> F:
    return F(name, value, map=True)


_POD_TEMPLATE_OWNER = {1: _m("metadata", "ObjectMeta"), 2: _m("spec", "PodSpec")}

MESSAGES: dict[str, dict[int, F]] = {
    # k8s.io/apimachinery
    "Unknown": {1: _m("typeMeta", "TypeMeta"), 2: F("raw", "rawbytes"), 3: _s("contentEncoding"),
                4: _s("contentType")},
    "TypeMeta": {1: _s("apiVersion"), 2: _s("kind")},
    "ObjectMeta": {
        1: _s("name"), 2: _s("generateName"), 3: _s("namespace"), 4: _s("selfLink"), 5: _s("uid"),
        6: _s("resourceVersion"), 7: _i("generation"), 8: F("creationTimestamp", "time"),
        9: F("deletionTimestamp", "time"), 10: _i("deletionGracePeriodSeconds", pointer=True),
        11: _map("labels"), 12: _map("annotations"), 13: _m("ownerReferences", "OwnerReference", repeated=True),
        14: _rs("finalizers"),
    },
    "OwnerReference": {1: _s("kind"), 3: _s("name"), 4: _s("uid"), 5: _s("apiVersion"),
                       6: _b("controller", pointer=True), 7: _b("blockOwnerDeletion", pointer=True)},
    "LabelSelector": {1: _map("matchLabels"), 2: _m("matchExpressions", "LabelSelectorRequirement", repeated=True)},
    "LabelSelectorRequirement": {1: _s("key"), 2: _s("operator"), 3: _rs("values")},
    "DeleteOptions": {1: _i("gracePeriodSeconds", pointer=True), 2: _m("preconditions", "Preconditions"),
                      3: _b("orphanDependents", pointer=True), 4: _s("propagationPolicy"), 5: _rs("dryRun"),
                      6: _b("ignoreStoreReadErrorWithClusterBreakingPotential", pointer=True)},
    "Preconditions": {1: _s("uid"), 2: _s("resourceVersion")},
    # core/v1
    "Namespace": {1: _m("metadata", "ObjectMeta"), 2: _m("spec", "NamespaceSpec"), 3: _m("status", "NamespaceStatus")},
    "NamespaceSpec": {1: _rs("finalizers")},
    "NamespaceStatus": {1: _s("phase")},
    "ConfigMap": {1: _m("metadata", "ObjectMeta"), 2: _map("data"), 3: _map("binaryData", "bytes"),
                  4: _b("immutable", pointer=True)},
    "Secret": {1: _m("metadata", "ObjectMeta"), 2: _map("data", "bytes"), 3: _s("type"), 4: _map("stringData"),
               5: _b("immutable", pointer=True)},
    "ServiceAccount": {1: _m("metadata", "ObjectMeta"), 2: _m("secrets", "ObjectReference", repeated=True),
                       3: _m("imagePullSecrets", "LocalObjectReference", repeated=True),
                       4: _b("automountServiceAccountToken", pointer=True)},
    "ObjectReference": {1: _s("kind"), 2: _s("namespace"), 3: _s("name"), 4: _s("uid"), 5: _s("apiVersion"),
                        6: _s("resourceVersion"), 7: _s("fieldPath")},
    "LocalObjectReference": {1: _s("name")},
    "PodTemplateSpec": _POD_TEMPLATE_OWNER,
    "PodSpec": {
        1: _m("volumes", "Volume", repeated=True), 2: _m("containers", "Container", repeated=True),
        3: _s("restartPolicy"), 4: _i("terminationGracePeriodSeconds", pointer=True),
        5: _i("activeDeadlineSeconds", pointer=True), 6: _s("dnsPolicy"), 7: _map("nodeSelector"),
        8: _s("serviceAccountName"), 9: _s("serviceAccount"), 10: _s("nodeName"), 11: _b("hostNetwork"),
        12: _b("hostPID"), 13: _b("hostIPC"), 14: _m("securityContext", "PodSecurityContext"),
        15: _m("imagePullSecrets", "LocalObjectReference", repeated=True), 16: _s("hostname"),
        17: _s("subdomain"), 19: _s("schedulerName"), 20: _m("initContainers", "Container", repeated=True),
        21: _b("automountServiceAccountToken", pointer=True), 22: _m("tolerations", "Toleration", repeated=True),
        24: _s("priorityClassName"), 25: _i("priority", pointer=True), 27: _b("shareProcessNamespace", pointer=True),
        29: _s("runtimeClassName", ), 30: _b("enableServiceLinks", pointer=True), 31: _s("preemptionPolicy"),
        35: _b("setHostnameAsFQDN", pointer=True), 37: _b("hostUsers", pointer=True),
        38: _m("schedulingGates", "PodSchedulingGate", repeated=True),
    },
    "PodSecurityContext": {2: _i("runAsUser", pointer=True), 3: _b("runAsNonRoot", pointer=True),
                           4: F("supplementalGroups", "int", repeated=True), 5: _i("fsGroup", pointer=True),
                           6: _i("runAsGroup", pointer=True)},
    "PodSchedulingGate": {1: _s("name")},
    "Toleration": {1: _s("key"), 2: _s("operator"), 3: _s("value"), 4: _s("effect"),
                   5: _i("tolerationSeconds", pointer=True)},
    "Volume": {1: _s("name"), 2: _m("volumeSource", "VolumeSource")},  # VolumeSource is inlined in JSON
    "VolumeSource": {2: _m("emptyDir", "EmptyDirVolumeSource"), 6: _m("secret", "SecretVolumeSource"),
                     10: _m("persistentVolumeClaim", "PVCVolumeSource"),
                     19: _m("configMap", "ConfigMapVolumeSource")},
    "EmptyDirVolumeSource": {1: _s("medium"), 2: F("sizeLimit", "quantity")},
    "SecretVolumeSource": {1: _s("secretName"), 3: _i("defaultMode", pointer=True), 4: _b("optional", pointer=True)},
    "ConfigMapVolumeSource": {1: _m("localObjectReference", "LocalObjectReference"),
                              3: _i("defaultMode", pointer=True), 4: _b("optional", pointer=True)},
    "PVCVolumeSource": {1: _s("claimName"), 2: _b("readOnly")},
    "Container": {
        1: _s("name"), 2: _s("image"), 3: _rs("command"), 4: _rs("args"), 5: _s("workingDir"),
        6: _m("ports", "ContainerPort", repeated=True), 7: _m("env", "EnvVar", repeated=True),
        8: _m("resources", "ResourceRequirements"), 9: _m("volumeMounts", "VolumeMount", repeated=True),
        13: _s("terminationMessagePath"), 14: _s("imagePullPolicy"), 16: _b("stdin"), 17: _b("stdinOnce"),
        18: _b("tty"), 20: _s("terminationMessagePolicy"), 24: _s("restartPolicy"),
    },
    "ContainerPort": {1: _s("name"), 2: _i("hostPort"), 3: _i("containerPort"), 4: _s("protocol"), 5: _s("hostIP")},
    "EnvVar": {1: _s("name"), 2: _s("value")},
    "ResourceRequirements": {1: _map("limits", "quantity"), 2: _map("requests", "quantity")},
    "VolumeMount": {1: _s("name"), 2: _b("readOnly"), 3: _s("mountPath"), 4: _s("subPath")},
    "Service": {1: _m("metadata", "ObjectMeta"), 2: _m("spec", "ServiceSpec"), 3: _m("status", "Ignored")},
    "ServiceSpec": {1: _m("ports", "ServicePort", repeated=True), 2: _map("selector"), 3: _s("clusterIP"),
                    4: _s("type"), 5: _rs("externalIPs"), 7: _s("sessionAffinity"), 8: _s("loadBalancerIP"),
                    9: _rs("loadBalancerSourceRanges"), 10: _s("externalName"), 11: _s("externalTrafficPolicy"),
                    12: _i("healthCheckNodePort"), 13: _b("publishNotReadyAddresses"), 17: _s("ipFamilyPolicy"),
                    18: _rs("clusterIPs"), 19: _rs("ipFamilies"), 20: _b("allocateLoadBalancerNodePorts", pointer=True),
                    21: _s("loadBalancerClass"), 22: _s("internalTrafficPolicy"), 23: _s("trafficDistribution")},
    "ServicePort": {1: _s("name"), 2: _s("protocol"), 3: _i("port"), 4: F("targetPort", "intstr"), 5: _i("nodePort"),
                    6: _s("appProtocol")},
    # statuses are written by controllers; what a client sends on create is discarded anyway
    "Ignored": {},
    "Binding": {1: _m("metadata", "ObjectMeta"), 2: _m("target", "ObjectReference")},
    "Eviction": {1: _m("metadata", "ObjectMeta"), 2: _m("deleteOptions", "DeleteOptions")},
    # apps/v1
    "Deployment": {1: _m("metadata", "ObjectMeta"), 2: _m("spec", "DeploymentSpec"), 3: _m("status", "Ignored")},
    "DeploymentSpec": {1: _i("replicas", pointer=True), 2: _m("selector", "LabelSelector"),
                       3: _m("template", "PodTemplateSpec"), 4: _m("strategy", "DeploymentStrategy"),
                       5: _i("minReadySeconds"), 6: _i("revisionHistoryLimit", pointer=True), 7: _b("paused"),
                       9: _i("progressDeadlineSeconds", pointer=True)},
    "DeploymentStrategy": {1: _s("type"), 2: _m("rollingUpdate", "RollingUpdateDeployment")},
    "RollingUpdateDeployment": {1: F("maxUnavailable", "intstr"), 2: F("maxSurge", "intstr")},
    # batch/v1
    "Job": {1: _m("metadata", "ObjectMeta"), 2: _m("spec", "JobSpec"), 3: _m("status", "Ignored")},
    "JobSpec": {1: _i("parallelism", pointer=True), 2: _i("completions", pointer=True),
                3: _i("activeDeadlineSeconds", pointer=True), 4: _m("selector", "LabelSelector"),
                5: _b("manualSelector", pointer=True), 6: _m("template", "PodTemplateSpec"),
                7: _i("backoffLimit", pointer=True), 8: _i("ttlSecondsAfterFinished", pointer=True),
                9: _s("completionMode"), 10: _b("suspend", pointer=True)},
    "CronJob": {1: _m("metadata", "ObjectMeta"), 2: _m("spec", "CronJobSpec"), 3: _m("status", "Ignored")},
    "CronJobSpec": {1: _s("schedule"), 2: _i("startingDeadlineSeconds", pointer=True), 3: _s("concurrencyPolicy"),
                    4: _b("suspend", pointer=True), 5: _m("jobTemplate", "JobTemplateSpec"),
                    6: _i("successfulJobsHistoryLimit", pointer=True), 7: _i("failedJobsHistoryLimit", pointer=True),
                    8: _s("timeZone")},
    "JobTemplateSpec": {1: _m("metadata", "ObjectMeta"), 2: _m("spec", "JobSpec")},
    # scheduling.k8s.io/v1
    "PriorityClass": {1: _m("metadata", "ObjectMeta"), 2: _i("value"), 3: _b("globalDefault"), 4: _s("description"),
                      5: _s("preemptionPolicy")},
    # policy/v1
    "PodDisruptionBudget": {1: _m("metadata", "ObjectMeta"), 2: _m("spec", "PodDisruptionBudgetSpec"),
                            3: _m("status", "Ignored")},
    "PodDisruptionBudgetSpec": {1: F("minAvailable", "intstr"), 2: _m("selector", "LabelSelector"),
                                3: F("maxUnavailable", "intstr"), 4: _s("unhealthyPodEvictionPolicy")},
    # rbac.authorization.k8s.io/v1
    "Role": {1: _m("metadata", "ObjectMeta"), 2: _m("rules", "PolicyRule", repeated=True)},
    "ClusterRole": {1: _m("metadata", "ObjectMeta"), 2: _m("rules", "PolicyRule", repeated=True)},
    "PolicyRule": {1: _rs("verbs"), 2: _rs("apiGroups"), 3: _rs("resources"), 4: _rs("resourceNames"),
                   5: _rs("nonResourceURLs")},
    "RoleBinding": {1: _m("metadata", "ObjectMeta"), 2: _m("subjects", "Subject", repeated=True),
                    3: _m("roleRef", "RoleRef")},
    "ClusterRoleBinding": {1: _m("metadata", "ObjectMeta"), 2: _m("subjects", "Subject", repeated=True),
                           3: _m("roleRef", "RoleRef")},
    "Subject": {1: _s("kind"), 2: _s("apiGroup"), 3: _s("name"), 4: _s("namespace")},
    "RoleRef": {1: _s("apiGroup"), 2: _s("kind"), 3: _s("name")},
}

# Fields whose message is inlined into the parent in JSON (Go's ``json:",inline"``).
_INLINE = {("Volume", "volumeSource"), ("ConfigMapVolumeSource", "localObjectReference")}
# Top-level kinds decodable from a request body, by (apiVersion, kind).
KINDS = {
    ("v1", "Namespace"), ("v1", "ConfigMap"), ("v1", "Binding"), ("policy/v1", "Eviction"), ("v1", "Secret"), ("v1", "ServiceAccount"), ("v1", "Service"),
    ("apps/v1", "Deployment"), ("batch/v1", "Job"), ("batch/v1", "CronJob"),
    ("scheduling.k8s.io/v1", "PriorityClass"), ("policy/v1", "PodDisruptionBudget"),
    ("rbac.authorization.k8s.io/v1", "Role"), ("rbac.authorization.k8s.io/v1", "ClusterRole"),
    ("rbac.authorization.k8s.io/v1", "RoleBinding"), ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"),
}


class ProtobufError(ValueError):
    pass


def _varint(buf: bytes, i: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        if i >= len(buf):
            raise ProtobufError("truncated varint")
        b = buf[i]
        i += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, i
        shift += 7
        if shift > 63:
            raise ProtobufError("varint too long")


def fields(buf: bytes) -> list[tuple[int, int | bytes]]:
    """(field number, value) pairs of one message: varints as int, length-delimited as bytes."""
    out: list[tuple[int, int | bytes]] = []
    i, n = 0, len(buf)
    while i < n:
        key, i = _varint(buf, i)
        num, wire = key >> 3, key & 7
        if wire == 0:
            v, i = _varint(buf, i)
            out.append((num, v))
        elif wire == 2:
            ln, i = _varint(buf, i)
            if i + ln > n:
                raise ProtobufError("truncated length-delimited field")
            out.append((num, buf[i:i + ln]))
            i += ln
        elif wire == 1:
            i += 8
            out.append((num, 0))
        elif wire == 5:
            i += 4
            out.append((num, 0))
        else:
            raise ProtobufError(f"unsupported wire type {wire}")
    return out


def _signed(v: int) -> int:
    return v - (1 << 64) if v >= 1 << 63 else v


def _scalar(f: F, v: int | bytes, path: str) -> Any:
    t = f.type
    if t in ("str", "bytes", "rawbytes", "quantity"):
        if not isinstance(v, bytes):
            raise ProtobufError(f"{path}: expected a length-delimited value")
        if t == "bytes":
            return base64.b64encode(v).decode()
        if t == "rawbytes":
            return v
        if t == "quantity":
            return _decode_quantity(v, path)
        return v.decode("utf-8")
    if t == "int":
        if isinstance(v, bytes):  # packed repeated ints
            vals, i = [], 0
            while i < len(v):
                x, i = _varint(v, i)
                vals.append(_signed(x))
            return vals
        return _signed(v)
    if t == "bool":
        if isinstance(v, bytes):
            raise ProtobufError(f"{path}: expected a varint")
        return bool(v)
    if not isinstance(v, bytes):
        raise ProtobufError(f"{path}: expected a message")
    if t == "time":
        secs = nanos = 0
        for num, tv in fields(v):
            if num == 1 and isinstance(tv, int):
                secs = _signed(tv)
            elif num == 2 and isinstance(tv, int):
                nanos = _signed(tv)
        if not secs and not nanos:
            return None
        return dt.datetime.fromtimestamp(secs, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    if t == "intstr":
        kind, ival, sval = 0, 0, ""
        for num, iv in fields(v):
            if num == 1 and isinstance(iv, int):
                kind = iv
            elif num == 2 and isinstance(iv, int):
                ival = _signed(iv)
            elif num == 3 and isinstance(iv, bytes):
                sval = iv.decode("utf-8")
        return sval if kind == 1 else ival
    return decode_message(t, v, path)


def _decode_quantity(v: bytes, path: str) -> str:
    for num, x in fields(v):
        if num == 1 and isinstance(x, bytes):
            return x.decode("utf-8")
    raise ProtobufError(f"{path}: empty quantity")


def _zero(x: Any) -> bool:
    return x is None or x == "" or x == 0 or x is False or x == []


def decode_message(name: str, buf: bytes, path: str = "") -> Obj:
    table = MESSAGES[name]
    out: Obj = {}
    if name == "Ignored":
        return out
    for num, v in fields(buf):
        f = table.get(num)
        fpath = f"{path}.{f.name}" if f and path else (f.name if f else path)
        if f is None:
            raise ProtobufError(f"field number {num} of {name} ({path or 'object'}) is not supported")
        if f.map:
            if not isinstance(v, bytes):
                raise ProtobufError(f"{fpath}: expected a map entry")
            key, val = "", None
            for n2, x in fields(v):
                if n2 == 1 and isinstance(x, bytes):
                    key = x.decode("utf-8")
                elif n2 == 2:
                    val = _scalar(F(f.name, f.type), x, f"{fpath}[{key}]")
            if val is None:
                val = "" if f.type in ("str", "bytes") else val
            out.setdefault(f.name, {})[key] = val
            continue
        val = _scalar(f, v, fpath)
        if f.repeated:
            lst = out.setdefault(f.name, [])
            if isinstance(val, list):
                lst.extend(val)
            else:
                lst.append(val)
        elif (name, f.name) in _INLINE and isinstance(val, dict):
            out.update(val)
        elif f.pointer or not _zero(val):
            out[f.name] = val
    return out


def decode_body(raw: bytes, *, kind_hint: str = "") -> Obj:
    """The object inside a protobuf request body (``k8s\\x00`` + runtime.Unknown), as a dict
    with apiVersion and kind. Raises ``ApiError`` 415 for what cannot be decoded."""
    if not raw.startswith(MAGIC):
        raise ApiError(400, "BadRequest", "the body of the request could not be decoded: "
                       "protobuf body does not start with the k8s magic prefix")
    try:
        env = decode_message("Unknown", raw[len(MAGIC):])
        tm = env.get("typeMeta") or {}
        api_version, kind = str(tm.get("apiVersion", "")), str(tm.get("kind", "") or kind_hint)
        if env.get("contentEncoding"):
            raise ProtobufError(f"content encoding {env['contentEncoding']!r} is not supported")
        if (api_version, kind) not in KINDS and kind not in ("DeleteOptions",):
            raise ApiError(415, "UnsupportedMediaType",
                           f"the body of the request was in an unknown format - accepted media types include: "
                           f"application/json, application/yaml (the sandbox decodes protobuf only for "
                           f"{', '.join(sorted(k for _, k in KINDS))} and DeleteOptions; got {kind or 'no kind'} "
                           f"{api_version})")
        obj = decode_message(kind, env.get("raw", b""))
    except ProtobufError as e:
        raise ApiError(415, "UnsupportedMediaType",
                       f"the body of the request was in an unknown format - accepted media types include: "
                       f"application/json, application/yaml (protobuf {kind_hint or 'object'}: {e})") from None
    except UnicodeDecodeError as e:
        raise ApiError(400, "BadRequest", f"the body of the request could not be decoded: {e}") from None
    if kind != "DeleteOptions":
        obj = {"apiVersion": api_version, "kind": kind, **obj}
    return obj
