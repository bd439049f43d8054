"""Quantities as apimachinery parses and prints them."""

from __future__ import annotations

from decimal import Decimal, localcontext
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from machinery.quantity import (
    FORMAT_ERROR,
    MAX_VALUE,
    SUFFIX_ERROR,
    Quantity,
    QuantityError,
    canonical,
    parse_quantity,
)

# (input, canonical form kube prints): from apimachinery's documented behaviour
EXAMPLES = [
    ("0", "0"),
    ("100m", "100m"),
    ("0.1", "100m"),
    ("1.5", "1500m"),
    ("1500m", "1500m"),
    ("2000", "2k"),
    ("1500", "1500"),
    ("1k", "1k"),
    ("1M", "1M"),
    ("1E", "1E"),
    ("1Ki", "1Ki"),
    ("1024", "1024"),
    ("1536Mi", "1536Mi"),
    ("1.5Gi", "1536Mi"),
    ("0.5Gi", "512Mi"),
    ("0.5Ki", "512"),
    ("1023Ki", "1023Ki"),
    ("1e3", "1e3"),
    ("1.5e3", "1500"),
    ("1E-3", "1e-3"),
    ("5e0", "5"),
    ("+5", "5"),
    ("-1Ki", "-1Ki"),
    ("-100m", "-100m"),
    ("-0", "0"),
    ("007", "7"),
    (".5", "500m"),
    ("5.", "5"),
    ("1n", "1n"),
    ("0.0000000001", "1n"),  # rounded up to one nano, as kube does
    ("1u", "1u"),
    ("12e6", "12e6"),
    ("1e30", "9223372036854775807"),  # capped
    ("100Ei", "9223372036854775807"),
    ("1e-99999999", "1e-9"),  # the exponent notation is kept
    ("1e99999999", "9223372036854775807"),
    ("0e99999999", "0"),
]


@pytest.mark.parametrize(("text", "expected"), EXAMPLES)
def test_canonical_forms(text: str, expected: str) -> None:
    assert canonical(text) == expected
    assert str(parse_quantity(text)) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", FORMAT_ERROR),
        ("abc", FORMAT_ERROR),
        ("1.2.3", FORMAT_ERROR),
        (" 1", FORMAT_ERROR),
        ("1 ", FORMAT_ERROR),
        ("1Gi5x", FORMAT_ERROR),
        ("1K", SUFFIX_ERROR),
        ("1e", SUFFIX_ERROR),
        ("1e+", SUFFIX_ERROR),
        ("1Ki5", SUFFIX_ERROR),
        ("1mi", SUFFIX_ERROR),
        ("1.5+3", SUFFIX_ERROR),
    ],
)
def test_rejects(text: str, message: str) -> None:
    with pytest.raises(QuantityError) as err:
        parse_quantity(text)
    assert str(err.value) == message


def test_numbers_and_arithmetic() -> None:
    assert parse_quantity(2).value == 2 and parse_quantity(0.5).value == Fraction(1, 2)
    with pytest.raises(QuantityError):
        parse_quantity(True)
    a, b = parse_quantity("1Gi"), parse_quantity("512Mi")
    assert a > b and b < a and a >= parse_quantity("1Gi") and b <= a and a == parse_quantity("1073741824")
    assert str(a + b) == "1536Mi" and str(a - b) == "512Mi" and str(-a) == "-1Gi"
    assert parse_quantity("250m").milli_value() == 250 and parse_quantity("1n").milli_value() == 1
    assert Quantity(Fraction(0)).is_zero() and len({parse_quantity("1"), parse_quantity("1000m")}) == 1


SUFFIXES = ["", "n", "u", "m", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]
EXP = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}


@st.composite
def quantity_text(draw: st.DrawFn) -> tuple[str, Decimal]:
    sign = draw(st.sampled_from(["", "+", "-"]))
    whole = draw(st.text("0123456789", min_size=1, max_size=8))
    frac = draw(st.text("0123456789", max_size=6))
    if draw(st.booleans()):
        exp = draw(st.integers(-15, 15))
        suffix = f"{draw(st.sampled_from('eE'))}{exp}"
        factor = Decimal(10) ** exp
    else:
        suffix = draw(st.sampled_from(SUFFIXES))
        factor = (
            Decimal(2) ** (10 * (SUFFIXES.index(suffix) - 9)) if suffix.endswith("i") else Decimal(10) ** EXP[suffix]
        )
    number = f"{whole}.{frac}" if frac else whole
    with localcontext() as ctx:
        ctx.prec = 200
        value = Decimal(number) * factor * (-1 if sign == "-" else 1)
    return f"{sign}{number}{suffix}", value


@settings(max_examples=300, deadline=None)
@given(quantity_text())
def test_values_are_exact_and_canonical_forms_round_trip(case: tuple[str, Decimal]) -> None:
    text, expected = case
    q = parse_quantity(text)
    exact = Fraction(expected)
    nano_units = exact * 10**9
    rounded = -((-abs(nano_units).numerator) // abs(nano_units).denominator)  # away from zero
    magnitude = min(Fraction(rounded, 10**9), Fraction(MAX_VALUE))
    assert q.value == (magnitude if exact >= 0 else -magnitude), text
    again = parse_quantity(canonical(q))
    assert again.value == q.value and canonical(again) == canonical(q)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="0123456789.+-eEinumkKMGTPx ", max_size=14))
def test_arbitrary_text_parses_or_raises_quantity_error(text: str) -> None:
    try:
        q = parse_quantity(text)
    except QuantityError as err:
        assert str(err) in (FORMAT_ERROR, SUFFIX_ERROR)
        return
    assert parse_quantity(canonical(q)).value == q.value
