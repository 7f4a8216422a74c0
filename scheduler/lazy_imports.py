"""Imports every process start would pay for and almost none uses, deferred (run once, from
``scheduler/__init__.py``, before anything imports structlog or ``cel``).

* structlog imports rich (its console, tracebacks and pretty-printer: ~0.1 s of CPU) when
  rich is installed, to draw tracebacks on the developer console and in dict tracebacks;
  ``scheduler.logging`` uses neither (``format_exc_info`` renders a traceback as plain text
  before the console or JSON renderer sees it), so structlog is imported here with rich
  hidden: the same output, without rich.
* The ``cel`` package's ``__init__`` imports its command line (typer, rich, prompt_toolkit,
  pygments: ~0.3 s) beside the evaluator DRA uses; ``cel.cli`` is found with a lazy loader,
  its code run only if something reads from it.

Both are plain ``importlib`` machinery; when either library is already imported (a tool that
imported it before ``scheduler``) or missing, nothing is done.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import sys
from collections.abc import Sequence
from types import ModuleType


def import_structlog_without_rich() -> None:
    if "structlog" in sys.modules or "rich" in sys.modules:
        return
    sys.modules["rich"] = None  # type: ignore[assignment]  # `import rich` raises ImportError
    try:
        import structlog  # noqa: F401
    finally:
        del sys.modules["rich"]


class _LazyCelCli(importlib.abc.MetaPathFinder):
    """Finds ``cel.cli`` as the path finder does, with a lazy loader (its code runs when an
    attribute of it is first read), then steps aside."""

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if fullname != "cel.cli":
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is not None and spec.loader is not None:
            spec.loader = importlib.util.LazyLoader(spec.loader)
        return spec


def defer_cel_cli() -> None:
    if "cel" in sys.modules or any(isinstance(f, _LazyCelCli) for f in sys.meta_path):
        return
    sys.meta_path.insert(0, _LazyCelCli())


def defer() -> None:
    import_structlog_without_rich()
    defer_cel_cli()
