import pytest

from scheduler.objects.quantity import QuantityError
from scheduler.objects.resources import (
    Resource,
    is_extended_resource_name,
    is_native_resource,
    is_scalar_resource_name,
)


@pytest.mark.parametrize(
    ("name", "native", "extended", "scalar"),
    [
        ("cpu", True, False, False),
        ("memory", True, False, False),
        ("hugepages-2Mi", True, False, True),
        ("attachable-volumes-aws-ebs", True, False, True),
        ("kubernetes.io/foo", True, False, True),
        ("nvidia.com/gpu", False, True, True),
        ("example.com/-bad", False, False, False),  # not a valid quota name
        ("requests.example.com/x", False, False, False),
        ("foo", True, False, False),
    ],
    ids=lambda v: str(v),
)
def test_resource_name_classes(name: str, native: bool, extended: bool, scalar: bool) -> None:
    assert is_native_resource(name) is native
    assert is_extended_resource_name(name) is extended
    assert is_scalar_resource_name(name) is scalar


@pytest.mark.parametrize(
    ("rl", "expected"),
    [
        (None, Resource()),
        ({}, Resource()),
        ({"cpu": "250m", "memory": "1Gi"}, Resource(milli_cpu=250, memory=2**30)),
        ({"cpu": "0.0001"}, Resource(milli_cpu=1)),
        ({"pods": "110", "ephemeral-storage": "1k"},
         Resource(allowed_pod_number=110, ephemeral_storage=1000)),
        ({"nvidia.com/gpu": "2", "hugepages-2Mi": "4Mi", "foo": "3"},
         Resource(scalar_resources={"nvidia.com/gpu": 2, "hugepages-2Mi": 4 * 2**20})),
    ],
    ids=["none", "empty", "cpu-mem", "cpu-rounds-up", "pods-eph", "scalars-ignore-unknown"],
)
def test_from_resource_list(rl: dict[str, str] | None, expected: Resource) -> None:
    assert Resource.from_resource_list(rl) == expected


def test_from_resource_list_error_names_field() -> None:
    with pytest.raises(QuantityError, match=r'^status.allocatable.cpu: invalid quantity "x"'):
        Resource.from_resource_list({"cpu": "x"}, where="status.allocatable")


@pytest.mark.parametrize(
    ("op", "a", "b", "expected"),
    [
        ("add", Resource(1, 2, 3, 4, {"x/y": 1}), Resource(10, 20, 30, 40, {"x/y": 2, "a/b": 5}),
         Resource(11, 22, 33, 44, {"x/y": 3, "a/b": 5})),
        ("sub", Resource(10, 20, 30, 40, {"x/y": 2}), Resource(1, 2, 3, 4, {"x/y": 2, "a/b": 1}),
         Resource(9, 18, 27, 36, {"x/y": 0, "a/b": -1})),
        ("set_max", Resource(5, 1, 0, 0, {"x/y": 1}), Resource(1, 9, 3, 0, {"x/y": 4, "a/b": 1}),
         Resource(5, 9, 3, 0, {"x/y": 4, "a/b": 1})),
    ],
    ids=["add", "sub", "set_max"],
)
def test_arithmetic(op: str, a: Resource, b: Resource, expected: Resource) -> None:
    getattr(a, op)(b)
    assert a == expected


def test_clone_get_is_zero() -> None:
    r = Resource(1, 2, 3, 4, {"x/y": 5})
    c = r.clone()
    c.scalar_resources["x/y"] = 0
    assert r.scalar_resources["x/y"] == 5
    assert [r.get(n) for n in ("cpu", "memory", "ephemeral-storage", "pods", "x/y", "z/w")] == [
        1, 2, 3, 4, 5, 0]
    assert Resource(scalar_resources={"x/y": 0}).is_zero()
    assert not r.is_zero()
