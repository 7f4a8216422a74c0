from typing import Any

import pytest

from scheduler.objects.labels import (
    LabelSelector,
    LabelSelectorError,
    parse_selector_string,
    validate_label_key,
    validate_label_value,
)

L = {"app": "web", "tier": "fe", "n": "5", "empty": ""}


@pytest.mark.parametrize(
    ("sel", "expected"),
    [
        (None, False),
        ({}, True),
        ({"matchLabels": {"app": "web"}}, True),
        ({"matchLabels": {"app": "db"}}, False),
        ({"matchLabels": {"app": "web", "tier": "fe"}}, True),
        ({"matchExpressions": [{"key": "app", "operator": "In", "values": ["web", "x"]}]}, True),
        ({"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["web"]}]}, False),
        ({"matchExpressions": [{"key": "zz", "operator": "NotIn", "values": ["web"]}]}, True),
        ({"matchExpressions": [{"key": "app", "operator": "Exists"}]}, True),
        ({"matchExpressions": [{"key": "zz", "operator": "DoesNotExist"}]}, True),
        ({"matchExpressions": [{"key": "empty", "operator": "DoesNotExist"}]}, False),
        ({"matchLabels": {"app": "web"},
          "matchExpressions": [{"key": "tier", "operator": "In", "values": ["be"]}]}, False),
    ],
    ids=["nil-nothing", "empty-everything", "eq", "eq-miss", "two-eq", "in", "notin",
         "notin-missing-key", "exists", "doesnotexist", "doesnotexist-present", "and"],
)
def test_from_dict_matches(sel: dict[str, Any] | None, expected: bool) -> None:
    assert LabelSelector.from_dict(sel).matches(L) is expected


@pytest.mark.parametrize(
    ("sel", "match"),
    [
        ({"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]},
         "not a valid label selector operator"),
        ({"matchExpressions": [{"key": "a", "operator": "In", "values": []}]},
         "values set can't be empty"),
        ({"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]},
         "must be empty"),
        ({"matchLabels": {"bad key!": "x"}}, "invalid label key"),
        ({"matchLabels": {"a": "-bad"}}, "invalid label value"),
        ({"matchLabels": {"a": 1}}, "must be a string"),
    ],
    ids=["gt-not-allowed", "in-empty", "exists-values", "bad-key", "bad-value", "non-string"],
)
def test_from_dict_errors(sel: dict[str, Any], match: str) -> None:
    with pytest.raises(LabelSelectorError, match=match) as ei:
        LabelSelector.from_dict(sel, where="spec.selector")
    assert str(ei.value).startswith("spec.selector.")


def test_nothing_everything() -> None:
    assert not LabelSelector.nothing().matches({})
    assert LabelSelector.everything().matches({})
    assert LabelSelector.everything().is_empty()
    assert not LabelSelector.nothing().is_empty()


@pytest.mark.parametrize(
    ("text", "labels", "expected"),
    [
        ("", {}, True),
        ("app=web", L, True),
        ("app==web", L, True),
        ("app!=web", L, False),
        ("app!=db", {}, True),
        ("app in (web, x)", L, True),
        ("app notin (web)", L, False),
        ("tier", L, True),
        ("!tier", L, False),
        ("!zz", L, True),
        ("app=web,tier=fe", L, True),
        ("app=web, tier=be", L, False),
        ("n>4", L, True),
        ("n<5", L, False),
        ("empty=", L, True),
        (" app = web , !zz ", L, True),
    ],
    ids=lambda v: repr(v) if isinstance(v, str) else "",
)
def test_parse_selector_string(text: str, labels: dict[str, str], expected: bool) -> None:
    assert parse_selector_string(text).matches(labels) is expected


@pytest.mark.parametrize(
    "text",
    ["=x", "a in x", "a in (x", "a,", "a b", "a in ()", "!", "a=b=c", "a>x", "bad key=1"],
)
def test_parse_selector_string_errors(text: str) -> None:
    with pytest.raises(ValueError, match="invalid label selector"):
        parse_selector_string(text)


def test_string_and_dict_forms_agree() -> None:
    a = parse_selector_string("app in (web),!x")
    b = LabelSelector.from_dict({"matchExpressions": [
        {"key": "app", "operator": "In", "values": ["web"]},
        {"key": "x", "operator": "DoesNotExist"}]})
    assert a == b


@pytest.mark.parametrize(
    ("key", "ok"),
    [("app", True), ("example.com/app", True), ("a" * 63, True), ("a" * 64, False),
     ("Example.com/app", False), ("/app", False), ("app-", False), ("", False),
     ("a/b/c", False)],
    ids=lambda v: repr(v)[:20],
)
def test_validate_label_key(key: str, ok: bool) -> None:
    assert (validate_label_key(key) is None) is ok


@pytest.mark.parametrize(
    ("value", "ok"),
    [("", True), ("v1.2_3-x", True), ("a" * 63, True), ("a" * 64, False), ("-a", False),
     ("a b", False)],
    ids=lambda v: repr(v)[:20],
)
def test_validate_label_value(value: str, ok: bool) -> None:
    assert (validate_label_value(value) is None) is ok
