from fractions import Fraction

import pytest

from scheduler.objects.quantity import (
    QuantityError,
    int_value,
    milli_value,
    parse_quantity,
)

F = Fraction


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0", F(0)),
        ("1", F(1)),
        ("100m", F(1, 10)),
        ("1.5", F(3, 2)),
        (".5", F(1, 2)),
        ("1.", F(1)),
        ("+2", F(2)),
        ("-2", F(-2)),
        ("5n", F(5, 10**9)),
        ("7u", F(7, 10**6)),
        ("2k", F(2000)),
        ("3M", F(3 * 10**6)),
        ("1G", F(10**9)),
        ("1T", F(10**12)),
        ("1P", F(10**15)),
        ("1E", F(10**18)),
        ("1Ki", F(1024)),
        ("1.5Ki", F(1536)),
        ("1Mi", F(2**20)),
        ("2Gi", F(2 * 2**30)),
        ("1Ti", F(2**40)),
        ("1Pi", F(2**50)),
        ("1e3", F(1000)),
        ("1E3", F(1000)),
        ("1e-3", F(1, 1000)),
        ("5e+2", F(500)),
        ("0.1n", F(1, 10**9)),  # sub-nano rounds up to 1n
        ("-0.1n", F(-1, 10**9)),
        ("1e-100", F(1, 10**9)),
        ("9Ei", F(2**63 - 1)),  # capped at int64 max
        ("1e100", F(2**63 - 1)),
        ("000", F(0)),
        ("Gi", F(0)),  # upstream quirk: no digits parses as zero
        (1, F(1)),
        (0.5, F(1, 2)),
        (0.1, F(1, 10)),
    ],
    ids=lambda v: repr(v),
)
def test_parse_quantity(text: str, expected: Fraction) -> None:
    assert parse_quantity(text) == expected


@pytest.mark.parametrize(
    "text",
    ["", "abc", "1K", "1Kib", "1e", "1.2.3", "1 Gi", " 1", "1Gi1", "0x10", "1ee3",
     "--1", "1m1"],
)
def test_parse_quantity_rejects(text: str) -> None:
    with pytest.raises(QuantityError, match="invalid quantity"):
        parse_quantity(text)


@pytest.mark.parametrize("value", [True, None, [1], float("nan"), float("inf")],
                         ids=["bool", "none", "list", "nan", "inf"])
def test_parse_quantity_rejects_types(value: object) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(value)


@pytest.mark.parametrize(
    ("text", "milli", "value"),
    [
        ("1", 1000, 1),
        ("100m", 100, 1),
        ("1500m", 1500, 2),
        ("0.1m", 1, 1),
        ("1n", 1, 1),
        ("0", 0, 0),
        ("1Gi", 1024**3 * 1000, 1024**3),
        ("-1500m", -1500, -1),
    ],
    ids=lambda v: repr(v),
)
def test_milli_and_int_value_round_up(text: str, milli: int, value: int) -> None:
    assert milli_value(parse_quantity(text)) == milli
    assert milli_value(text) == milli
    assert int_value(parse_quantity(text)) == value
    assert int_value(text) == value
