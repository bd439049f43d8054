"""Kubernetes resource quantities (`500m`, `1.5Gi`, `2e3`): parsed exactly, compared, added, and
written back in kube's canonical form.

Quota and LimitRange compare and sum quantities, and kubectl shows them as the apiserver wrote them,
so the rules follow apimachinery's `resource.Quantity`: a signed decimal number, then a suffix that
is binary SI (Ki..Ei), decimal SI (n, u, m, "", k, M, G, T, P, E) or a decimal exponent (`e3`,
`E-2`).  A parsed value is rounded away from zero to whole nano units and capped at 2^63-1 in
magnitude, as kube does.  Every value is therefore a whole number of nanos, which is what a
`Quantity` holds (an int: sums and comparisons are exact, and cost what int arithmetic costs;
quota charges add and compare them for every pod create); `value` is the same as a `Fraction`.

The canonical form keeps the notation the quantity was written in: binary SI stays binary when
the value is a whole number of at least 1024 (`1536Mi`), decimal forms pick the largest power of
1000 that keeps the mantissa whole (`1500m`, `2k`), exponent forms likewise (`15e2`... `1500`).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal

Format = Literal["DecimalSI", "BinarySI", "DecimalExponent"]

FORMAT_ERROR = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
SUFFIX_ERROR = "unable to parse quantity's suffix"

MAX_VALUE = 2**63 - 1
NANOS_PER_UNIT = 10**9
NANOS_PER_MILLI = 10**6
NANO = Fraction(1, NANOS_PER_UNIT)
_SUFFIX_LETTERS = frozenset("eEinumkKMGTP")
_DIGITS = frozenset("0123456789")
_DECIMAL_SUFFIXES = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_BINARY_SUFFIXES = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL_NAMES = {exp: name for name, exp in _DECIMAL_SUFFIXES.items()}
_BINARY_NAMES = {exp // 10: name for name, exp in _BINARY_SUFFIXES.items()}
# a non-zero mantissa times 10**e is past the cap or below one nano well before these bounds
# (the mantissa has at most as many digits as the request has bytes: the bounds grow with it)
_EXPONENT_SLACK = 64


class QuantityError(ValueError):
    """Not a quantity; the message is apimachinery's."""


