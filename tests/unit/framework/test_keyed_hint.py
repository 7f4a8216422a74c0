"""``KeyedHint`` through the public plugin API: the worked example of docs/plugins.md
("Queueing hints with keys"), run as the page writes it, is an out-of-tree-style plugin
registered as tests register Python plugins (a ``Registry`` merged over the in-tree one);
its real Framework rejects pods at Filter and feeds its hints to a real SchedulingQueue.  A
node event asks only the waiting pods that share its key, and moves exactly the pods the same
hint moves without keys (asking every pod)."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from types import ModuleType
from typing import Any

import pytest

import scheduler.framework as api
from scheduler.config.types import PluginRef, Plugins, PluginSet, Profile
from scheduler.framework import events as ev
from scheduler.framework.events import KeyedHint, QueueingHint
from scheduler.framework.node_info import NodeInfo
from scheduler.framework.registry import Registry
from scheduler.framework.runtime import Framework
from scheduler.objects.pod import pod_key, scheduler_name
from scheduler.plugins.registry import in_tree_registry
from scheduler.queue import HintEntry, SchedulingQueue
from tests.builders import NodeBuilder, PodBuilder
from tests.docs.readme import section_blocks
from tests.fakes import DictListers, FakeHandle, FakeNominator, SnapshotLister, in_tree_framework

SECTION = "Queueing hints with keys"
PAGE = "docs/plugins.md"
PROFILE = "pools"
NODE_LABEL = ev.ClusterEvent(ev.EventResource.NODE, ev.ActionType.UPDATE_NODE_LABEL,
                             "NodeUpdate")
# The waiting pods: two want pool a, two pool b, one pool c.
WAITING = {"a-0": "a", "a-1": "a", "b-0": "b", "b-1": "b", "c-0": "c"}


def example() -> ModuleType:
    """The page's plugin module, as an installed package would hold it."""
    (block,) = section_blocks(SECTION, lang="python", page=PAGE)
    module = ModuleType("node_pool")
    exec(compile(block.text, f"{PAGE}:{block.line}", "exec"), module.__dict__)
    return module


def framework(module: ModuleType) -> Framework:
    extra = Registry()
    extra.register("NodePool", module.NodePool)
    refs = [PluginRef("PrioritySort"), PluginRef("NodePool"), PluginRef("DefaultBinder")]
    profile = Profile(scheduler_name=PROFILE, plugins=Plugins(
        multi_point=PluginSet(enabled=refs, disabled=[PluginRef("*")])))
    return in_tree_framework(profile, snapshot_provider=lambda: SnapshotLister([]),
                             listers=DictListers({}), nominator=FakeNominator(),
                             registry=in_tree_registry().merged(extra))


def node(name: str, pool: str | None) -> dict[str, Any]:
    return NodeBuilder(name).labels({"example.com/node-pool": pool} if pool else {}).obj()


def asking(fn: Callable[..., QueueingHint], asked: list[str]) -> Callable[..., QueueingHint]:
    def hint(pod: dict[str, Any], old: Any, new: Any) -> QueueingHint:
        asked.append(pod["metadata"]["name"])
        return fn(pod, old, new)
    return hint


def waiting_queue(fwk: Framework, hints: list[HintEntry]) -> SchedulingQueue:
    """A queue holding the WAITING pods, each rejected by the framework's Filter on a node in
    no pool."""
    queue = SchedulingQueue(less=fwk.queue_sort_less, pre_enqueue=fwk.run_pre_enqueue_plugins,
                            hints={PROFILE: hints}, profile_of=scheduler_name,
                            clock=lambda: 1000.0)
    outside = NodeInfo(node("n0", None))
    for name, pool in WAITING.items():
        queue.add(PodBuilder(name).scheduler_name(PROFILE)
                  .annotations({"example.com/node-pool": pool}).obj())
        qpi = queue.pop_nowait()
        assert qpi is not None
        status = fwk.run_filter_plugins(fwk.new_cycle_state(), qpi.pod_info, outside)
        assert status is not None and status.plugin == "NodePool", status
        qpi.unschedulable_plugins = {status.plugin}
        queue.add_unschedulable_if_not_present(qpi, queue.scheduling_cycle())
    return queue


