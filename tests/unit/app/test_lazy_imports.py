"""scheduler/lazy_imports.py: a process that imports the daemon pays neither for rich
(structlog's optional traceback drawing) nor for ``cel``'s command line, and loses nothing:
CEL compiles, ``cel.cli`` loads when read, tracebacks are still logged in both formats."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

HEAVY = ("rich", "typer", "prompt_toolkit", "pygments")


def _run(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout + done.stderr


def test_the_daemon_imports_neither_rich_nor_cels_command_line() -> None:
    out = _run(f"""
        import sys
        import scheduler.app
        from scheduler.dra.cel import compile_selector
        compile_selector('device.driver == "gpu.example.com"')
        print(sorted(m for m in sys.modules if m.split(".")[0] in {HEAVY!r}))
        import cel.cli
        print(callable(cel.cli.main))
    """)
    assert out.splitlines()[:2] == ["[]", "True"], out


@pytest.mark.parametrize("fmt", ["console", "json"])
def test_tracebacks_are_still_logged(fmt: str) -> None:
    out = _run(f"""
        import structlog
        from scheduler.logging import configure_logging
        configure_logging(fmt={fmt!r})
        try:
            raise RuntimeError("boom")
        except RuntimeError:
            structlog.get_logger("t").exception("failed")
    """)
    assert "Traceback (most recent call last)" in out and "RuntimeError: boom" in out, out
