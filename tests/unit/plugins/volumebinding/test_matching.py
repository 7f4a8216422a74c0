"""FindMatchingVolume (scheduler path), binding a PV to a claim, allowed topologies."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.plugins.volumebinding.matching import (
    ANN_BOUND_BY_CONTROLLER,
    CandidatePV,
    bind_volume_to_claim,
    find_matching_volume,
    is_pvc_fully_bound,
    pvc_storage_class,
    topology_terms_match,
)
from tests.builders import NodeBuilder
from tests.unit.plugins.volumebinding.storage import ZONE, pv, pvc

NODE_A = NodeBuilder("node-a").labels({ZONE: "a"}).obj()

CASES: list[tuple[str, dict[str, Any], list[dict[str, Any]], list[str], str | None]] = [
    ("smallest fit wins", pvc("c", size="5Gi"),
     [pv("big", size="100Gi"), pv("exact", size="5Gi"), pv("mid", size="8Gi")], [], "exact"),
    ("too small", pvc("c", size="5Gi"), [pv("small", size="4Gi")], [], None),
    ("1Gi vs 1000Mi exact comparison", pvc("c", size="1Gi"), [pv("p", size="1000Mi")], [], None),
    ("no request matches any size", pvc("c", size="0"), [pv("p", size="1Mi")], [], "p"),
    ("access modes must be a superset", pvc("c", modes=("ReadWriteMany",)),
     [pv("rwo"), pv("rwx", modes=("ReadWriteOnce", "ReadWriteMany"))], [], "rwx"),
    ("class mismatch", pvc("c", cls="fast"), [pv("p", cls="local")], [], None),
    ("empty class matches only empty class", pvc("c", cls=None),
     [pv("classed"), pv("plain", cls="")], [], "plain"),
    ("label selector", pvc("c", selector={"matchLabels": {"tier": "gold"}}),
     [pv("silver", labels={"tier": "silver"}), pv("gold", labels={"tier": "gold"})], [], "gold"),
    ("node affinity must admit the node", pvc("c"),
     [pv("in-b", zone="b"), pv("in-a", zone="a", size="50Gi")], [], "in-a"),
    ("not Available is skipped", pvc("c"), [pv("released", phase="Released")], [], None),
    ("claimed by another claim", pvc("c"), [pv("taken", claim=("default", "other"))], [], None),
    ("pre-bound to this claim wins over smaller", pvc("c"),
     [pv("small", size="5Gi"), pv("mine", size="50Gi", claim=("default", "c"), phase="Pending")],
     [], "mine"),
    ("pre-bound with conflicting affinity means no match", pvc("c"),
     [pv("mine", claim=("default", "c"), zone="b"), pv("other", zone="a")], [], None),
    ("pre-bound with another uid is not ours", pvc("c"),
     [pv("stale", claim=("default", "c"), claim_uid="old-uid")], [], None),
    ("excluded names are skipped", pvc("c"), [pv("p1", size="5Gi"), pv("p2", size="6Gi")],
     ["p1"], "p2"),
    ("volume mode must match", pvc("c"), [pv("block", volume_mode="Block")], [], None),
]


@pytest.mark.parametrize(("claim", "pvs", "excluded", "want"),
                         [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_find_matching_volume(claim: dict[str, Any], pvs: list[dict[str, Any]],
                              excluded: list[str], want: str | None) -> None:
    got = find_matching_volume(claim, [CandidatePV(p) for p in pvs], NODE_A, excluded)
    assert (got.name if got else None) == want


def test_pv_affinity_ignores_match_fields_like_upstream() -> None:
    volume = pv("p")
    volume["spec"]["nodeAffinity"] = {"required": {"nodeSelectorTerms": [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-a"]}]}]}}
    assert find_matching_volume(pvc("c"), [CandidatePV(volume)], NODE_A) is None


def test_bind_volume_to_claim_sets_claim_ref_and_annotation() -> None:
    claim = pvc("c", rv="7")
    new, dirty = bind_volume_to_claim(pv("p"), claim)
    assert dirty
    assert new["spec"]["claimRef"] == {"kind": "PersistentVolumeClaim", "namespace": "default",
                                       "name": "c", "uid": claim["metadata"]["uid"],
                                       "apiVersion": "v1", "resourceVersion": "7"}
    assert new["metadata"]["annotations"][ANN_BOUND_BY_CONTROLLER] == "yes"
    # Binding again changes nothing.
    again, dirty_again = bind_volume_to_claim(new, claim)
    assert not dirty_again and again == new


def test_user_prebound_volume_gets_uid_but_no_controller_annotation() -> None:
    new, dirty = bind_volume_to_claim(pv("p", claim=("default", "c")), pvc("c"))
    assert dirty
    assert new["spec"]["claimRef"]["uid"] == "uid-pvc-default-c"
    assert ANN_BOUND_BY_CONTROLLER not in new["metadata"].get("annotations", {})


@pytest.mark.parametrize(("terms", "labels", "want"), [
    (None, {}, True),
    ([], {ZONE: "a"}, True),
    ([{"matchLabelExpressions": [{"key": ZONE, "values": ["a", "b"]}]}], {ZONE: "b"}, True),
    ([{"matchLabelExpressions": [{"key": ZONE, "values": ["a"]}]}], {ZONE: "c"}, False),
    ([{"matchLabelExpressions": [{"key": ZONE, "values": ["a"]}]}], {}, False),
    ([{"matchLabelExpressions": []}], {ZONE: "a"}, False),
    ([{"matchLabelExpressions": [{"key": ZONE, "values": ["x"]}]},
      {"matchLabelExpressions": [{"key": ZONE, "values": ["a"]}]}], {ZONE: "a"}, True),
])
def test_topology_terms_match(terms: Any, labels: dict[str, str], want: bool) -> None:
    assert topology_terms_match(terms, labels) is want


def test_claim_class_and_bound_state() -> None:
    claim = pvc("c", cls="spec-class", annotations={
        "volume.beta.kubernetes.io/storage-class": "beta-class"})
    assert pvc_storage_class(claim) == "beta-class"
    assert not is_pvc_fully_bound(pvc("c", volume="p"))
    assert is_pvc_fully_bound(pvc("c", volume="p", bound=True))
    assert is_pvc_fully_bound(pvc("c", volume="p", phase="Bound"))
    assert not is_pvc_fully_bound(pvc("c", phase="Bound"))
