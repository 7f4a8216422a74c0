"""``kube-py-scheduler plugins``: every registered plugin, where it comes from, what it
implements, and which profiles of the active configuration enable it.

The registry is the daemon's own (in-tree plugins plus installed ``kube_py_scheduler.plugins``
entry points) and "enabled" is what the daemon would run: each profile of ``--config`` (or
the built-in default) is turned into its plugins offline, so a broken plugin or config is
reported here exactly as ``run`` would report it (exit 2). A plugin is enabled in a profile
when the framework runs it at one extension point or more; one that is built (e.g. named in
multiPoint) but disabled at every point it implements, like PrioritySort once Coscheduling
is the profile's one queue sort, is not.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from scheduler.cli.common import Command, print_error, setup_logging
from scheduler.exit_codes import EXIT_OK, EXIT_USAGE

if TYPE_CHECKING:
    from scheduler.config.types import KubeSchedulerConfiguration
    from scheduler.framework.registry import Registry


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", help="KubeSchedulerConfiguration whose profiles decide "
                        "ENABLED (default: the built-in default configuration)")
    parser.add_argument("-o", "--output", choices=("table", "json"), default="table",
                        help="output format (default %(default)s)")


def plugin_rows(config: KubeSchedulerConfiguration, registry: Registry) -> list[dict[str, Any]]:
    """One row per registered plugin: name, origin, the extension points it implements, the
    profiles that run it and, per profile, the points it runs at (the framework's lists)."""
    from scheduler.framework.registry import extension_points_of
    from scheduler.framework.runtime import Framework
    from scheduler.offline import offline_handle_kwargs

    runs_at: dict[str, dict[str, list[str]]] = {}
    built: dict[str, list[str]] = {}
    for profile in config.profiles:
        fwk = Framework(profile=profile, registry=registry, **offline_handle_kwargs())
        for name, plugin in fwk.plugins.items():
            built[name] = extension_points_of(plugin)
        for point, names in fwk.list_plugins().items():
            for name in names:
                runs_at.setdefault(name, {}).setdefault(profile.scheduler_name, []).append(point)
    rows: list[dict[str, Any]] = []
    for name in registry:
        registration = registry.registration(name)
        points = built.get(name)
        if points is None:
            points = registration.extension_points()
        rows.append({
            "name": name,
            "origin": str(registration.origin),
            "extensionPoints": points,
            "enabledIn": list(runs_at.get(name, {})),
            "enabledAt": runs_at.get(name, {}),
        })
    return rows


def _enabled_cell(row: dict[str, Any]) -> str:
    """The profiles that run the plugin; where it runs at only some of the points it
    implements, those points after the profile (``py-scheduler:queueSort``)."""
    cells = []
    for profile, points in row["enabledAt"].items():
        partial = row["extensionPoints"] is not None and set(points) != set(row["extensionPoints"])
        cells.append(f"{profile}:{'+'.join(points)}" if partial else profile)
    return ",".join(cells) or "-"


def handle(args: argparse.Namespace) -> int:
    from scheduler.app import StartupError, installed_registry, validate_profiles
    from scheduler.cli.run import load_config

    setup_logging(args)
    try:
        config, source = load_config(args.config)
        registry = installed_registry()
        validate_profiles(config, registry, source=source)
    except StartupError as exc:
        print_error(exc)
        return EXIT_USAGE

    rows = plugin_rows(config, registry)
    if args.output == "json":
        print(json.dumps({"config": source, "plugins": rows}, indent=2))
        return EXIT_OK
    table: list[tuple[str, str, str, str]] = [("NAME", "ORIGIN", "EXTENSION POINTS",
                                               "ENABLED IN")]
    for r in rows:
        points = r["extensionPoints"]
        table.append((r["name"], r["origin"],
                      ",".join(points) if points is not None else "(known once built)",
                      _enabled_cell(r)))
    widths = [max(len(row[i]) for row in table) for i in range(3)]
    for row in table:
        print("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row[:3])) + "  " + row[3])
    print(f"\n(profiles from {source})")
    return EXIT_OK


COMMAND = Command(
    name="plugins",
    help="list the registered plugins (in-tree and installed) and what enables them",
    description="List every registered plugin: its name, origin (in-tree, or distribution and "
    "version), the extension points it implements, and the profiles of the active "
    "configuration (--config) that enable it.",
    add_arguments=add_arguments,
    handle=handle,
    default_log_level="warning",
)
