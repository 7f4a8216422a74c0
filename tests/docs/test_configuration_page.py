"""docs/configuration.md's example configuration, accepted as the daemon accepts a config."""

from __future__ import annotations

from tests.docs.markdown import section_blocks


def test_configuration_example_is_accepted_by_the_daemon() -> None:
    """The example was once rejected (its profiles used different queueSort plugins)."""
    from scheduler.app import validate_profiles
    from scheduler.config.load import parse_config_text
    from scheduler.plugins.registry import in_tree_registry

    (block,) = section_blocks("Configuration", lang="yaml", page="docs/configuration.md")
    config = parse_config_text(block.text, source="docs/configuration.md")
    validate_profiles(config, in_tree_registry(), source="docs/configuration.md")
    assert [p.scheduler_name for p in config.profiles] == ["py-scheduler", "py-binpack"]
