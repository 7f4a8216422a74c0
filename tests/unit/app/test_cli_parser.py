"""The one CLI parser: common flags on every subcommand, the default subcommand, bench's
help, and shell completion that really completes in bash and zsh."""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from scheduler import KUBE_SCHEDULER_RELEASE, __version__
from scheduler.cli import build_parser, main
from scheduler.cli.main import COMMANDS
from scheduler.exit_codes import EXIT_USAGE

NAMES = [command.name for command in COMMANDS]


def _subparser(name: str) -> argparse.ArgumentParser:
    for action in build_parser()._actions:
        if isinstance(action, argparse._SubParsersAction):
            parser: argparse.ArgumentParser = action.choices[name]
            return parser
    raise AssertionError("no subparsers")


@pytest.mark.parametrize("name", NAMES)
def test_every_subcommand_has_version(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main([name, "--version"])
    assert exc.value.code == 0
    # ours, and the kube-scheduler release whose behaviour we match (issue 26)
    assert capsys.readouterr().out.strip() == (
        f"kube-py-scheduler {__version__} (kube-scheduler v{KUBE_SCHEDULER_RELEASE})")


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize(("given", "parsed"), [("debug", "debug"), ("DEBUG", "debug"),
                                               ("Warning", "warning")])
def test_every_subcommand_takes_log_level_in_any_case(name: str, given: str, parsed: str) -> None:
    extra = ["bash"] if name == "completion" else []
    args = build_parser().parse_args([name, *extra, "--log-level", given])
    assert args.log_level == parsed


@pytest.mark.parametrize("name", NAMES)
def test_log_level_rejects_unknown_levels(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    extra = ["bash"] if name == "completion" else []
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args([name, *extra, "--log-level", "loud"])
    assert exc.value.code == EXIT_USAGE
    assert "debug" in capsys.readouterr().err


def test_flags_without_a_subcommand_mean_run() -> None:
    # run's own validation answers: the flags reached `run`, which refused the address.
    # (A process of its own: `run` configures logging for the whole process.)
    done = subprocess.run([sys.executable, "-m", "scheduler", "--metrics-bind-address",
                           "nonsense"], capture_output=True, text=True, timeout=60)
    assert done.returncode == EXIT_USAGE
    assert "--metrics-bind-address: expected host:port" in done.stderr


def test_root_help_and_version_stay_the_root_parser(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    for name in NAMES:
        assert name in out


def test_bench_help_gives_every_flag_a_help_text_and_its_default() -> None:
    bench = _subparser("bench")
    for action in bench._actions:
        if isinstance(action, (argparse._HelpAction, argparse._VersionAction)):
            continue
        assert action.help, action.dest
        assert "default" in action.help, action.dest
    text = " ".join(bench.format_help().split())  # argparse wraps lines
    assert "(default 1000)" in text and "(default SchedulingBasic)" in text


@pytest.fixture(scope="module")
def completion_scripts(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """``kube-py-scheduler completion <shell>`` run once per shell for the module: the script
    only depends on the parser, and each run is a process start (seconds)."""
    folder = tmp_path_factory.mktemp("completion")
    scripts: dict[str, Path] = {}

    def script(shell: str) -> Path:
        if shell not in scripts:
            out = subprocess.run([sys.executable, "-m", "scheduler", "completion", shell],
                                 capture_output=True, text=True, check=True)
            scripts[shell] = folder / f"completion.{shell}"
            scripts[shell].write_text(out.stdout)
        return scripts[shell]

    return script


def _bash_complete(script: Path, words: list[str]) -> list[str]:
    array = " ".join(f"'{w}'" for w in words)
    code = (f"source {script}; COMP_WORDS=({array}); COMP_CWORD={len(words) - 1}; "
            '_kube_py_scheduler; printf "%s\\n" "${COMPREPLY[@]}"; complete -p kube-py-scheduler')
    out = subprocess.run(["bash", "-c", code], capture_output=True, text=True, check=True)
    return out.stdout.split()


@pytest.mark.parametrize(
    ("words", "expected"),
    [
        (["kube-py-scheduler", "ru"], ["run"]),
        (["kube-py-scheduler", "p"], ["podgroup-controller", "plugins"]),
        (["kube-py-scheduler", "bench", "--work"], ["--workload"]),
        (["kube-py-scheduler", "bench", "--workload", "Sc"],
         ["SchedulingBasic", "SchedulingPodAntiAffinity", "SchedulingWhileGated",
          "SchedulingWithResourceClaimTemplate"]),
        (["kube-py-scheduler", "sandbox", "--log-level", "w"], ["warning"]),
        (["kube-py-scheduler", "completion", "z"], ["zsh"]),
        (["kube-py-scheduler", "run", "--nodes", ""], []),
    ],
)
def test_bash_completion_completes_commands_flags_and_choices(
    completion_scripts: Callable[[str], Path], words: list[str], expected: list[str]
) -> None:
    out = _bash_complete(completion_scripts("bash"), words)
    # The last words are `complete -F _kube_py_scheduler kube-py-scheduler`.
    assert out[-4:] == ["complete", "-F", "_kube_py_scheduler", "kube-py-scheduler"]
    assert out[:-4] == expected


def test_bash_completion_offers_files_for_path_flags(
        tmp_path: Path, completion_scripts: Callable[[str], Path]) -> None:
    (tmp_path / "sched.yaml").write_text("")
    script = completion_scripts("bash")
    code = (f"cd {tmp_path}; source {script}; "
            "COMP_WORDS=(kube-py-scheduler run --config sch); COMP_CWORD=3; "
            '_kube_py_scheduler; printf "%s\\n" "${COMPREPLY[@]}"')
    out = subprocess.run(["bash", "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["sched.yaml"]


@pytest.mark.skipif(shutil.which("zsh") is None, reason="zsh is not installed")
def test_zsh_completion_registers_and_completes(
        completion_scripts: Callable[[str], Path]) -> None:
    script = completion_scripts("zsh")
    # What zsh's bashcompinit does on <TAB>: call the function through its compgen.
    code = (
        "autoload -U compinit && compinit -u -D; "
        f"source {script}; print -r -- $_comps[kube-py-scheduler]; "
        "COMP_WORDS=(kube-py-scheduler bench --workload sp); COMP_CWORD=3; "
        'print -l -- ${(f)"$(compgen -F _kube_py_scheduler -- sp)"}'
    )
    out = subprocess.run(["zsh", "-c", code], capture_output=True, text=True, check=True)
    lines = out.stdout.split("\n")
    assert lines[0] == "_bash_complete -F _kube_py_scheduler"
    # zsh narrows the candidates to the typed prefix itself (compadd).
    assert "spread" in lines[1:] and "run" not in lines[1:]


@pytest.mark.parametrize(("argv", "usage", "error"), [
    pytest.param(["run", "--bogus-flag"], "usage: kube-py-scheduler run ",
                 "kube-py-scheduler run: error: unrecognized arguments: --bogus-flag",
                 id="run"),
    pytest.param(["--bogus-flag"], "usage: kube-py-scheduler run ",
                 "kube-py-scheduler run: error: unrecognized arguments: --bogus-flag",
                 id="no-subcommand-means-run"),
    pytest.param(["run", "--kubeconfg", "x"], "usage: kube-py-scheduler run ",
                 "kube-py-scheduler run: error: unrecognized arguments: --kubeconfg x "
                 "(did you mean --kubeconfig?)", id="misspelt-flag"),
    pytest.param(["plugins", "--outptu=json"], "usage: kube-py-scheduler plugins ",
                 "kube-py-scheduler plugins: error: unrecognized arguments: --outptu=json "
                 "(did you mean --output?)", id="misspelt-flag-with-value"),
])
def test_an_unknown_flag_prints_its_subcommands_usage(
        argv: list[str], usage: str, error: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.startswith(usage)
    assert err.rstrip().splitlines()[-1] == error


@pytest.mark.parametrize("name", NAMES)
def test_the_parser_of_one_command_parses_it_as_the_whole_parser_does(name: str) -> None:
    # main() builds only the chosen subcommand's flags; its parse must not differ
    extra = ["bash"] if name == "completion" else []
    whole = build_parser().parse_args([name, *extra])
    one = build_parser(only=name).parse_args([name, *extra])
    assert vars(one) == vars(whole)


def test_run_does_not_import_the_packages_of_the_other_commands() -> None:
    # every process of the daemon (and every test that starts one) paid for importing the
    # sandbox and the explain engine just to build their flags
    argv = ["run", "--config", "/nonexistent/config.yaml"]
    not_imported = ["scheduler.sandbox", "scheduler.explain.cli", "scheduler.bench",
                    "scheduler.soak.run"]
    code = ("import sys\nfrom scheduler.cli import main\ntry:\n    main(sys.argv[1:])\n"
            "except SystemExit:\n    pass\n"
            "print(sorted(m for m in sys.modules if m.startswith('scheduler.')))")
    done = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True,
                          timeout=60)
    modules = done.stdout.strip().splitlines()[-1]
    for module in not_imported:
        assert f"'{module}'" not in modules and f"'{module}." not in modules, (module, done.stderr)
