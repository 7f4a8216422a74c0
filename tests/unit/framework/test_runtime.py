"""Framework runtime: plugin resolution (multiPoint expansion, overrides, weights, validation)
and every extension point's semantics, driven by fake plugins."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from scheduler.config.errors import ConfigError
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.errors import AlreadyBoundError, FrameworkStatusError, PluginConfigError
from scheduler.framework.events import (
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    EventResource,
)
from scheduler.framework.interfaces import (
    BindPlugin,
    FilterPlugin,
    PermitPlugin,
    PostBindPlugin,
    PostFilterPlugin,
    PreBindPlugin,
    PreEnqueuePlugin,
    PreFilterPlugin,
    PreScorePlugin,
    QueueSortPlugin,
    ReservePlugin,
    ScorePlugin,
)
from scheduler.framework.node_info import NodeInfo
from scheduler.framework.runtime import WILDCARD_EVENT
from scheduler.framework.status import Code, Status
from scheduler.framework.types import NodeScore, PostFilterResult, PreFilterResult, QueuedPodInfo
from scheduler.metrics import SchedulerMetrics
from scheduler.objects.pod import PodInfo
from tests.builders import make_node, make_pod
from tests.unit.framework.fakeplugins import Env, ps


def _pod(name: str = "p", priority: int = 0, **kw: Any) -> PodInfo:
    return PodInfo.from_pod(make_pod(name, priority=priority, **kw))


def _nodes(*names: str) -> list[NodeInfo]:
    return [NodeInfo(make_node(n)) for n in names]


U = Code.UNSCHEDULABLE
UU = Code.UNSCHEDULABLE_AND_UNRESOLVABLE


# --- construction -----------------------------------------------------------------------------


class TestPluginResolution:
    def test_multi_point_expands_to_implemented_points_only(self) -> None:
        env = Env()
        env.add("A", [FilterPlugin, ScorePlugin])
        env.add("B", [ReservePlugin])
        fwk = env.framework(multi=["A", "B"])
        plugins = fwk.list_plugins()
        assert plugins["filter"] == ["A"]
        assert plugins["score"] == ["A"]
        assert plugins["reserve"] == ["B"]
        assert plugins["preFilter"] == []
        assert plugins["queueSort"] == ["Sort"]
        assert plugins["bind"] == ["Binder"]

    def test_specific_entry_overrides_multi_point_and_keeps_upstream_order(self) -> None:
        env = Env()
        for name in "ABCD":
            env.add(name, [FilterPlugin])
        # C is in both: its specific entry wins and runs first; D is specific-only, last.
        fwk = env.framework(multi=["A", "B", "C"], filter=ps("D", "C"))
        assert fwk.list_plugins()["filter"] == ["C", "A", "B", "D"]

    def test_disabled_at_a_point_removes_multi_point_plugin_there_only(self) -> None:
        env = Env()
        env.add("A", [FilterPlugin, ScorePlugin])
        env.add("B", [FilterPlugin])
        fwk = env.framework(multi=["A", "B"], filter=ps(disabled=["A"]))
        assert fwk.list_plugins()["filter"] == ["B"]
        assert fwk.list_plugins()["score"] == ["A"]

    def test_disabled_star_skips_expansion_but_keeps_specific_plugins(self) -> None:
        env = Env()
        env.add("A", [FilterPlugin])
        env.add("B", [FilterPlugin])
        fwk = env.framework(multi=["A"], filter=ps("B", disabled=["*"]))
        assert fwk.list_plugins()["filter"] == ["B"]

    def test_plugin_instantiated_once_per_profile(self) -> None:
        env = Env()
        created: list[str] = []
        env.add("A", [FilterPlugin, ScorePlugin, ReservePlugin])
        original = env.registry.get("A")
        env.registry.registration("A").factory = lambda a, h: (created.append("A"), original(a, h))[1]
        fwk = env.framework(multi=["A"], score=ps(("A", 3)))
        assert created == ["A"]
        assert fwk.get_plugin("A") is env.instances["A"]

    @pytest.mark.parametrize(
        ("multi", "score", "expected"),
        [
            ([("A", 0)], None, {"A": 1}),  # 0 means unset -> 1
            ([("A", 4)], None, {"A": 4}),
            ([("A", 2)], ps(("A", 7)), {"A": 7}),  # the specific score entry wins
            ([("A", 2)], ps(("A", 0)), {"A": 1}),
        ],
    )
    def test_score_weights(self, multi: Any, score: Any, expected: dict[str, int]) -> None:
        env = Env()
        env.add("A", [ScorePlugin])
        kwargs = {"score": score} if score is not None else {}
        fwk = env.framework(multi=multi, **kwargs)
        assert fwk.score_weights == expected

    def test_plugin_at_point_it_does_not_implement(self) -> None:
        env = Env()
        env.add("A", [ScorePlugin])
        with pytest.raises(PluginConfigError) as err:
            env.framework(filter=ps("A"))
        assert err.value.plugin == "A"
        assert "test-profile" in str(err.value)
        assert "filter" in str(err.value)

    def test_duplicate_at_point(self) -> None:
        env = Env()
        env.add("A", [FilterPlugin])
        with pytest.raises(PluginConfigError, match="more than once"):
            env.framework(filter=ps("A", "A"))

    def test_unknown_plugin(self) -> None:
        env = Env()
        with pytest.raises(PluginConfigError, match="not registered") as err:
            env.framework(multi=["Nope"])
        assert err.value.plugin == "Nope"

    def test_queue_sort_required_exactly_once(self) -> None:
        env = Env()
        with pytest.raises(PluginConfigError, match="queue sort"):
            env.framework(sort=False)
        env.add("Sort2", [QueueSortPlugin])
        with pytest.raises(PluginConfigError, match="but got 2"):
            env.framework(multi=["Sort2"])

    def test_bind_plugin_required(self) -> None:
        env = Env()
        with pytest.raises(PluginConfigError, match="bind plugin"):
            env.framework(binder=False)

    def test_constructor_error_names_profile_plugin_and_field(self) -> None:
        env = Env()
        env.add("A", [FilterPlugin], **{"raise": ConfigError("", [("A.args.size", "must be > 0")])})
        with pytest.raises(PluginConfigError) as err:
            env.framework(multi=["A"])
        assert err.value.profile == "test-profile"
        assert err.value.plugin == "A"
        assert err.value.field == "A.args.size"
        assert str(err.value) == "profile 'test-profile': plugin 'A': A.args.size: must be > 0"

    def test_plain_constructor_exception_becomes_config_error(self) -> None:
        env = Env()
        env.add("A", [FilterPlugin], **{"raise": ValueError("boom")})
        with pytest.raises(PluginConfigError, match="boom"):
            env.framework(multi=["A"])

    def test_default_profile_with_in_tree_registry(self) -> None:
        from scheduler.config.defaults import default_profile
        from scheduler.framework.runtime import Framework
        from scheduler.offline import offline_handle_kwargs
        from scheduler.plugins.registry import IN_TREE, in_tree_registry

        for path in IN_TREE.values():  # other plugins may still be in progress
            pytest.importorskip(path.partition(":")[0])
        fwk = Framework(profile=default_profile(), registry=in_tree_registry(), **offline_handle_kwargs())
        plugins = fwk.list_plugins()
        # DefaultPreemption's PreEnqueue holds a preemptor back while its preemption runs.
        assert plugins["preEnqueue"] == ["SchedulingGates", "DynamicResources",
                                         "DefaultPreemption"]
        assert plugins["queueSort"] == ["PrioritySort"]
        assert plugins["filter"][:3] == ["NodeUnschedulable", "NodeName", "TaintToleration"]
        assert "NodeResourcesFit" in plugins["filter"]
        # DynamicResources just before DefaultPreemption (kube-scheduler 1.34+)
        assert plugins["postFilter"] == ["DynamicResources", "DefaultPreemption"]
        assert plugins["bind"] == ["DefaultBinder"]
        assert fwk.score_weights["TaintToleration"] == 3
        assert fwk.score_weights["NodeResourcesFit"] == 1
        assert fwk.score_weights["NodeResourcesBalancedAllocation"] == 1


# --- queue ------------------------------------------------------------------------------------


class TestQueueAndPreEnqueue:
    def test_queue_sort_less_delegates(self) -> None:
        fwk = Env().framework()
        a = QueuedPodInfo(_pod("a"), timestamp=1.0)
        b = QueuedPodInfo(_pod("b"), timestamp=2.0)
        assert fwk.queue_sort_less(a, b)
        assert not fwk.queue_sort_less(b, a)

    def test_pre_enqueue_first_rejection_named(self) -> None:
        env = Env()
        env.add("G1", [PreEnqueuePlugin])
        env.add("G2", [PreEnqueuePlugin], pre_enqueue=Status(UU, "gated"))
        fwk = env.framework(multi=["G1", "G2"])
        status = fwk.run_pre_enqueue_plugins(_pod())
        assert status == Status(UU, "gated", plugin="G2")

    def test_pre_enqueue_exception_is_error(self) -> None:
        env = Env()
        env.add("G", [PreEnqueuePlugin], pre_enqueue=RuntimeError("bug"))
        status = env.framework(multi=["G"]).run_pre_enqueue_plugins(_pod())
        assert status is not None and status.code == Code.ERROR and status.plugin == "G"
        assert isinstance(status.error, RuntimeError)


# --- PreFilter / Filter -----------------------------------------------------------------------


class TestPreFilter:
    def test_skip_disables_filter(self) -> None:
        env = Env()
        env.add(
            "A",
            [PreFilterPlugin, FilterPlugin],
            pre_filter=(None, Status(Code.SKIP)),
            filter=Status(U, "never"),
        )
        fwk = env.framework(multi=["A"])
        state = CycleState()
        result, status, rejectors = fwk.run_pre_filter_plugins(state, _pod(), _nodes("n1"))
        assert (result, status, rejectors) == (None, None, set())
        assert state.skip_filter_plugins == {"A"}
        assert fwk.run_filter_plugins(state, _pod(), _nodes("n1")[0]) is None
        assert env.calls("filter") == []

    def test_unresolvable_stops(self) -> None:
        env = Env()
        env.add("A", [PreFilterPlugin], pre_filter=(None, Status(UU, "no")))
        env.add("B", [PreFilterPlugin])
        fwk = env.framework(multi=["A", "B"])
        _, status, rejectors = fwk.run_pre_filter_plugins(CycleState(), _pod(), [])
        assert status == Status(UU, "no", plugin="A")
        assert rejectors == {"A"}
        assert env.calls("pre_filter") == ["A"]

    def test_unschedulable_runs_the_rest(self) -> None:
        env = Env()
        env.add("A", [PreFilterPlugin], pre_filter=(None, Status(U, "a")))
        env.add("B", [PreFilterPlugin])
        fwk = env.framework(multi=["A", "B"])
        _, status, rejectors = fwk.run_pre_filter_plugins(CycleState(), _pod(), [])
        assert status == Status(U, "a", plugin="A")
        assert rejectors == {"A"}
        assert env.calls("pre_filter") == ["A", "B"]

    def test_results_intersect(self) -> None:
        env = Env()
        env.add("A", [PreFilterPlugin], pre_filter=(PreFilterResult({"n1", "n2"}), None))
        env.add("B", [PreFilterPlugin], pre_filter=(PreFilterResult({"n2", "n3"}), None))
        env.add("C", [PreFilterPlugin], pre_filter=(PreFilterResult(None), None))
        fwk = env.framework(multi=["A", "C", "B"])
        result, status, rejectors = fwk.run_pre_filter_plugins(CycleState(), _pod(), [])
        assert status is None
        assert result is not None and result.node_names == {"n2"}
        assert rejectors == {"A", "B"}

    def test_empty_intersection_is_unresolvable(self) -> None:
        env = Env()
        env.add("B", [PreFilterPlugin], pre_filter=(PreFilterResult({"n1"}), None))
        env.add("A", [PreFilterPlugin], pre_filter=(PreFilterResult({"n2"}), None))
        env.add("Z", [PreFilterPlugin])
        fwk = env.framework(multi=["B", "A", "Z"])
        _, status, rejectors = fwk.run_pre_filter_plugins(CycleState(), _pod(), [])
        assert status == Status(UU, "node(s) didn't satisfy plugin(s) [A B] simultaneously")
        assert rejectors == {"A", "B"}
        assert "Z" not in env.calls("pre_filter")

    def test_single_plugin_selecting_nothing(self) -> None:
        env = Env()
        env.add("A", [PreFilterPlugin], pre_filter=(PreFilterResult(set()), None))
        fwk = env.framework(multi=["A"])
        _, status, _ = fwk.run_pre_filter_plugins(CycleState(), _pod(), [])
        assert status == Status(UU, "node(s) didn't satisfy plugin A")

    def test_error_and_exception(self) -> None:
        env = Env()
        env.add("A", [PreFilterPlugin], pre_filter=(None, Status(Code.ERROR, "io")))
        _, status, _ = env.framework(multi=["A"]).run_pre_filter_plugins(CycleState(), _pod(), [])
        assert status == Status(Code.ERROR, "running PreFilter plugin 'A': io", plugin="A")

        env = Env()
        env.add("A", [PreFilterPlugin], pre_filter=KeyError("x"))
        _, status, _ = env.framework(multi=["A"]).run_pre_filter_plugins(CycleState(), _pod(), [])
        assert status is not None and status.code == Code.ERROR and status.plugin == "A"


class TestFilter:
    def test_stops_at_first_rejection_and_names_plugin(self) -> None:
        env = Env()
        env.add("A", [FilterPlugin])
        env.add("B", [FilterPlugin], filter=Status(U, "full", plugin="wrong"))
        env.add("C", [FilterPlugin])
        fwk = env.framework(multi=["A", "B", "C"])
        status = fwk.run_filter_plugins(CycleState(), _pod(), _nodes("n1")[0])
        assert status == Status(U, "full", plugin="B")
        assert env.calls("filter") == ["A", "B"]

    def test_non_rejection_status_becomes_error(self) -> None:
        env = Env()
        env.add("A", [FilterPlugin], filter=Status(Code.WAIT, "huh"))
        status = env.framework(multi=["A"]).run_filter_plugins(
            CycleState(), _pod(), _nodes("n1")[0]
        )
        assert status == Status(Code.ERROR, "running 'A' filter plugin: huh", plugin="A")

    def test_exception_becomes_error_naming_plugin(self) -> None:
        env = Env()
        env.add("A", [FilterPlugin], filter=ZeroDivisionError("division by zero"))
        status = env.framework(multi=["A"]).run_filter_plugins(
            CycleState(), _pod(), _nodes("n1")[0]
        )
        assert status is not None and status.code == Code.ERROR
        assert status.plugin == "A" and "division by zero" in status.message()
        assert isinstance(status.error, ZeroDivisionError)

    def test_all_pass(self) -> None:
        env = Env()
        env.add("A", [FilterPlugin])
        assert (
            env.framework(multi=["A"]).run_filter_plugins(CycleState(), _pod(), _nodes("n1")[0])
            is None
        )


def _reject_if_pods(state: CycleState, pod_info: PodInfo, node_info: NodeInfo) -> Status | None:
    return Status(U, "occupied") if node_info.pods else None


def _reject_if_empty(state: CycleState, pod_info: PodInfo, node_info: NodeInfo) -> Status | None:
    return Status(U, "needs company") if not node_info.pods else None


class TestFilterWithNominatedPods:
    def _env(self, filter_fn: Any, nominated: list[PodInfo]) -> Env:
        env = Env()
        env.add("F", [PreFilterPlugin, FilterPlugin], filter=filter_fn, extensions=True)
        env.nominator.nominated["n1"] = nominated
        return env

    def test_higher_priority_nominated_pod_counts(self) -> None:
        env = self._env(_reject_if_pods, [_pod("nom", priority=10)])
        fwk = env.framework(multi=["F"])
        state = CycleState()
        status = fwk.run_filter_plugins_with_nominated_pods(
            state, _pod(priority=5), _nodes("n1")[0]
        )
        assert status == Status(U, "occupied", plugin="F")
        assert env.calls("add_pod") == ["F"]

    def test_lower_priority_nominated_pod_is_ignored(self) -> None:
        env = self._env(_reject_if_pods, [_pod("nom", priority=1)])
        fwk = env.framework(multi=["F"])
        status = fwk.run_filter_plugins_with_nominated_pods(
            CycleState(), _pod(priority=5), _nodes("n1")[0]
        )
        assert status is None
        assert env.calls("add_pod") == []
        assert env.calls("filter") == ["F"]  # one pass only

    def test_the_pod_itself_is_not_added(self) -> None:
        env = self._env(_reject_if_pods, [_pod("p", priority=10)])
        fwk = env.framework(multi=["F"])
        assert (
            fwk.run_filter_plugins_with_nominated_pods(
                CycleState(), _pod("p", priority=10), _nodes("n1")[0]
            )
            is None
        )

    def test_second_pass_without_nominated_pods_must_also_pass(self) -> None:
        env = self._env(_reject_if_empty, [_pod("nom", priority=10)])
        fwk = env.framework(multi=["F"])
        node = _nodes("n1")[0]
        status = fwk.run_filter_plugins_with_nominated_pods(CycleState(), _pod(priority=5), node)
        assert status == Status(U, "needs company", plugin="F")
        assert env.calls("filter") == ["F", "F"]
        assert node.pods == []  # the real NodeInfo was not touched

    def test_add_pod_failure_is_error(self) -> None:
        env = self._env(_reject_if_pods, [_pod("nom", priority=10)])
        env.instances.clear()
        fwk = env.framework(multi=["F"])
        env.instances["F"].behaviour["add_pod"] = Status(Code.ERROR, "state broken")
        status = fwk.run_filter_plugins_with_nominated_pods(
            CycleState(), _pod(priority=5), _nodes("n1")[0]
        )
        assert status is not None and status.code == Code.ERROR
        assert "running AddPod on PreFilter plugin 'F'" in status.message()

    def test_extensions_skip_plugins_skipped_at_pre_filter(self) -> None:
        env = self._env(_reject_if_pods, [_pod("nom", priority=10)])
        fwk = env.framework(multi=["F"])
        state = CycleState()
        state.skip_filter_plugins = {"F"}
        assert (
            fwk.run_pre_filter_extension_add_pod(state, _pod(), _pod("x"), _nodes("n1")[0]) is None
        )
        assert (
            fwk.run_pre_filter_extension_remove_pod(state, _pod(), _pod("x"), _nodes("n1")[0])
            is None
        )
        assert env.calls("add_pod") == [] and env.calls("remove_pod") == []


class TestPostFilter:
    def test_first_success_wins(self) -> None:
        env = Env()
        env.add("A", [FilterPlugin, PostFilterPlugin], post_filter=(None, Status(U, "a")))
        env.add("B", [PostFilterPlugin], post_filter=(PostFilterResult("n9"), None))
        env.add("C", [PostFilterPlugin])
        fwk = env.framework(multi=["A", "B", "C"])
        result, status = fwk.run_post_filter_plugins(CycleState(), _pod(), {})
        assert result == PostFilterResult("n9") and status is None
        assert env.calls("post_filter") == ["A", "B"]

    def test_all_unschedulable_aggregates_reasons(self) -> None:
        env = Env()
        env.add("A", [PostFilterPlugin], post_filter=(None, Status(U, "a")))
        env.add("B", [PostFilterPlugin], post_filter=(PostFilterResult("n2"), Status(U, "b")))
        result, status = env.framework(multi=["A", "B"]).run_post_filter_plugins(
            CycleState(), _pod(), {}
        )
        assert result == PostFilterResult("n2")
        assert status == Status(U, "a", "b", plugin="A")

    def test_unresolvable_and_error_stop(self) -> None:
        env = Env()
        env.add("A", [PostFilterPlugin], post_filter=(None, Status(UU, "never")))
        env.add("B", [PostFilterPlugin])
        _, status = env.framework(multi=["A", "B"]).run_post_filter_plugins(
            CycleState(), _pod(), {}
        )
        assert status == Status(UU, "never", plugin="A")
        assert env.calls("post_filter") == ["A"]

        env = Env()
        env.add("A", [PostFilterPlugin], post_filter=RuntimeError("bug"))
        result, status = env.framework(multi=["A"]).run_post_filter_plugins(
            CycleState(), _pod(), {}
        )
        assert result is None and status is not None and status.code == Code.ERROR


# --- Score ------------------------------------------------------------------------------------


def _by_node(scores: dict[str, int]) -> Any:
    def fn(state: CycleState, pod_info: PodInfo, node_info: NodeInfo) -> tuple[int, None]:
        return scores[node_info.name], None

    return fn


class TestScore:
    def test_weights_and_totals(self) -> None:
        env = Env()
        env.add("A", [ScorePlugin], score=_by_node({"n1": 10, "n2": 20}))
        env.add("B", [ScorePlugin], score=_by_node({"n1": 50, "n2": 0}))
        fwk = env.framework(multi=[("A", 2), ("B", 3)])
        results = fwk.run_score_plugins(CycleState(), _pod(), _nodes("n1", "n2"))
        assert [(r.name, r.total_score, r.scores) for r in results] == [
            ("n1", 170, {"A": 20, "B": 150}),
            ("n2", 40, {"A": 40, "B": 0}),
        ]

    def test_normalize_runs_before_range_check(self) -> None:
        def halve(scores: list[NodeScore]) -> None:
            for s in scores:
                s.score //= 2

        env = Env()
        env.add("A", [ScorePlugin], score=_by_node({"n1": 200, "n2": 100}), normalize=halve)
        results = env.framework(multi=["A"]).run_score_plugins(
            CycleState(), _pod(), _nodes("n1", "n2")
        )
        assert [r.total_score for r in results] == [100, 50]

    @pytest.mark.parametrize("bad", [101, -1])
    def test_out_of_range_is_error_naming_plugin(self, bad: int) -> None:
        env = Env()
        env.add("A", [ScorePlugin], score=_by_node({"n1": 5}))
        env.add("B", [ScorePlugin], score=_by_node({"n1": bad}))
        fwk = env.framework(multi=["A", "B"])
        with pytest.raises(FrameworkStatusError) as err:
            fwk.run_score_plugins(CycleState(), _pod(), _nodes("n1"))
        assert err.value.status.plugin == "B"
        assert f"plugin 'B' returns an invalid score {bad}" in str(err.value)
        results, status = fwk.score_nodes(CycleState(), _pod(), _nodes("n1"))
        assert results == [] and status is not None and status.code == Code.ERROR

    def test_score_and_normalize_failures(self) -> None:
        env = Env()
        env.add("A", [ScorePlugin], score=RuntimeError("bug"))
        _, status = env.framework(multi=["A"]).score_nodes(CycleState(), _pod(), _nodes("n1"))
        assert status is not None and status.plugin == "A" and status.code == Code.ERROR

        env = Env()
        env.add("A", [ScorePlugin], normalize=lambda s: Status(Code.ERROR, "bad normalize"))
        _, status = env.framework(multi=["A"]).score_nodes(CycleState(), _pod(), _nodes("n1"))
        assert status is not None and "bad normalize" in status.message()

    def test_pre_score_skip_skips_score(self) -> None:
        env = Env()
        env.add(
            "A",
            [PreScorePlugin, ScorePlugin],
            pre_score=Status(Code.SKIP),
            score=_by_node({"n1": 100}),
        )
        env.add("B", [ScorePlugin], score=_by_node({"n1": 7}))
        fwk = env.framework(multi=["A", "B"])
        state = CycleState()
        assert fwk.run_pre_score_plugins(state, _pod(), _nodes("n1")) is None
        assert state.skip_score_plugins == {"A"}
        results = fwk.run_score_plugins(state, _pod(), _nodes("n1"))
        assert results[0].scores == {"B": 7}
        assert "A" not in env.calls("score")

    def test_pre_score_error(self) -> None:
        env = Env()
        env.add("A", [PreScorePlugin], pre_score=Status(U, "no"))
        status = env.framework(multi=["A"]).run_pre_score_plugins(CycleState(), _pod(), [])
        assert status == Status(Code.ERROR, "running PreScore plugin 'A': no", plugin="A")


# --- Reserve / Permit / Bind ------------------------------------------------------------------


class TestReserve:
    def test_unreserve_runs_in_reverse_and_swallows_exceptions(self) -> None:
        env = Env()
        env.add("A", [ReservePlugin])
        env.add("B", [ReservePlugin], unreserve=RuntimeError("bug"))
        env.add("C", [ReservePlugin])
        fwk = env.framework(multi=["A", "B", "C"])
        fwk.run_reserve_plugins_unreserve(CycleState(), _pod(), "n1")
        assert env.calls("unreserve") == ["C", "B", "A"]

    def test_reserve_stops_at_failure(self) -> None:
        env = Env()
        env.add("A", [ReservePlugin], reserve=Status(U, "taken"))
        env.add("B", [ReservePlugin])
        fwk = env.framework(multi=["A", "B"])
        assert fwk.run_reserve_plugins_reserve(CycleState(), _pod(), "n1") == Status(
            U, "taken", plugin="A"
        )
        assert env.calls("reserve") == ["A"]

    def test_reserve_error_wrapped(self) -> None:
        env = Env()
        env.add("A", [ReservePlugin], reserve=Status(Code.ERROR, "io"))
        status = env.framework(multi=["A"]).run_reserve_plugins_reserve(CycleState(), _pod(), "n")
        assert status == Status(Code.ERROR, "running Reserve plugin 'A': io", plugin="A")

    @pytest.mark.parametrize("sampled", [False, True], ids=["unsampled", "sampled"])
    def test_reserve_that_raises_is_an_error_and_stops(self, sampled: bool) -> None:
        env = Env()
        env.add("A", [ReservePlugin], reserve=RuntimeError("bug"))
        env.add("B", [ReservePlugin])
        state = CycleState()
        state.record_plugin_metrics = sampled
        status = env.framework(multi=["A", "B"]).run_reserve_plugins_reserve(state, _pod(), "n")
        assert status == Status(Code.ERROR, "running Reserve plugin 'A': bug", plugin="A")
        assert env.calls("reserve") == ["A"]


class TestPermit:
    async def test_all_allow(self) -> None:
        env = Env()
        env.add("A", [PermitPlugin])
        fwk = env.framework(multi=["A"])
        assert fwk.run_permit_plugins(CycleState(), _pod(), "n1") is None
        assert await fwk.wait_on_permit(_pod()) is None
        assert len(fwk.waiting_pods) == 0

    async def test_reject(self) -> None:
        env = Env()
        env.add("A", [PermitPlugin], permit=(Status(U, "nope"), 0.0))
        env.add("B", [PermitPlugin])
        fwk = env.framework(multi=["A", "B"])
        assert fwk.run_permit_plugins(CycleState(), _pod(), "n1") == Status(U, "nope", plugin="A")
        assert env.calls("permit") == ["A"]

    async def test_error_wrapped(self) -> None:
        env = Env()
        env.add("A", [PermitPlugin], permit=RuntimeError("bug"))
        status = env.framework(multi=["A"]).run_permit_plugins(CycleState(), _pod(), "n1")
        assert status is not None and status.code == Code.ERROR and status.plugin == "A"
        assert status.message().startswith("running Permit plugin 'A': ")

    async def test_wait_then_allow(self) -> None:
        env = Env()
        env.add("A", [PermitPlugin], permit=(Status(Code.WAIT), 30.0))
        env.add("B", [PermitPlugin], permit=(Status(Code.WAIT), 30.0))
        fwk = env.framework(multi=["A", "B"])
        pod = _pod()
        status = fwk.run_permit_plugins(CycleState(), pod, "n1")
        assert status is not None and status.code == Code.WAIT
        waiting = fwk.handle.get_waiting_pod(pod.uid)
        assert waiting is not None and sorted(waiting.pending_plugins()) == ["A", "B"]
        waiter = asyncio.create_task(fwk.wait_on_permit(pod))
        waiting.allow("A")
        await asyncio.sleep(0)
        assert not waiter.done()
        waiting.allow("B")
        assert await waiter is None
        assert fwk.handle.get_waiting_pod(pod.uid) is None

    async def test_wait_then_reject(self) -> None:
        env = Env()
        env.add("A", [PermitPlugin], permit=(Status(Code.WAIT), 30.0))
        fwk = env.framework(multi=["A"])
        pod = _pod()
        fwk.run_permit_plugins(CycleState(), pod, "n1")
        waiter = asyncio.create_task(fwk.wait_on_permit(pod))
        assert fwk.reject_waiting_pod(pod.uid)
        assert await waiter == Status(U, "removed", plugin="")
        assert not fwk.reject_waiting_pod(pod.uid)

    async def test_timeout(self) -> None:
        env = Env()
        env.add("Gang", [PermitPlugin], permit=(Status(Code.WAIT), 0.01))
        fwk = env.framework(multi=["Gang"])
        pod = _pod()
        fwk.run_permit_plugins(CycleState(), pod, "n1")
        status = await asyncio.wait_for(fwk.wait_on_permit(pod), 5)
        assert status == Status(
            U, "rejected due to timeout after waiting 10ms at plugin Gang", plugin="Gang"
        )

    async def test_timeout_capped_at_15_minutes(self) -> None:
        env = Env()
        env.add("A", [PermitPlugin], permit=(Status(Code.WAIT), 3600.0))
        fwk = env.framework(multi=["A"])
        pod = _pod()
        loop = asyncio.get_running_loop()
        fwk.run_permit_plugins(CycleState(), pod, "n1")
        waiting = fwk.waiting_pods.get(pod.uid)
        assert waiting is not None
        timer = waiting._pending["A"]
        assert timer.when() - loop.time() <= 15 * 60
        waiting.reject("", "cleanup")
        await fwk.wait_on_permit(pod)

    async def test_permit_wait_metric(self) -> None:
        metrics = SchedulerMetrics()
        env = Env()
        env.add("A", [PermitPlugin], permit=(Status(Code.WAIT), 30.0))
        fwk = env.framework(multi=["A"], metrics=metrics)
        pod = _pod()
        fwk.run_permit_plugins(CycleState(), pod, "n1")
        fwk.waiting_pods.get(pod.uid).allow("A")  # type: ignore[union-attr]
        await fwk.wait_on_permit(pod)
        assert (
            metrics.registry.get_sample_value(
                "scheduler_permit_wait_duration_seconds_count", {"result": "Success"}
            )
            == 1
        )


class TestBind:
    async def test_skip_chain(self) -> None:
        env = Env()
        env.add("B1", [BindPlugin], bind=Status(Code.SKIP))
        fwk = env.framework(multi=["B1"])  # Binder comes after B1
        assert await fwk.run_bind_plugins(CycleState(), _pod(), "n1") is None
        assert env.calls("bind") == ["B1", "Binder"]

    async def test_all_skip(self) -> None:
        env = Env()
        env.add("B1", [BindPlugin], bind=Status(Code.SKIP))
        fwk = env.framework(multi=["B1"], binder=False)
        status = await fwk.run_bind_plugins(CycleState(), _pod(), "n1")
        assert status is not None and status.code == Code.SKIP

    async def test_first_decisive_binder_wins_and_error_keeps_cause(self) -> None:
        cause = AlreadyBoundError("already bound")
        env = Env()
        env.add("B1", [BindPlugin], bind=Status(Code.ERROR, "already bound", error=cause))
        fwk = env.framework(multi=["B1"])
        status = await fwk.run_bind_plugins(CycleState(), _pod(), "n1")
        assert status is not None and status.code == Code.ERROR and status.plugin == "B1"
        assert status.error is cause
        assert env.calls("bind") == ["B1"]

    async def test_pre_bind_and_post_bind(self) -> None:
        env = Env()
        env.add(
            "P",
            [PreBindPlugin, PostBindPlugin],
            pre_bind=Status(U, "volume not ready"),
            post_bind=RuntimeError("ignored"),
        )
        fwk = env.framework(multi=["P"])
        assert await fwk.run_pre_bind_plugins(CycleState(), _pod(), "n1") == Status(
            U, "volume not ready", plugin="P"
        )
        fwk.run_post_bind_plugins(CycleState(), _pod(), "n1")  # must not raise
        assert env.calls("post_bind") == ["P"]


# --- events, handle, metrics ------------------------------------------------------------------


class TestEventsToRegister:
    def test_wildcard_default_and_declared_events(self) -> None:
        node_add = ClusterEvent(EventResource.NODE, ActionType.ADD)

        def hint(pod: Any, old: Any, new: Any) -> Any:
            return None

        env = Env()
        env.add("NoExt", [FilterPlugin])
        env.add(
            "WithExt", [FilterPlugin], enqueue=True, events=[ClusterEventWithHint(node_add, hint)]
        )
        env.add("ScoreOnly", [ScorePlugin])
        env.add("Permit", [PermitPlugin])
        fwk = env.framework(multi=["NoExt", "WithExt", "ScoreOnly", "Permit"])
        events = fwk.events_to_register()
        assert (WILDCARD_EVENT, "NoExt", None) in events
        assert (node_add, "WithExt", hint) in events
        assert (WILDCARD_EVENT, "Permit", None) in events
        assert all(name not in ("ScoreOnly", "Sort", "Binder") for _, name, _ in events)
        assert WILDCARD_EVENT.is_wildcard()


class TestHandle:
    def test_handle_members(self) -> None:
        env = Env()
        env.add("A", [FilterPlugin], filter=_reject_if_pods)
        fwk = env.framework(multi=["A"])
        handle = env.instances["A"].handle
        assert handle is fwk.handle
        assert handle.profile_name == "test-profile"
        assert handle.snapshot() is env.snapshot
        assert handle.client is env.client
        assert handle.event_recorder is env.recorder
        assert handle.nominator is env.nominator
        assert handle.clock() == 1000.0
        handle.activate([{"metadata": {"name": "x"}}])
        assert env.activated == [{"metadata": {"name": "x"}}]
        assert list(handle.iterate_waiting_pods()) == []
        assert handle.get_waiting_pod("nope") is None
        assert not handle.reject_waiting_pod("nope")
        node = NodeInfo(make_node("n1"))
        node.add_pod(_pod("other"))
        assert handle.run_filter_plugins_with_nominated_pods(CycleState(), _pod(), node) == Status(
            U, "occupied", plugin="A"
        )


class TestMetrics:
    def test_extension_point_and_sampled_plugin_durations(self) -> None:
        metrics = SchedulerMetrics()
        env = Env()
        env.add("A", [PreFilterPlugin, FilterPlugin], pre_filter=(None, Status(U, "x")))
        fwk = env.framework(multi=["A"], metrics=metrics)
        get = metrics.registry.get_sample_value
        state = CycleState()
        fwk.run_pre_filter_plugins(state, _pod(), [])
        assert (
            get(
                "scheduler_framework_extension_point_duration_seconds_count",
                {
                    "extension_point": "PreFilter",
                    "status": "Unschedulable",
                    "profile": "test-profile",
                },
            )
            == 1
        )
        labels = {"plugin": "A", "extension_point": "PreFilter", "status": "Unschedulable"}
        assert get("scheduler_plugin_execution_duration_seconds_count", labels) is None
        state.record_plugin_metrics = True
        fwk.run_pre_filter_plugins(state, _pod(), [])
        assert get("scheduler_plugin_execution_duration_seconds_count", labels) == 1

    # Each binding-side extension point with and without a plugin in the profile: one
    # observation with the same status label either way; an empty one records zero seconds.
    BINDING_POINTS = [
        ("Reserve", ReservePlugin, "Success"),
        ("Unreserve", ReservePlugin, "Success"),
        ("Permit", PermitPlugin, "Success"),
        ("PreBindPreFlight", PreBindPlugin, "Skip"),
        ("PreBind", PreBindPlugin, "Success"),
        ("PostBind", PostBindPlugin, "Success"),
    ]

    @pytest.mark.parametrize("with_plugin", [True, False], ids=["a plugin", "no plugin"])
    @pytest.mark.parametrize(("point", "kind", "status"), BINDING_POINTS,
                             ids=[p[0] for p in BINDING_POINTS])
    async def test_binding_extension_points_observed_with_or_without_plugins(
            self, point: str, kind: type, status: str, with_plugin: bool) -> None:
        metrics = SchedulerMetrics()
        env = Env()
        env.add("A", [kind, BindPlugin] if with_plugin else [BindPlugin],
                **({"pre_bind_pre_flight": Status(Code.SKIP)} if point == "PreBindPreFlight"
                   and with_plugin else {}))
        fwk = env.framework(multi=["A"], metrics=metrics)
        state, pod = CycleState(), _pod()
        state.skip_pre_bind_plugins = {"stale"}
        run = {
            "Reserve": lambda: fwk.run_reserve_plugins_reserve(state, pod, "n1"),
            "Unreserve": lambda: fwk.run_reserve_plugins_unreserve(state, pod, "n1"),
            "Permit": lambda: fwk.run_permit_plugins(state, pod, "n1"),
            "PreBindPreFlight": lambda: fwk.run_pre_bind_pre_flights(state, pod, "n1"),
            "PostBind": lambda: fwk.run_post_bind_plugins(state, pod, "n1"),
        }
        labels = {"extension_point": point, "status": status, "profile": "test-profile"}
        get = metrics.registry.get_sample_value
        # No series before the first observation (the child is made then).
        assert get("scheduler_framework_extension_point_duration_seconds_count", labels) is None
        if point == "PreBind":
            result = await fwk.run_pre_bind_plugins(state, pod, "n1")
        else:
            result = run[point]()
        expected = Status(Code.SKIP) if point == "PreBindPreFlight" else None
        assert result == expected
        if point == "PreBindPreFlight":
            assert state.skip_pre_bind_plugins == ({"A"} if with_plugin else set())
        assert get("scheduler_framework_extension_point_duration_seconds_count", labels) == 1
        total = get("scheduler_framework_extension_point_duration_seconds_sum", labels)
        assert total is not None and (total > 0) is with_plugin
        if not with_plugin:  # zero seconds: in the smallest bucket, as observe(0.0) puts it
            assert get("scheduler_framework_extension_point_duration_seconds_bucket",
                       {**labels, "le": "0.0001"}) == 1

    def test_filter_evaluations_counted_in_bulk(self) -> None:
        metrics = SchedulerMetrics()
        env = Env()
        env.add("A", [FilterPlugin])
        fwk = env.framework(multi=["A"], metrics=metrics)
        for node in _nodes("n1", "n2", "n3"):
            fwk.run_filter_plugins(CycleState(), _pod(), node)
        fwk.flush_metrics()
        assert (
            metrics.registry.get_sample_value(
                "scheduler_plugin_evaluation_total",
                {"plugin": "A", "extension_point": "Filter", "profile": "test-profile"},
            )
            == 3
        )

    def test_sampled_batch_filter_observes_one_call_per_node_by_status(self) -> None:
        metrics = SchedulerMetrics()
        env = Env()
        env.add("A", [FilterPlugin])
        fwk = env.framework(multi=["A"], metrics=metrics)
        get = metrics.registry.get_sample_value
        ok = {"plugin": "A", "extension_point": "Filter", "status": "Success"}
        nodes = _nodes("n1", "n2", "n3")
        state = CycleState()
        fwk.run_filter_plugins_on_nodes(state, _pod(), nodes)
        assert get("scheduler_plugin_execution_duration_seconds_count", ok) is None
        state.record_plugin_metrics = True
        assert fwk.run_filter_plugins_on_nodes(state, _pod(), nodes) == [None, None, None]
        assert get("scheduler_plugin_execution_duration_seconds_count", ok) == 3
        assert get("scheduler_plugin_execution_duration_seconds_sum", ok) >= 0

    def test_new_cycle_state_samples_about_ten_percent(self) -> None:
        import random

        env = Env()
        fwk = env.framework(metrics=SchedulerMetrics())
        fwk._rng = random.Random(7)
        sampled = sum(fwk.new_cycle_state().record_plugin_metrics for _ in range(2000))
        assert 100 < sampled < 300
        assert not Env().framework().new_cycle_state().record_plugin_metrics  # no metrics

    @pytest.mark.parametrize("seed", [0, 7, 12345])
    def test_sampling_draws_what_randrange_draws(self, seed: int) -> None:
        """The scheduler's generator also breaks host ties: the sampling draw takes the
        same bits from it as ``randrange(100) < percent``, so placements do not move."""
        import random

        from scheduler.framework.runtime import PLUGIN_METRICS_SAMPLE_PERCENT

        fwk = Env().framework(metrics=SchedulerMetrics())
        fwk._rng = random.Random(seed)
        reference = random.Random(seed)
        for _ in range(500):
            assert fwk.new_cycle_state().record_plugin_metrics == (
                reference.randrange(100) < PLUGIN_METRICS_SAMPLE_PERCENT)
        assert fwk._rng.getstate() == reference.getstate()


class TestPreFilterAndPreScoreCalls:
    """Unsampled cycles call PreFilter and PreScore plugins without the timed wrapper: an
    exception still becomes an Error naming the plugin, in sampled cycles and not, and each
    plugin run is counted in scheduler_plugin_evaluation_total."""

    @pytest.mark.parametrize("sampled", [False, True])
    @pytest.mark.parametrize("point", ["pre_filter", "pre_score"])
    def test_a_raising_plugin_fails_the_pod_with_an_error_naming_it(
        self, sampled: bool, point: str,
    ) -> None:
        env = Env()
        env.add("A", [PreFilterPlugin, PreScorePlugin])
        env.add("B", [PreFilterPlugin, PreScorePlugin], **{point: RuntimeError("boom")})
        env.add("C", [PreFilterPlugin, PreScorePlugin])
        fwk = env.framework(multi=["A", "B", "C"], metrics=SchedulerMetrics())
        state = CycleState()
        state.record_plugin_metrics = sampled
        if point == "pre_filter":
            _, status, _ = fwk.run_pre_filter_plugins(state, _pod(), _nodes("n1"))
        else:
            status = fwk.run_pre_score_plugins(state, _pod(), _nodes("n1"))
        assert status is not None and status.code == Code.ERROR
        assert status.plugin == "B" and "boom" in status.message()
        assert ("C", point) not in env.log  # the run stops at the error

    @pytest.mark.parametrize("point", ["PreFilter", "PreScore"])
    def test_each_plugin_run_is_counted(self, point: str) -> None:
        metrics = SchedulerMetrics()
        env = Env()
        env.add("A", [PreFilterPlugin, PreScorePlugin])
        env.add("B", [PreFilterPlugin, PreScorePlugin], pre_filter=(None, Status(Code.SKIP)),
                pre_score=Status(Code.SKIP))
        fwk = env.framework(multi=["A", "B"], metrics=metrics)
        for sampled in (False, True, False):
            state = CycleState()
            state.record_plugin_metrics = sampled
            if point == "PreFilter":
                fwk.run_pre_filter_plugins(state, _pod(), _nodes("n1"))
            else:
                fwk.run_pre_score_plugins(state, _pod(), _nodes("n1"))
        for name in ("A", "B"):
            assert metrics.registry.get_sample_value(
                "scheduler_plugin_evaluation_total",
                {"plugin": name, "extension_point": point, "profile": "test-profile"}) == 3
