"""KubeSchedulerConfiguration v1: types, defaults, loading and validation."""

from scheduler.config.defaults import DEFAULT_SCHEDULER_NAME, default_config, effective_plugins
from scheduler.config.errors import ConfigError
from scheduler.config.load import load_config_file, parse_config
from scheduler.config.types import (
    KubeSchedulerConfiguration,
    PluginRef,
    Plugins,
    PluginSet,
    Profile,
)

__all__ = [
    "DEFAULT_SCHEDULER_NAME",
    "ConfigError",
    "KubeSchedulerConfiguration",
    "PluginRef",
    "PluginSet",
    "Plugins",
    "Profile",
    "default_config",
    "effective_plugins",
    "load_config_file",
    "parse_config",
]
