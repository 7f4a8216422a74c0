"""``kube-py-scheduler soak``'s flags: durations, help texts with defaults, bad flags."""

from __future__ import annotations

import argparse

import pytest

from scheduler.cli.main import build_parser
from scheduler.exit_codes import EXIT_USAGE
from scheduler.soak import parse_duration, run


@pytest.mark.parametrize(("text", "seconds"), [
    ("90", 90.0), ("90s", 90.0), ("2m", 120.0), ("1h", 3600.0), ("1h30m", 5400.0),
    ("0.5m", 30.0),
])
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "2x", "m", "1h 2m", "0s", "-5m", "2mm"])
def test_bad_durations_are_refused(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        parse_duration(text)


def _soak_parser() -> argparse.ArgumentParser:
    for action in build_parser()._actions:
        if isinstance(action, argparse._SubParsersAction):
            parser: argparse.ArgumentParser = action.choices["soak"]
            return parser
    raise LookupError("soak")


def test_every_flag_has_a_help_text_with_its_default() -> None:
    for action in _soak_parser()._actions:
        if isinstance(action, (argparse._HelpAction, argparse._VersionAction)):
            continue
        assert action.help and "default" in action.help, action.dest


def test_the_documented_flags_parse() -> None:
    args = build_parser().parse_args(["soak", "--duration", "1h", "--seed", "42", "--nodes",
                                      "10", "--replicas", "2", "--report", "r.json", "--plot",
                                      "p.png"])
    assert (args.duration, args.seed, args.nodes, args.replicas, args.report, args.plot) == (
        3600.0, 42, 10, 2, "r.json", "p.png")


@pytest.mark.parametrize(("nodes", "replicas"), [(1, 2), (10, 0), (10, 4)])
def test_bad_sizes_exit_2_before_starting_anything(nodes: int, replicas: int) -> None:
    args = build_parser().parse_args(["soak", "--nodes", str(nodes), "--replicas",
                                      str(replicas)])
    assert run(args) == EXIT_USAGE
