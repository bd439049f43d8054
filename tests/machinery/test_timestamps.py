"""metav1.Time as the API writes it, and the tolerant reading both sides use."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from machinery.timestamps import format_time, parse_time


def test_round_trip_to_the_second() -> None:
    at = parse_time("2024-05-01T10:00:00Z")
    assert at == 1714557600.0 and format_time(at) == "2024-05-01T10:00:00Z"
    assert format_time(at + 0.999) == "2024-05-01T10:00:00Z"  # truncated, as metav1.Time marshals


def test_fractions_offsets_and_naive_times() -> None:
    at = 1714557600.0
    assert parse_time("2024-05-01T10:00:00.123456Z") == pytest.approx(at + 0.123456)
    assert parse_time("2024-05-01T12:00:00+02:00") == at
    assert parse_time("2024-05-01T10:00:00z") == at
    assert parse_time("2024-05-01T10:00:00") == at  # no zone: UTC, never the local zone


@pytest.mark.parametrize("bad", [None, "", "garbage", 5, "2024-13-01T00:00:00Z"])
def test_unreadable_is_none(bad: object) -> None:
    assert parse_time(bad) is None


@example([0.5, 0.9999996, 1.9999994, 1.5, -1e-97, -0.5])
@given(st.lists(st.floats(min_value=-1e10, max_value=1e10), min_size=1, max_size=20))
def test_the_remembered_second_never_answers_for_another(instants: list[float]) -> None:
    """format_time keeps the last second it formatted: any order of instants, repeated or not,
    reads as datetime itself would write each."""
    for at in [*instants, *instants]:
        assert format_time(at) == datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
