"""The one argparse parser of ``kube-py-scheduler`` and its dispatch to subcommand handlers."""

from __future__ import annotations

import argparse
import difflib
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
    soak,
)
from scheduler.cli.common import PROG, VERSION, Command, add_common_options

COMMANDS: tuple[Command, ...] = (
    run.COMMAND,
    sandbox.COMMAND,
    bench.COMMAND,
    soak.COMMAND,
    podgroup_controller.COMMAND,
    plugins.COMMAND,
    explain.COMMAND,
    completion.COMMAND,
)
DEFAULT_COMMAND = run.COMMAND.name


def build_parser(*, only: str | None = None) -> argparse.ArgumentParser:
    """The whole command line; with ``only``, the other subcommands keep their name and help
    but not their flags: adding a subcommand's flags imports its package (the sandbox, the
    explain engine, the bench), which a process that runs one command never needs."""
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="A secondary Kubernetes scheduler with kube-scheduler semantics. "
        f"Flags without a subcommand mean `{DEFAULT_COMMAND}`.",
    )
    parser.add_argument("--version", action="version", version=VERSION)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for command in COMMANDS:
        p = sub.add_parser(command.name, help=command.help, description=command.description)
        if only is None or command.name == only:
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
    parser = build_parser(only=args_list[0] if args_list[0] in names else None)
    # Subcommands parse with parse_known_args: an unknown flag would reach the root parser,
    # whose usage does not list the subcommand's flags; the subcommand reports it instead.
    args, unknown = parser.parse_known_args(args_list)
    if unknown:
        command_parser = _command_parser(parser, args.command)
        command_parser.error(unrecognized_message(command_parser, unknown))
    code: int = args.handler(args)
    return code


def _command_parser(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    for action in parser._actions:  # argparse keeps subparsers only in its action
        if isinstance(action, argparse._SubParsersAction):
            command_parser: argparse.ArgumentParser = action.choices[name]
            return command_parser
    raise LookupError(name)


def unrecognized_message(parser: argparse.ArgumentParser, unknown: Sequence[str]) -> str:
    """argparse's message, with the closest flag of ``parser`` for a misspelt one."""
    message = f"unrecognized arguments: {' '.join(unknown)}"
    flags = [o for action in parser._actions for o in action.option_strings
             if o.startswith("--")]
    for arg in unknown:
        if arg.startswith("--"):
            close = difflib.get_close_matches(arg.split("=", 1)[0], flags, n=1, cutoff=0.75)
            if close:
                message += f" (did you mean {close[0]}?)"
    return message
