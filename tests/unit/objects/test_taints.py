import pytest

from scheduler.objects.errors import ObjectError
from scheduler.objects.taints import (
    NO_EXECUTE,
    NO_SCHEDULE,
    PREFER_NO_SCHEDULE,
    Taint,
    Toleration,
    find_untolerated_taint,
    format_taint,
    parse_taints,
    parse_tolerations,
    tolerates,
)
from tests.builders import NodeBuilder, PodBuilder

T = Taint("dedicated", "gpu", NO_SCHEDULE)


@pytest.mark.parametrize(
    ("tol", "taint", "expected"),
    [
        (Toleration("dedicated", "Equal", "gpu", NO_SCHEDULE), T, True),
        (Toleration("dedicated", "", "gpu", NO_SCHEDULE), T, True),
        (Toleration("dedicated", "Equal", "cpu", NO_SCHEDULE), T, False),
        (Toleration("dedicated", "Exists", "", NO_SCHEDULE), T, True),
        (Toleration("dedicated", "Exists", "ignored", ""), T, True),
        (Toleration("dedicated", "Exists", "", NO_EXECUTE), T, False),
        (Toleration("", "Exists"), T, True),
        (Toleration("", "Exists", "", PREFER_NO_SCHEDULE), T, False),
        (Toleration("other", "Exists"), T, False),
        (Toleration("dedicated", "Gt", "1"), T, False),
        (Toleration("", "Equal", "gpu"), T, True),  # upstream: empty key skips key check
        (Toleration("dedicated", "Equal", ""), Taint("dedicated", "", NO_SCHEDULE), True),
    ],
    ids=["equal", "empty-op-is-equal", "equal-wrong-value", "exists", "exists-any-effect",
         "effect-mismatch", "wildcard", "wildcard-effect-mismatch", "other-key",
         "unknown-operator", "empty-key-equal", "empty-values"],
)
def test_tolerates(tol: Toleration, taint: Taint, expected: bool) -> None:
    assert tolerates(tol, taint) is expected


@pytest.mark.parametrize(
    ("taints", "tolerations", "effects", "expected"),
    [
        ([], [], frozenset({NO_SCHEDULE}), None),
        ([T], [], frozenset({NO_SCHEDULE, NO_EXECUTE}), T),
        ([T], [Toleration("dedicated", "Exists")], frozenset({NO_SCHEDULE}), None),
        ([Taint("a", "", PREFER_NO_SCHEDULE), T], [], frozenset({NO_SCHEDULE}), T),
        ([Taint("a", "", PREFER_NO_SCHEDULE)], [], frozenset({NO_SCHEDULE}), None),
        ([Taint("a", "1", NO_EXECUTE), T], [Toleration("a", "Exists")],
         frozenset({NO_SCHEDULE, NO_EXECUTE}), T),
    ],
    ids=["none", "untolerated", "tolerated", "skips-other-effects", "filtered-out",
         "second-untolerated"],
)
def test_find_untolerated_taint(taints: list[Taint], tolerations: list[Toleration],
                                effects: frozenset[str], expected: Taint | None) -> None:
    assert find_untolerated_taint(taints, tolerations, effects=effects) == expected


def test_parse_and_format() -> None:
    node = NodeBuilder("n1").taint("dedicated", "gpu", NO_SCHEDULE).taint("x", "", NO_EXECUTE).obj()
    assert parse_taints(node) == [T, Taint("x", "", NO_EXECUTE)]
    assert format_taint(T) == "{dedicated: gpu}"
    pod = PodBuilder("p").toleration(key="dedicated", operator="Exists",
                                     effect=NO_SCHEDULE, toleration_seconds=5).obj()
    assert parse_tolerations(pod) == [Toleration("dedicated", "Exists", "", NO_SCHEDULE, 5)]


@pytest.mark.parametrize(
    ("path", "value", "field"),
    [
        ("spec.taints", [{"key": "a", "effect": "Sometimes"}], "spec.taints[0].effect"),
        ("spec.taints", [{"effect": "NoSchedule"}], "spec.taints[0].key"),
        ("spec.taints", [{"key": 1, "effect": "NoSchedule"}], "spec.taints[0].key"),
        ("spec.taints", "nope", "spec.taints"),
    ],
    ids=["bad-effect", "missing-key", "key-not-string", "not-a-list"],
)
def test_parse_taints_errors(path: str, value: object, field: str) -> None:
    node = NodeBuilder("n1").set(path, value).obj()
    with pytest.raises(ObjectError) as ei:
        parse_taints(node)
    assert ei.value.field == field
    assert ei.value.kind == "Node" and ei.value.name == "n1"


def test_parse_tolerations_error() -> None:
    pod = PodBuilder("p").set("spec.tolerations", [{"key": "a", "tolerationSeconds": "5"}]).obj()
    with pytest.raises(ObjectError, match=r"^Pod default/p: spec.tolerations\[0\].tolerationSeconds"):
        parse_tolerations(pod)
