"""``kube-py-scheduler explain POD``: why is this pod Pending, and where would it go?

Bad input (a pod that does not exist, a pod of another scheduler, an unreadable config or
pod file, no usable kubeconfig) is one clear line on stderr and exit status 2.  Whether the
pod fits or not, a completed explanation exits 0.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence
from typing import Any, TextIO

import yaml

from scheduler.exit_codes import EXIT_OK, EXIT_USAGE
from scheduler.explain.render import FORMATS, render



class ExplainError(Exception):
    """Bad input: printed as one line, exit status 2."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("pod", nargs="?", help="the pod's name (omit with --pod-file)")
    parser.add_argument("-n", "--namespace", default=None,
                        help="the pod's namespace (default: the kubeconfig context's, "
                        "else default)")
    parser.add_argument("--pod-file", help="explain this pod manifest (YAML or JSON) instead "
                        "of an existing pod: would it fit, and where?")
    parser.add_argument("--config", help="the scheduler's KubeSchedulerConfiguration file "
                        "(default: the shipped configuration)")
    parser.add_argument("--profile", help="explain with this profile instead of the pod's "
                        "spec.schedulerName")
    parser.add_argument("--kubeconfig", help="kubeconfig file (default: in-cluster, then "
                        "$KUBECONFIG, then ~/.kube/config)")
    parser.add_argument("--context", help="kubeconfig context to use")
    parser.add_argument("-o", "--output", choices=FORMATS, default="table")
    parser.add_argument("--from-scheduler", metavar="URL",
                        help="also show the running scheduler's own last diagnosis of the pod "
                        "(its /debug/pods endpoint, e.g. https://127.0.0.1:10259)")
    parser.add_argument("--token", help="bearer token for --from-scheduler")
    parser.add_argument("--ca-file", help="CA bundle to verify --from-scheduler's certificate")
    parser.add_argument("--insecure-skip-tls-verify", action="store_true",
                        help="do not verify --from-scheduler's certificate")
    parser.add_argument("--sync-timeout", type=float, default=60.0,
                        help="seconds to wait for the cluster's objects to be listed")


def parser() -> argparse.ArgumentParser:
    """The command's own parser (the CLI adds the same arguments to its subcommand)."""
    p = argparse.ArgumentParser(prog="kube-py-scheduler explain")
    add_arguments(p)
    return p


async def explain_and_print(
    args: argparse.Namespace, *, stdout: TextIO | None = None, stderr: TextIO | None = None
) -> int:
    """Run the command; the answer on stdout, bad input as one line on stderr (exit 2)."""
    out = stdout or sys.stdout
    err = stderr or sys.stderr
    try:
        text = await run(args)
    except ExplainError as exc:
        print(f"kube-py-scheduler explain: {exc}", file=err)
        return EXIT_USAGE
    out.write(text)
    return EXIT_OK


async def amain(
    argv: Sequence[str], *, stdout: TextIO | None = None, stderr: TextIO | None = None
) -> int:
    """The command inside a running event loop (tests call this next to their sandbox)."""
    try:
        args = parser().parse_args(list(argv))
    except SystemExit as exc:  # argparse printed the usage error
        return int(exc.code or 0)
    return await explain_and_print(args, stdout=stdout, stderr=stderr)


async def run(args: argparse.Namespace) -> str:
    """Everything but printing; raises ExplainError for bad input."""
    from scheduler.app import StartupError, installed_registry, validate_profiles
    from scheduler.client.connection import ConfigurationError, load_connection
    from scheduler.config.defaults import shipped_config
    from scheduler.config.errors import ConfigError
    from scheduler.config.load import load_config_file

    if not args.pod and not args.pod_file:
        raise ExplainError("name a pod, or give --pod-file")
    if args.pod and args.pod_file:
        raise ExplainError("give a pod name or --pod-file, not both")
    if args.pod_file and args.from_scheduler:
        raise ExplainError("--from-scheduler needs an existing pod: the scheduler has never "
                           "seen a --pod-file pod")
    try:
        config = load_config_file(args.config) if args.config else shipped_config()
    except ConfigError as exc:
        raise ExplainError(str(exc)) from exc
    except OSError as exc:
        raise ExplainError(f"--config: cannot read {args.config!r}: {exc.strerror}") from exc
    try:
        # The daemon's registry: in-tree plus installed out-of-tree plugins.
        registry = installed_registry()
        validate_profiles(config, registry, source=args.config or "<shipped config>")
    except StartupError as exc:
        raise ExplainError(str(exc)) from exc
    pod_from_file = read_pod_file(args.pod_file) if args.pod_file else None
    try:
        connection = load_connection(kubeconfig=args.kubeconfig, context=args.context)
    except ConfigurationError as exc:
        raise ExplainError(f"cannot configure the API connection: {exc}") from exc
    namespace = args.namespace or connection.namespace or "default"
    if pod_from_file is not None:
        meta = pod_from_file["metadata"]
        meta["namespace"] = args.namespace or meta.get("namespace") or namespace
    return await _explain(args, config, registry, connection, namespace, pod_from_file)


