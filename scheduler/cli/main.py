"""The one argparse parser of ``kube-py-scheduler`` and its dispatch to subcommand handlers."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from scheduler.cli import (
    bench,
    completion,
    explain,
    plugins,
    podgroup_controller,
    run,
    sandbox,
)
from scheduler.cli.common import PROG, VERSION, Command, add_common_options

COMMANDS: tuple[Command, ...] = (
    run.COMMAND,
    sandbox.COMMAND,
    bench.COMMAND,
    podgroup_controller.COMMAND,
    plugins.COMMAND,
    explain.COMMAND,
    completion.COMMAND,
)
DEFAULT_COMMAND = run.COMMAND.name


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="A secondary Kubernetes scheduler with kube-scheduler semantics. "
        f"Flags without a subcommand mean `{DEFAULT_COMMAND}`.",
    )
    parser.add_argument("--version", action="version", version=VERSION)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for command in COMMANDS:
        p = sub.add_parser(command.name, help=command.help, description=command.description)
        command.add_arguments(p)
        add_common_options(p, default_log_level=command.default_log_level)
        p.set_defaults(handler=command.handle)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    # No subcommand (nothing, or flags only) means `run`; the root parser's own --help and
    # --version stay its own.
    names = {command.name for command in COMMANDS}
    if not args_list or (args_list[0] not in names
                         and args_list[0] not in ("-h", "--help", "--version")):
        args_list.insert(0, DEFAULT_COMMAND)
    args = build_parser().parse_args(args_list)
    code: int = args.handler(args)
    return code
