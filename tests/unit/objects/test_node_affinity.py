from typing import Any

import pytest

from scheduler.objects.errors import ObjectError
from scheduler.objects.node_affinity import (
    PreferredSchedulingTerms,
    RequiredNodeAffinity,
    node_selector_matches,
)
from tests.builders import NodeBuilder, PodBuilder, node_term

NODE = NodeBuilder("n1").labels(zone="a", disk="ssd", cores="8").obj()


def expr(key: str, op: str, *values: str) -> dict[str, Any]:
    e: dict[str, Any] = {"key": key, "operator": op}
    if values:
        e["values"] = list(values)
    return e


def term(*exprs: dict[str, Any], fields: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    t: dict[str, Any] = {}
    if exprs:
        t["matchExpressions"] = list(exprs)
    if fields is not None:
        t["matchFields"] = fields
    return t


@pytest.mark.parametrize(
    ("terms", "expected"),
    [
        ([term(expr("zone", "In", "a", "b"))], True),
        ([term(expr("zone", "In", "b"))], False),
        ([term(expr("zone", "NotIn", "b"))], True),
        ([term(expr("gpu", "NotIn", "b"))], True),
        ([term(expr("disk", "Exists"))], True),
        ([term(expr("disk", "DoesNotExist"))], False),
        ([term(expr("cores", "Gt", "4"))], True),
        ([term(expr("cores", "Lt", "4"))], False),
        ([term(expr("zone", "Gt", "4"))], False),  # non-integer label never matches
        ([term(expr("missing", "Lt", "4"))], False),
        ([term(expr("zone", "In", "a"), expr("disk", "In", "hdd"))], False),  # AND
        ([term(expr("zone", "In", "x")), term(expr("disk", "In", "ssd"))], True),  # OR
        ([term()], False),  # empty term matches nothing
        ([term(), term(expr("zone", "In", "a"))], True),
        ([], False),  # no terms matches nothing
        ([term(fields=[expr("metadata.name", "In", "n1")])], True),
        ([term(fields=[expr("metadata.name", "NotIn", "n1")])], False),
        ([term(expr("zone", "In", "a"), fields=[expr("metadata.name", "In", "n2")])], False),
    ],
    ids=["in", "in-miss", "notin", "notin-missing", "exists", "doesnotexist", "gt", "lt",
         "gt-non-int", "lt-missing", "and", "or", "empty-term", "empty-term-or", "no-terms",
         "field-in", "field-notin", "field-and-label"],
)
def test_required_terms(terms: list[dict[str, Any]], expected: bool) -> None:
    pod = PodBuilder("p").required_node_affinity(terms).obj()
    assert RequiredNodeAffinity.from_pod(pod).match(NODE) is expected


@pytest.mark.parametrize(
    ("selector", "terms", "expected"),
    [
        ({"zone": "a"}, None, True),
        ({"zone": "b"}, None, False),
        ({"zone": "a"}, [term(expr("disk", "In", "ssd"))], True),
        ({"zone": "a"}, [term(expr("disk", "In", "hdd"))], False),
        ({"zone": "b"}, [term(expr("disk", "In", "ssd"))], False),
        (None, None, True),
    ],
    ids=["selector", "selector-miss", "both", "affinity-miss", "selector-miss-2", "none"],
)
def test_node_selector_and_affinity(selector: dict[str, str] | None,
                                    terms: list[dict[str, Any]] | None, expected: bool) -> None:
    b = PodBuilder("p")
    if selector:
        b.node_selector(selector)
    if terms is not None:
        b.required_node_affinity(terms)
    rna = RequiredNodeAffinity.from_pod(b.obj())
    assert rna.match(NODE) is expected
    assert rna.is_empty() is (selector is None and terms is None)


@pytest.mark.parametrize(
    ("bad_term", "field"),
    [
        (term(expr("zone", "Foo", "a")),
         "nodeSelectorTerms[0].matchExpressions[0].operator"),
        (term(expr("zone", "In")), "nodeSelectorTerms[0].matchExpressions[0]"),
        (term(expr("cores", "Gt", "x")), "nodeSelectorTerms[0].matchExpressions[0]"),
        (term(expr("cores", "Gt", "1", "2")), "nodeSelectorTerms[0].matchExpressions[0]"),
        (term(expr("zone", "Exists", "a")), "nodeSelectorTerms[0].matchExpressions[0]"),
        (term(fields=[expr("metadata.name", "Exists")]),
         "nodeSelectorTerms[0].matchFields[0].operator"),
        (term(fields=[expr("metadata.name", "In", "a", "b")]),
         "nodeSelectorTerms[0].matchFields[0].values"),
    ],
    ids=["bad-op", "in-no-values", "gt-not-int", "gt-two-values", "exists-with-values",
         "field-op", "field-two-values"],
)
def test_parse_errors(bad_term: dict[str, Any], field: str) -> None:
    pod = PodBuilder("web-1").required_node_affinity([bad_term]).obj()
    with pytest.raises(ObjectError) as ei:
        RequiredNodeAffinity.from_pod(pod)
    prefix = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution."
    assert ei.value.field == prefix + field
    assert str(ei.value).startswith(f"Pod default/web-1: {prefix}{field}")


def test_preferred_score() -> None:
    pod = (PodBuilder("p")
           .preferred_node_affinity(5, node_term(zone="a"))
           .preferred_node_affinity(3, node_term(disk=["hdd"]))
           .preferred_node_affinity(2, node_term(disk=["ssd", "nvme"]))
           .preferred_node_affinity(7, {})  # empty preference ignored
           .obj())
    terms = PreferredSchedulingTerms.from_pod(pod)
    assert len(terms) == 3
    assert terms.score(NODE) == 7
    assert PreferredSchedulingTerms(None).score(NODE) == 0


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        (None, True),
        ({"nodeSelectorTerms": [term(expr("zone", "In", "a"))]}, True),
        ({"nodeSelectorTerms": [term(expr("zone", "In", "z"))]}, False),
        ({"nodeSelectorTerms": []}, False),
    ],
    ids=["none", "match", "miss", "no-terms"],
)
def test_node_selector_matches(selector: dict[str, Any] | None, expected: bool) -> None:
    assert node_selector_matches(selector, NODE) is expected
