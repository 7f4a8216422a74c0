"""DefaultStorageClass admission, the API server's (it reads the classes from its own storage,
not from a controller): a claim created without a class (the field or the beta annotation)
gets the class marked default by either spelling of the annotation; among several, the newest,
and among equally new ones the first by name (kube-apiserver 1.26+); a claim naming a class,
even "", keeps it."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.sandbox.registry import Registry
from scheduler.sandbox.store import Store

Obj = dict[str, Any]
GA = "storageclass.kubernetes.io/is-default-class"
BETA = "storageclass.beta.kubernetes.io/is-default-class"


def _class(name: str, created: str, **annotations: str) -> Obj:
    return {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "provisioner": "csi.example.com",
            "metadata": {"name": name, "creationTimestamp": created, "annotations": annotations}}


def _claim_class(classes: list[Obj], claim_class: object = None, annotations: dict[str, str] | None = None) -> Any:
    reg = Registry(Store(watch_history=100))
    reg.create(reg.catalog.builtin("", "namespaces"), "", {"metadata": {"name": "default"}})
    scs = reg.catalog.builtin("storage.k8s.io", "storageclasses")
    for sc in classes:
        # straight into the store: creationTimestamp as given (the registry would stamp now)
        reg.store.write(reg.ts(scs), sc, None)
    spec: Obj = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
    if claim_class is not None:
        spec["storageClassName"] = claim_class
    e = reg.create(reg.catalog.builtin("", "persistentvolumeclaims"), "default",
                   {"metadata": {"name": "c", "annotations": annotations or {}}, "spec": spec})
    return e.obj["spec"].get("storageClassName")


T1, T2 = "2026-01-01T00:00:00Z", "2026-01-02T00:00:00Z"


@pytest.mark.parametrize("classes, claim_class, want", [
    ([], None, None),
    ([_class("plain", T1)], None, None),
    ([_class("off", T1, **{GA: "false"})], None, None),
    ([_class("ga", T1, **{GA: "true"})], None, "ga"),
    ([_class("beta", T1, **{BETA: "true"})], None, "beta"),
    # several defaults: the newest ...
    ([_class("new", T2, **{GA: "true"}), _class("old", T1, **{GA: "true"})], None, "new"),
    ([_class("a-old", T1, **{GA: "true"}), _class("z-new", T2, **{BETA: "true"})], None, "z-new"),
    # ... and among equally new ones the first by name
    ([_class("b", T2, **{GA: "true"}), _class("a", T2, **{GA: "true"}), _class("c", T1, **{GA: "true"})],
     None, "a"),
    # a claim with a class (even the empty one: no class) keeps it
    ([_class("ga", T1, **{GA: "true"})], "fast", "fast"),
    ([_class("ga", T1, **{GA: "true"})], "", ""),
])
def test_default_storage_class_admission(classes: list[Obj], claim_class: object, want: object) -> None:
    assert _claim_class(classes, claim_class) == want


def test_a_claim_with_the_beta_class_annotation_is_not_defaulted() -> None:
    """PersistentVolumeClaimHasClass counts the beta annotation as a class."""
    classes = [_class("ga", T1, **{GA: "true"})]
    assert _claim_class(classes, annotations={"volume.beta.kubernetes.io/storage-class": "old"}) is None
    assert _claim_class(classes, annotations={"other": "x"}) == "ga"
