"""DRA's CEL environment: device fields, quantities, semver, errors, limits."""

from __future__ import annotations

import pytest

from scheduler.dra.cel import MAX_EXPRESSION_LENGTH, CelError, DeviceEnv, compile_selector

ENV = DeviceEnv(
    driver="gpu.example.com",
    attributes={"model": {"string": "a100"}, "driverVersion": {"version": "1.2.3"},
                "other.io/numa": {"int": 1}, "mig": {"bool": True}},
    capacity={"memory": {"value": "40Gi"}, "other.io/slots": {"value": "8"}},
)

CASES = [
    ('device.driver == "gpu.example.com"', True),
    ('device.driver == "nic.example.com"', False),
    ('device.attributes["gpu.example.com"].model == "a100"', True),
    ('device.attributes["gpu.example.com"].mig', True),
    ('device.attributes["other.io"].numa == 1', True),
    ('has(device.attributes["gpu.example.com"].model)', True),
    ('has(device.attributes["unknown.io"].model)', False),
    ('device.capacity["gpu.example.com"].memory.compareTo(quantity("10Gi")) > 0', True),
    ('device.capacity["gpu.example.com"].memory.isGreaterThan(quantity("40Gi"))', False),
    ('device.capacity["gpu.example.com"].memory.isLessThan(quantity("41Gi"))', True),
    ('device.capacity["gpu.example.com"].memory == quantity("40Gi")', True),
    ('device.capacity["other.io"].slots.asInteger() == 8', True),
    ('device.attributes["gpu.example.com"].driverVersion.isGreaterThan(semver("1.2.0"))', True),
    ('device.attributes["gpu.example.com"].driverVersion.isLessThan(semver("1.2.3-rc.1"))',
     False),
    ('semver("1.2.3-rc.1").isLessThan(semver("1.2.3"))', True),
    ('device.attributes["gpu.example.com"].driverVersion.minor() == 2', True),
    ('isQuantity("1Gi") && !isQuantity("x")', True),
    ('device.attributes["gpu.example.com"].model.matches("^a1")', True),
]


@pytest.mark.parametrize(("expression", "want"), CASES)
def test_selector_result(expression: str, want: bool) -> None:
    assert compile_selector(expression).matches(ENV) is want


@pytest.mark.parametrize(("expression", "message"), [
    ("device.driver ==", "CEL compile error"),
    ("", "empty expression"),
    ("x" * (MAX_EXPRESSION_LENGTH + 1), "more than the limit"),
    ("(" * 40 + "true" + ")" * 40, "nests 40 levels"),
])
def test_compile_errors_are_cel_errors(expression: str, message: str) -> None:
    with pytest.raises(CelError, match=message):
        compile_selector(expression)
    with pytest.raises(CelError, match=message):  # the cached failure is the same error
        compile_selector(expression)


@pytest.mark.parametrize(("expression", "message"), [
    ('device.attributes["unknown.io"].model == "x"', "no such key: model"),
    ('device.driver', "must be a bool"),
    ('quantity("not a quantity").sign() == 1', "invalid quantity"),
    ('device.attributes["gpu.example.com"].model.compareTo(quantity("1")) == 0',
     "expected a quantity"),
    ("1 / 0 == 1", "CEL runtime error"),
])
def test_runtime_errors_are_cel_errors(expression: str, message: str) -> None:
    with pytest.raises(CelError, match=message):
        compile_selector(expression).matches(ENV)


def test_compiled_programs_are_cached() -> None:
    assert compile_selector('device.driver == "a"') is compile_selector('device.driver == "a"')