@dataclass(frozen=True, slots=True)
class Quantity:
    """An exact value, in nanos, and the notation it was written in (which its canonical form keeps)."""

    nanos: int
    format: Format = "DecimalSI"

    @property
    def value(self) -> Fraction:
        return Fraction(self.nanos, NANOS_PER_UNIT)

    def __str__(self) -> str:
        return canonical(self)

    def __lt__(self, other: Quantity) -> bool:
        return self.nanos < other.nanos

    def __le__(self, other: Quantity) -> bool:
        return self.nanos <= other.nanos

    def __gt__(self, other: Quantity) -> bool:
        return self.nanos > other.nanos

    def __ge__(self, other: Quantity) -> bool:
        return self.nanos >= other.nanos

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Quantity) and self.nanos == other.nanos

    def __hash__(self) -> int:
        return hash(self.nanos)

    def __add__(self, other: Quantity) -> Quantity:
        return Quantity(self.nanos + other.nanos, self.format)

    def __sub__(self, other: Quantity) -> Quantity:
        return Quantity(self.nanos - other.nanos, self.format)

    def __neg__(self) -> Quantity:
        return Quantity(-self.nanos, self.format)

    def is_zero(self) -> bool:
        return self.nanos == 0

    def milli_value(self) -> int:
        """The value in thousandths, rounded up (kube's MilliValue), as cpu quota counts it."""
        return -(-self.nanos // NANOS_PER_MILLI)


ZERO = Quantity(0)


def _split(text: str) -> tuple[bool, str, str, str]:
    """(positive, integer digits, fraction digits, suffix), following kube's scanner; an empty
    number is 0 (so "-" and "." parse, as they do in kube)."""
    pos, end = 0, len(text)
    positive = True
    if pos < end and text[pos] in "+-":
        positive = text[pos] == "+"
        pos += 1
    while pos < end and text[pos] == "0":
        pos += 1
    start = pos
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    num = text[start:pos] or "0"
    denom = ""
    if pos < end and text[pos] == ".":
        pos += 1
        start = pos
        while pos < end and text[pos] in _DIGITS:
            pos += 1
        denom = text[start:pos]
    suffix_start = pos
    while pos < end and text[pos] in _SUFFIX_LETTERS:
        pos += 1
    if pos < end and text[pos] in "+-":
        pos += 1
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    if pos < end:
        raise QuantityError(FORMAT_ERROR)
    return positive, num, denom, text[suffix_start:]


def _interpret(suffix: str) -> tuple[int, int, Format]:
    """(base, exponent, format) of a suffix."""
    if suffix in _DECIMAL_SUFFIXES:
        return 10, _DECIMAL_SUFFIXES[suffix], "DecimalSI"
    if suffix in _BINARY_SUFFIXES:
        return 2, _BINARY_SUFFIXES[suffix], "BinarySI"
    if len(suffix) > 1 and suffix[0] in "eE":
        digits = suffix[1:].lstrip("+-")
        if digits and digits.isdigit() and suffix[1:].count("-") + suffix[1:].count("+") <= 1:
            return 10, int(suffix[1:]), "DecimalExponent"
    raise QuantityError(SUFFIX_ERROR)


def _scale(mantissa: Fraction, base: int, exponent: int) -> Fraction:
    """mantissa * base**exponent, without building huge numbers when the result will be capped
    or rounded to one nano anyway."""
    if mantissa == 0:
        return mantissa
    digits = len(str(mantissa.numerator)) + len(str(mantissa.denominator))
    decimal_exponent = exponent if base == 10 else exponent * 3 // 10
    if decimal_exponent > 19 + digits + _EXPONENT_SLACK:
        return Fraction(MAX_VALUE + 1)
    if decimal_exponent < -(9 + digits + _EXPONENT_SLACK):
        return Fraction(1, 10**10)  # below one nano: rounds up to it
    return mantissa * Fraction(base) ** exponent


_CACHED_LENGTH = 40  # quantities in objects are short and repeat ("100m", "64Mi"); hostile ones are not cached


def parse_quantity(raw: str | int | float) -> Quantity:
    """A quantity from its JSON form (a string, or a number as kube also accepts)."""
    if isinstance(raw, bool) or not isinstance(raw, str | int | float):
        raise QuantityError(FORMAT_ERROR)
    text = raw if isinstance(raw, str) else repr(raw)
    if len(text) <= _CACHED_LENGTH:
        return _parse_cached(text)  # admission parses the same few quantities dozens of times a create
    return _parse(text)


@functools.lru_cache(maxsize=4096)
def _parse_cached(text: str) -> Quantity:
    return _parse(text)


def _parse(text: str) -> Quantity:
    if not text:
        raise QuantityError(FORMAT_ERROR)
    positive, num, denom, suffix = _split(text)
    base, exponent, fmt = _interpret(suffix)
    mantissa = Fraction(int(num + denom), 10 ** len(denom))
    magnitude = _scale(mantissa, base, exponent)
    nanos = 0
    if magnitude != 0:
        units = magnitude / NANO
        whole = -((-units.numerator) // units.denominator)  # round away from zero to a nano
        nanos = min(whole, MAX_VALUE * NANOS_PER_UNIT)
    return Quantity(nanos if positive else -nanos, fmt)


def parse_or_none(raw: object) -> Quantity | None:
    """The quantity, or None when `raw` is absent or not one: for readers of objects that were
    validated once (or come from a peer) and would rather skip a bad value than fail on it."""
    if raw is None:
        return None
    try:
        return parse_quantity(raw)  # type: ignore[arg-type]
    except QuantityError:
        return None


def is_quantity(raw: object) -> bool:
    try:
        parse_quantity(raw)  # type: ignore[arg-type]
    except QuantityError:
        return False
    return True


def _decimal(nanos: int, fmt: Format) -> str:
    """mantissa and a power of 1000 (largest keeping the mantissa whole): kube's AsCanonicalBytes."""
    if nanos == 0:
        return "0"
    mantissa, exponent = nanos, -9
    while mantissa % 1000 == 0 and exponent < 18:
        mantissa //= 1000
        exponent += 3
    if fmt == "DecimalExponent":
        return f"{mantissa}" if exponent == 0 else f"{mantissa}e{exponent}"
    return f"{mantissa}{_DECIMAL_NAMES[exponent]}"


def canonical(q: Quantity | str | int | float) -> str:
    """The string kube writes for a quantity (`Quantity.String()`)."""
    if not isinstance(q, Quantity):
        q = parse_quantity(q)
    fmt = q.format
    units, nanos_left = divmod(q.nanos, NANOS_PER_UNIT)
    if fmt == "BinarySI" and (-1024 < units < 1024 or nanos_left):
        fmt = "DecimalSI"
    if fmt != "BinarySI":
        return _decimal(q.nanos, fmt)
    mantissa, power = units, 0
    while mantissa % 1024 == 0 and power < 6:
        mantissa //= 1024
        power += 1
    return f"{mantissa}{_BINARY_NAMES.get(power, '')}"
