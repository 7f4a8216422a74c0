"""Score normalization and shape functions shared by score plugins."""

from __future__ import annotations

import pytest

from scheduler.config.errors import ConfigError
from scheduler.framework.types import MAX_NODE_SCORE, NodeScore
from scheduler.plugins.helper import (
    FunctionShapePoint,
    build_broken_linear_function,
    default_normalize_score,
    default_normalize_values,
    go_div,
    normalize_to_max_node_score,
    validate_no_args,
)


def _scores(values: list[int]) -> list[NodeScore]:
    return [NodeScore(f"n{i}", v) for i, v in enumerate(values)]


@pytest.mark.parametrize(
    ("reverse", "raw", "want"),
    [
        (False, [2, 4, 6, 8], [25, 50, 75, 100]),
        (True, [2, 4, 6, 8], [75, 50, 25, 0]),
        (False, [500, 5, 10, 15], [100, 1, 2, 3]),
        (True, [500, 5, 10, 15], [0, 99, 98, 97]),
        (False, [7, 7, 7], [100, 100, 100]),
        (False, [300, 2, 2], [100, 0, 0]),  # truncation, not rounding
        (True, [0, 3, 3, 3], [100, 0, 0, 0]),
        (False, [0, 0, 0], [0, 0, 0]),  # all zero stays zero
        (True, [0, 0], [100, 100]),  # all zero reversed: everyone is best
        (False, [1, 2], [50, 100]),
        (False, [], []),
        (True, [], []),
    ],
)
def test_default_normalize_score(reverse: bool, raw: list[int], want: list[int]) -> None:
    scores = _scores(raw)
    default_normalize_score(MAX_NODE_SCORE, reverse, scores)
    assert [s.score for s in scores] == want
    assert [s.name for s in scores] == [f"n{i}" for i in range(len(raw))]
    assert default_normalize_values(MAX_NODE_SCORE, reverse, list(raw)) == want


def test_default_normalize_score_custom_max_priority() -> None:
    scores = _scores([1, 3])
    default_normalize_score(10, False, scores)
    assert [s.score for s in scores] == [3, 10]


def test_normalize_to_max_node_score_shortcut() -> None:
    scores = _scores([1, 4])
    normalize_to_max_node_score(scores, reverse=True)
    assert [s.score for s in scores] == [75, 0]


@pytest.mark.parametrize(
    ("a", "b", "want"),
    [(7, 2, 3), (-7, 2, -3), (7, -2, -3), (-7, -2, 3), (0, 5, 0), (6, 3, 2)],
)
def test_go_div_truncates_toward_zero(a: int, b: int, want: int) -> None:
    assert go_div(a, b) == want


_SHAPE = [FunctionShapePoint(10, 1), FunctionShapePoint(20, 6), FunctionShapePoint(40, 2)]


@pytest.mark.parametrize(
    ("x", "want"),
    [
        (-5, 1),  # below the first point
        (10, 1),
        (12, 2),  # 1 + 5*2/10
        (15, 3),
        (20, 6),
        (30, 4),  # 6 + (-4)*10/20
        (39, 3),  # 6 + (-4)*19/20 = 6 - 3 (truncated toward zero)
        (40, 2),
        (1000, 2),  # above the last point
    ],
)
def test_broken_linear_function(x: int, want: int) -> None:
    assert build_broken_linear_function(_SHAPE)(x) == want


def test_broken_linear_function_single_point_is_constant() -> None:
    f = build_broken_linear_function([FunctionShapePoint(50, 7)])
    assert [f(0), f(50), f(100)] == [7, 7, 7]


def test_broken_linear_function_needs_a_point() -> None:
    with pytest.raises(ValueError):
        build_broken_linear_function([])


@pytest.mark.parametrize("args", [None, {}, {"apiVersion": "x", "kind": "Y"}])
def test_validate_no_args_accepts_empty(args: dict[str, str] | None) -> None:
    validate_no_args("P", args)


def test_validate_no_args_names_unknown_field() -> None:
    with pytest.raises(ConfigError, match=r"P\.args\.foo: unknown field"):
        validate_no_args("P", {"foo": 1})


def test_validate_no_args_rejects_non_mapping() -> None:
    with pytest.raises(ConfigError, match="must be an object"):
        validate_no_args("P", [1])  # type: ignore[arg-type]
