"""Out-of-tree plugins from entry points: registered with their origin, or refused at
startup with the entry point, the distribution and the cause."""

from __future__ import annotations

import importlib.metadata
import sys
import textwrap
from pathlib import Path

import pytest

from scheduler.app import StartupError, validate_profiles
from scheduler.config.load import parse_config
from scheduler.plugins.outoftree import ENTRY_POINT_GROUP, PluginLoadError, load_entry_points
from scheduler.plugins.registry import in_tree_registry

GOOD = '''
from scheduler.framework import FilterPlugin, Status


class OnlyEven(FilterPlugin):
    NAME = "OnlyEven"

    def __init__(self, args, handle):
        self.modulo = args.get("modulo", 2)
        if not isinstance(self.modulo, int) or self.modulo < 1:
            raise ValueError(f"modulo: must be a positive integer, got {self.modulo!r}")

    def filter(self, state, pod_info, node_info):
        return None


class Nothing:
    pass


def not_a_factory_but_data():
    pass


NOT_CALLABLE = 42


class NoPoint(__import__("scheduler.framework", fromlist=["Plugin"]).Plugin):
    NAME = "NoPoint"

    def __init__(self, args, handle):
        pass
'''


def distribution(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, entry_points: str,
                 *, module: str = GOOD, dist: str = "acme-plugins", version: str = "1.2.3"
                 ) -> list[importlib.metadata.EntryPoint]:
    """An installed-looking distribution (a .dist-info on sys.path) with these entry points."""
    (tmp_path / "acme_plugins.py").write_text(module)
    info = tmp_path / f"{dist.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
    (info / "entry_points.txt").write_text(
        f"[{ENTRY_POINT_GROUP}]\n" + textwrap.dedent(entry_points))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "acme_plugins", raising=False)  # each test its own
    (found,) = importlib.metadata.distributions(path=[str(tmp_path)])
    return [ep for ep in found.entry_points if ep.group == ENTRY_POINT_GROUP]


def test_registers_with_distribution_and_version(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    eps = distribution(tmp_path, monkeypatch, "OnlyEven = acme_plugins:OnlyEven\n")
    registry = load_entry_points(in_tree_registry(), entry_points=eps)
    origin = registry.origin("OnlyEven")
    assert (origin.distribution, origin.version, str(origin)) == (
        "acme-plugins", "1.2.3", "acme-plugins 1.2.3")
    assert registry.registration("OnlyEven").extension_points() == ["filter"]
    assert registry.origin("NodeResourcesFit").in_tree


@pytest.mark.parametrize(
    ("entry_point", "cause"),
    [
        ("NodeResourcesFit = acme_plugins:OnlyEven",
         "plugin name 'NodeResourcesFit' is already taken by an in-tree plugin"),
        ("Broken = acme_missing_module:Plugin",
         "cannot import 'acme_missing_module:Plugin': ModuleNotFoundError"),
        ("Typo = acme_plugins:OnlyEvn", "cannot import 'acme_plugins:OnlyEvn': AttributeError"),
        ("Data = acme_plugins:NOT_CALLABLE", "is a int, not a plugin factory"),
        ("Nothing = acme_plugins:Nothing", "Nothing does not subclass scheduler.framework.Plugin"),
        ("NoPoint = acme_plugins:NoPoint", "NoPoint implements no extension point"),
    ],
    ids=["collides-in-tree", "import-fails", "attribute-missing", "not-callable",
         "not-a-plugin", "no-extension-point"],
)
def test_refused_naming_entry_point_distribution_and_cause(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, entry_point: str, cause: str
) -> None:
    eps = distribution(tmp_path, monkeypatch, entry_point + "\n")
    with pytest.raises(PluginLoadError) as ei:
        load_entry_points(in_tree_registry(), entry_points=eps)
    message = str(ei.value)
    assert message.startswith(
        f"entry point '{entry_point}' of distribution acme-plugins 1.2.3: "), message
    assert cause in message


def _config(plugin_args: dict[str, object]) -> object:
    return parse_config({
        "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
        "profiles": [{"schedulerName": "s", "plugins": {"filter": {"enabled": [
            {"name": "OnlyEven"}]}},
            "pluginConfig": [{"name": "OnlyEven", "args": plugin_args}]}],
    })


def test_factory_raising_on_its_args_names_the_distribution(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    eps = distribution(tmp_path, monkeypatch, "OnlyEven = acme_plugins:OnlyEven\n")
    registry = load_entry_points(in_tree_registry(), entry_points=eps)
    validate_profiles(_config({"modulo": 3}), registry, source="c.yaml")  # type: ignore[arg-type]
    with pytest.raises(StartupError) as ei:
        validate_profiles(_config({"modulo": 0}), registry,  # type: ignore[arg-type]
                          source="c.yaml")
    assert str(ei.value) == (
        "c.yaml: profiles[0]: profile 's': plugin 'OnlyEven': modulo: must be a positive "
        "integer, got 0 (from entry point 'OnlyEven = acme_plugins:OnlyEven' of distribution "
        "acme-plugins 1.2.3)")


def test_function_factory_building_a_plugin_with_no_extension_point(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = GOOD + "\n\ndef make(args, handle):\n    return NoPoint(args, handle)\n"
    eps = distribution(tmp_path, monkeypatch, "Made = acme_plugins:make\n", module=module)
    registry = load_entry_points(in_tree_registry(), entry_points=eps)
    config = parse_config({
        "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
        "profiles": [{"schedulerName": "s", "plugins": {"multiPoint": {"enabled": [
            {"name": "Made"}]}}}],
    })
    with pytest.raises(StartupError, match=r"plugin 'Made' implements no extension point "
                                           r"\(from entry point 'Made = acme_plugins:make'"):
        validate_profiles(config, registry, source="c.yaml")
