"""validate_object names the object and the field of each read-only kind's problem."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from scheduler.objects.validation import validate_object
from tests.builders import set_path
from tests.unit.objects.test_malformed_properties import OBJECTS

# (kind, path, value, expected message start)
CASES: list[tuple[str, str, Any, str]] = [
    ("PersistentVolume", "spec.capacity.storage", "big",
     'PersistentVolume pv: spec.capacity.storage: invalid quantity "big"'),
    ("PersistentVolume", "spec.capacity.storage", "-1Gi",
     "PersistentVolume pv: spec.capacity.storage: must be greater than or equal to 0"),
    ("PersistentVolume", "spec.claimRef", "c", "PersistentVolume pv: spec.claimRef: must be an object"),
    ("PersistentVolume", "spec.nodeAffinity.required", {"nodeSelectorTerms": [5]},
     "PersistentVolume pv: spec.nodeAffinity.required.nodeSelectorTerms[0]: must be an object"),
    ("PersistentVolumeClaim", "spec.selector", {"matchLabels": "x"},
     "PersistentVolumeClaim d/c: spec.selector.matchLabels: expected a map"),
    ("PersistentVolumeClaim", "spec.resources", "5Gi",
     "PersistentVolumeClaim d/c: spec.resources: must be an object"),
    ("StorageClass", "volumeBindingMode", "Later",
     "StorageClass s: volumeBindingMode: unsupported value 'Later'"),
    ("CSINode", "spec.drivers", [{"name": "d", "allocatable": {"count": "many"}}],
     "CSINode n: spec.drivers[0].allocatable.count: must be a non-negative integer"),
    ("PodDisruptionBudget", "spec.minAvailable", [1],
     "PodDisruptionBudget d/b: spec.minAvailable: must be an integer or a percentage"),
    ("PodGroup", "spec.minMember", "three", "PodGroup d/g: spec.minMember: must be an integer"),
    ("PodGroup", "spec", "gang", "PodGroup d/g: spec: must be an object"),
    ("PodGroup", "metadata.labels", {"a": 1}, "PodGroup d/g: metadata.labels: must be a map"),
]


@pytest.mark.parametrize(("kind", "path", "value", "message"), CASES,
                         ids=[f"{c[0]} {c[1]}" for c in CASES])
def test_validate_object_names_the_object_and_field(kind: str, path: str, value: Any,
                                                    message: str) -> None:
    obj = copy.deepcopy(OBJECTS[kind])
    set_path(obj, path, value)
    error = validate_object(kind, obj)
    assert error is not None and str(error).startswith(message), str(error)
