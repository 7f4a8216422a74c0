"""The passive assume cache: assumed copies win until the informer holds another version."""

from __future__ import annotations

import pytest

from scheduler.plugins.volumebinding.assume_cache import AssumeError, pv_cache, pvc_cache
from tests.fakes import DictListers
from tests.unit.plugins.volumebinding.storage import pv, pvc







def test_assumed_copy_is_returned_until_restored() -> None:
    listers = DictListers({"persistentvolumes": [pv("p1", rv="5"), pv("p2", rv="3")]})
    cache = pv_cache(lambda: listers)
    assumed = pv("p1", rv="5", claim=("ns", "c"))
    cache.assume(assumed)
    assert cache.get("p1") is assumed
    assert cache.get_api_obj("p1") == pv("p1", rv="5")
    assert [p["metadata"]["name"] for p in cache.list() if p["spec"].get("claimRef")] == ["p1"]
    cache.restore("p1")
    assert cache.get("p1") == pv("p1", rv="5")
    assert len(cache) == 0


def test_newer_informer_version_expires_assumption() -> None:
    listers = DictListers({"persistentvolumes": [pv("p1", rv="5")]})
    cache = pv_cache(lambda: listers)
    cache.assume(pv("p1", rv="5", claim=("ns", "c")))
    listers.objects["persistentvolumes"] = [pv("p1", rv="6", phase="Bound")]
    got = cache.get("p1")
    assert got is not None and got["metadata"]["resourceVersion"] == "6"
    assert len(cache) == 0


def test_deleted_object_expires_assumption() -> None:
    listers = DictListers({"persistentvolumes": [pv("p1", rv="5")]})
    cache = pv_cache(lambda: listers)
    cache.assume(pv("p1", rv="5", claim=("ns", "c")))
    listers.objects["persistentvolumes"] = []
    assert cache.get("p1") is None
    assert cache.list() == []


def test_assume_rejects_unknown_and_out_of_sync() -> None:
    listers = DictListers({"persistentvolumes": [pv("p1", rv="5")]})
    cache = pv_cache(lambda: listers)
    with pytest.raises(AssumeError, match="could not find"):
        cache.assume(pv("nope"))
    with pytest.raises(AssumeError, match="out of sync"):
        cache.assume(pv("p1", rv="4"))


def test_restore_with_version_only_drops_that_assumption() -> None:
    listers = DictListers({"persistentvolumeclaims": [pvc("c", ns="ns", rv="2")]})
    cache = pvc_cache(lambda: listers)
    cache.assume(pvc("c", ns="ns", rv="2", annotations={"x": "y"}))
    cache.restore("ns/c", "9")
    assert cache.get("ns/c") is not None and cache.get("ns/c")["metadata"]["annotations"] == {"x": "y"}  # type: ignore[index]
    cache.restore("ns/c", "2")
    assert cache.get("ns/c") == pvc("c", ns="ns", rv="2")
