"""The layers (CONTRIBUTING.md "Architecture") hold: import-linter's contracts from
pyproject.toml, checked on the whole ``scheduler`` package (indirect imports included)."""

from __future__ import annotations

import logging
import pkgutil
import tomllib
from pathlib import Path

import pytest

import scheduler.plugins

ROOT = Path(__file__).resolve().parents[2]


def _contracts() -> list[dict[str, object]]:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    contracts: list[dict[str, object]] = data["tool"]["importlinter"]["contracts"]
    return contracts


def test_import_contracts_are_kept(capsys: pytest.CaptureFixture[str]) -> None:
    from importlinter.cli import lint_imports

    # import-linter configures logging with dictConfig, which disables every logger that
    # exists then (aiohttp's, kopf's): later tests in this process would lose their lines.
    loggers = [lg for lg in logging.root.manager.loggerDict.values()
               if isinstance(lg, logging.Logger) and not lg.disabled]
    try:
        code = lint_imports(config_filename=str(ROOT / "pyproject.toml"), no_cache=True)
    finally:
        for lg in loggers:
            lg.disabled = False
    out = capsys.readouterr().out
    assert code == 0, out
    assert f"Contracts: {len(_contracts())} kept, 0 broken." in out


def test_every_in_tree_plugin_is_in_the_plugin_layers() -> None:
    """A new plugin module must join the contract (else nothing stops helpers importing it)."""
    (layers,) = [c["layers"] for c in _contracts() if c["id"] == "plugin-layers"]
    assert isinstance(layers, list)
    listed = {m.strip() for layer in layers for m in str(layer).replace("|", ":").split(":")}
    modules = {f"scheduler.plugins.{m.name}" for m in pkgutil.iter_modules(scheduler.plugins.__path__)}
    assert modules - listed == set()


FRAMEWORK_MODULE_MAX_LINES = 800


def test_framework_modules_stay_reviewable() -> None:
    """The runtime once grew past 800 lines in one module; it is split along its steps
    (runtime_filter, runtime_score, runtime_binding) and every framework module stays
    under the limit."""
    import scheduler.framework

    root = Path(scheduler.framework.__path__[0])
    sizes = {p.name: len(p.read_text().splitlines()) for p in root.glob("*.py")}
    assert {name: n for name, n in sizes.items() if n > FRAMEWORK_MODULE_MAX_LINES} == {}
