"""Render the Helm chart without a ``helm`` binary: ``helm template`` through the Helm engine
as a Python package (helm-python-sdk, Helm v4's Go SDK; ``pip install helm-python-sdk``), the
one the tests use. The manifests go to stdout, for ``kubectl apply -f -``::

    python deploy/helm/render.py py-scheduler deploy/helm/kube-py-scheduler -n kube-py-scheduler \\
        --set image.repository=registry.example.com/kube-py-scheduler > kube-py-scheduler.yaml

The arguments are ``helm template``'s: RELEASE CHART, ``-n/--namespace``, ``-f/--values FILE``
(repeatable), ``--set-json``, ``--set`` and ``--set-string`` (repeatable, merged in that
order over the files, as Helm merges them). The namespace is not created (``helm
--create-namespace`` does that; create it with kubectl first). See docs/deploy.md.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any


def _merge(into: dict[str, Any], values: dict[str, Any]) -> dict[str, Any]:
    """Helm's coalescing of values: maps merge key by key, anything else replaces."""
    for key, value in values.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into[key] = value
    return into


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python deploy/helm/render.py",
        description="helm template without helm: render the chart with helm-python-sdk")
    p.add_argument("release", help="the release name, as `helm install RELEASE`")
    p.add_argument("chart", type=Path,
                   help="the chart directory, e.g. deploy/helm/kube-py-scheduler")
    p.add_argument("-n", "--namespace", default="default", help="the release namespace")
    p.add_argument("-f", "--values", action="append", default=[], type=Path, metavar="FILE",
                   help="a values file (repeatable; later files win)")
    p.add_argument("--set", action="append", default=[], metavar="K=V",
                   help="a value, as helm --set (repeatable)")
    p.add_argument("--set-string", action="append", default=[], metavar="K=V",
                   help="a string value, as helm --set-string (repeatable)")
    p.add_argument("--set-json", action="append", default=[], metavar="K=JSON",
                   help="a JSON value, as helm --set-json (repeatable)")
    return p


def values(args: argparse.Namespace) -> dict[str, Any]:
    """The values of ``-f`` files and ``--set*`` flags; a bad one is a ``ValueError`` naming
    the flag and Helm's reason."""
    from helm_python import HelmError, parse_set_json, parse_set_string, \
        parse_set_string_values, values_from_yaml

    merged: dict[str, Any] = {}
    sources: list[tuple[str, str, Any]] = [
        *(("-f", str(f), lambda f=f: values_from_yaml(f.read_text())) for f in args.values),
        *(("--set-json", e, lambda e=e: parse_set_json(e)) for e in args.set_json),
        *(("--set", e, lambda e=e: parse_set_string(e)) for e in args.set),
        *(("--set-string", e, lambda e=e: parse_set_string_values(e)) for e in args.set_string),
    ]
    for flag, given, parse in sources:
        try:
            _merge(merged, parse())
        except (HelmError, OSError) as exc:
            raise ValueError(f"{flag} {given}: {exc}") from exc
    return merged


def render(args: argparse.Namespace) -> str:
    """The chart's manifests as one YAML stream, each headed by ``# Source:`` as
    ``helm template`` prints them (NOTES.txt left out)."""
    from helm_python import Chart, Config

    chart = Chart.load(args.chart)
    config = Config(namespace=args.namespace)
    try:
        rendered = config.render(chart, values(args), name=args.release,
                                 namespace=args.namespace, is_install=True)
    finally:
        config.close()
        chart.close()
    out = []
    for path, text in sorted(rendered.items()):
        if path.endswith("NOTES.txt") or not text.strip():
            continue
        out.append(f"---\n# Source: {path}\n{text.strip()}\n")
    return "".join(out)


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        import helm_python  # noqa: F401
    except ImportError:
        print("render.py needs the Helm engine: pip install helm-python-sdk", file=sys.stderr)
        return 2
    from helm_python import HelmError

    try:
        sys.stdout.write(render(args))
    except ValueError as exc:
        print(f"render.py: {exc}", file=sys.stderr)
        return 2
    except HelmError as exc:  # the chart does not load or render with these values
        print(f"render.py: {args.chart}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