async def _explain(
    args: argparse.Namespace,
    config: Any,
    registry: Any,
    connection: Any,
    namespace: str,
    pod_from_file: dict[str, Any] | None,
) -> str:
    from scheduler.client.api import ApiConnectionError, ApiError
    from scheduler.explain.cluster import ClusterUnavailable, get_pod, load_cluster
    from scheduler.explain.engine import explain_pod
    from scheduler.objects.errors import ObjectError

    try:
        async with load_cluster(connection, config, registry=registry,
                                sync_timeout=args.sync_timeout) as loaded:
            sched = loaded.scheduler
            if pod_from_file is not None:
                pod = pod_from_file
                where = args.pod_file
            else:
                found = await get_pod(loaded.client, namespace, args.pod)
                if found is None:
                    raise ExplainError(f"pod {namespace}/{args.pod} not found")
                pod = found
                where = f"pod {namespace}/{args.pod}"
            fwk = _framework_for(sched, pod, args.profile, where)
            node = str((pod.get("spec") or {}).get("nodeName") or "")
            if node:
                raise ExplainError(f"{where} is already bound to node {node}: nothing to explain")
            try:
                explanation = await explain_pod(sched, fwk, pod)
            except ObjectError as exc:
                raise ExplainError(f"{where} is malformed: {exc}") from exc
            daemon = None
            if args.from_scheduler and pod_from_file is None:
                from scheduler.explain.remote import fetch_daemon_diagnosis

                daemon = await fetch_daemon_diagnosis(
                    args.from_scheduler, namespace, args.pod, token=args.token,
                    ca_file=args.ca_file, insecure=args.insecure_skip_tls_verify,
                )
    except ClusterUnavailable as exc:
        raise ExplainError(str(exc)) from exc
    except (ApiConnectionError, ApiError) as exc:
        raise ExplainError(f"cannot read the cluster: {exc}") from exc
    return render(explanation, args.output, daemon=daemon)


def _framework_for(sched: Any, pod: dict[str, Any], profile: str | None, where: str) -> Any:
    """The pod's profile, or ``--profile``; a pod of another scheduler is bad input unless a
    profile is named."""
    names = ", ".join(sorted(sched.profiles))
    if profile:
        fwk = sched.profiles.get(profile)
        if fwk is None:
            raise ExplainError(f"--profile {profile!r}: no such profile in the configuration "
                               f"(profiles: {names})")
        return fwk
    wanted = str((pod.get("spec") or {}).get("schedulerName") or "default-scheduler")
    fwk = sched.profiles.get(wanted)
    if fwk is None:
        raise ExplainError(
            f"{where} is for scheduler {wanted!r}, not one of this configuration's profiles "
            f"({names}); explain it with one of them with --profile NAME"
        )
    return fwk


def read_pod_file(path: str) -> dict[str, Any]:
    """A Pod manifest as the API server would hold it before scheduling (a uid, no node)."""
    try:
        with open(path, encoding="utf-8") as f:
            obj = yaml.safe_load(f)
    except OSError as exc:
        raise ExplainError(f"--pod-file: cannot read {path!r}: {exc.strerror}") from exc
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        problem = getattr(exc, "problem", None) or "syntax error"
        raise ExplainError(f"--pod-file {path}: not valid YAML{where}: {problem}") from exc
    if not isinstance(obj, dict) or obj.get("kind", "Pod") != "Pod":
        raise ExplainError(f"--pod-file {path}: expected one Pod object")
    meta = obj.get("metadata")
    if not isinstance(meta, dict) or not (meta.get("name") or meta.get("generateName")):
        raise ExplainError(f"--pod-file {path}: metadata.name is required")
    if not isinstance(obj.get("spec"), dict):
        raise ExplainError(f"--pod-file {path}: spec is required")
    if (obj["spec"]).get("nodeName"):
        raise ExplainError(f"--pod-file {path}: spec.nodeName is set; the pod needs no scheduler")
    meta["name"] = meta.get("name") or f"{meta['generateName']}explain"
    # Never equal to a real pod's uid, so the pod is not mistaken for one in the cache.
    meta["uid"] = f"explain-{meta['name']}"
    obj["status"] = {}
    return obj
