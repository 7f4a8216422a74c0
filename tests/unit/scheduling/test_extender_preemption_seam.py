"""The scheduling cycle reaches the preemption that HTTP extenders narrow through the
framework's ExtenderPreemption seam, whichever PostFilter plugin provides it."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from scheduler.config.defaults import shipped_config
from scheduler.config.load import parse_config_text
from scheduler.config.types import KubeSchedulerConfiguration
from scheduler.framework.interfaces import ExtenderPreemption
from scheduler.framework.runtime import Framework
from scheduler.offline import offline_handle_kwargs
from scheduler.plugins.registry import in_tree_registry

DEFAULT_ONLY = """\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
  - schedulerName: a
"""
NO_PREEMPTION = DEFAULT_ONLY + """\
    plugins:
      postFilter: {disabled: [{name: "*"}]}
"""


@pytest.mark.parametrize(("config", "plugin"), [
    pytest.param(lambda: parse_config_text(DEFAULT_ONLY), "DefaultPreemption",
                 id="v1-defaults"),
    # The shipped profile preempts with CapacityScheduling in DefaultPreemption's place: the
    # core once looked DefaultPreemption up by name and so skipped the extenders' verb.
    pytest.param(shipped_config, "CapacityScheduling", id="shipped-profile"),
    pytest.param(lambda: parse_config_text(NO_PREEMPTION), None, id="no-postfilter"),
])
def test_the_preempting_postfilter_plugin_is_found_by_the_seam(
        config: Callable[[], KubeSchedulerConfiguration], plugin: str | None) -> None:
    profile = config().profiles[0]
    fwk = Framework(profile=profile, registry=in_tree_registry(), **offline_handle_kwargs())
    found = fwk.extender_preemption()
    if plugin is None:
        assert found is None
        return
    assert found is fwk.get_plugin(plugin)
    assert isinstance(found, ExtenderPreemption)