def where(queue: SchedulingQueue) -> dict[str, list[str]]:
    return {q: [pod_key(p) for p in pods] for q, pods in queue.pending_pods().items()}


@pytest.mark.parametrize(
    ("event", "old", "new", "asked", "moved"),
    [
        pytest.param(ev.NODE_ADD, None, node("n1", "a"), ["a-0", "a-1"], ["a-0", "a-1"],
                     id="node-added-to-a"),
        pytest.param(NODE_LABEL, node("n1", None), node("n1", "b"), ["b-0", "b-1"],
                     ["b-0", "b-1"], id="node-labelled-into-b"),
        # c-0 shares the key; the hint still decides (the node was in c already: Skip).
        pytest.param(NODE_LABEL, node("n1", "c"), node("n1", "c"), ["c-0"], [],
                     id="node-already-in-c"),
        pytest.param(NODE_LABEL, node("n1", "a"), node("n1", "d"), [], [],
                     id="node-moved-to-a-pool-nobody-wants"),
        pytest.param(ev.NODE_ADD, None, node("n1", None), [], [], id="node-added-in-no-pool"),
    ],
)
def test_a_node_joining_a_pool_asks_only_its_pods(event: ev.ClusterEvent, old: Any, new: Any,
                                                  asked: list[str], moved: list[str]) -> None:
    module = example()
    assert module.KeyedHint is api.KeyedHint is KeyedHint  # the public name, the queue's class
    fwk = framework(module)
    entries = fwk.events_to_register()
    assert [(e.label, p) for e, p, _ in entries] == [("", "NodePool")]
    keyed_asked: list[str] = []
    plain_asked: list[str] = []
    keyed: list[HintEntry] = []
    plain: list[HintEntry] = []
    for registered, plugin, hint in entries:
        assert isinstance(hint, KeyedHint)
        keyed.append((registered, plugin, KeyedHint(
            asking(hint.fn, keyed_asked), event_keys=hint.event_keys, pod_keys=hint.pod_keys)))
        plain.append((registered, plugin, asking(hint.fn, plain_asked)))
    with_keys, without = waiting_queue(fwk, keyed), waiting_queue(fwk, plain)
    before = where(with_keys)
    assert before == where(without)
    assert sorted(before["unschedulable"]) == sorted(f"default/{n}" for n in WAITING)

    for queue in (with_keys, without):
        queue.move_all_to_active_or_backoff_queue(event, old, new)

    assert sorted(keyed_asked) == asked  # only the pods of the node's pool
    assert sorted(plain_asked) == sorted(WAITING)  # without keys: every waiting pod
    after = where(with_keys)
    assert after == where(without)
    assert sorted(set(before["unschedulable"]) - set(after["unschedulable"])) == [
        f"default/{n}" for n in moved]


def test_the_example_keys_keep_the_contract() -> None:
    """Whenever the event's keys share none with the pod's, the hint answers Skip."""
    module = example()
    (item,) = module.NodePool({}, FakeHandle()).events_to_register()
    hint = item.hint
    assert isinstance(hint, KeyedHint)
    pools = (None, "a", "b")
    for want, was, now in itertools.product(pools, pools, pools):
        pod = PodBuilder("p").annotations({"example.com/node-pool": want} if want else {}).obj()
        old = None if was is None else node("n", was)
        keys = hint.event_keys(old, node("n", now))
        assert keys is not None
        if not set(keys) & set(hint.pod_keys(pod)):
            assert hint(pod, old, node("n", now)) is QueueingHint.SKIP, (want, was, now)
    with pytest.raises(ValueError, match=r"NodePool takes no args, got \['pool'\]"):
        module.NodePool({"pool": "a"}, FakeHandle())
