"""Go durations: the cases Go's time package tests, Go's error wording, and fuzzing."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from machinery.duration import DurationError, format_duration, parse_duration

S = 1_000_000_000


@pytest.mark.parametrize(
    ("text", "ns"),
    [
        ("0", 0),
        ("+0", 0),
        ("-0", 0),
        ("5s", 5 * S),
        ("-5s", -5 * S),
        ("1.5h", 5400 * S),
        (".5s", S // 2),
        ("1.s", S),
        ("1h30m", 5400 * S),
        ("10.5s4m", 4 * 60 * S + 10 * S + S // 2),
        ("3µs", 3000),
        ("3μs", 3000),
        ("3us", 3000),
        ("100ns", 100),
        ("0.3333333333333333333h", 20 * 60 * S),
        ("9223372036854775807ns", 2**63 - 1),
        ("-9223372036854775808ns", -(2**63)),
        ("0.100000000000000000000h", 6 * 60 * S),
    ],
)
def test_parses_as_go(text: str, ns: int) -> None:
    assert parse_duration(text) == ns


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", 'time: invalid duration ""'),
        ("3", 'time: missing unit in duration "3"'),
        ("-", 'time: invalid duration "-"'),
        ("s", 'time: invalid duration "s"'),
        (".", 'time: invalid duration "."'),
        ("-.", 'time: invalid duration "-."'),
        (".s", 'time: invalid duration ".s"'),
        ("+.s", 'time: invalid duration "+.s"'),
        ("1d", 'time: unknown unit "d" in duration "1d"'),
        ("1h ", 'time: unknown unit "h " in duration "1h "'),
        ("9223372036854775808ns", 'time: invalid duration "9223372036854775808ns"'),
        ("9223372036854775.808us", 'time: invalid duration "9223372036854775.808us"'),
        ("\u00e91s", 'time: invalid duration "\\xc3\\xa91s"'),
        ("\u0661s", 'time: invalid duration "\\xd9\\xa1s"'),  # Go's digits are ASCII only
    ],
)
def test_refuses_as_go(text: str, message: str) -> None:
    with pytest.raises(DurationError) as raised:
        parse_duration(text)
    assert str(raised.value) == message


@settings(max_examples=300, deadline=None)
@given(st.integers(-(2**63), 2**63 - 1))
def test_format_then_parse_is_identity(ns: int) -> None:
    assert parse_duration(format_duration(ns)) == ns


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="0123456789.+-hmsuµnμ d", max_size=16) | st.text(max_size=16))
def test_any_text_parses_in_range_or_is_refused_typed(text: str) -> None:
    try:
        ns = parse_duration(text)
    except DurationError as e:
        assert str(e).startswith("time: ")
    else:
        assert -(2**63) <= ns < 2**63
