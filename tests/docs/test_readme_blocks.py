"""Every command and config block of the README is executed by a test, and this file says
which: a block without an entry here (a new one), or an entry whose test does not read that
section of the README, fails. Blocks without a language are output or diagrams, not inputs
(the explain sample output is checked against a real run all the same)."""

from __future__ import annotations

import ast
import collections
from pathlib import Path

from tests.docs.readme import REPO, blocks

# (section, language, index among that section's blocks of that language) -> the test that
# executes (or, for a config, loads and runs) that block, as "path::function".
EXECUTED_BY: dict[tuple[str, str, int], str] = {
    ("Quick start", "bash", 0): "tests/docs/test_readme_quickstart.py::"
                                "test_quick_start_runs_the_demo_and_the_kubectl_block_shows_it",
    ("Quick start", "bash", 1): "tests/docs/test_readme_quickstart.py::"
                                "test_quick_start_runs_the_demo_and_the_kubectl_block_shows_it",
    ("Install in a cluster", "bash", 0): "tests/docs/test_readme_install.py::"
                                         "test_kubectl_lines_install_the_scheduler",
    ("Install in a cluster", "yaml", 0): "tests/docs/test_readme_install.py::"
                                         "test_opt_in_snippet_is_what_the_shipped_example_does",
    ("Command line", "bash", 0): "tests/docs/test_readme.py::"
                                 "test_shell_completion_command_installs_the_completion",
    ("Secure serving (port 10259)", "bash", 0): "tests/docs/test_readme_secure_serving.py::"
                                                "test_local_walk_through_runs_as_written",
    ("Secure serving (port 10259)", "bash", 1): "tests/docs/test_readme_secure_serving.py::"
        "test_kubectl_apply_and_helm_lines_install_the_servicemonitor_and_binding",
    ("Secure serving (port 10259)", "yaml", 0): "tests/docs/test_readme_secure_serving.py::"
                                                "test_prometheus_yaml_is_the_optional_manifests",
    ("Secure serving (port 10259)", "bash", 2): "tests/docs/test_readme_secure_serving.py::"
        "test_kubectl_apply_and_helm_lines_install_the_servicemonitor_and_binding",
    ("Configuration", "yaml", 0): "tests/docs/test_readme.py::"
                                  "test_configuration_example_is_accepted_by_the_daemon",
    ("Write a plugin", "python", 0): "tests/integration/test_out_of_tree_plugins.py::"
                                     "test_readme_blocks_are_the_example_package",
    ("Write a plugin", "toml", 0): "tests/integration/test_out_of_tree_plugins.py::"
                                   "test_readme_blocks_are_the_example_package",
    ("Write a plugin", "yaml", 0): "tests/integration/test_out_of_tree_plugins.py::"
                                   "test_readme_blocks_are_the_example_package",
    ("Write a plugin", "bash", 0): "tests/integration/test_out_of_tree_plugins.py::"
                                   "test_plugins_command_lists_it_with_its_origin",
    ("Extenders", "bash", 0): "tests/integration/test_extenders.py::"
                              "test_readme_extenders_section",
    ("Extenders", "yaml", 0): "tests/integration/test_extenders.py::"
                              "test_readme_extenders_section",
    ("Why is my pod Pending?", "bash", 0): "tests/docs/test_readme_explain.py::"
                                           "test_walk_through_runs_as_written",
    ("Why is my pod Pending?", "bash", 1): "tests/docs/test_readme_explain.py::"
                                           "test_rbac_commands_run_against_a_cluster",
    ("The sandbox API server", "bash", 0): "tests/conformance/test_tls_kubeconfig.py::"
                                           "test_readme_sandbox_block_runs",
    ("Development", "bash", 0): "tests/docs/test_readme_development.py::"
                                "test_development_commands_run_and_pass",
}


def _readme_inputs() -> list[tuple[str, str, int]]:
    seen: collections.Counter[tuple[str, str]] = collections.Counter()
    keys = []
    for block in blocks():
        if not block.lang:
            continue
        key = (block.section, block.lang)
        keys.append((block.section, block.lang, seen[key]))
        seen[key] += 1
    return keys


def _function(path: Path, name: str) -> ast.AST | None:
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            return node
    return None


def test_every_readme_block_is_executed_by_a_named_test() -> None:
    inputs = _readme_inputs()
    missing = [key for key in inputs if key not in EXECUTED_BY]
    assert not missing, f"README blocks no test executes (add a test and an entry): {missing}"
    stale = sorted(set(EXECUTED_BY) - set(inputs))
    assert not stale, f"entries for blocks the README no longer has: {stale}"


def test_each_named_test_exists_and_reads_its_section_of_the_readme() -> None:
    for (section, _, _), where in EXECUTED_BY.items():
        file, _, name = where.partition("::")
        path = REPO / file
        assert path.exists(), where
        assert _function(path, name) is not None, f"no test {name} in {file}"
        source = path.read_text()
        # The test reads the block from the README (so it runs what the README says).
        assert "section_blocks" in source, f"{file} does not read README blocks"
        assert f'"{section}"' in source, f"{file} never names the section {section!r}"
